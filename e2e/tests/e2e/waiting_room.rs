//! A queue-mode sale end to end, on the real Redis, broker and services,
//! through two ingresses: the pre-queue is served in the shuffle the log
//! commits to (and not in arrival order), later joins first come; an order
//! needs the user's entry token, and a token admits one order even when
//! sent through both ingresses at once; the sell-out reaches every waiter
//! at once; a unit cancelled back serves the next place.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::future::join_all;
use reqwest::StatusCode;
use seckill_analytics::audit::audit_voucher;
use seckill_analytics::sale::{read_sales, Selection};
use seckill_core::event::Event;
use seckill_core::{queue, Envelope, UserId};
use serde_json::{json, Value};

use crate::helpers::{eventually, Platform};
use crate::live::sse::SseStream;

const STOCK: u64 = 5;
const EARLY: usize = 30;
const LATE: usize = 3;

/// `GET …/queue/me` as `user` through `base`, long-polling `wait` if given.
async fn me(platform: &Platform, base: &str, voucher: &str, user: &str, wait: Option<&str>) -> (StatusCode, Value) {
    let mut url = format!("{base}/api/v1/vouchers/{voucher}/queue/me");
    if let Some(wait) = wait {
        url.push_str(&format!("?wait={wait}"));
    }
    let response =
        platform.http.get(url).header("authorization", Platform::as_user(user)).send().await.expect("answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_sale_is_served_in_the_committed_shuffle_one_order_per_entry() {
    let platform = Platform::start().await;
    let (second, _second_ingress) = platform.another_ingress().await;
    let begins = Utc::now() + chrono::Duration::seconds(4);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": STOCK, "per_user_limit": 1, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1),
            "mode": "queue", "queue_factor": 1.0, "queue_entry_rate": 1000, "queue_idle_seconds": 60,
        }))
        .await;
    let (status, body) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    assert_eq!((status, body["mode"].as_str()), (StatusCode::OK, Some("queue")), "{body}");

    // The pre-queue: joins before the start, alternating ingresses (the
    // first join and its retry each through the other one); each retried
    // at once keeps its one place.
    let early: Vec<String> = (0..EARLY).map(|i| format!("early-{i:02}")).collect();
    for (i, user) in early.iter().enumerate() {
        let (base, other) = if i % 2 == 0 { (&platform.base, &second) } else { (&second, &platform.base) };
        let joined = platform
            .http
            .post(format!("{other}/api/v1/vouchers/{voucher}/queue"))
            .header("authorization", Platform::as_user(user))
            .send()
            .await
            .expect("answers");
        let status = joined.status();
        let body: Value = joined.json().await.unwrap_or(Value::Null);
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["place"], Value::Null, "no place number before the shuffle is revealed");
        let again = platform
            .http
            .post(format!("{base}/api/v1/vouchers/{voucher}/queue"))
            .header("authorization", Platform::as_user(user))
            .header("idempotency-key", "join-1")
            .send()
            .await
            .expect("answers");
        assert_eq!(again.status(), StatusCode::OK, "a second join keeps the place");
    }
    assert!(Utc::now() < begins, "the pre-queue was joined before the start (raise the start's margin)");
    let (status, body) = platform.order(&voucher, "early-00").await;
    assert_eq!(status, StatusCode::CONFLICT, "not started yet: {body}");

    // The start: the seed is revealed, the first STOCK places get entries.
    eventually(|| async { (Utc::now() > begins + chrono::Duration::milliseconds(200)).then_some(()) }).await;
    let late: Vec<String> = (0..LATE).map(|i| format!("late-{i}")).collect();
    for user in &late {
        let (status, body) = platform.post(&format!("/api/v1/vouchers/{voucher}/queue"), Some(user), None).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, body) = platform.order(&voucher, "early-00").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("entry_token_required")), "{body}");

    let everyone: Vec<String> = early.iter().chain(&late).cloned().collect();
    let turns: HashMap<String, Value> = eventually(|| async {
        let statuses = join_all(everyone.iter().map(|user| me(&platform, &platform.base, &voucher, user, None))).await;
        let turns: HashMap<String, Value> = everyone
            .iter()
            .zip(statuses)
            .filter(|(_, (_, body))| body["state"] == "your_turn")
            .map(|(user, (_, body))| (user.clone(), body))
            .collect();
        (turns.len() == STOCK as usize).then_some(turns)
    })
    .await;

    // A forged token and another user's token are refused before Redis.
    let (holder, status_body) = turns.iter().next().expect("a turn");
    let token = status_body["entry_token"].as_str().expect("a token").to_owned();
    let outsider = everyone.iter().find(|user| !turns.contains_key(*user)).expect("someone waits");
    let (status, body) = platform.order_with_entry(&platform.base, &voucher, outsider, &token).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("entry_token_invalid")), "{body}");
    let forged = format!("{}x", &token[..token.len() - 1]);
    let (status, body) = platform.order_with_entry(&platform.base, &voucher, holder, &forged).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("entry_token_invalid")), "{body}");

    // One token through both ingresses at once: one order.
    let (a, b) = tokio::join!(
        platform.order_with_entry(&platform.base, &voucher, holder, &token),
        platform.order_with_entry(&second, &voucher, holder, &token),
    );
    let accepted: Vec<&Value> =
        [&a, &b].into_iter().filter(|(s, _)| *s == StatusCode::ACCEPTED).map(|(_, b)| b).collect();
    assert_eq!(accepted.len(), 1, "{a:?} {b:?}");
    let refused = if a.0 == StatusCode::ACCEPTED { &b } else { &a };
    assert_eq!(refused.0, StatusCode::CONFLICT, "{refused:?}");
    assert_eq!(refused.1["error"], "entry_token_used");
    assert_eq!(refused.1["order_id"], accepted[0]["order_id"]);

    // The other holders buy; the waiters long-poll and hear the sell-out.
    let waiters: Vec<&String> = everyone.iter().filter(|user| !turns.contains_key(*user)).collect();
    let polls = waiters.iter().enumerate().map(|(i, user)| {
        let base = if i % 2 == 0 { platform.base.clone() } else { second.clone() };
        let (platform, voucher) = (&platform, &voucher);
        async move {
            loop {
                let (status, body) = me(platform, &base, voucher, user, Some("20s")).await;
                assert_eq!(status, StatusCode::OK, "{body}");
                if body["state"] == "sold_out" {
                    return Instant::now();
                }
            }
        }
    });
    let buying = async {
        let mut orders = vec![accepted[0]["order_id"].as_str().expect("order id").to_owned()];
        let others: Vec<(&String, &Value)> = turns.iter().filter(|(user, _)| *user != holder).collect();
        let (last, before) = others.split_last().expect("more than one holder");
        for (user, body) in before {
            let (status, body) = platform
                .order_with_entry(&platform.base, &voucher, user, body["entry_token"].as_str().expect("token"))
                .await;
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
            orders.push(body["order_id"].as_str().expect("order id").to_owned());
        }
        // Every unit has an entry, one unit is not sold yet: the room is
        // open and nobody waiting has been told sold out.
        let room = platform.redis_gate().await.advance_room(voucher.parse().expect("voucher id")).await;
        let room = room.expect("the room advances");
        assert_eq!((room.state, room.remaining), (seckill_gate::RoomState::Open, 1), "{room:?}");
        for (i, user) in waiters.iter().enumerate() {
            let base = if i % 2 == 0 { &platform.base } else { &second };
            let (_, place) = me(&platform, base, &voucher, user, None).await;
            assert_eq!(place["state"], "waiting", "before the last order, {user}: {place}");
        }
        let last_sent = Instant::now();
        let (status, body) = platform
            .order_with_entry(&platform.base, &voucher, last.0, last.1["entry_token"].as_str().expect("token"))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        orders.push(body["order_id"].as_str().expect("order id").to_owned());
        (last_sent, Instant::now(), orders)
    };
    let (heard, (last_sent, sold_at, orders)) = tokio::join!(join_all(polls), buying);
    // Heard after the last order was sent (an earlier sold out is a wrong
    // one), and soon after it was answered.
    for at in &heard {
        assert!(*at >= last_sent, "a waiter heard sold out {:?} before the last order", last_sent - *at);
    }
    let slowest = heard.iter().map(|at| at.saturating_duration_since(sold_at)).max().expect("waiters");
    assert!(
        slowest < Duration::from_secs(1),
        "the sell-out reached the last of {} waiters after {slowest:?}",
        heard.len()
    );

    // A unit comes back: the next place in line is served.
    let first = &orders[0];
    let owner = holder.clone();
    let created = platform.wait_final(first).await;
    assert_eq!(created["status"], "CREATED", "{created}");
    let (status, body) = platform.post(&format!("/api/v1/orders/{first}/cancel"), Some(&owner), None).await;
    assert!(status.is_success(), "{body}");
    let next = eventually(|| async {
        let statuses = join_all(waiters.iter().map(|user| me(&platform, &second, &voucher, user, None))).await;
        waiters
            .iter()
            .zip(statuses)
            .find(|(_, (_, body))| body["state"] == "your_turn")
            .map(|(user, _)| (*user).clone())
    })
    .await;

    // The log: commitment before the first join, the reveal, the served
    // order = the shuffle of the pre-queue by the revealed seed, then FIFO.
    let sales = seckill_core::topics::Topics::with_prefix(&platform.infra.namespace).sales;
    let records = platform
        .read_topic(&sales, |messages| {
            messages.iter().filter_map(decode).filter(|e| matches!(e, Event::QueueEntryIssued(_))).count()
                > STOCK as usize
        })
        .await;
    let events: Vec<Event> =
        records.iter().filter_map(decode).filter(|e| e.voucher_id().to_string() == voucher).collect();
    let committed = events.iter().position(|e| matches!(e, Event::QueueSeedCommitted(_))).expect("a commitment");
    let first_join = events.iter().position(|e| matches!(e, Event::QueueJoined(_))).expect("joins");
    assert!(committed < first_join, "the seed is committed before the first join");
    let (Event::QueueSeedCommitted(commitment), Some(Event::QueueSeedRevealed(revealed))) =
        (&events[committed], events.iter().find(|e| matches!(e, Event::QueueSeedRevealed(_))))
    else {
        panic!("the seed is revealed");
    };
    assert_eq!(queue::seed_commitment(&revealed.seed), commitment.seed_hash);
    assert_eq!(revealed.pre_queued, EARLY as u64);
    let arrivals: Vec<UserId> = early.iter().map(|u| UserId::parse(u).expect("valid")).collect();
    let shuffled = queue::pre_queue_order(&revealed.seed, &arrivals);
    assert_ne!(shuffled, arrivals, "the shuffle differs from arrival order");
    let served: Vec<(u64, UserId)> = events
        .iter()
        .filter_map(|e| match e {
            Event::QueueEntryIssued(issued) => Some((issued.place, issued.user_id.clone())),
            _ => None,
        })
        .collect();
    for (place, user) in &served {
        assert_eq!(&shuffled[usize::try_from(*place).expect("small") - 1], user, "place {place}");
    }
    assert_eq!(served.len(), STOCK as usize + 1);
    assert_eq!(served.last().map(|(_, user)| user.as_str()), Some(next.as_str()));
    let used = events.iter().filter(|e| matches!(e, Event::QueueEntryUsed(_))).count();
    assert_eq!(used, STOCK as usize, "every order spent its entry, once");

    // `seckill audit` recomputes the same from the log.
    let id = voucher.parse().expect("voucher id");
    let read = read_sales(&platform.kafka, &Selection::vouchers(vec![id])).await.expect("the log is read");
    let [sale] = read.sales.as_slice() else { panic!("one sale") };
    let audit = audit_voucher(&sale.log, None);
    let queue_rules: Vec<&str> =
        audit.rules.iter().map(|rule| rule.rule).filter(|rule| rule.starts_with("queue_")).collect();
    assert_eq!(
        queue_rules,
        [
            "queue_seed_committed",
            "queue_served_in_shuffle",
            "queue_entries_single_use",
            "queue_entries_in_time",
            "queue_beacon"
        ]
    );
    let failed: Vec<String> = audit.failed().map(|rule| format!("{}: {}", rule.rule, rule.detail)).collect();
    assert!(failed.is_empty(), "{failed:?}");
}

fn decode(message: &seckill_kafka::OwnedMessage) -> Option<Event> {
    use seckill_kafka::Message as _;
    Envelope::decode(message.payload()?).ok().map(|envelope| envelope.event)
}

/// The place's stream: the pre-queue's place without a number, then the
/// turn with its token for one and the position for the other; the buyer's
/// stream ends once its entry placed the order, the other's says sold out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_is_pushed_on_its_stream_from_the_pre_queue_to_the_order() {
    let platform = Platform::start().await;
    let begins = Utc::now() + chrono::Duration::seconds(3);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 1, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1),
            "mode": "queue", "queue_factor": 1.0,
        }))
        .await;
    let stream_url = format!("{}/api/v1/vouchers/{voucher}/queue/me/stream", platform.base);
    let auth = |user: &str| [("authorization", Platform::as_user(user))];
    let refused = SseStream::request(&platform.http, &stream_url, &auth("nobody")).await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    let body: Value = refused.json().await.expect("json");
    assert_eq!(body["error"], "not_in_queue");
    let fcfs = platform.create_voucher(1, 1).await;
    let fcfs_url = format!("{}/api/v1/vouchers/{fcfs}/queue/me/stream", platform.base);
    let refused = SseStream::request(&platform.http, &fcfs_url, &auth("nobody")).await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);

    let users = ["s1", "s2"];
    let mut streams = Vec::new();
    for user in users {
        let (status, body) = platform.post(&format!("/api/v1/vouchers/{voucher}/queue"), Some(user), None).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let mut stream = SseStream::open(&platform.http, &stream_url, &auth(user)).await;
        let first = stream.next(Duration::from_secs(10)).await.expect("an event at once");
        assert_eq!(first.event.as_deref(), Some("queue"));
        let status = first.json();
        assert_eq!((status["state"].as_str(), &status["place"]), (Some("waiting"), &Value::Null), "{status}");
        streams.push(stream);
    }
    // After the start: one is served, the other told its position.
    let mut turn = None;
    let mut position = None;
    for (user, stream) in users.iter().zip(streams.iter_mut()) {
        loop {
            let event = stream.next(Duration::from_secs(30)).await.expect("the start is pushed");
            let status = event.json();
            if status["state"] == "your_turn" {
                turn = Some((*user, status["entry_token"].as_str().expect("a token").to_owned()));
                break;
            }
            if status["position"] == 1 && status["place"] == 2 {
                position = Some(*user);
                break;
            }
        }
    }
    let (buyer, token) = turn.expect("one of the two is served");
    let waiter = position.expect("the other is told its position");
    let (status, body) = platform.order_with_entry(&platform.base, &voucher, buyer, &token).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (buyer_stream, waiter_stream) = if buyer == users[0] {
        streams.split_at_mut(1)
    } else {
        let (a, b) = streams.split_at_mut(1);
        (b, a)
    };
    let settled = loop {
        let event = buyer_stream[0].next(Duration::from_secs(30)).await.expect("the order is pushed");
        let status = event.json();
        if status["order_id"] == body["order_id"] {
            break status;
        }
    };
    assert_eq!(settled["state"], "your_turn");
    assert!(buyer_stream[0].next(Duration::from_secs(10)).await.is_none(), "a settled place's stream ends");
    loop {
        let event = waiter_stream[0].next(Duration::from_secs(30)).await.expect("the sell-out is pushed");
        if event.json()["state"] == "sold_out" {
            break;
        }
    }
    let _ = waiter;
}

/// A holder who only long-polls (`?wait=`, what the sale page falls back to
/// when streams are refused) is present: a poll that waits longer than the
/// room's idle time does not get the place skipped when its turn comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_polling_waiter_is_not_skipped_as_idle() {
    a_long_polling_waiter_is_not_skipped_as_idle_on(Platform::start().await).await;
}

/// [`a_long_polling_waiter_is_not_skipped_as_idle`] on `platform` (also run
/// on the Redis Cluster, `e2e cluster`).
pub(crate) async fn a_long_polling_waiter_is_not_skipped_as_idle_on(platform: Platform) {
    const IDLE_SECONDS: i64 = 5;
    let begins = Utc::now() - chrono::Duration::seconds(1);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 1, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1),
            "mode": "queue", "queue_factor": 1.0, "queue_idle_seconds": IDLE_SECONDS, "queue_token_seconds": 8,
        }))
        .await;
    let join = format!("/api/v1/vouchers/{voucher}/queue");
    let (status, body) = eventually(|| async {
        let (status, body) = platform.post(&join, Some("first"), None).await;
        (body["error"] != "queue_not_open").then_some((status, body))
    })
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    eventually(|| async {
        (me(&platform, &platform.base, &voucher, "first", None).await.1["state"] == "your_turn").then_some(())
    })
    .await;
    let (status, body) = platform.post(&join, Some("poller"), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // The first holder never orders: its entry lapses after 8 s and the
    // unit goes to the next place. The poller meanwhile only long-polls,
    // each poll waiting past the idle time.
    let started = Instant::now();
    let settled = loop {
        let (status, body) = me(&platform, &platform.base, &voucher, "poller", Some("25s")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if body["state"] != "waiting" {
            break body;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the poller's turn never came: {body}");
    };
    assert_eq!(settled["state"], "your_turn", "a polling holder is not idle: {settled}");
    assert!(
        started.elapsed() > Duration::from_secs(IDLE_SECONDS as u64),
        "the poll outlasted the idle time before the turn came"
    );
}
