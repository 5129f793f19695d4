//! The HTTP API fuzzed from its own OpenAPI document: schemathesis
//! (installed by `scripts/setup`) generates valid and invalid requests for
//! every operation, sends them to a running ingress and checks every answer
//! against the document: never a 5xx (but the documented `503` of the
//! payment routes on a platform without payments), only documented statuses,
//! content types, headers and bodies, invalid data refused, auth enforced.
//! Then the sale's stock must have moved only by the fuzzing user's own
//! admitted orders, never past the per-user limit.
//!
//! Bounded: a fixed seed and a fixed number of examples per operation, one
//! worker (schemathesis 4.32's parallel workers occasionally crash on an
//! internal cache race). The three event streams are left out: an answer
//! that never ends cannot be checked whole (`e2e live` and `e2e
//! waiting_room` test them, bad input included).

use std::path::PathBuf;
use std::time::Duration;

use seckill_devstack::TEST_ADMIN_TOKEN;

use crate::helpers::{eventually, Platform};

/// Test cases per operation and phase.
const EXAMPLES: &str = "25";
/// The whole schemathesis run may take at most this long.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// What every answer is checked for: every check schemathesis has (no 5xx;
/// documented statuses, content types, headers and bodies; invalid data
/// refused and valid data accepted; auth enforced; `405` with `Allow`; ...).
const CHECKS: &str = "all";

/// Creating and changing a voucher have rules across fields and state that
/// a schema cannot state: the window's end after its start (in the request,
/// or against the voucher's current start), the stock within its cap given
/// what the voucher already has, an `Idempotency-Key` reused for another
/// change. A schema-valid request may break one and is refused with the
/// documented `400` or `422`; every other operation must accept valid data.
const VOUCHER_RULES: &str = r#"
[[operations]]
include-operation-id = ["createVoucher", "updateVoucher"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", 400, 401, 403, 404, 409, 422, 429]
"#;

/// A long-poll on an order answers at the order's next change, or at its
/// `wait` (up to 30 s): the client waits longer than that, and an answer
/// that long is on time.
const LONG_POLLS: &str = r#"
[[operations]]
include-operation-id = ["getOrder"]
request-timeout = 40.0
checks.max_response_time = 35.0
"#;

/// The fuzzed platform has no payment provider: starting a payment and the
/// provider's callback answer the documented `503 unavailable` (payments
/// are not configured) to every request that gets past authentication, the
/// callback even before it reads its `Stripe-Signature` (with payments on,
/// a missing one is `400 invalid_signature`). Every other 5xx is still a
/// failure.
const PAYMENT_ROUTES: &str = r#"
[[operations]]
include-operation-id = ["createPayment"]
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", 503]

[[operations]]
include-operation-id = ["receivePaymentWebhook"]
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", 503]
checks.missing_required_header.expected-statuses = [400, 401, 403, 406, 415, 422, 503]
"#;

/// The schemathesis executable `scripts/setup` installs.
fn schemathesis() -> PathBuf {
    let path = std::env::var_os("SECKILL_SCHEMATHESIS").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        home.join(".local/share/seckill/schemathesis/bin/schemathesis")
    });
    assert!(path.exists(), "{} is missing: run scripts/setup", path.display());
    path
}

/// Runs schemathesis against the platform's ingress with `authorization`
/// on every request and `args` selecting operations; fails the test with
/// its report unless every check passed.
async fn fuzz(platform: &Platform, what: &str, config: Option<&str>, authorization: &str, args: &[&str]) {
    let dir = platform.infra.dir.path().join(format!("schemathesis-{what}"));
    std::fs::create_dir_all(&dir).expect("a directory for the run");
    let mut command = tokio::process::Command::new(schemathesis());
    let file = dir.join("schemathesis.toml");
    std::fs::write(&file, format!("{}\n{VOUCHER_RULES}\n{PAYMENT_ROUTES}\n{LONG_POLLS}", config.unwrap_or_default()))
        .expect("config written");
    command.arg("--config-file").arg(file);
    command
        .current_dir(&dir)
        .arg("run")
        .arg(format!("{}/api/v1/openapi.json", platform.base))
        .args(["--header", &format!("Authorization: {authorization}")])
        .args(["--checks", CHECKS, "--max-examples", EXAMPLES, "--seed", "20261123"])
        .args(["--generation-database", "none", "--no-color", "--workers", "1"])
        .args(args)
        .kill_on_drop(true);
    let output = tokio::time::timeout(RUN_TIMEOUT, command.output())
        .await
        .unwrap_or_else(|_| panic!("schemathesis ({what}) did not finish within {RUN_TIMEOUT:?}"))
        .expect("schemathesis runs");
    let report = String::from_utf8_lossy(&output.stdout);
    println!("schemathesis, {what}:\n{report}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "schemathesis found failures ({what}); its report is above");
    assert!(report.contains("passed"), "schemathesis ({what}) tested nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_no_undocumented_answer_and_no_stock_leak() {
    let platform = Platform::start().await;
    let (stock, limit) = (1_000, 2);
    let voucher = platform.create_voucher(stock, limit).await;
    let user = Platform::as_user("fuzzer");

    // Everything a user can call, with every id made up...
    fuzz(
        &platform,
        "user operations",
        None,
        &user,
        &[
            "--exclude-operation-id",
            "createVoucher",
            "--exclude-operation-id",
            "updateVoucher",
            "--exclude-operation-id",
            "streamVoucher",
            "--exclude-operation-id",
            "streamUserOrders",
            "--exclude-operation-id",
            "streamQueuePlace",
        ],
    )
    .await;
    // ...then with the real voucher, so bodies and headers reach the gate.
    let pinned = format!("[parameters]\n\"path.voucher_id\" = \"{voucher}\"\n");
    fuzz(
        &platform,
        "orders on a real voucher",
        Some(&pinned),
        &user,
        &["--include-operation-id", "placeOrder", "--include-operation-id", "getVoucher"],
    )
    .await;
    // The admin's operations, with the admin token.
    let admin = format!("Bearer {TEST_ADMIN_TOKEN}");
    let admin_operations = ["createVoucher", "updateVoucher", "listVouchers", "getOrder", "cancelOrder", "refundOrder"];
    let admin_args: Vec<&str> = admin_operations.iter().flat_map(|id| ["--include-operation-id", *id]).collect();
    fuzz(&platform, "admin operations", None, &admin, &admin_args).await;

    // Stock moved only by the fuzzing user's admitted units, within the limit.
    let bought: std::collections::HashMap<String, u64> = redis::cmd("HGETALL")
        .arg(seckill_gate::VoucherKeys::new(&platform.redis.key_prefix, voucher.parse().expect("id")).bought)
        .query_async(&mut platform.redis_connection().await)
        .await
        .expect("HGETALL");
    assert!(bought.keys().all(|holder| holder == "fuzzer"), "only the fuzzing user bought: {bought:?}");
    let units = bought.get("fuzzer").copied().unwrap_or(0);
    assert!(units <= u64::from(limit), "the per-user limit held: {units}");
    let remaining = platform.redis_remaining(&voucher).await;
    assert_eq!(remaining, stock - units, "only admitted units left the gate");
    eventually(|| async { (platform.persistent_remaining(&voucher).await == remaining).then_some(()) }).await;
    let (status, _) = platform.get(&format!("{}/healthz", platform.base)).await;
    assert!(status.is_success(), "the ingress is still up");
}
