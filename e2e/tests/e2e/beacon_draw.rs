//! A draw ranked by a public beacon round, end to end: the beacon sandbox
//! runs as its own process (`seckill-beacon-sandbox`, drand's HTTP API and
//! quicknet's signing scheme under a key of its own), the ingress fetches
//! rounds from it (behind a relay that does not answer, which it must skip),
//! the creation record fixes the round, the draw waits for it after
//! entries close, and the log's ranking is the one the round's randomness
//! gives; `draw verify` checks the signature and passes.

use std::collections::HashMap;

use chrono::Utc;
use reqwest::StatusCode;
use seckill_analytics::draw::read_kafka;
use seckill_core::beacon::{BeaconChain, BeaconConfig};
use seckill_core::event::Event;
use seckill_core::{draw, Envelope, UserId};
use seckill_devstack::{free_port, BeaconSandbox, TempDir};
use serde_json::{json, Value};

use crate::draw::entry;
use crate::helpers::{eventually, Platform};

const ENTRIES: usize = 40;
const STOCK: u64 = 3;

/// The sandbox's chain, as a relay's `/info` gives it.
pub(crate) async fn chain_of(http: &reqwest::Client, relay: &str) -> BeaconChain {
    let info: Value = http.get(format!("{relay}/info")).send().await.expect("answers").json().await.expect("JSON");
    BeaconChain {
        hash: info["hash"].as_str().expect("hash").to_owned(),
        public_key: info["public_key"].as_str().expect("key").to_owned(),
        genesis_time: info["genesis_time"].as_i64().expect("genesis"),
        period: u32::try_from(info["period"].as_u64().expect("period")).expect("small"),
    }
}

/// `[beacon]` naming a dead relay first, then `relay`.
pub(crate) fn beacon_config(chain: &BeaconChain, relay: &str) -> BeaconConfig {
    BeaconConfig {
        relays: vec![format!("http://127.0.0.1:{}", free_port()), relay.to_owned()],
        chain_hash: chain.hash.clone(),
        public_key: chain.public_key.clone(),
        genesis_time: chain.genesis_time,
        period: chain.period,
        timeout_ms: 500,
        retry_ms: 200,
    }
}

pub(crate) fn decode(message: &seckill_kafka::OwnedMessage) -> Option<Envelope> {
    use seckill_kafka::Message as _;
    Envelope::decode(message.payload()?).ok()
}

/// The records of `records` about `voucher`, decoded.
pub(crate) fn of_voucher(records: &[seckill_kafka::OwnedMessage], voucher: &str) -> Vec<Envelope> {
    records.iter().filter_map(decode).filter(|e| e.event.voucher_id().to_string() == voucher).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_waits_for_its_beacon_round_and_ranks_by_it() {
    let dir = TempDir::new().expect("dir");
    let sandbox = BeaconSandbox::start(dir.path(), 1).expect("the beacon sandbox starts");
    let http = reqwest::Client::new();
    let chain = chain_of(&http, &sandbox.url()).await;
    // drand's API shape: the chain-prefixed and default forms, and a
    // round in the future is not there yet.
    let prefixed = http.get(format!("{}/{}/info", sandbox.url(), chain.hash)).send().await.expect("answers");
    assert_eq!(prefixed.status(), StatusCode::OK);
    let future = http.get(format!("{}/{}/public/99999999", sandbox.url(), chain.hash)).send().await.expect("answers");
    assert_eq!(future.status(), StatusCode::NOT_FOUND, "a round in the future is too early");
    let platform =
        Platform::start_configured(None, |config| config.beacon = beacon_config(&chain, &sandbox.url())).await;

    let now = Utc::now();
    let draw_at = now + chrono::Duration::seconds(6);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": STOCK, "per_user_limit": 1, "begins_at": now, "ends_at": now + chrono::Duration::hours(1),
            "mode": "draw", "draw_at": draw_at, "purchase_seconds": 60,
        }))
        .await;
    let users: Vec<String> = (0..ENTRIES).map(|i| format!("beacon-entrant-{i:02}")).collect();
    for user in &users {
        let (status, body) = platform.post(&format!("/api/v1/vouchers/{voucher}/entries"), Some(user), None).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    assert!(Utc::now() < draw_at, "every entry before the draw");
    let outcome = eventually(|| async {
        let status = entry(&platform, &platform.base, &voucher, &users[0], Some("10s")).await;
        (status["state"] != "entered").then_some(status)
    })
    .await;
    assert_eq!(outcome["winners"], STOCK, "{outcome}");

    // The log: the plan in the creation record, the round with the reveal.
    let sales = seckill_core::topics::Topics::with_prefix(&platform.infra.namespace).sales;
    let records = platform
        .read_topic(&sales, |messages| {
            messages.iter().filter_map(decode).any(|e| matches!(e.event, Event::DrawWinnersSelected(_)))
        })
        .await;
    let mine = of_voucher(&records, &voucher);
    let plan = mine
        .iter()
        .find_map(|e| match &e.event {
            Event::VoucherCreated(created) => created.draw.as_ref().and_then(|draw| draw.beacon.as_deref().cloned()),
            _ => None,
        })
        .expect("the creation record plans a beacon round");
    assert_eq!(plan.chain, chain);
    assert_eq!(plan.round, chain.first_round_after(draw_at), "the first round after entries close");
    assert!(plan.round_time() > draw_at);
    let (revealed_at, reveal) = mine
        .iter()
        .find_map(|e| match &e.event {
            Event::DrawSeedRevealed(reveal) => Some((e.emitted_at, reveal.clone())),
            _ => None,
        })
        .expect("a reveal");
    let round = reveal.beacon.clone().expect("the reveal logs the round");
    assert_eq!(round.round, plan.round);
    assert_eq!(seckill_beacon::verify(&chain, &round), Ok(reveal.seed.clone()), "the seed is the round's randomness");
    assert!(revealed_at >= plan.round_time(), "the draw waited for the round: {revealed_at} < {}", plan.round_time());
    let mut by_seq: HashMap<u64, UserId> = HashMap::new();
    let mut chunks: Vec<(u64, Vec<UserId>)> = Vec::new();
    for envelope in &mine {
        match &envelope.event {
            Event::DrawEntered(entered) => {
                by_seq.entry(entered.seq).or_insert_with(|| entered.user_id.clone());
            }
            Event::DrawRanked(chunk) => chunks.push((chunk.chunk, chunk.users.clone())),
            _ => {}
        }
    }
    let entrants: Vec<UserId> = (1..=ENTRIES as u64).map(|seq| by_seq[&seq].clone()).collect();
    chunks.sort_by_key(|(chunk, _)| *chunk);
    chunks.dedup_by_key(|(chunk, _)| *chunk);
    let ranking: Vec<UserId> = chunks.into_iter().flat_map(|(_, users)| users).collect();
    assert_eq!(ranking, draw::ranking(&reveal.seed, &entrants), "ranked by the round's randomness");
    let first = entry(&platform, &platform.base, &voucher, ranking[0].as_str(), None).await;
    assert_eq!((first["state"].as_str(), first["rank"].as_u64()), (Some("won"), Some(1)), "{first}");

    // `seckill draw verify`: PASS, the beacon's signature checked.
    let id = voucher.parse().expect("voucher id");
    let read = read_kafka(&platform.kafka, id, false).await.expect("the log is read");
    let verified = seckill_analytics::draw::verify(&read.log).expect("a draw");
    assert!(verified.pass, "{}", verified.text());
    let beacon = verified.checks.iter().find(|check| check.check == "beacon").expect("the beacon check");
    assert!(beacon.detail.ends_with("signature verifies; the revealed seed is its randomness"), "{}", beacon.detail);

    // Apart from the platform's code: scripts/draw-ranking.py under PyPI's
    // drand-verify passes the log, and fails a copy whose round's
    // signature was swapped for the round before's (a valid signature, of
    // another round).
    let mut original = Vec::new();
    let mut doctored = Vec::new();
    let next = http
        .get(format!("{}/{}/public/{}", sandbox.url(), chain.hash, round.round - 1))
        .send()
        .await
        .expect("answers")
        .json::<Value>()
        .await
        .expect("the round before");
    for message in &records {
        use seckill_kafka::Message as _;
        let Some(payload) = message.payload() else { continue };
        original.extend_from_slice(payload);
        original.push(b'\n');
        let mut envelope = Envelope::decode(payload).expect("valid records");
        if let Event::DrawSeedRevealed(reveal) = &mut envelope.event {
            if let Some(logged) = reveal.beacon.as_mut().filter(|_| reveal.voucher_id == id) {
                logged.signature = next["signature"].as_str().expect("a signature").to_owned();
            }
        }
        doctored.extend_from_slice(&envelope.encode());
        doctored.push(b'\n');
    }
    let files = tempfile::tempdir().expect("a temporary directory");
    for (name, bytes, expected) in [("log.jsonl", &original, 0), ("doctored.jsonl", &doctored, 1)] {
        let path = files.path().join(name);
        std::fs::write(&path, bytes).expect("written");
        let output = std::process::Command::new(drand_verify_python())
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/draw-ranking.py"))
            .args(["--voucher", &voucher])
            .arg(&path)
            .output()
            .expect("python runs");
        let printed = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(expected),
            "{name}: {printed}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The Python `scripts/setup --tests` installs drand-verify into.
pub(crate) fn drand_verify_python() -> std::path::PathBuf {
    let home = std::env::var_os("SECKILL_DRAND_VERIFY_HOME").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".local/share/seckill/drand-verify")
    });
    let python = home.join("bin/python");
    assert!(python.exists(), "{} is missing: run scripts/setup --tests (it installs drand-verify)", python.display());
    python
}
