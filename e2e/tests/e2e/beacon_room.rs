//! A waiting room whose pre-queue is shuffled by a public beacon round, end
//! to end: the beacon sandbox runs as its own process, the creation record
//! fixes the chain and the first round after the start, the pre-queue
//! closes at the start, nobody is served until the ingress has fetched the
//! round (and checked its signature), and the places are then served in
//! the order the round's randomness and the logged pre-queue give. The
//! voucher read names the round; the audit's `queue_beacon` rule checks the
//! round and passes, and so does `scripts/room-order.py` (Python and PyPI's
//! drand-verify, none of the platform's code), which fails a copy of the log
//! whose reveal logs another round and one with a place served to another
//! user.

use chrono::Utc;
use reqwest::StatusCode;
use seckill_analytics::audit::audit_voucher;
use seckill_analytics::sale::{read_sales, Selection};
use seckill_core::beacon::{BeaconChain, BeaconRound};
use seckill_core::event::Event;
use seckill_core::Envelope;
use seckill_core::{queue, UserId};
use seckill_devstack::{BeaconSandbox, TempDir};
use serde_json::{json, Value};

use crate::beacon_draw::{beacon_config, chain_of, decode, drand_verify_python, of_voucher};
use crate::helpers::{eventually, Platform};

const STOCK: u64 = 3;
const EARLY: usize = 12;

/// A platform that ranks by the beacon sandbox (a process of its own), and
/// a queue-mode voucher on it whose pre-queue `early` joined before its
/// start.
pub(crate) struct BeaconRoom {
    pub(crate) chain: BeaconChain,
    pub(crate) platform: Platform,
    pub(crate) voucher: String,
    pub(crate) begins: chrono::DateTime<Utc>,
    /// Last: the sandbox and its directory outlive the platform.
    pub(crate) sandbox: BeaconSandbox,
    _dir: TempDir,
}

impl BeaconRoom {
    /// `stock` units, the start `begins_in` seconds from now, places kept
    /// `idle_seconds` unwatched; `early` joined before the start.
    pub(crate) async fn open(stock: u64, begins_in: i64, idle_seconds: u64, early: &[String]) -> Self {
        let dir = TempDir::new().expect("dir");
        let sandbox = BeaconSandbox::start(dir.path(), 1).expect("the beacon sandbox starts");
        let chain = chain_of(&reqwest::Client::new(), &sandbox.url()).await;
        let platform =
            Platform::start_configured(None, |config| config.beacon = beacon_config(&chain, &sandbox.url())).await;
        let begins = Utc::now() + chrono::Duration::seconds(begins_in);
        let voucher = platform
            .create_voucher_from(json!({
                "stock": stock, "per_user_limit": 1, "begins_at": begins,
                "ends_at": begins + chrono::Duration::hours(1), "mode": "queue", "queue_factor": 1.0,
                "queue_entry_rate": 1000, "queue_idle_seconds": idle_seconds,
            }))
            .await;
        for user in early {
            let (status, body) = eventually(|| async {
                let (status, body) =
                    platform.post(&format!("/api/v1/vouchers/{voucher}/queue"), Some(user), None).await;
                (body["error"] != "queue_not_open").then_some((status, body))
            })
            .await;
            assert_eq!(status, StatusCode::CREATED, "{user}: {body}");
        }
        assert!(Utc::now() < begins, "the pre-queue was joined before the start (raise the start's margin)");
        Self { chain, platform, voucher, begins, sandbox, _dir: dir }
    }

    /// The sales topic's records once the voucher has issued at least
    /// `entries` entries (`of_voucher` picks and decodes the voucher's).
    pub(crate) async fn once_issued(&self, entries: usize) -> Vec<seckill_kafka::OwnedMessage> {
        let sales = seckill_core::topics::Topics::with_prefix(&self.platform.infra.namespace).sales;
        self.platform.read_topic(&sales, |messages| served(&of_voucher(messages, &self.voucher)).len() >= entries).await
    }
}

/// The places `records` served (`QueueEntryIssued`), and to whom, in log
/// order.
pub(crate) fn served(records: &[Envelope]) -> Vec<(u64, UserId)> {
    records
        .iter()
        .filter_map(|e| match &e.event {
            Event::QueueEntryIssued(issued) => Some((issued.place, issued.user_id.clone())),
            _ => None,
        })
        .collect()
}

/// Checks that each place `served` went to the user `line` (the round's
/// shuffle of the pre-queue) puts there.
pub(crate) fn assert_served_in_line_order(served: &[(u64, UserId)], line: &[UserId]) {
    for (place, user) in served {
        assert_eq!(&line[usize::try_from(*place).expect("small") - 1], user, "place {place}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_room_waits_for_its_beacon_round_and_serves_the_pre_queue_by_it() {
    let early: Vec<String> = (0..EARLY).map(|i| format!("beacon-early-{i:02}")).collect();
    let room = BeaconRoom::open(STOCK, 5, 60, &early).await;
    let (platform, sandbox, begins) = (&room.platform, &room.sandbox, room.begins);
    let (chain, voucher) = (room.chain.clone(), room.voucher.clone());
    let http = reqwest::Client::new();
    // The voucher read shows the round the room will wait for.
    let (_, read) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    let room_read = &read["queue"];
    assert_eq!(room_read["beacon_round"].as_u64(), Some(chain.first_round_after(begins)), "{read}");
    assert_eq!(room_read["awaiting_beacon"], false, "the pre-queue is open: {read}");

    // Served once the round is in: as many entries as units.
    let records = room.once_issued(STOCK as usize).await;
    let mine = of_voucher(&records, &voucher);
    let plan = mine
        .iter()
        .find_map(|e| match &e.event {
            Event::VoucherCreated(created) => created.queue.as_ref().and_then(|q| q.beacon.as_deref().cloned()),
            _ => None,
        })
        .expect("the creation record plans a beacon round");
    assert_eq!(plan.chain, chain);
    assert_eq!(plan.round, chain.first_round_after(begins), "the first round after the pre-queue closes");
    let (revealed_at, reveal) = mine
        .iter()
        .find_map(|e| match &e.event {
            Event::QueueSeedRevealed(reveal) => Some((e.emitted_at, reveal.clone())),
            _ => None,
        })
        .expect("a reveal");
    let round = reveal.beacon.clone().expect("the reveal logs the round");
    assert_eq!(round.round, plan.round);
    assert_eq!(seckill_beacon::verify(&chain, &round), Ok(reveal.seed.clone()), "the key is the round's randomness");
    assert!(revealed_at >= plan.round_time(), "the room waited for the round: {revealed_at} < {}", plan.round_time());
    let first_issue = mine
        .iter()
        .filter(|e| matches!(e.event, Event::QueueEntryIssued(_)))
        .map(|e| e.emitted_at)
        .min()
        .expect("entries issued");
    assert!(first_issue >= revealed_at, "nobody served before the reveal");
    let users: Vec<UserId> = early.iter().map(|user| UserId::parse(user).expect("valid")).collect();
    assert_eq!(reveal.entries_hash, Some(queue::pre_queue_hash(&users)));
    let shuffled = queue::beacon_pre_queue_order(&reveal.seed, &users);
    assert_served_in_line_order(&served(&mine), &shuffled);
    // The first served holds an entry token, as queue/me tells it.
    let first = shuffled[0].as_str();
    let response = platform
        .http
        .get(format!("{}/api/v1/vouchers/{voucher}/queue/me", platform.base))
        .header("authorization", Platform::as_user(first))
        .send()
        .await
        .expect("answers");
    let status: Value = response.json().await.expect("a place");
    assert_eq!((status["state"].as_str(), status["place"].as_u64()), (Some("your_turn"), Some(1)), "{status}");

    // `seckill audit`: the beacon rule checks the round and passes.
    let id = voucher.parse().expect("voucher id");
    let read = read_sales(&platform.kafka, &Selection::vouchers(vec![id])).await.expect("the log is read");
    let [sale] = read.sales.as_slice() else { panic!("one sale") };
    let audit = audit_voucher(&sale.log, None);
    let failed: Vec<String> = audit.failed().map(|rule| format!("{}: {}", rule.rule, rule.detail)).collect();
    assert!(failed.is_empty(), "{failed:?}");
    let beacon = audit.rules.iter().find(|rule| rule.rule == "queue_beacon").expect("the beacon rule");
    assert_eq!(beacon.figures["signature_verifies"], true, "{}", beacon.detail);
    assert_eq!(beacon.figures["round_after_pre_queue_closed"], true, "{}", beacon.detail);

    // Apart from the platform's code: scripts/room-order.py under PyPI's
    // drand-verify passes the log, and fails a copy whose reveal logs the
    // round before (a valid round, its signature and randomness: not the
    // planned one), a copy that plans and logs that round (published
    // before the pre-queue closed) and a copy with place 1 served to
    // another user.
    let before =
        BeaconRound { round: round.round - 1, signature: signature_of(&http, sandbox, &chain, round.round - 1).await };
    let earlier_seed = seckill_beacon::verify(&chain, &before).expect("the round before verifies");
    let wrong_round = doctored(&records, |event| {
        if let Event::QueueSeedRevealed(reveal) = event {
            reveal.beacon = Some(before.clone());
            reveal.seed = earlier_seed.clone();
        }
    });
    // The round before in the plan too: a round published before the
    // pre-queue closed, whose randomness could have been known.
    let early_round = doctored(&records, |event| match event {
        Event::VoucherCreated(created) => {
            if let Some(plan) = created.queue.as_mut().and_then(|queue| queue.beacon.as_mut()) {
                plan.round = before.round;
            }
        }
        Event::QueueSeedRevealed(reveal) => {
            reveal.beacon = Some(before.clone());
            reveal.seed = earlier_seed.clone();
        }
        _ => {}
    });
    let other_user = shuffled[1].clone();
    let changed_place = doctored(&records, |event| match event {
        Event::QueueEntryIssued(issued) if issued.place == 1 => issued.user_id = other_user.clone(),
        _ => {}
    });
    let files = tempfile::tempdir().expect("a temporary directory");
    let cases = [
        ("log.jsonl", as_replayed(&records), 0, "PASS".to_owned()),
        (
            "wrong-round.jsonl",
            wrong_round,
            1,
            format!("the reveal logs round {}, not the planned {}", before.round, plan.round),
        ),
        (
            "early-round.jsonl",
            early_round,
            1,
            format!("the plan names round {}, but the first round after the pre-queue closed", before.round),
        ),
        ("changed-place.jsonl", changed_place, 1, format!("place 1 went to {other_user}, not {first}")),
    ];
    for (name, bytes, expected, says) in cases {
        let path = files.path().join(name);
        std::fs::write(&path, bytes).expect("written");
        let output = std::process::Command::new(drand_verify_python())
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/room-order.py"))
            .args(["--voucher", &voucher])
            .arg(&path)
            .output()
            .expect("python runs");
        let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        println!("{name}: {printed}");
        assert_eq!(output.status.code(), Some(expected), "{name}: {printed}");
        assert!(printed.contains(&says), "{name} says {says:?}: {printed}");
    }
}

/// The signature of the sandbox chain's `round`, from its relay API.
async fn signature_of(http: &reqwest::Client, sandbox: &BeaconSandbox, chain: &BeaconChain, round: u64) -> String {
    let url = format!("{}/{}/public/{round}", sandbox.url(), chain.hash);
    let body: Value = http.get(url).send().await.expect("answers").json().await.expect("a round");
    body["signature"].as_str().expect("a signature").to_owned()
}

/// `records` as JSON Lines, as `seckill replay` writes them.
fn as_replayed(records: &[seckill_kafka::OwnedMessage]) -> Vec<u8> {
    use seckill_kafka::Message as _;
    records.iter().filter_map(|message| message.payload()).flat_map(|payload| [payload, b"\n"].concat()).collect()
}

/// `records` as JSON Lines, each passed through `change` first.
fn doctored(records: &[seckill_kafka::OwnedMessage], mut change: impl FnMut(&mut Event)) -> Vec<u8> {
    let mut lines = Vec::new();
    for envelope in records.iter().filter_map(decode) {
        let mut envelope = envelope;
        change(&mut envelope.event);
        lines.extend_from_slice(&envelope.encode());
        lines.push(b'\n');
    }
    lines
}
