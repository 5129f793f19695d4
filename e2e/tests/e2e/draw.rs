//! A draw sale end to end, on the real Redis, broker and services, through
//! two ingresses: 10,000 entries on stock 100; the log commits to the seed
//! before the first entry and ranks exactly as the rule says from the seed
//! and the entry list; ranks 1..100 win; nobody else orders, nobody orders
//! twice, even retrying through both ingresses at once; wins that lapse
//! promote the next ranks until the stock is sold.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::Utc;
use futures::stream::{self, StreamExt};
use reqwest::StatusCode;
use seckill_analytics::draw::{read_kafka, read_lines};
use seckill_analytics::reconcile::{reconcile, Mode};
use seckill_analytics::sale::Selection;
use seckill_core::config::{DrawConfig, Secret};
use seckill_core::event::Event;
use seckill_core::{draw, queue, Envelope, UserId};
use serde_json::{json, Value};

use crate::helpers::{eventually, Platform};

const ENTRIES: usize = 10_000;
const STOCK: usize = 100;
/// Winners who buy at once; the others let their window lapse.
const BUYERS: usize = 60;
/// Long enough for the log's 10,000 entries to be read and checked on a
/// busy machine before the winners buy (a win lapses after it).
const PURCHASE_SECONDS: i64 = 20;

/// `POST …/entries` as `user` through `base`.
async fn enter(platform: &Platform, base: &str, voucher: &str, user: &str) -> (StatusCode, Value) {
    let response = platform
        .http
        .post(format!("{base}/api/v1/vouchers/{voucher}/entries"))
        .header("authorization", Platform::as_user(user))
        .send()
        .await
        .expect("answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `GET …/entries/me` as `user` through `base`, long-polling `wait` if given.
pub(crate) async fn entry(platform: &Platform, base: &str, voucher: &str, user: &str, wait: Option<&str>) -> Value {
    let mut url = format!("{base}/api/v1/vouchers/{voucher}/entries/me");
    if let Some(wait) = wait {
        url.push_str(&format!("?wait={wait}"));
    }
    let response =
        platform.http.get(url).header("authorization", Platform::as_user(user)).send().await.expect("answers");
    assert_eq!(response.status(), StatusCode::OK, "{user}'s entry");
    response.json().await.expect("a status")
}

/// An order as `user` through `base`, with `key` as its `Idempotency-Key`.
async fn order(platform: &Platform, base: &str, voucher: &str, user: &str, key: &str) -> (StatusCode, Value) {
    let response = platform
        .http
        .post(format!("{base}/api/v1/vouchers/{voucher}/orders"))
        .header("authorization", Platform::as_user(user))
        .header("idempotency-key", key)
        .send()
        .await
        .expect("answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn decode(message: &seckill_kafka::OwnedMessage) -> Option<Event> {
    use seckill_kafka::Message as _;
    Envelope::decode(message.payload()?).ok().map(|envelope| envelope.event)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_of_ten_thousand_ranks_by_the_log_and_admits_only_its_winners() {
    let platform = Platform::start().await;
    let (second, _second_ingress) = platform.another_ingress().await;
    let now = Utc::now();
    // Room for 10,000 entries through a debug build beside the whole suite
    // (about 10 s alone, more than 45 s beside it); the draw is made at
    // draw_at, not before.
    let draw_at = now + chrono::Duration::seconds(100);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": STOCK, "per_user_limit": 1, "begins_at": now, "ends_at": now + chrono::Duration::hours(1),
            "mode": "draw", "draw_at": draw_at, "purchase_seconds": PURCHASE_SECONDS,
        }))
        .await;
    let (status, body) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    assert_eq!((status, body["mode"].as_str()), (StatusCode::OK, Some("draw")), "{body}");
    let (status, body) = platform.order(&voucher, "early-bird").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("not_a_winner")), "{body}");

    // Entries through both ingresses; a repeat is the same entry.
    let users: Vec<String> = (0..ENTRIES).map(|i| format!("entrant-{i:05}")).collect();
    let answers: Vec<(StatusCode, Value)> = stream::iter(users.iter().enumerate())
        .map(|(i, user)| {
            let base = if i % 2 == 0 { platform.base.clone() } else { second.clone() };
            let (platform, voucher) = (&platform, &voucher);
            async move { enter(platform, &base, voucher, user).await }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    for (status, body) in &answers {
        assert_eq!(*status, StatusCode::CREATED, "{body}");
        assert_eq!(body["state"], "entered");
    }
    assert!(Utc::now() < draw_at, "every entry was taken before the draw (raise draw_at's margin)");
    let (status, body) = enter(&platform, &second, &voucher, &users[7]).await;
    assert_eq!((status, body["state"].as_str()), (StatusCode::OK, Some("entered")), "a repeat entry: {body}");

    // The draw: everyone hears the outcome on their long-poll.
    let first = entry(&platform, &platform.base, &voucher, &users[0], None).await;
    assert_eq!(first["state"], "entered");
    let until_draw = (draw_at - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(until_draw.saturating_sub(Duration::from_secs(2))).await;
    let outcome = eventually(|| async {
        let status = entry(&platform, &second, &voucher, &users[0], Some("10s")).await;
        (status["state"] != "entered").then_some(status)
    })
    .await;
    assert!(Utc::now() >= draw_at, "no outcome before draw_at");
    assert_eq!(outcome["winners"], STOCK);
    let (status, body) = enter(&platform, &platform.base, &voucher, "latecomer").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("draw_closed")), "{body}");

    // The log: the commitment precedes every entry, the revealed seed
    // matches it, the list hash and the ranking are the rule's.
    let sales = seckill_core::topics::Topics::with_prefix(&platform.infra.namespace).sales;
    let chunks = ENTRIES.div_ceil(draw::RANK_CHUNK);
    let records = platform
        .read_topic(&sales, |messages| {
            messages.iter().filter_map(decode).filter(|e| matches!(e, Event::DrawWinnersSelected(_))).count() > 0
        })
        .await;
    let events: Vec<Event> =
        records.iter().filter_map(decode).filter(|e| e.voucher_id().to_string() == voucher).collect();
    let committed = events.iter().position(|e| matches!(e, Event::DrawSeedCommitted(_))).expect("a commitment");
    let first_entry = events.iter().position(|e| matches!(e, Event::DrawEntered(_))).expect("entries");
    assert!(committed < first_entry, "the seed is committed before the first entry");
    let mut by_seq: HashMap<u64, UserId> = HashMap::new();
    for event in &events {
        if let Event::DrawEntered(entered) = event {
            by_seq.entry(entered.seq).or_insert_with(|| entered.user_id.clone());
        }
    }
    let entrants: Vec<UserId> = (1..=ENTRIES as u64).map(|seq| by_seq[&seq].clone()).collect();
    let (Event::DrawSeedCommitted(commitment), Some(Event::DrawSeedRevealed(revealed))) =
        (&events[committed], events.iter().find(|e| matches!(e, Event::DrawSeedRevealed(_))))
    else {
        panic!("the seed is revealed");
    };
    assert_eq!(queue::seed_commitment(&revealed.seed), commitment.seed_hash);
    assert_eq!(
        (revealed.entries, revealed.entries_hash.as_str()),
        (ENTRIES as u64, draw::entries_hash(&entrants).as_str())
    );
    let mut logged: Vec<(u64, Vec<UserId>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::DrawRanked(chunk) => Some((chunk.chunk, chunk.users.clone())),
            _ => None,
        })
        .collect();
    logged.sort_by_key(|(chunk, _)| *chunk);
    logged.dedup_by_key(|(chunk, _)| *chunk);
    assert_eq!(logged.len(), chunks);
    let ranking: Vec<UserId> = logged.into_iter().flat_map(|(_, users)| users).collect();
    assert_eq!(ranking, draw::ranking(&revealed.seed, &entrants), "the ranking is reproduced from the log alone");
    assert_eq!(ranking, draw::ranking(&revealed.seed, &entrants), "and again");

    // Ranks 1..100 won; rank 101 did not.
    let name = |rank: usize| ranking[rank - 1].as_str().to_owned();
    let status = entry(&platform, &platform.base, &voucher, &name(1), None).await;
    assert_eq!((status["state"].as_str(), status["rank"].as_u64()), (Some("won"), Some(1)), "{status}");
    let status = entry(&platform, &second, &voucher, &name(STOCK + 1), None).await;
    assert_eq!(status["state"], "not_selected", "{status}");
    let (status, body) = order(&platform, &platform.base, &voucher, &name(STOCK + 1), "k").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("not_a_winner")), "{body}");

    // Winners buy, retrying through both ingresses at once: with the same
    // key the same order, with another key `win_used`.
    let buying = (1..=BUYERS).map(|rank| {
        let (platform, voucher, second) = (&platform, &voucher, &second);
        let user = name(rank);
        async move {
            let (a, b, c) = tokio::join!(
                order(platform, &platform.base, voucher, &user, "first"),
                order(platform, second, voucher, &user, "first"),
                order(platform, second, voucher, &user, "other"),
            );
            let accepted: Vec<&Value> =
                [&a, &b, &c].into_iter().filter(|(s, _)| *s == StatusCode::ACCEPTED).map(|(_, body)| body).collect();
            let ids: HashSet<String> =
                accepted.iter().filter_map(|body| body["order_id"].as_str()).map(str::to_owned).collect();
            assert_eq!(ids.len(), 1, "one order for rank {rank}: {a:?} {b:?} {c:?}");
            for (status, body) in [&a, &b, &c] {
                assert!(*status == StatusCode::ACCEPTED || body["error"] == "win_used", "rank {rank}: {status} {body}");
            }
            ids
        }
    });
    let mut orders: HashSet<String> = futures::future::join_all(buying).await.into_iter().flatten().collect();

    // The other winners let their windows lapse: the next ranks are
    // promoted, and buy, until the stock is sold.
    let lapsed = name(BUYERS + 1);
    let promoted_ranks = (STOCK + 1)..=(STOCK + STOCK - BUYERS);
    for rank in promoted_ranks.clone() {
        let user = name(rank);
        // A long-poll answers a change from what the caller would read now:
        // read first, then wait.
        let status = eventually(|| async {
            let now = entry(&platform, &platform.base, &voucher, &user, None).await;
            let status = if now["state"] == "promoted" {
                now
            } else {
                entry(&platform, &second, &voucher, &user, Some("5s")).await
            };
            (status["state"] == "promoted").then_some(status)
        })
        .await;
        assert_eq!(status["rank"].as_u64(), Some(rank as u64));
        let (code, body) = order(&platform, &second, &voucher, &user, "promoted").await;
        assert_eq!(code, StatusCode::ACCEPTED, "rank {rank}: {body}");
        orders.insert(body["order_id"].as_str().expect("an order id").to_owned());
    }
    let status = entry(&platform, &platform.base, &voucher, &lapsed, None).await;
    assert_eq!(status["state"], "lapsed", "{status}");
    let (code, body) = order(&platform, &platform.base, &voucher, &lapsed, "late").await;
    assert_eq!((code, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("purchase_window_closed")), "{body}");
    assert_eq!(orders.len(), STOCK);
    for id in &orders {
        assert_eq!(platform.wait_final(id).await["status"], "CREATED");
    }
    assert_eq!(platform.redis_remaining(&voucher).await, 0);
    // Sold: nobody further is promoted. Only a draw's advance promotes;
    // one run now, after the last unit was sold, says sold out and moves
    // the cursor past no one (whatever the drivers did before it).
    let advanced = platform.redis_gate().await.advance_draw(voucher.parse().expect("voucher id")).await;
    let advanced = advanced.expect("the draw advances");
    let won_through = (STOCK + STOCK - BUYERS) as u64;
    assert_eq!(advanced.state, seckill_gate::RoomState::SoldOut, "{advanced:?}");
    assert_eq!(
        (advanced.cursor, advanced.skipped_now),
        (won_through, 0),
        "no promotion after the sell-out: {advanced:?}"
    );
    let next = entry(&platform, &second, &voucher, &name(STOCK + STOCK - BUYERS + 1), None).await;
    assert_eq!(
        (next["state"].as_str(), next["won_through"].as_u64()),
        (Some("not_selected"), Some(won_through)),
        "{next}"
    );

    let records = platform
        .read_topic(&sales, |messages| {
            messages.iter().filter_map(decode).filter(|e| matches!(e, Event::DrawWinUsed(_))).count() >= STOCK
        })
        .await;
    let mut promoted: Vec<u64> = records
        .iter()
        .filter_map(decode)
        .filter_map(|e| match e {
            Event::DrawWinnerPromoted(p) if p.voucher_id.to_string() == voucher => Some(p.rank),
            _ => None,
        })
        .collect();
    // Two ingresses' relays may interleave records on the topic: the ranks
    // say the order (and `draw verify` checks it by the Redis clock).
    promoted.sort_unstable();
    let expected: Vec<u64> = promoted_ranks.map(|rank| rank as u64).collect();
    assert_eq!(promoted, expected, "the next ranks, once each");

    // `seckill draw verify`: PASS from the log, the same twice; a copy of
    // the log with one entry changed FAILs.
    let id = voucher.parse().expect("voucher id");
    let verified = |read: seckill_analytics::draw::DrawRead| {
        seckill_analytics::draw::verify(&read.log).expect("a draw").read_from(read.source)
    };
    // The orders' records may reach the topic after their wins' (another
    // relay): read until the log holds them all.
    let first = eventually(|| async {
        let read = verified(read_kafka(&platform.kafka, id, false).await.expect("the log is read"));
        (read.wins_used == STOCK as u64 && read.pass).then_some(read)
    })
    .await;
    assert!(first.pass, "{}", first.text());
    assert_eq!((first.entries, first.winners, first.wins_used), (ENTRIES as u64, Some(STOCK as u64), STOCK as u64));
    let again = verified(read_kafka(&platform.kafka, id, false).await.expect("the log is read"));
    assert_eq!(again.checks, first.checks, "the verification is reproducible");
    // `seckill report` shows the draw and the same verdict.
    let html = crate::report::rendered(&platform, &Selection::vouchers(vec![id])).await;
    let all_pass = format!("{n} of {n} checks pass", n = first.checks.len());
    assert!(html.contains("data-pass=\"true\"") && html.contains(&all_pass), "the report's draw passes: {all_pass}");
    let winners =
        format!("<tr data-field=\"draw_winners\"><th>winners at the draw</th><td class=\"n\" data-value=\"{STOCK}\">");
    assert!(html.contains(&winners), "the report counts the winners");
    let (mut original, mut copy) = (Vec::new(), Vec::new());
    let mut changed = false;
    for message in &records {
        use seckill_kafka::Message as _;
        let Some(payload) = message.payload() else { continue };
        original.extend_from_slice(payload);
        original.push(b'\n');
        let mut envelope = Envelope::decode(payload).expect("the platform writes valid records");
        if let Event::DrawEntered(entered) = &mut envelope.event {
            if !changed && entered.voucher_id == id && entered.seq == 7 {
                entered.user_id = UserId::parse("mallory").expect("valid");
                changed = true;
            }
        }
        copy.extend_from_slice(&envelope.encode());
        copy.push(b'\n');
    }
    assert!(changed, "the copy has the seventh entry");
    let tampered = verified(read_lines(copy.as_slice(), "a doctored copy", id).expect("the copy is read"));
    let failed: Vec<&str> = tampered.failed().map(|check| check.check).collect();
    assert!(!tampered.pass && failed.contains(&"entries_hash") && failed.contains(&"ranking"), "{}", tampered.text());

    // The written rule alone (docs/EVENTS.md), reimplemented apart from the
    // platform's code, agrees: the log passes, the doctored copy fails.
    let files = tempfile::tempdir().expect("a temporary directory");
    for (name, bytes, expected) in [("log.jsonl", &original, 0), ("doctored.jsonl", &copy, 1)] {
        let path = files.path().join(name);
        std::fs::write(&path, bytes).expect("written");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/draw-ranking.py");
        let output = std::process::Command::new("python3")
            .arg(script)
            .args(["--voucher", &voucher])
            .arg(&path)
            .output()
            .expect("python3 runs");
        let printed = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(expected),
            "{name}: {printed}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// With a seal key set, a draw Redis loses before its reveal comes back
/// from the log with the very seed it committed to: `seckill reconcile`
/// opens the sealed commitment, the entries keep their seqs, later ones go
/// on from there, and the draw made afterwards passes `draw verify` with
/// one commitment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_lost_before_its_reveal_comes_back_with_its_sealed_seed() {
    const SEAL_KEY: &str = "e2e-seal-key-thirty-two-characters-long";
    let platform = Platform::start_configured(None, |config| config.draw.seal_key = Secret::new(SEAL_KEY)).await;
    let now = Utc::now();
    // Room for the entries, the loss and the reconcile before the draw, on
    // a loaded machine too.
    let draw_at = now + chrono::Duration::seconds(20);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 2, "per_user_limit": 1, "begins_at": now, "ends_at": now + chrono::Duration::hours(1),
            "mode": "draw", "draw_at": draw_at, "purchase_seconds": 60,
        }))
        .await;
    let id: seckill_core::VoucherId = voucher.parse().expect("voucher id");
    let users = ["sealed-a", "sealed-b", "sealed-c", "sealed-d"];
    let (status, body) = eventually(|| async {
        let (status, body) = enter(&platform, &platform.base, &voucher, users[0]).await;
        (body["error"] != "draw_not_open").then_some((status, body))
    })
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    for user in &users[1..3] {
        assert_eq!(enter(&platform, &platform.base, &voucher, user).await.0, StatusCode::CREATED);
    }
    let keys = seckill_gate::VoucherKeys::new(&platform.redis.key_prefix, id);
    let mut redis = platform.redis_connection().await;
    let seed: String = redis::cmd("HGET").arg(&keys.room).arg("seed").query_async(&mut redis).await.expect("HGET");

    // Redis loses the voucher and its draw (the outbox stands for the log).
    let mut lost: Vec<String> = keys.all().iter().map(|key| (*key).to_owned()).collect();
    lost.extend([keys.room.clone(), keys.line.clone(), keys.places.clone(), keys.ranks.clone(), keys.holds.clone()]);
    let _: () = redis::cmd("DEL").arg(&lost).query_async(&mut redis).await.expect("DEL");
    let gate = seckill_gate::Gate::connect(&platform.redis).await.expect("Redis");
    let draw = DrawConfig { seal_key: Secret::new(SEAL_KEY) };
    let report = reconcile(&gate, &platform.kafka, &draw, Mode::Write, async |_| {}).await.expect("reconciles");
    let restored = report.vouchers.iter().find(|v| v.voucher_id == id).and_then(|v| v.outcome.draw);
    assert_eq!(
        restored,
        Some(seckill_gate::DrawRestored::Rebuilt {
            stage: "entering",
            entries: 3,
            wins: 0,
            wins_used: 0,
            new_seed: false
        })
    );
    let back: String = redis::cmd("HGET").arg(&keys.room).arg("seed").query_async(&mut redis).await.expect("HGET");
    assert_eq!(back, seed, "the seed committed to, opened from the log");
    assert_eq!(entry(&platform, &platform.base, &voucher, users[1], None).await["seq"], 2);
    let (status, body) = eventually(|| async {
        let (status, body) = enter(&platform, &platform.base, &voucher, users[3]).await;
        (status != StatusCode::NOT_FOUND && status != StatusCode::SERVICE_UNAVAILABLE).then_some((status, body))
    })
    .await;
    assert_eq!((status, body["seq"].as_u64()), (StatusCode::CREATED, Some(4)), "{body}");

    // The draw, made at draw_at, checks out from the log: one commitment.
    let until_draw = (draw_at - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(until_draw).await;
    let verified = eventually(|| async {
        let read = read_kafka(&platform.kafka, id, false).await.expect("the log is read");
        let verified = seckill_analytics::draw::verify(&read.log).expect("a draw");
        (verified.winners == Some(2)).then_some(verified)
    })
    .await;
    assert!(verified.pass, "{}", verified.text());
    let commitment = verified.checks.iter().find(|check| check.check == "commitment").expect("checked");
    assert!(commitment.detail.starts_with("1 commitment (1 distinct)"), "{}", commitment.detail);
}

/// A draw's sale cannot be moved to end at or before its draw (its winners
/// buy after it): `422 ends_before_draw`, nothing changed; after it, the
/// end moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_sale_cannot_end_before_its_draw() {
    let platform = Platform::start().await;
    let now = Utc::now();
    let draw_at = now + chrono::Duration::minutes(10);
    let ends_at = now + chrono::Duration::hours(1);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 2, "per_user_limit": 1, "begins_at": now, "ends_at": ends_at,
            "mode": "draw", "draw_at": draw_at, "purchase_seconds": 60,
        }))
        .await;
    // The draw is open once an entry is taken.
    let (status, body) = eventually(|| async {
        let (status, body) = enter(&platform, &platform.base, &voucher, "entrant").await;
        (body["error"] != "draw_not_open").then_some((status, body))
    })
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    for early in [draw_at - chrono::Duration::minutes(1), draw_at] {
        let (status, body) = platform.update_voucher(&voucher, json!({ "ends_at": early })).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("ends_before_draw")),
            "{body}"
        );
    }
    let (_, read) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    let unchanged = chrono::DateTime::parse_from_rfc3339(read["ends_at"].as_str().expect("ends_at")).expect("a time");
    assert_eq!(unchanged.timestamp_millis(), ends_at.timestamp_millis(), "nothing changed: {read}");
    let later = draw_at + chrono::Duration::minutes(5);
    let (status, body) = platform.update_voucher(&voucher, json!({ "ends_at": later })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
