//! Threats at the door, each refused with a clear error and without moving a
//! unit of stock: forged, unsigned, algorithm-swapped and expired tokens; a
//! user acting on another user's order; the development identity header on
//! an ingress that does not trust it; admin routes without the admin token;
//! floods over the per-user and per-address rates (the address behind a
//! proxy being the last `X-Forwarded-For` entry, an IPv6 client its /64);
//! malformed requests.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use seckill_auth::unix_now;
use seckill_devstack::TEST_JWT_SECRET;
use seckill_ingress::RateLimitConfig;
use serde_json::{json, Value};
use sha2::Sha256;

use crate::helpers::Platform;

/// A token with any header and claims, its signature computed with `key`
/// over exactly what it carries (empty `key`: no signature at all).
fn crafted(header: &Value, claims: &Value, key: &[u8]) -> String {
    let encode = |value: &Value| URL_SAFE_NO_PAD.encode(value.to_string());
    let input = format!("{}.{}", encode(header), encode(claims));
    let signature = if key.is_empty() {
        String::new()
    } else {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
        mac.update(input.as_bytes());
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    };
    format!("Bearer {input}.{signature}")
}

/// Sends `request` and returns its status and JSON body.
async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("the ingress answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_and_other_users_orders_are_refused_and_stock_is_unchanged() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(10, 1).await;
    let (status, placed) = platform.order(&voucher, "alice").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{placed}");
    let order = placed["order_id"].as_str().expect("order_id").to_owned();
    assert_eq!(platform.wait_final(&order).await["status"], "CREATED");
    let before = (platform.redis_remaining(&voucher).await, platform.persistent_remaining(&voucher).await);
    assert_eq!(before, (9, 9));

    let mallory = json!({"sub": "mallory", "exp": unix_now() + 600});
    let hs256 = json!({"alg": "HS256", "typ": "JWT"});
    let alice_token = Platform::as_user("alice");
    let tampered = {
        // Alice's genuine header and signature around mallory's claims.
        let parts: Vec<&str> = alice_token.trim_start_matches("Bearer ").split('.').collect();
        format!("Bearer {}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(mallory.to_string()), parts[2])
    };
    let bad_tokens = [
        ("signed with another secret", crafted(&hs256, &mallory, b"not the ingress's secret, but 32+ bytes")),
        ("claims swapped under a genuine signature", tampered),
        ("alg none, unsigned", crafted(&json!({"alg": "none"}), &mallory, b"")),
        (
            "RS256 header signed with the HMAC secret",
            crafted(&json!({"alg": "RS256"}), &mallory, TEST_JWT_SECRET.as_bytes()),
        ),
        (
            "expired an hour ago",
            crafted(&hs256, &json!({"sub": "mallory", "exp": unix_now() - 3600}), TEST_JWT_SECRET.as_bytes()),
        ),
        ("no exp", crafted(&hs256, &json!({"sub": "mallory"}), TEST_JWT_SECRET.as_bytes())),
        ("not a JWT", "Bearer hunter2".to_owned()),
        ("another scheme", "Basic bWFsbG9yeTpwdw==".to_owned()),
    ];
    let orders_url = format!("{}/api/v1/vouchers/{voucher}/orders", platform.base);
    let order_url = format!("{}/api/v1/orders/{order}", platform.base);
    for (what, token) in &bad_tokens {
        let (status, body) = answer(platform.http.post(&orders_url).header("authorization", token)).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("unauthorized")),
            "{what}: {body}"
        );
        assert!(!body["message"].as_str().unwrap_or_default().is_empty(), "{what}: a clear message");
        let (status, _) = answer(platform.http.get(&order_url).header("authorization", token)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: reading alice's order");
        let (status, _) =
            answer(platform.http.post(format!("{order_url}/cancel")).header("authorization", token)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: cancelling alice's order");
    }

    // A valid user acting on someone else's order learns nothing: 404.
    let bob = Platform::as_user("bob");
    for request in [
        platform.http.get(&order_url),
        platform.http.post(format!("{order_url}/cancel")),
        platform.http.post(format!("{order_url}/confirm")),
        platform.http.get(format!("{}/api/v1/users/alice/orders", platform.base)),
    ] {
        let (status, body) = answer(request.header("authorization", &bob)).await;
        assert_eq!((status, body["error"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{body}");
    }
    // Alice sees her own.
    let (status, own) = answer(platform.http.get(&order_url).header("authorization", &alice_token)).await;
    assert_eq!((status, own["user_id"].as_str()), (StatusCode::OK, Some("alice")));

    // The development header means nothing here.
    let (status, _) = answer(platform.http.post(&orders_url).header("x-user-id", "mallory")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = answer(platform.http.post(format!("{order_url}/cancel")).header("x-user-id", "alice")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Admin routes: 401 without a token, 403 with anything but the admin's.
    let open_sale = json!({"stock": 1000, "begins_at": chrono::Utc::now(), "ends_at": chrono::Utc::now() + chrono::Duration::hours(1)});
    let create = || platform.http.post(format!("{}/api/v1/vouchers", platform.base)).json(&open_sale);
    let change = || {
        platform.http.patch(format!("{}/api/v1/vouchers/{voucher}", platform.base)).json(&json!({"add_stock": 1000}))
    };
    assert_eq!(answer(create()).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(answer(change()).await.0, StatusCode::UNAUTHORIZED);
    for token in [alice_token.as_str(), "Bearer not-the-admin-token", bad_tokens[3].1.as_str()] {
        assert_eq!(answer(create().header("authorization", token)).await.0, StatusCode::FORBIDDEN, "{token}");
        assert_eq!(answer(change().header("authorization", token)).await.0, StatusCode::FORBIDDEN, "{token}");
    }

    // Nothing of the above moved stock or changed alice's order.
    assert_eq!((platform.redis_remaining(&voucher).await, platform.persistent_remaining(&voucher).await), before);
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == 1).await;
    assert_eq!(
        (shown["admitted"].as_u64(), shown["stock"].as_u64(), shown["cancelled"].as_u64()),
        (Some(1), Some(10), Some(0))
    );
    assert_eq!(platform.wait_final(&order).await["status"], "CREATED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_over_the_rate_limits_get_429_and_everyone_else_still_buys() {
    let limits = RateLimitConfig {
        per_user_per_second: 1,
        per_user_burst: 3,
        per_ip_per_second: 1,
        per_ip_burst: 40,
        ..RateLimitConfig::default()
    };
    let platform = Platform::start_configured(None, |config| config.rate_limit = limits).await;
    let voucher = platform.create_voucher(100, 1).await;

    // One user hammering: the burst passes, then 429 with Retry-After.
    let mut greedy = Vec::new();
    for _ in 0..10 {
        let response = platform
            .http
            .post(format!("{}/api/v1/vouchers/{voucher}/orders", platform.base))
            .header("authorization", Platform::as_user("greedy"))
            .send()
            .await
            .expect("answers");
        let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let status = response.status();
        greedy.push((status, retry_after, response.json::<Value>().await.unwrap_or(Value::Null)));
    }
    let statuses: Vec<StatusCode> = greedy.iter().map(|(status, ..)| *status).collect();
    assert_eq!(statuses[0], StatusCode::ACCEPTED);
    assert!(statuses[1..3].iter().all(|s| *s == StatusCode::CONFLICT), "the burst reaches the gate: {statuses:?}");
    // At most one token can have refilled while the ten requests were sent.
    let limited: Vec<_> = greedy[3..].iter().filter(|(status, ..)| *status == StatusCode::TOO_MANY_REQUESTS).collect();
    assert!(limited.len() >= 6, "{statuses:?}");
    for (_, retry_after, body) in &limited {
        assert_eq!(body["error"], "rate_limited");
        let seconds: u64 = retry_after.as_deref().expect("Retry-After").parse().expect("whole seconds");
        assert!(seconds >= 1 && body["retry_after_seconds"] == seconds, "{body}");
    }

    // Everyone else still buys.
    let (status, body) = platform.order(&voucher, "patient").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // One address sending for many users runs into the per-address limit.
    let mut by_status = std::collections::BTreeMap::<u16, u32>::new();
    for user in 0..60 {
        let (status, body) = platform.order(&voucher, &format!("crowd-{user}")).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert!(body["message"].as_str().is_some_and(|m| m.contains("address")), "{body}");
        }
        *by_status.entry(status.as_u16()).or_default() += 1;
    }
    let admitted_crowd = by_status.get(&202).copied().unwrap_or(0);
    assert!(by_status.get(&429).copied().unwrap_or(0) >= 15, "{by_status:?}");
    assert!(admitted_crowd >= 25, "the address's burst was served: {by_status:?}");

    // Refused requests changed nothing in the gate: only the admitted took stock.
    let admitted = 2 + u64::from(admitted_crowd);
    assert_eq!(platform.redis_remaining(&voucher).await, 100 - admitted);
    let metrics = platform.http.get(format!("{}/metrics", platform.base)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("text");
    for reason in ["rate_limited_user", "rate_limited_ip"] {
        assert!(
            metrics.lines().any(|l| l.starts_with("seckill_requests_refused_total") && l.contains(reason)),
            "{reason}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_proxy_the_last_forwarded_entry_across_header_lines_is_limited() {
    let limits = RateLimitConfig {
        per_user_per_second: 0,
        per_ip_per_second: 1,
        per_ip_burst: 5,
        trust_x_forwarded_for: true,
        ..RateLimitConfig::default()
    };
    let platform = Platform::start_configured(None, |config| config.rate_limit = limits).await;
    let voucher = platform.create_voucher(100, 1).await;
    let orders = format!("{}/api/v1/vouchers/{voucher}/orders", platform.base);

    // A client behind the proxy writes its own X-Forwarded-For line, a new
    // address each time; the proxy appends a line with the address it saw.
    let mut statuses = Vec::new();
    for i in 0..15 {
        let (status, body) = answer(
            platform
                .http
                .post(&orders)
                .header("authorization", Platform::as_user(&format!("behind-proxy-{i}")))
                .header("x-forwarded-for", format!("10.9.8.{i}, 10.9.7.{i}"))
                .header("x-forwarded-for", "203.0.113.7"),
        )
        .await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert!(body["message"].as_str().is_some_and(|m| m.contains("address")), "{body}");
        }
        statuses.push(status);
    }
    assert!(statuses[..5].iter().all(|s| *s == StatusCode::ACCEPTED), "the address's burst: {statuses:?}");
    // Ten more within seconds: at most a few tokens refilled meanwhile.
    let limited = statuses[5..].iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    assert!(limited >= 5, "the proxy-added address is limited, whatever the client wrote: {statuses:?}");

    // Another client of the proxy, whose first line names the busy address,
    // is counted as itself.
    let (status, body) = answer(
        platform
            .http
            .post(&orders)
            .header("authorization", Platform::as_user("other-client"))
            .header("x-forwarded-for", "203.0.113.7")
            .header("x-forwarded-for", "198.51.100.9"),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // An IPv6 client picking a new address of its /64 for every request is
    // one client.
    let mut rotating = Vec::new();
    for i in 0..10 {
        let (status, _) = answer(
            platform
                .http
                .post(&orders)
                .header("authorization", Platform::as_user(&format!("rotating-{i}")))
                .header("x-forwarded-for", format!("2001:db8:7:7:{i:x}::{:x}", 1000 + i)),
        )
        .await;
        rotating.push(status);
    }
    let limited = rotating.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    assert!(limited >= 4, "one /64 shares one bucket of 5: {rotating:?}");

    let admitted = statuses.iter().chain(&rotating).filter(|s| **s == StatusCode::ACCEPTED).count() as u64 + 1;
    assert_eq!(platform.redis_remaining(&voucher).await, 100 - admitted, "refused requests took no stock");
}

#[tokio::test]
async fn malformed_requests_get_one_error_shape_and_change_nothing() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(5, 2).await;
    let orders = format!("{}/api/v1/vouchers/{voucher}/orders", platform.base);
    let alice = Platform::as_user("alice");
    let post = |body: String| platform.http.post(&orders).header("authorization", &alice).body(body);
    let cases: Vec<(&str, reqwest::RequestBuilder, StatusCode)> = vec![
        ("not JSON", post("{quantity: 1".into()), StatusCode::BAD_REQUEST),
        ("unknown field", post(r#"{"quantity": 1, "price": 0}"#.into()), StatusCode::BAD_REQUEST),
        ("quantity 0", post(r#"{"quantity": 0}"#.into()), StatusCode::BAD_REQUEST),
        ("quantity over the maximum", post(r#"{"quantity": 10001}"#.into()), StatusCode::BAD_REQUEST),
        ("negative quantity", post(r#"{"quantity": -1}"#.into()), StatusCode::BAD_REQUEST),
        ("quantity as a string", post(r#"{"quantity": "1"}"#.into()), StatusCode::BAD_REQUEST),
        ("null quantity", post(r#"{"quantity": null}"#.into()), StatusCode::BAD_REQUEST),
        ("a JSON array", post("[1]".into()), StatusCode::BAD_REQUEST),
        (
            "a body over 16 KiB",
            post(format!(r#"{{"quantity": 1, "pad": "{}"}}"#, "x".repeat(20_000))),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            "an Idempotency-Key with spaces",
            post(String::new()).header("idempotency-key", "a b"),
            StatusCode::BAD_REQUEST,
        ),
        (
            "an Idempotency-Key of 129 characters",
            post(String::new()).header("idempotency-key", "k".repeat(129)),
            StatusCode::BAD_REQUEST,
        ),
        (
            "a voucher id that is not a UUID",
            platform
                .http
                .post(format!("{}/api/v1/vouchers/1%20OR%201=1/orders", platform.base))
                .header("authorization", &alice),
            StatusCode::BAD_REQUEST,
        ),
        (
            "a user listing with an unknown query parameter",
            platform
                .http
                .get(format!("{}/api/v1/users/alice/orders?limit=5&admin=true", platform.base))
                .header("authorization", &alice),
            StatusCode::BAD_REQUEST,
        ),
        (
            "a listing limit of 0",
            platform.http.get(format!("{}/api/v1/vouchers?limit=0", platform.base)),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (what, request, expected) in cases {
        let (status, body) = answer(request).await;
        assert_eq!(status, expected, "{what}: {body}");
        assert!(body["error"].is_string() && body["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
    }
    assert_eq!(platform.redis_remaining(&voucher).await, 5, "no malformed request took stock");
    let (status, body) = platform.order_units(&voucher, "alice", 2).await;
    assert_eq!(status, StatusCode::ACCEPTED, "a well-formed request still works: {body}");
}
