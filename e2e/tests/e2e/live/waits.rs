//! Long-polls: answered by the event that changes the order, by the end of
//! the wait, and by shutdown; bounded; woken on every replica; without a
//! status, waiting for a change from the one the order has; every answer
//! dated when it is sent.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::sse::SseStream;
use super::{header, read};
use crate::helpers::{eventually, Platform};

/// Waits until the ingress at `base` counts `waiting` long-polls.
async fn until_waiting(platform: &Platform, base: &str, waiting: u64) {
    eventually(|| async {
        let text = platform.http.get(format!("{base}/metrics")).send().await.ok()?.text().await.ok()?;
        let line = text.lines().find(|line| line.starts_with("seckill_live_waiters{"))?;
        (line.rsplit(' ').next()?.parse::<f64>().ok()? as u64 == waiting).then_some(())
    })
    .await;
}

/// A long-poll on `order` at `base` as `user`, in the background.
fn long_poll(
    platform: &Platform,
    base: &str,
    order: &str,
    user: &str,
    query: &str,
) -> tokio::task::JoinHandle<(StatusCode, Option<String>, Value, Duration)> {
    let request = platform
        .http
        .get(format!("{base}/api/v1/orders/{order}?{query}"))
        .header("authorization", Platform::as_user(user));
    tokio::spawn(async move {
        let started = Instant::now();
        let response = request.send().await.expect("answers");
        let (status, wait) = (response.status(), header(response.headers(), "seckill-wait").map(str::to_owned));
        (status, wait, response.json().await.unwrap_or(Value::Null), started.elapsed())
    })
}

#[tokio::test]
async fn long_polls_on_every_replica_are_answered_by_the_decision_and_others_by_their_end() {
    let mut platform = Platform::start().await;
    let (other, _replica) = platform.another_ingress().await;
    let voucher = platform.create_voucher(5, 1).await;

    // Nothing decides while the processor is down: the order stays PENDING.
    platform.processor.take().expect("running").stop().await;
    let (status, placed) = platform.order(&voucher, "waiter").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let order = placed["order_id"].as_str().expect("order_id").to_owned();
    let here = long_poll(&platform, &platform.base, &order, "waiter", "wait=25s");
    let there = long_poll(&platform, &other, &order, "waiter", "wait=25s&status=PENDING");
    until_waiting(&platform, &platform.base, 1).await;
    until_waiting(&platform, &other, 1).await;

    platform.start_processor().await;
    for answered in [here, there] {
        let (status, wait, body, elapsed) = answered.await.expect("answered");
        assert_eq!((status, wait.as_deref()), (StatusCode::OK, Some("changed")), "{body}");
        assert_eq!(body["status"], "CREATED");
        assert!(elapsed < Duration::from_secs(25), "woken, not timed out: {elapsed:?}");
    }

    // A wait on a status the order keeps ends with the order as it stands.
    let (status, wait, body, elapsed) =
        long_poll(&platform, &platform.base, &order, "waiter", "wait=300ms&status=CREATED").await.expect("answered");
    assert_eq!((status, wait.as_deref(), body["status"].as_str()), (StatusCode::OK, Some("timeout"), Some("CREATED")));
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    // A status that differs at once answers at once.
    let (_, wait, _, _) =
        long_poll(&platform, &other, &order, "waiter", "wait=25s&status=PENDING").await.expect("answered");
    assert_eq!(wait.as_deref(), Some("changed"));

    // Bad waits are refused, someone else's order is not found.
    for query in ["wait=31s", "wait=10", "wait=010s", "wait=1s&status=LOST"] {
        let (status, _, body) =
            read(&platform, &platform.base, &format!("/api/v1/orders/{order}?{query}"), Some("waiter"), &[]).await;
        assert_eq!((status, body["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_request")), "{query}");
    }
    // `status` without `wait` is a plain read: the order as it stands.
    let (status, _, body) =
        read(&platform, &platform.base, &format!("/api/v1/orders/{order}?status=PENDING"), Some("waiter"), &[]).await;
    assert_eq!((status, body["status"].as_str()), (StatusCode::OK, Some("CREATED")), "{body}");
    let (status, _, _, _) = long_poll(&platform, &other, &order, "intruder", "wait=5s").await.expect("answered");
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn waiters_and_streams_are_bounded_and_shutdown_answers_every_waiter() {
    let mut platform = Platform::start_configured(None, |config| {
        config.live.max_waiters = 1;
        config.live.max_streams_per_user = 1;
    })
    .await;
    let voucher = platform.create_voucher(5, 2).await;
    platform.processor.take().expect("running").stop().await;
    let (_, placed) = platform.order(&voucher, "bounded").await;
    let order = placed["order_id"].as_str().expect("order_id").to_owned();

    let waiting = long_poll(&platform, &platform.base, &order, "bounded", "wait=30s");
    until_waiting(&platform, &platform.base, 1).await;
    let (status, _, body) =
        read(&platform, &platform.base, &format!("/api/v1/orders/{order}?wait=5s"), Some("bounded"), &[]).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{body}");

    let url = format!("{}/api/v1/users/bounded/orders/stream", platform.base);
    let auth = [("authorization", Platform::as_user("bounded"))];
    let _open = SseStream::open(&platform.http, &url, &auth).await;
    let second = SseStream::request(&platform.http, &url, &auth).await;
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(second.headers().get("retry-after").is_some());

    // Shutdown answers the waiter with the order as it stands.
    let stopping = Instant::now();
    platform.ingress.take().expect("running").stop().await;
    let (status, wait, body, _) = waiting.await.expect("answered");
    assert_eq!((status, wait.as_deref(), body["status"].as_str()), (StatusCode::OK, Some("timeout"), Some("PENDING")));
    assert!(stopping.elapsed() < Duration::from_secs(10), "answered at shutdown, not after the wait");
}

/// A long-poll without `status` waits for the order to leave the status it
/// has: a created order's is answered by its claim (or, priced, its
/// payment), not at once because it is no longer `PENDING`.
#[tokio::test]
async fn a_wait_without_a_status_is_answered_by_the_next_change_of_the_order() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(5, 1).await;
    let (status, placed) = platform.order(&voucher, "follower").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{placed}");
    let order = placed["order_id"].as_str().expect("order_id").to_owned();
    platform.wait_order(&order, |o| o["status"] == "CREATED").await;

    let waiting = long_poll(&platform, &platform.base, &order, "follower", "wait=25s");
    until_waiting(&platform, &platform.base, 1).await;
    let (status, body) = platform.post(&format!("/api/v1/orders/{order}/confirm"), Some("follower"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, wait, body, elapsed) = waiting.await.expect("answered");
    assert_eq!((status, wait.as_deref(), body["status"].as_str()), (StatusCode::OK, Some("changed"), Some("PAID")));
    assert!(elapsed < Duration::from_secs(25), "woken by the claim, not timed out: {elapsed:?}");

    // A paid free order changes no more: the wait ends with it as it is.
    let (status, wait, body, elapsed) =
        long_poll(&platform, &platform.base, &order, "follower", "wait=500ms").await.expect("answered");
    assert_eq!((status, wait.as_deref(), body["status"].as_str()), (StatusCode::OK, Some("timeout"), Some("PAID")));
    assert!(elapsed >= Duration::from_millis(500), "{elapsed:?}");
}

/// A waiting-room place and a draw entry long-polled until the wait ends
/// carry the server's clock as it answers, not as the request arrived:
/// clients count down to the start, `draw_at` and `purchase_until` from it.
#[tokio::test]
async fn a_long_polls_server_time_is_when_it_answers() {
    let platform = Platform::start().await;
    let now = Utc::now();
    let later = now + chrono::Duration::hours(1);
    let room = platform
        .create_voucher_from(json!({
            "stock": 5, "mode": "queue", "begins_at": later, "ends_at": later + chrono::Duration::hours(1),
        }))
        .await;
    let draw = platform
        .create_voucher_from(json!({
            "stock": 5, "mode": "draw", "begins_at": now, "draw_at": later,
            "ends_at": later + chrono::Duration::hours(1),
        }))
        .await;
    let (status, body) = platform.post(&format!("/api/v1/vouchers/{room}/queue"), Some("clocked"), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = platform.post(&format!("/api/v1/vouchers/{draw}/entries"), Some("clocked"), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    for path in [format!("/api/v1/vouchers/{room}/queue/me"), format!("/api/v1/vouchers/{draw}/entries/me")] {
        // Redis runs on this machine: its clock is this one.
        let asked = Utc::now();
        let (status, headers, body) =
            read(&platform, &platform.base, &format!("{path}?wait=2s"), Some("clocked"), &[]).await;
        let answered = Utc::now();
        assert_eq!((status, header(&headers, "seckill-wait")), (StatusCode::OK, Some("timeout")), "{path}: {body}");
        let server_time: DateTime<Utc> =
            body["server_time"].as_str().expect("server_time").parse().expect("an RFC 3339 time");
        assert!(
            server_time >= asked + chrono::Duration::milliseconds(1_900),
            "{path}: server_time {server_time} is the request's ({asked}), not the answer's ({answered})"
        );
        assert!(server_time <= answered + chrono::Duration::milliseconds(200), "{path}: {server_time} vs {answered}");
    }
}
