//! A waiting room without a beacon Redis lost before its reveal, rebuilt
//! from its records through `Gate::restore`: with its commitment holding
//! the seed sealed under the operator's key and that key given, the room
//! comes back with the seed it committed to, every pre-queue place at the
//! key `lua/queue_join.lua` gave it, later pre-queue joins keyed under the
//! same seed, and the start serves the shuffle an unbroken room would have
//! served. Without the key, with another key, or with the seed not sealed,
//! it starts over empty and the outcome says which.
//!
//! The loss is the deletion of every key of the voucher (the outbox, which
//! the log stands for here, is read first).

use seckill_core::event::{Event, QueueSeedCommitted, VoucherCreated};
use seckill_core::{queue, sealed_seed, Envelope, UserId, VoucherId};
use seckill_gate::{Joined, RestoreAction, RestoreMode, RoomRestored, StartedOver, VoucherAdmission};

use crate::room::{advance_until_quiet, begin, envelopes, open, queue_definition};
use crate::room_beacon_restore::lose;
use crate::{on_single_and_cluster, state_of, user, Harness};

on_single_and_cluster!(
    single_only: [],
    both: [
        a_room_lost_before_its_reveal_comes_back_with_its_sealed_seed,
        without_a_key_that_opens_the_seal_the_room_starts_over_and_says_why,
    ],
);

const KEY: &[u8] = b"gate sealed room restore test key";
const EARLY: usize = 12;
const STOCK: u64 = 3;

/// The line as Redis holds it: each member with its score, first first.
async fn scored_line(h: &Harness, voucher: VoucherId) -> Vec<(String, u64)> {
    redis::cmd("ZRANGE")
        .arg(h.gate.keys(voucher).line)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut h.connection.clone())
        .await
        .expect("ZRANGE")
}

/// What the log holds of the sale: its definition, the commitment the
/// ingress logs (the seed sealed under `key`, if any), and every record
/// the scripts wrote.
async fn the_log(h: &Harness, definition: &VoucherCreated, seed: &str, key: Option<&[u8]>) -> Vec<Envelope> {
    let voucher = definition.voucher_id;
    let mut log = vec![
        Envelope::new(Event::VoucherCreated(definition.clone())),
        Envelope::new(Event::QueueSeedCommitted(QueueSeedCommitted {
            voucher_id: voucher,
            seed_hash: queue::seed_commitment(seed),
            sealed_seed: key.and_then(|key| sealed_seed::seal(key, voucher, seed)),
        })),
    ];
    log.extend(envelopes(h, voucher).await);
    log
}

/// A room without a beacon, its seed committed, `count` users in its
/// pre-queue: its definition, its seed and the users.
async fn a_pre_queue(h: &Harness, count: usize, prefix: &str) -> (VoucherCreated, String, Vec<UserId>) {
    let definition = queue_definition(STOCK, 1, 100);
    assert!(definition.queue.as_ref().is_some_and(|settings| settings.beacon.is_none()), "no beacon");
    let seed = open(h, &definition).await;
    let early: Vec<UserId> = (0..count).map(|i| user(&format!("{prefix}-{i:02}"))).collect();
    for holder in &early {
        let joined = h.gate.join_queue(definition.voucher_id, holder, None).await.expect("answers");
        assert_eq!(joined, Joined::Placed { attempt: 1 });
    }
    (definition, seed, early)
}

async fn a_room_lost_before_its_reveal_comes_back_with_its_sealed_seed(h: &Harness) {
    let (definition, seed, mut early) = a_pre_queue(h, EARLY, "sealed").await;
    let voucher = definition.voucher_id;
    let line_before = scored_line(h, voucher).await;
    assert_eq!(line_before.len(), EARLY);
    let log = the_log(h, &definition, &seed, Some(KEY)).await;
    lose(h, voucher).await;

    let mut state = state_of(&log);
    assert!(state.room_history.open_sealed_seed(voucher, KEY), "the key opens the logged seal");
    let outcome = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!(outcome.action, RestoreAction::Restored);
    assert_eq!(outcome.room, Some(RoomRestored::RebuiltSealed { pre_queue: EARLY as u64, after_start: 0 }));
    let again = h.gate.restore(&state, RestoreMode::Write).await.expect("restores");
    assert_eq!(again.room, Some(RoomRestored::Kept), "a room Redis has is kept");

    let room = h.gate.room(voucher).await.expect("reads").expect("the room is back");
    assert_eq!(room.seed, seed, "the seed committed to, opened from the log");
    assert!(room.committed, "its commitment is in the log: it takes joins at once");
    assert_eq!(scored_line(h, voucher).await, line_before, "every place at the key it had");
    for holder in &early {
        let joined = h.gate.join_queue(voucher, holder, None).await.expect("answers");
        assert!(matches!(joined, Joined::Held { .. }), "{holder} keeps their place: {joined:?}");
    }
    // A pre-queue join after the rebuild is keyed under the same seed.
    let after = user("sealed-after");
    assert_eq!(h.gate.join_queue(voucher, &after, None).await.expect("answers"), Joined::Placed { attempt: 1 });
    let key: u64 = redis::cmd("ZSCORE")
        .arg(h.gate.keys(voucher).line)
        .arg(format!("{after}|1"))
        .query_async(&mut h.connection.clone())
        .await
        .expect("ZSCORE");
    assert_eq!(key, queue::shuffle_key(&seed, &after));
    early.push(after);

    // The start reveals the seed committed to and serves the shuffle it
    // gives, as an unbroken room would have.
    begin(h, voucher).await;
    let summary = advance_until_quiet(h, voucher).await;
    assert_eq!((summary.issued, summary.pre_queued), (STOCK, Some(EARLY as u64 + 1)));
    let events: Vec<Event> = envelopes(h, voucher).await.into_iter().map(|envelope| envelope.event).collect();
    let reveals: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            Event::QueueSeedRevealed(revealed) => Some(revealed.clone()),
            _ => None,
        })
        .collect();
    let [revealed] = reveals.try_into().expect("revealed once");
    assert_eq!(revealed.seed, seed);
    assert_eq!(revealed.pre_queued, EARLY as u64 + 1);
    let served: Vec<(u64, UserId)> = events
        .iter()
        .filter_map(|event| match event {
            Event::QueueEntryIssued(issued) => Some((issued.place, issued.user_id.clone())),
            _ => None,
        })
        .collect();
    let shuffle = queue::pre_queue_order(&seed, &early);
    let expected: Vec<(u64, UserId)> = (1u64..).zip(shuffle).take(STOCK as usize).collect();
    assert_eq!(served, expected, "the places of the committed shuffle, each served once");
}

/// Restores the lost room of `state` and returns what became of it, after
/// checking it came back new and empty (`users` hold no place).
async fn started_over(h: &Harness, state: &VoucherAdmission, users: &[UserId]) -> Option<RoomRestored> {
    let voucher = state.voucher_id;
    let outcome = h.gate.restore(state, RestoreMode::Write).await.expect("restores");
    let room = h.gate.room(voucher).await.expect("reads").expect("a new room");
    assert!(!room.committed, "its new seed awaits its commitment in the log");
    for holder in users {
        assert_eq!(h.gate.place(voucher, holder).await.expect("reads"), None, "the room starts over empty");
    }
    lose(h, voucher).await;
    outcome.room
}

async fn without_a_key_that_opens_the_seal_the_room_starts_over_and_says_why(h: &Harness) {
    let (definition, seed, early) = a_pre_queue(h, 2, "unsealed").await;
    let voucher = definition.voucher_id;
    let sealed_log = the_log(h, &definition, &seed, Some(KEY)).await;
    let unsealed_log = the_log(h, &definition, &seed, None).await;
    lose(h, voucher).await;
    let lost = |why| Some(RoomRestored::StartedOver { why, pre_queue: 2, after_start: 0 });

    let no_key = state_of(&sealed_log);
    assert_eq!(started_over(h, &no_key, &early).await, lost(StartedOver::NoSealKey));
    let mut wrong_key = state_of(&sealed_log);
    assert!(!wrong_key.room_history.open_sealed_seed(voucher, b"another key, also 32 characters"));
    assert_eq!(started_over(h, &wrong_key, &early).await, lost(StartedOver::WrongSealKey));
    let mut not_sealed = state_of(&unsealed_log);
    assert!(!not_sealed.room_history.open_sealed_seed(voucher, KEY));
    assert_eq!(started_over(h, &not_sealed, &early).await, lost(StartedOver::NoBeacon));
}
