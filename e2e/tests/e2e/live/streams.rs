//! Server-Sent Events: a user's order changes, every one, in order, resumed
//! after a disconnect on another replica without gaps or duplicates (also
//! while the projector is down); and a voucher's phase and stock.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::StatusCode;

use super::act;
use super::sse::{SseEvent, SseStream};
use crate::helpers::{Platform, DEADLINE};

/// How long a stream stays quiet before the test decides nothing more comes.
const QUIET: Duration = Duration::from_millis(800);

/// Reads events until every order in `expected` has shown the statuses
/// listed for it; returns what came, in order.
async fn read_until(stream: &mut SseStream, expected: &HashMap<String, Vec<&str>>) -> Vec<SseEvent> {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut events = Vec::new();
    let done = |events: &[SseEvent]| {
        expected.iter().all(|(order, statuses)| {
            let seen: Vec<String> = events
                .iter()
                .map(SseEvent::json)
                .filter(|row| row["order_id"] == order.as_str())
                .map(|row| row["status"].as_str().unwrap_or_default().to_owned())
                .collect();
            seen.len() >= statuses.len()
        })
    };
    while !done(&events) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let event = stream.next(left).await.unwrap_or_else(|| panic!("the stream stalled after {events:?}"));
        events.push(event);
    }
    events
}

/// Each order's statuses in the order they came.
fn by_order(events: &[SseEvent]) -> HashMap<String, Vec<String>> {
    let mut orders: HashMap<String, Vec<String>> = HashMap::new();
    for event in events {
        assert_eq!(event.event.as_deref(), Some("order"), "{event:?}");
        assert!(event.id.is_some(), "every change carries an id to resume from");
        let row = event.json();
        let order = row["order_id"].as_str().expect("order_id").to_owned();
        orders.entry(order).or_default().push(row["status"].as_str().expect("status").to_owned());
    }
    orders
}

/// Places an order for "streamer"; its id.
async fn place(platform: &Platform, voucher: &str) -> String {
    let (status, placed) = platform.order(voucher, "streamer").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{placed}");
    placed["order_id"].as_str().expect("order_id").to_owned()
}

#[tokio::test]
async fn a_users_stream_delivers_every_change_in_order_and_resumes_on_another_replica_without_gaps_or_duplicates() {
    let mut platform = Platform::start().await;
    let (other, _replica) = platform.another_ingress().await;
    let voucher = platform.create_voucher(10, 4).await;
    let auth = ("authorization", Platform::as_user("streamer"));
    let url = |base: &str| format!("{base}/api/v1/users/streamer/orders/stream");
    let mut stream = SseStream::open(&platform.http, &url(&platform.base), std::slice::from_ref(&auth)).await;

    let (first, second) = (place(&platform, &voucher).await, place(&platform, &voucher).await);
    platform.wait_order(&first, |o| o["status"] == "CREATED").await;
    platform.wait_order(&second, |o| o["status"] == "CREATED").await;
    act(&platform, &platform.base, &format!("/api/v1/orders/{first}/cancel"), "streamer").await;
    act(&platform, &platform.base, &format!("/api/v1/orders/{second}/confirm"), "streamer").await;

    let expected = HashMap::from([
        (first.clone(), vec!["PENDING", "CREATED", "CANCELLED"]),
        (second.clone(), vec!["PENDING", "CREATED", "PAID"]),
    ]);
    let events = read_until(&mut stream, &expected).await;
    assert!(stream.next(QUIET).await.is_none(), "nothing more: no duplicate");
    let seen = by_order(&events);
    for (order, statuses) in &expected {
        assert_eq!(&seen[order], statuses, "every change of {order}, once, in order");
    }
    let resume_from = events.last().and_then(|event| event.id.clone()).expect("an id");
    drop(stream);

    // While disconnected: a new order, and the paid (claimed) one cancelled.
    let third = place(&platform, &voucher).await;
    platform.wait_order(&third, |o| o["status"] == "CREATED").await;
    act(&platform, &platform.base, &format!("/api/v1/orders/{second}/cancel"), "streamer").await;
    platform.wait_order(&second, |o| o["status"] == "CANCELLED").await;

    // Reconnecting to the other replica gets exactly what was missed.
    let headers = [auth.clone(), ("last-event-id", resume_from)];
    let mut resumed = SseStream::open(&platform.http, &url(&other), &headers).await;
    let missed = HashMap::from([(third.clone(), vec!["PENDING", "CREATED"]), (second.clone(), vec!["CANCELLED"])]);
    let events = read_until(&mut resumed, &missed).await;
    assert!(resumed.next(QUIET).await.is_none(), "nothing more: no duplicate");
    let seen = by_order(&events);
    assert_eq!(seen.len(), 2, "only the orders that changed: {seen:?}");
    for (order, statuses) in &missed {
        assert_eq!(&seen[order], statuses);
    }
    let resume_from = events.last().and_then(|event| event.id.clone()).expect("an id");
    drop(resumed);

    // The projector stops: an order admitted and decided while the client
    // reconnects is in no view, only in the log. The replica learned it from
    // the log, and its stream catches up from memory.
    let projector = platform.projector.take().expect("the projector runs");
    projector.stop().await;
    let fourth = place(&platform, &voucher).await;
    platform.wait_order(&fourth, |o| o["status"] == "CREATED").await;
    let headers = [auth.clone(), ("last-event-id", resume_from)];
    let mut resumed = SseStream::open(&platform.http, &url(&other), &headers).await;
    let unviewed = HashMap::from([(fourth.clone(), vec!["PENDING", "CREATED"])]);
    let events = read_until(&mut resumed, &unviewed).await;
    assert_eq!(by_order(&events), HashMap::from([(fourth, vec!["PENDING".to_owned(), "CREATED".to_owned()])]));
    drop(resumed);
    platform.start_projector().await;

    // Another user's stream, a forged resume id and a missing token are refused.
    let response =
        SseStream::request(&platform.http, &url(&platform.base), &[("authorization", Platform::as_user("nosy"))]).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response =
        SseStream::request(&platform.http, &url(&platform.base), &[auth.clone(), ("last-event-id", "v1.x".to_owned())])
            .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let response = SseStream::request(&platform.http, &url(&platform.base), &[]).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_vouchers_stream_pushes_its_phase_and_stock() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(2, 1).await;
    let url = format!("{}/api/v1/vouchers/{voucher}/stream", platform.base);
    let mut stream = SseStream::open(&platform.http, &url, &[]).await;
    let first = stream.next(DEADLINE).await.expect("the voucher at once");
    assert_eq!(first.event.as_deref(), Some("voucher"));
    let shown = first.json();
    assert_eq!((shown["phase"].as_str(), shown["available"].as_u64()), (Some("open"), Some(2)));

    platform.order(&voucher, "a").await;
    platform.order(&voucher, "b").await;
    loop {
        let event = stream.next(DEADLINE).await.expect("a push");
        let shown = event.json();
        assert!(shown["available"].as_u64().expect("available") < 2, "only changes are pushed");
        if shown["phase"] == "sold_out" {
            assert_eq!(shown["available"], 0);
            break;
        }
    }
    let response = SseStream::request(
        &platform.http,
        &format!("{}/api/v1/vouchers/{}/stream", platform.base, uuid::Uuid::now_v7()),
        &[],
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_filling_the_voucher_streams_never_take_a_buyers_place() {
    let platform = Platform::start_configured(None, |config| {
        config.live.max_voucher_streams = 5;
        config.live.max_waiters_per_user = 2;
    })
    .await;
    let voucher = platform.create_voucher(10, 1).await;
    let watch = format!("{}/api/v1/vouchers/{voucher}/stream", platform.base);
    let mut watchers = Vec::new();
    for _ in 0..5 {
        watchers.push(SseStream::open(&platform.http, &watch, &[]).await);
    }
    let refused = SseStream::request(&platform.http, &watch, &[]).await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE, "the anonymous pool is full");

    // The buyer's own stream opens all the same, and shows their order.
    let auth = ("authorization", Platform::as_user("buyer"));
    let mine = format!("{}/api/v1/users/buyer/orders/stream", platform.base);
    let mut stream = SseStream::open(&platform.http, &mine, std::slice::from_ref(&auth)).await;
    let (status, placed) = platform.order(&voucher, "buyer").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{placed}");
    let order = placed["order_id"].as_str().expect("order_id").to_owned();
    let events = read_until(&mut stream, &HashMap::from([(order.clone(), vec!["PENDING", "CREATED"])])).await;
    assert_eq!(by_order(&events)[&order], ["PENDING", "CREATED"]);

    // Long-polls are bounded per user: of three waiting at once, one is
    // told to slow down.
    let poll = format!("{}/api/v1/orders/{order}?wait=2s&status=CREATED", platform.base);
    let polls = (0..3).map(|_| platform.http.get(&poll).header(auth.0, auth.1.clone()).send());
    let statuses: Vec<StatusCode> =
        futures::future::join_all(polls).await.into_iter().map(|r| r.expect("answered").status()).collect();
    let limited = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    let answered = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!((answered, limited), (2, 1), "{statuses:?}");
    drop(watchers);
}
