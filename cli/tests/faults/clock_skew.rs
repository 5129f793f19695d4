//! A service's wall clock 30 s off (`seckill_devstack::ClockShim`, an
//! `LD_PRELOAD` shim that moves the wall clock and keeps every timed wait
//! true, so librdkafka runs), and every deadline still judged on Redis's
//! clock: the services stamp each deadline-relevant time (an order's
//! `accepted_at`, a decision's time and so its `pay_by`, a claim's, the
//! expiry sweeper's now) with `seckill_core::clock::now()`, their host's
//! clock plus the offset to Redis's `TIME` they measure
//! (`seckill_web::ServerClock`), while Redis judges sale windows, entry
//! tokens, challenges and draw windows itself.
//!
//! Three scenarios, each under the suite's whole mixed load (the waiting
//! room and the draw included): the ingress 30 s slow, the ingress 30 s
//! fast, the processor 30 s fast. In each, probes measured on this test's
//! clock (the machine's, which is Redis's): a hold's `pay_by` is true now
//! plus `payment_seconds`, and it lives that long; a claim a second before
//! the true `pay_by` wins, one a second after it does not; an order 3 s
//! before the true end is created, one 1 s after it refused `ended`; a
//! challenge and an entry token last their length. The skewed service
//! reports its raw offset (±30 s) and `SeckillClockSkew` fires for it
//! alone; the invariant checker and the audit (every rule, the room's and
//! the draw's included) pass. Each test prints its figures.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use seckill_core::challenge;
use seckill_devstack::user_token;
use serde_json::{json, Value};

use crate::alerts::Alerts;
use crate::cluster::{Cluster, Service};
use crate::load::Promised;
use crate::sale::{create_voucher, create_voucher_from};
use crate::{settle_tally, turn, under_load_on, RECOVERY_BOUND};

/// The suite's skew: 30 s, thirty times what `SeckillClockSkew` tolerates.
const OFF_MS: i64 = 30_000;
/// How long a challenge lasts here (`challenge.seconds`, its least).
const CHALLENGE_SECONDS: i64 = 10;
/// The hold of the probes' free vouchers (`payment_seconds`).
const HOLD_SECONDS: u32 = 3;
/// How long the probes' waiting room's entry tokens last.
const TOKEN_SECONDS: i64 = 5;
/// How far Redis's clock and this test's may disagree, read through a
/// service: the same host, so the services' measurement error (half a
/// round trip) and a little scheduling.
const TOLERANCE: f64 = 0.25;
/// How much later than its `pay_by` a hold may be seen expired: the
/// sweeper runs every second, then the log and the view.
const LATE_BY: f64 = 2.5;
/// How long before a true deadline the probes act when they must be in
/// time, and how long after when they must not.
const BEFORE: chrono::Duration = chrono::Duration::milliseconds(1_000);
const AFTER: chrono::Duration = chrono::Duration::milliseconds(1_000);

/// The three scenarios share the platform's setup and the probes; only
/// which service is skewed, and which way, differs.
async fn skewed(service: Service, offset_ms: i64, fault: &str) {
    let _turn = turn().await;
    let mut cluster = tokio::task::block_in_place(Cluster::start);
    cluster.ingress_env.push(("SECKILL_CHALLENGE__SECONDS".to_owned(), CHALLENGE_SECONDS.to_string()));
    tokio::task::block_in_place(|| {
        if service != Service::Ingress {
            // The challenge's length is the ingress's setting, read at start.
            assert!(cluster.stop(Service::Ingress), "[{fault}] the ingress exits 0 on SIGTERM before its restart");
            cluster.start_service(Service::Ingress);
        }
        cluster.restart_with_clock_off(service, offset_ms);
    });
    let skewed_since = tokio::time::Instant::now();
    let offset = assert_offset(&cluster, service, -(offset_ms as f64) / 1000.0, fault).await;
    let alerts = Alerts::watch(&cluster).await;
    let (mut cluster, vouchers, load) = under_load_on(cluster).await;

    let probes = deadlines_kept(&cluster, fault).await;
    println!("[{fault}] {service:?} measured {offset:+.2} s off Redis (its host's clock, for NTP health)");
    let alerted = skew_alert_fires_for(&alerts, service, skewed_since, fault).await;
    println!("[{fault}] SeckillClockSkew firing for the {service:?} alone, {alerted:?} after its skewed start");

    tokio::time::sleep(Duration::from_secs(1)).await;
    load.until_rooms_served(RECOVERY_BOUND).await;
    let mut tally = load.finish().await;
    tally.promised.extend(probes);
    settle_tally(&mut cluster, &vouchers, tally, fault).await;
}

/// Runs every probe at once on `cluster` (whose ingress's challenges last
/// [`CHALLENGE_SECONDS`]); the orders they were promised, for the checker.
async fn deadlines_kept(cluster: &Cluster, fault: &str) -> Vec<Promised> {
    let (holds, end, challenges, tokens) = tokio::join!(
        holds_kept(cluster, fault),
        end_kept(cluster, fault),
        challenges_kept(cluster, fault),
        entry_tokens_kept(cluster, fault),
    );
    [holds, end, challenges, tokens].into_iter().flatten().collect()
}

/// An order on a held sale, sent at a true time, and its hold as the
/// view first showed it.
struct Held {
    promised: Promised,
    sent: DateTime<Utc>,
    seen_created: DateTime<Utc>,
    pay_by: DateTime<Utc>,
}

impl Held {
    async fn order(cluster: &Cluster, voucher: &str, user: &str, fault: &str) -> Self {
        let sent = Utc::now();
        let promised = admitted(cluster, voucher, user, (None, None), "an order with a hold").await;
        let (created, seen_created) = view_until(cluster, &promised.order, "created", status_is("CREATED")).await;
        let pay_by = time_of(&created, "pay_by");
        let held = Self { promised, sent, seen_created, pay_by };
        held.assert_pay_by(fault);
        held
    }

    /// `pay_by` is the true time of the decision plus the hold, rounded up
    /// to a whole second: no earlier than the order was sent plus the hold,
    /// no later than the view showed it created plus the hold and a second.
    fn assert_pay_by(&self, fault: &str) {
        let hold = f64::from(HOLD_SECONDS);
        let ahead = (self.pay_by - self.sent).as_seconds_f64();
        let latest = (self.seen_created - self.sent).as_seconds_f64() + hold + 1.0;
        assert!(
            (hold - TOLERANCE..=latest + TOLERANCE).contains(&ahead),
            "[{fault}] a {HOLD_SECONDS}-s hold's pay_by is {ahead:.2} s after the order was sent, not within \
             [{hold}, {latest:.2}] s by the true clock"
        );
    }

    /// Claims at `at` (true time); the answer and the order's final state.
    async fn claim_at(&self, cluster: &Cluster, at: DateTime<Utc>) -> (StatusCode, Value, Value) {
        sleep_until(at).await;
        let (status, body) = claim(cluster, &self.promised.order, &self.promised.user).await;
        let (row, _) = view_until(cluster, &self.promised.order, "final", |row| {
            matches!(row["status"].as_str(), Some("CANCELLED" | "PAID"))
        })
        .await;
        (status, body, row)
    }
}

/// Holds judged on the true clock: `pay_by` is true now plus the hold, an
/// unpaid hold lives that long, a claim a second before the true `pay_by`
/// wins and one a second after it does not.
async fn holds_kept(cluster: &Cluster, fault: &str) -> Vec<Promised> {
    let voucher = create_voucher(cluster, 1_000, 2, HOLD_SECONDS).await;
    let (unpaid, in_time, late) = tokio::join!(
        Held::order(cluster, &voucher, "hold-unpaid", fault),
        Held::order(cluster, &voucher, "hold-in-time", fault),
        Held::order(cluster, &voucher, "hold-late", fault),
    );
    let ((expired, seen_expired), (won, won_body, won_row), (lost, lost_body, lost_row)) = tokio::join!(
        view_until(cluster, &unpaid.promised.order, "expired", status_is("CANCELLED")),
        in_time.claim_at(cluster, in_time.pay_by - BEFORE),
        late.claim_at(cluster, late.pay_by + AFTER),
    );
    let told = (unpaid.pay_by - unpaid.sent).as_seconds_f64();
    let life = (seen_expired - unpaid.sent).as_seconds_f64();
    let past = (seen_expired - unpaid.pay_by).as_seconds_f64();
    println!(
        "[{fault}] a {HOLD_SECONDS}-s hold: pay_by {told:.2} s after the order was sent (true clock), seen expired \
         {life:.2} s after it ({past:.2} s past pay_by); a claim 1 s before the true pay_by: {won} then {}; one 1 s \
         after it: {lost} {} then {} ({})",
        won_row["status"], lost_body["error"], lost_row["status"], lost_row["reason"]
    );
    assert_eq!(expired["reason"], "expired", "[{fault}] {expired}");
    assert!(
        (-TOLERANCE..LATE_BY).contains(&past),
        "[{fault}] an unpaid hold seen expired {past:.2} s past its true pay_by"
    );
    assert_eq!(won, StatusCode::ACCEPTED, "[{fault}] a claim before the true pay_by: {won_body}");
    assert_eq!(won_row["status"], "PAID", "[{fault}] a claim before the true pay_by: {won_row}");
    assert!(
        lost == StatusCode::CONFLICT || lost == StatusCode::ACCEPTED,
        "[{fault}] a claim after the true pay_by answered {lost} {lost_body}"
    );
    assert_eq!(
        (lost_row["status"].as_str(), lost_row["reason"].as_str()),
        (Some("CANCELLED"), Some("expired")),
        "[{fault}] a claim after the true pay_by must not win: {lost_row}"
    );
    vec![unpaid.promised, in_time.promised, late.promised]
}

/// The sale's end on the true clock: an order 3 s before it is created
/// (its `accepted_at` is before the end in the processor too), one 1 s
/// after it is refused `ended`.
async fn end_kept(cluster: &Cluster, fault: &str) -> Vec<Promised> {
    let ends_at = Utc::now() + chrono::Duration::seconds(8);
    let voucher = voucher_ending(cluster, ends_at, 0).await;
    sleep_until(ends_at - chrono::Duration::seconds(3)).await;
    let before = admitted(cluster, &voucher, "end-before", (None, None), "an order 3 s before the end").await;
    sleep_until(ends_at + AFTER).await;
    let (status, body) = order(cluster, &voucher, "end-after", None, None).await;
    let decided = |row: &Value| matches!(row["status"].as_str(), Some("CREATED" | "PAID" | "FAILED"));
    let (row, _) = view_until(cluster, &before.order, "decided", decided).await;
    println!(
        "[{fault}] an order 3 s before the true end: 202 then {} ({}); one 1 s after it: {status} {}",
        row["status"], row["reason"], body["error"]
    );
    assert_eq!(row["status"], "CREATED", "[{fault}] an order 3 s before the true end: {row}");
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("ended")), "[{fault}] {body}");
    vec![before]
}

/// A challenge lasts [`CHALLENGE_SECONDS`] of true time: one spent a
/// second before its expiry pays, one spent a second after is refused.
async fn challenges_kept(cluster: &Cluster, fault: &str) -> Vec<Promised> {
    let voucher = voucher_ending(cluster, Utc::now() + chrono::Duration::hours(1), 4).await;
    let asked = Utc::now();
    let (in_time, expires) = solved_challenge(cluster, &voucher, "challenge-in-time").await;
    let (late, late_expires) = solved_challenge(cluster, &voucher, "challenge-late").await;
    let dated = (expires - asked).as_seconds_f64();
    sleep_until(expires - BEFORE).await;
    let paid =
        admitted(cluster, &voucher, "challenge-in-time", (None, Some(&in_time)), "a challenge 1 s before expiry").await;
    sleep_until(late_expires + AFTER).await;
    let (status, body) = order(cluster, &voucher, "challenge-late", None, Some(&late)).await;
    println!(
        "[{fault}] a challenge dated {dated:.2} s ahead (true clock): 1 s before then it paid; 1 s after, {status} {}",
        body["error"]
    );
    let length = CHALLENGE_SECONDS as f64;
    assert!(
        (length - TOLERANCE..=length + 1.0).contains(&dated),
        "[{fault}] a challenge expires {dated:.2} s after it was asked for, not {length}"
    );
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("challenge_expired")),
        "[{fault}] a challenge past its true expiry: {body}"
    );
    vec![paid]
}

/// An entry token lasts [`TOKEN_SECONDS`] of true time: one spent a
/// second before its expiry admits, one spent a second after is refused.
async fn entry_tokens_kept(cluster: &Cluster, fault: &str) -> Vec<Promised> {
    let room = waiting_room(cluster).await;
    // From the join: the room serves at once, but a waiter may hear of its
    // turn up to a long poll (2 s) later.
    let joined = Utc::now();
    let (in_time, expires) = entry_token(cluster, &room, "token-in-time").await;
    let life = (expires - joined).as_seconds_f64();
    let (late, late_expires) = entry_token(cluster, &room, "token-late").await;
    sleep_until(expires - BEFORE).await;
    let spent =
        admitted(cluster, &room, "token-in-time", (Some(&in_time), None), "an entry token 1 s before expiry").await;
    sleep_until(late_expires + AFTER).await;
    let (status, body) = order(cluster, &room, "token-late", Some(&late), None).await;
    println!(
        "[{fault}] an entry token expiring {life:.2} s after its holder joined (true clock): 1 s before then it \
         admitted; 1 s after, {status} {}",
        body["error"]
    );
    let length = TOKEN_SECONDS as f64;
    assert!(
        (length - TOLERANCE..=length + 1.0).contains(&life),
        "[{fault}] an entry token expires {life:.2} s after its holder joined a room serving at once, not {length}"
    );
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("entry_token_expired")),
        "[{fault}] an entry token past its true expiry: {body}"
    );
    vec![spent]
}

/// `seckill_clock_offset_seconds` as `service` reports it (Redis's clock
/// minus its own), once its Redis probe has measured it.
async fn measured_offset(cluster: &Cluster, service: Service) -> f64 {
    let url = format!("{}/metrics", cluster.url(service));
    let started = tokio::time::Instant::now();
    loop {
        let text = match cluster.http.get(&url).send().await {
            Ok(answer) => answer.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let offset = text
            .lines()
            .find(|line| line.starts_with("seckill_clock_offset_seconds"))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse::<f64>().ok())
            .filter(|offset| *offset != 0.0);
        if let Some(offset) = offset {
            return offset;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{service:?} never measured its clock: {text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Asserts `service` measures its clock `expected` seconds off Redis's.
async fn assert_offset(cluster: &Cluster, service: Service, expected: f64, fault: &str) -> f64 {
    let offset = measured_offset(cluster, service).await;
    assert!((offset - expected).abs() < 1.0, "[{fault}] {service:?} reads {offset} s off Redis, not {expected}");
    offset
}

/// Requires `SeckillClockSkew` to fire for `skewed` and for no other
/// service that measures its clock; how long after `since` (the skewed
/// service's start) it fired.
async fn skew_alert_fires_for(alerts: &Alerts, skewed: Service, since: tokio::time::Instant, fault: &str) -> Duration {
    let name = |service: Service| format!("{service:?}").to_lowercase();
    alerts.fires(fault, "SeckillClockSkew", &[("service", &name(skewed))], Duration::from_secs(40)).await;
    let after = since.elapsed();
    for other in [Service::Ingress, Service::Processor].into_iter().filter(|service| *service != skewed) {
        alerts.quiet(fault, "SeckillClockSkew", &[("service", &name(other))]).await;
    }
    after
}

/// `POST path` on the ingress as `user`, with `body` and a proof.
async fn post(
    cluster: &Cluster,
    path: &str,
    user: &str,
    body: Option<Value>,
    proof: Option<&(String, String)>,
) -> (StatusCode, Value) {
    let mut request = cluster
        .http
        .post(format!("{}{path}", cluster.url(Service::Ingress)))
        .header("authorization", format!("Bearer {}", user_token(user)));
    if let Some(body) = body {
        request = request.json(&body);
    }
    if let Some((challenge, solution)) = proof {
        request = request.header("seckill-challenge", challenge).header("seckill-solution", solution);
    }
    let answer = request.send().await.expect("the ingress answers");
    let status = answer.status();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// Orders one unit of `voucher` as `user`, with an entry token or a proof.
async fn order(
    cluster: &Cluster,
    voucher: &str,
    user: &str,
    entry: Option<&str>,
    proof: Option<&(String, String)>,
) -> (StatusCode, Value) {
    let body = match entry {
        Some(entry) => json!({ "quantity": 1, "entry_token": entry }),
        None => json!({ "quantity": 1 }),
    };
    post(cluster, &format!("/api/v1/vouchers/{voucher}/orders"), user, Some(body), proof).await
}

/// Orders one unit of `voucher` as `user`, which must be admitted (`what`
/// says why): the promise to hand the checker.
async fn admitted(
    cluster: &Cluster,
    voucher: &str,
    user: &str,
    (entry, proof): (Option<&str>, Option<&(String, String)>),
    what: &str,
) -> Promised {
    let (status, body) = order(cluster, voucher, user, entry, proof).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{what}: {body}");
    let order = body["order_id"].as_str().expect("a 202 names its order").to_owned();
    Promised { order, voucher: voucher.to_owned(), user: user.to_owned(), quantity: 1 }
}

/// Claims (confirms) `order` as its owner `user`.
async fn claim(cluster: &Cluster, order: &str, user: &str) -> (StatusCode, Value) {
    post(cluster, &format!("/api/v1/orders/{order}/confirm"), user, None, None).await
}

/// A queue-mode voucher open now, serving places at once, its entry
/// tokens lasting [`TOKEN_SECONDS`].
async fn waiting_room(cluster: &Cluster) -> String {
    let now = Utc::now();
    let body = json!({
        "stock": 1_000, "per_user_limit": 2, "payment_seconds": 0,
        "begins_at": now - chrono::Duration::seconds(1), "ends_at": now + chrono::Duration::hours(1),
        "mode": "queue", "queue_factor": 1.5, "queue_entry_rate": 200, "queue_idle_seconds": 5,
        "queue_token_seconds": TOKEN_SECONDS,
    });
    create_voucher_from(cluster, &body).await
}

/// `user` joins the waiting room of `voucher` and waits for their turn:
/// their entry token, and when the room says it expires.
async fn entry_token(cluster: &Cluster, voucher: &str, user: &str) -> (String, DateTime<Utc>) {
    let (status, mut seen) = post(cluster, &format!("/api/v1/vouchers/{voucher}/queue"), user, None, None).await;
    assert!(matches!(status.as_u16(), 200 | 201), "joining the room answered {status}: {seen}");
    for _ in 0..10 {
        if let Some(token) = seen["entry_token"].as_str() {
            let expires = ["entry_expires_at", "expires_at"]
                .iter()
                .find_map(|field| seen[*field].as_str().and_then(|at| at.parse().ok()))
                .unwrap_or_else(|| panic!("the room names when an entry expires: {seen}"));
            return (token.to_owned(), expires);
        }
        let answer = cluster
            .http
            .get(format!("{}/api/v1/vouchers/{voucher}/queue/me?wait=2s", cluster.url(Service::Ingress)))
            .header("authorization", format!("Bearer {}", user_token(user)))
            .send()
            .await
            .expect("the ingress answers");
        seen = answer.json().await.unwrap_or(Value::Null);
    }
    panic!("{user}'s turn never came: {seen}");
}

/// A solved challenge for `user` on `voucher`, and when it expires.
async fn solved_challenge(cluster: &Cluster, voucher: &str, user: &str) -> ((String, String), DateTime<Utc>) {
    let answer = cluster
        .http
        .get(format!("{}/api/v1/vouchers/{voucher}/challenge", cluster.url(Service::Ingress)))
        .header("authorization", format!("Bearer {}", user_token(user)))
        .send()
        .await
        .expect("the ingress answers");
    assert_eq!(answer.status(), StatusCode::OK);
    let issued: Value = answer.json().await.expect("a challenge");
    let text = issued["challenge"].as_str().expect("a challenge").to_owned();
    let bits = u32::try_from(issued["bits"].as_u64().expect("bits")).expect("small");
    let expires = issued["expires_at"].as_str().and_then(|at| at.parse().ok()).expect("an expiry");
    let solution = challenge::solve(&text, bits);
    ((text, solution), expires)
}

/// The order as the view has it once `done` holds, and the true time this
/// test first saw it so (polled every 50 ms).
async fn view_until(
    cluster: &Cluster,
    order: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> (Value, DateTime<Utc>) {
    let url = format!("{}/api/v1/orders/{order}", cluster.url(Service::Projector));
    let started = tokio::time::Instant::now();
    loop {
        if let Ok(answer) = cluster.http.get(&url).send().await {
            let row: Value = answer.json().await.unwrap_or_default();
            if done(&row) {
                return (row, Utc::now());
            }
        }
        assert!(started.elapsed() < RECOVERY_BOUND, "order {order} never {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn status_is(status: &'static str) -> impl Fn(&Value) -> bool {
    move |row| row["status"] == status
}

fn time_of(row: &Value, field: &str) -> DateTime<Utc> {
    row[field].as_str().and_then(|at| at.parse().ok()).unwrap_or_else(|| panic!("no {field} in {row}"))
}

/// A free voucher, open now, ending at `ends_at` (true time), asking
/// `challenge_bits` of every order.
async fn voucher_ending(cluster: &Cluster, ends_at: DateTime<Utc>, challenge_bits: u32) -> String {
    let body = json!({
        "stock": 1_000, "per_user_limit": 5, "payment_seconds": 0, "challenge_bits": challenge_bits,
        "begins_at": Utc::now() - chrono::Duration::seconds(1), "ends_at": ends_at,
    });
    create_voucher_from(cluster, &body).await
}

/// Sleeps until `at` by this host's (true) clock.
async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(wait) = (at - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingress_thirty_seconds_slow_keeps_every_deadline_on_redis_clock() {
    skewed(Service::Ingress, -OFF_MS, "ingress clock 30 s slow").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingress_thirty_seconds_fast_keeps_every_deadline_on_redis_clock() {
    skewed(Service::Ingress, OFF_MS, "ingress clock 30 s fast").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_thirty_seconds_fast_keeps_every_deadline_on_redis_clock() {
    skewed(Service::Processor, OFF_MS, "processor clock 30 s fast").await;
}
