//! A waiting room Redis lost, brought back by `reconcile` while the
//! platform runs: against the beacon sandbox, a beacon room lost before its
//! reveal is rebuilt from the logged joins and serves by its round, and one
//! lost while serving comes back where it stood, its holders buying with a
//! token read again; with a seal key, a room without a beacon lost before
//! its reveal comes back with the seed it committed to, every holder at
//! their place. Each time the report's line for the room (as `seckill
//! reconcile` prints it) says what became of it, with its counts.

use chrono::Utc;
use reqwest::StatusCode;
use seckill_analytics::audit::audit_voucher;
use seckill_analytics::reconcile::{reconcile, Mode, ReconcileReport};
use seckill_analytics::sale::{read_sales, Selection};
use seckill_core::config::{DrawConfig, Secret};
use seckill_core::event::Event;
use seckill_core::{queue, UserId, VoucherId};
use serde_json::json;

use crate::beacon_draw::of_voucher;
use crate::beacon_room::{assert_served_in_line_order, served, BeaconRoom};
use crate::helpers::{eventually, Platform};

/// A beacon waiting room Redis loses before its reveal: `reconcile`
/// rebuilds it from the logged joins and its line for the room says so,
/// with the counts; the room then waits for its round and serves the
/// pre-queue in the order the round gives; a second reconcile keeps it and
/// says that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beacon_room_lost_before_its_reveal_is_rebuilt_and_reconcile_says_so() {
    const EARLY: usize = 4;
    let early: Vec<String> = (0..EARLY).map(|i| format!("rebuilt-early-{i}")).collect();
    let room = BeaconRoom::open(2, 8, 60, &early).await;
    let (platform, voucher) = (&room.platform, &room.voucher);
    // Redis loses the voucher and its room before the start, so before the
    // reveal (the outbox stands for the log).
    assert!(Utc::now() < room.begins, "lost before the start (raise the start's margin)");
    let keys = platform.keys(voucher);
    let mut lost: Vec<String> = keys.all().iter().map(|key| (*key).to_owned()).collect();
    lost.extend([keys.room.clone(), keys.line.clone(), keys.places.clone(), keys.seen.clone()]);
    let _: () = redis::cmd("DEL").arg(&lost).query_async(&mut platform.redis_connection().await).await.expect("DEL");

    let id: seckill_core::VoucherId = voucher.parse().expect("voucher id");
    let room_line = |report: &ReconcileReport| {
        let room = report.vouchers.iter().find(|v| v.voucher_id == id).and_then(|v| v.outcome.room);
        // As `seckill reconcile` prints it (cli/src/reconcile.rs).
        room.map(|room| format!("{id}: {room}"))
    };
    let report = platform.reconcile(Mode::Write).await;
    assert_eq!(
        room_line(&report),
        Some(format!(
            "{id}: room rebuilt from the log before its reveal: {EARLY} pre-queue places (keyed again once its \
             beacon round is in) and 0 later joins"
        ))
    );
    let again = platform.reconcile(Mode::Write).await;
    assert_eq!(room_line(&again), Some(format!("{id}: room kept: Redis still had it")));

    // The rebuilt room waits for its round, then serves by it.
    let mine = of_voucher(&room.once_issued(2).await, voucher);
    let reveal = mine
        .iter()
        .find_map(|e| match &e.event {
            Event::QueueSeedRevealed(reveal) => Some(reveal.clone()),
            _ => None,
        })
        .expect("a reveal");
    let users: Vec<UserId> = early.iter().map(|user| UserId::parse(user).expect("valid")).collect();
    assert_eq!(reveal.entries_hash, Some(seckill_core::queue::pre_queue_hash(&users)), "the whole pre-queue back");
    let shuffled = seckill_core::queue::beacon_pre_queue_order(&reveal.seed, &users);
    let served = served(&mine);
    assert_eq!(served.len(), 2, "served once each: {served:?}");
    assert_served_in_line_order(&served, &shuffled);
}

/// `GET …/queue/me` as `user`: its status and body.
async fn queue_me(platform: &Platform, voucher: &str, user: &str) -> (StatusCode, serde_json::Value) {
    let response = platform
        .http
        .get(format!("{}/api/v1/vouchers/{voucher}/queue/me", platform.base))
        .header("authorization", Platform::as_user(user))
        .send()
        .await
        .expect("answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(serde_json::Value::Null))
}

/// A beacon waiting room Redis loses while serving: `reconcile` rebuilds it
/// from the log where it stood and its line says so; the holder whose entry
/// was not spent reads a token again and buys with it, the one who bought
/// stays served once, and the next place waits on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beacon_room_lost_while_serving_comes_back_where_it_stood() {
    const EARLY: usize = 4;
    let early: Vec<String> = (0..EARLY).map(|i| format!("serving-early-{i}")).collect();
    let room = BeaconRoom::open(2, 5, 600, &early).await;
    let (platform, voucher) = (&room.platform, &room.voucher);
    // Two units, two entries; the first holder buys.
    let mut served: Vec<(u64, String)> = served(&of_voucher(&room.once_issued(2).await, voucher))
        .into_iter()
        .map(|(place, user)| (place, user.to_string()))
        .collect();
    served.sort();
    let [(_, buyer), (_, holder)] = <[_; 2]>::try_from(served).expect("two served");
    let (_, status) = queue_me(platform, voucher, &buyer).await;
    let token = status["entry_token"].as_str().expect("a token").to_owned();
    let (status, bought) = platform.order_with_entry(&platform.base, voucher, &buyer, &token).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{bought}");

    let keys = platform.keys(voucher);
    let mut lost: Vec<String> = keys.all().iter().map(|key| (*key).to_owned()).collect();
    lost.extend([keys.room.clone(), keys.line.clone(), keys.places.clone(), keys.seen.clone(), keys.holds.clone()]);
    let _: () = redis::cmd("DEL").arg(&lost).query_async(&mut platform.redis_connection().await).await.expect("DEL");
    let id: seckill_core::VoucherId = voucher.parse().expect("voucher id");
    let report = platform.reconcile(Mode::Write).await;
    let room = report.vouchers.iter().find(|v| v.voucher_id == id).and_then(|v| v.outcome.room);
    // As `seckill reconcile` prints it (cli/src/reconcile.rs).
    assert_eq!(
        room.map(|room| format!("{id}: {room}")),
        Some(format!(
            "{id}: room rebuilt from the log after its reveal: {EARLY} pre-queue places in the order revealed and \
             0 later joins; 2 served (1 spent), 0 skipped"
        ))
    );

    // The holder reads its turn again (a token under the rebuilt room's
    // key) and buys with it; the buyer's entry stays spent.
    let token = eventually(|| async {
        let (_, status) = queue_me(platform, voucher, &holder).await;
        (status["state"] == "your_turn").then(|| status["entry_token"].as_str().map(str::to_owned)).flatten()
    })
    .await;
    let (status, body) = platform.order_with_entry(&platform.base, voucher, &holder, &token).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (_, status) = queue_me(platform, voucher, &buyer).await;
    assert_eq!((&status["state"], &status["order_id"]), (&"your_turn".into(), &bought["order_id"]), "{status}");
}

/// The room's line as Redis holds it: each member with its score.
async fn scored_line(platform: &Platform, voucher: &str) -> Vec<(String, u64)> {
    redis::cmd("ZRANGE")
        .arg(platform.keys(voucher).line)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut platform.redis_connection().await)
        .await
        .expect("ZRANGE")
}

/// With a seal key set, a waiting room without a beacon Redis loses before
/// its start (so before its reveal): `reconcile` opens the sealed
/// commitment and rebuilds the room with the seed it committed to, and its
/// line says so; every holder's place is the one they had (the line's keys
/// unchanged), the start serves the shuffle of that seed, the holders buy,
/// and the sale's audit passes with one commitment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_without_a_beacon_lost_before_its_reveal_comes_back_with_its_sealed_seed() {
    const SEAL_KEY: &str = "e2e-room-seal-key-thirty-two-characters";
    const STOCK: usize = 3;
    const EARLY: usize = 8;
    let platform = Platform::start_configured(None, |config| config.draw.seal_key = Secret::new(SEAL_KEY)).await;
    // Room for the joins, the loss and the reconcile before the start, on
    // a loaded machine too.
    let begins = Utc::now() + chrono::Duration::seconds(20);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": STOCK, "per_user_limit": 1, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1),
            "mode": "queue", "queue_factor": 1.0, "queue_entry_rate": 1000, "queue_idle_seconds": 60,
        }))
        .await;
    let early: Vec<String> = (0..EARLY).map(|i| format!("sealed-room-{i}")).collect();
    for user in &early {
        let (status, body) = eventually(|| async {
            let (status, body) = platform.post(&format!("/api/v1/vouchers/{voucher}/queue"), Some(user), None).await;
            (body["error"] != "queue_not_open").then_some((status, body))
        })
        .await;
        assert_eq!(status, StatusCode::CREATED, "{user}: {body}");
    }
    let keys = platform.keys(&voucher);
    let mut redis = platform.redis_connection().await;
    let seed: String = redis::cmd("HGET").arg(&keys.room).arg("seed").query_async(&mut redis).await.expect("HGET");
    let line_before = scored_line(&platform, &voucher).await;
    assert_eq!(line_before.len(), EARLY);

    // Redis loses the voucher and its room before the start (the outbox
    // stands for the log).
    let mut lost: Vec<String> = keys.all().iter().map(|key| (*key).to_owned()).collect();
    lost.extend([keys.room.clone(), keys.line.clone(), keys.places.clone(), keys.seen.clone()]);
    let _: () = redis::cmd("DEL").arg(&lost).query_async(&mut redis).await.expect("DEL");
    let id: VoucherId = voucher.parse().expect("voucher id");
    let gate = platform.redis_gate().await;
    let draw = DrawConfig { seal_key: Secret::new(SEAL_KEY) };
    let report = reconcile(&gate, &platform.kafka, &draw, Mode::Write, async |_| {}).await.expect("reconciles");
    assert!(Utc::now() < begins, "restored before the start (raise the start's margin)");
    let room = report.vouchers.iter().find(|v| v.voucher_id == id).and_then(|v| v.outcome.room);
    // As `seckill reconcile` prints it (cli/src/reconcile.rs).
    assert_eq!(
        room.map(|room| format!("{id}: {room}")),
        Some(format!(
            "{id}: room rebuilt from the log before its reveal with the seed it committed to (opened from its \
             seal): {EARLY} pre-queue places keyed as before and 0 later joins"
        ))
    );
    let back: String = redis::cmd("HGET").arg(&keys.room).arg("seed").query_async(&mut redis).await.expect("HGET");
    assert_eq!(back, seed, "the seed committed to, opened from the log");
    assert_eq!(scored_line(&platform, &voucher).await, line_before, "every holder at the place they had");

    // The start serves the first places of the committed shuffle; each
    // holder buys with their entry.
    let users: Vec<UserId> = early.iter().map(|user| UserId::parse(user).expect("valid")).collect();
    let shuffled = queue::pre_queue_order(&seed, &users);
    for holder in &shuffled[..STOCK] {
        let token = eventually(|| async {
            let (_, status) = queue_me(&platform, &voucher, holder.as_str()).await;
            (status["state"] == "your_turn").then(|| status["entry_token"].as_str().map(str::to_owned)).flatten()
        })
        .await;
        let (status, body) = platform.order_with_entry(&platform.base, &voucher, holder.as_str(), &token).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{holder}: {body}");
    }
    for waiter in &shuffled[STOCK..] {
        let (_, status) = queue_me(&platform, &voucher, waiter.as_str()).await;
        assert_ne!(status["state"], "your_turn", "{waiter} is behind the served places: {status}");
    }

    // The log: one commitment, the seed revealed is it, the places served
    // are the shuffle's first; `seckill audit` passes the sale.
    let sales = seckill_core::topics::Topics::with_prefix(&platform.infra.namespace).sales;
    let records = platform
        .read_topic(&sales, |messages| {
            let mine = of_voucher(messages, &voucher);
            mine.iter().filter(|e| matches!(e.event, Event::QueueEntryUsed(_))).count() >= STOCK
        })
        .await;
    let mine = of_voucher(&records, &voucher);
    let commitments: Vec<&str> = mine
        .iter()
        .filter_map(|e| match &e.event {
            Event::QueueSeedCommitted(commitment) => Some(commitment.seed_hash.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(commitments, [queue::seed_commitment(&seed)], "one commitment, to the seed restored");
    let reveal = mine.iter().find_map(|e| match &e.event {
        Event::QueueSeedRevealed(reveal) => Some(reveal.seed.clone()),
        _ => None,
    });
    assert_eq!(reveal, Some(seed.clone()));
    let served = served(&mine);
    assert_eq!(served.len(), STOCK, "served once each: {served:?}");
    assert_served_in_line_order(&served, &shuffled);
    let read = read_sales(&platform.kafka, &Selection::vouchers(vec![id])).await.expect("the log is read");
    let [sale] = read.sales.as_slice() else { panic!("one sale") };
    let audit = audit_voucher(&sale.log, None);
    let failed: Vec<String> = audit.failed().map(|rule| format!("{}: {}", rule.rule, rule.detail)).collect();
    assert!(failed.is_empty(), "{failed:?}");
    let shuffle = audit.rules.iter().find(|rule| rule.rule == "queue_served_in_shuffle").expect("the shuffle rule");
    assert!(shuffle.detail.starts_with(&format!("{EARLY} pre-queue joins")), "{}", shuffle.detail);
}
