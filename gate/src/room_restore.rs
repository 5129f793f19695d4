//! Rebuilding a waiting room Redis lost, from the log (`seckill reconcile`,
//! after [`Gate::restore`] rebuilt the voucher itself).
//!
//! A beacon room lost before its reveal (waiting for its round, or hashing
//! and keying its pre-queue) comes back with every place the log holds: the
//! pre-queue unkeyed, the joins after the start by their seq. It waits for
//! its round again, and keys the whole pre-queue afresh once the round is
//! in, so its places are those the round determines however far keying had
//! gone (`lua/queue_restore.lua`). Nothing was served before the reveal,
//! so nobody can be served twice.
//!
//! A room without a beacon lost before its reveal comes back with the seed
//! it committed to, when its commitment holds the seed sealed under the
//! operator's key (`[draw] seal_key`) and the caller opened it
//! ([`RoomHistory::open_sealed_seed`]): every logged place is back, the
//! pre-queue keyed by SHA-1(seed:user) as `lua/queue_join.lua` keyed it, the
//! joins after the start by their seq, the seed marked committed (its hash
//! is in the log). Each holder keeps the place they had, later pre-queue
//! joins are keyed under the same seed, and the reveal at the start shows
//! the seed the log committed to.
//!
//! A room lost after its reveal (with a beacon or not) has its order in the
//! log: it comes back in that order, serving on from where it stood
//! (`crate::room_revealed`), unless the log's places do not add up.
//!
//! The places are written [`MOST_PLACES_PER_RESTORE`] a call into staging
//! keys, and the room hash last, in the call that moves them in: a
//! pre-queue of 100,000 never holds its Redis master for one long call, the
//! room stays missing (nobody joins or is served) until the last step, and
//! a restorer that dies between steps leaves no room, which the next
//! `seckill reconcile` rebuilds whole (every step writes again what it
//! wrote).
//!
//! Any other room is opened new and empty, as at the voucher's creation,
//! and [`StartedOver`] says why: no beacon and not revealed, with its seed
//! not sealed in the log, or sealed but no key given or a key that does not
//! open it (the seed was Redis's secret); or a log that does not add up.

use std::fmt;

use redis::RedisResult;
use seckill_core::queue::{self, QueueSettings};
use seckill_core::{UserId, VoucherId};

use crate::gate::unexpected;
use crate::room_history::RoomHistory;
use crate::room_rebuild::{Placed, RoomRebuild, AFTER_START};
use crate::room_revealed::revealed;
use crate::Gate;

/// Most places one `queue_restore.lua` call writes: about what one
/// `queue_advance.lua` call keys ([`crate::MOST_PLACES_PER_ADVANCE`]), a
/// call of about 10 ms; the script refuses a longer step.
pub const MOST_PLACES_PER_RESTORE: usize = 1_000;

/// What became of a queue-mode voucher's waiting room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoomRestored {
    /// Redis still had it: untouched.
    Kept,
    /// Opened new and empty, as at the voucher's creation: the log's
    /// `pre_queue` and `after_start` places are not brought back (`why`).
    StartedOver { why: StartedOver, pre_queue: u64, after_start: u64 },
    /// A beacon room rebuilt from the log before its reveal, waiting for
    /// its round again: `pre_queue` places unkeyed, `after_start` by seq.
    Rebuilt { pre_queue: u64, after_start: u64 },
    /// A room without a beacon rebuilt from the log before its reveal with
    /// the seed opened from its sealed commitment: `pre_queue` places keyed
    /// as before, `after_start` by seq.
    RebuiltSealed { pre_queue: u64, after_start: u64 },
    /// A room rebuilt from the log after its reveal, in the order revealed,
    /// serving on from where it stood: `served` places had an entry
    /// (`spent` of them on an order), `skipped` were passed idle.
    RebuiltServing { pre_queue: u64, after_start: u64, served: u64, spent: u64, skipped: u64 },
}

/// Why a lost room was opened new and empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartedOver {
    /// The log holds no place in it: nothing was lost.
    NoPlaces,
    /// No beacon, not revealed, and the log's commitment does not hold the
    /// seed sealed (the ingresses had no seal key): its order's seed was
    /// Redis's secret.
    NoBeacon,
    /// No beacon, not revealed, its seed sealed in the log, but no seal key
    /// was given to open it.
    NoSealKey,
    /// No beacon, not revealed, its seed sealed in the log, but the seal key
    /// given does not open it (another key than the ingresses').
    WrongSealKey,
    /// Revealed, but the log's places do not add up (records lost before
    /// they were logged): its places cannot be told.
    Gaps,
}

/// `seckill reconcile`'s line for the room (after the voucher's id).
impl fmt::Display for RoomRestored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Kept => write!(f, "room kept: Redis still had it"),
            Self::StartedOver { why: StartedOver::NoPlaces, .. } => {
                write!(f, "room opened new: the log holds no place in it")
            }
            Self::StartedOver { why, pre_queue, after_start } => {
                let why = match why {
                    StartedOver::NoBeacon => {
                        "no beacon, not revealed, its seed not sealed in the log: its order's seed was Redis's secret"
                    }
                    StartedOver::NoSealKey => {
                        "no beacon, not revealed: its seed is sealed in the log, but no seal key was given \
                         ([draw] seal_key)"
                    }
                    StartedOver::WrongSealKey => {
                        "no beacon, not revealed: the seal key given ([draw] seal_key) does not open its sealed seed"
                    }
                    StartedOver::NoPlaces | StartedOver::Gaps => "revealed, but the log's places do not add up",
                };
                write!(
                    f,
                    "room started over empty ({why}): {pre_queue} pre-queue places and {after_start} later joins \
                     in the log not brought back"
                )
            }
            Self::Rebuilt { pre_queue, after_start } => write!(
                f,
                "room rebuilt from the log before its reveal: {pre_queue} pre-queue places (keyed again once its \
                 beacon round is in) and {after_start} later joins"
            ),
            Self::RebuiltSealed { pre_queue, after_start } => write!(
                f,
                "room rebuilt from the log before its reveal with the seed it committed to (opened from its seal): \
                 {pre_queue} pre-queue places keyed as before and {after_start} later joins"
            ),
            Self::RebuiltServing { pre_queue, after_start, served, spent, skipped } => write!(
                f,
                "room rebuilt from the log after its reveal: {pre_queue} pre-queue places in the order revealed and \
                 {after_start} later joins; {served} served ({spent} spent), {skipped} skipped"
            ),
        }
    }
}

/// A beacon room not revealed yet: its pre-queue unkeyed (-1, keyed again
/// once the round is in), its joins after the start by seq, every place
/// waiting, under a fresh seed the ingresses commit to.
fn unrevealed(history: &RoomHistory) -> RoomRebuild {
    let waiting =
        |score: String, user: &UserId| Placed { score, user: user.to_string(), attempt: 1, value: "1|w||".to_owned() };
    let places = history
        .pre_queue
        .iter()
        .map(|user| waiting("-1".to_owned(), user))
        .chain(history.after_start.iter().map(|(seq, user)| waiting((AFTER_START + seq).to_string(), user)))
        .collect();
    RoomRebuild { places, holds: Vec::new(), seed: queue::new_seed(), fields: Vec::new() }
}

/// A room without a beacon not revealed yet, under `seed`, the seed its
/// commitment sealed: its pre-queue keyed as `lua/queue_join.lua` keyed it
/// (`queue::shuffle_key`), its joins after the start by seq, every place
/// waiting, the seed committed already (the log holds its hash).
fn sealed(history: &RoomHistory, seed: &str) -> RoomRebuild {
    let waiting = |score: u64, user: &UserId| Placed {
        score: score.to_string(),
        user: user.to_string(),
        attempt: 1,
        value: "1|w||".to_owned(),
    };
    let places = history
        .pre_queue
        .iter()
        .map(|user| waiting(queue::shuffle_key(seed, user), user))
        .chain(history.after_start.iter().map(|(seq, user)| waiting(AFTER_START + seq, user)))
        .collect();
    RoomRebuild { places, holds: Vec::new(), seed: seed.to_owned(), fields: vec![("committed", "1".to_owned())] }
}

/// Why a room without a beacon, not revealed, whose seed was not opened,
/// cannot come back.
fn unopened(history: &RoomHistory) -> StartedOver {
    match (history.sealed(), history.key_tried()) {
        (false, _) => StartedOver::NoBeacon,
        (true, false) => StartedOver::NoSealKey,
        (true, true) => StartedOver::WrongSealKey,
    }
}

impl Gate {
    /// Brings `voucher`'s waiting room back after its voucher was restored.
    pub(crate) async fn restore_room(
        &self,
        voucher: VoucherId,
        settings: &QueueSettings,
        history: &RoomHistory,
    ) -> RedisResult<RoomRestored> {
        let pre_queue = history.pre_queue.len() as u64;
        let after_start = history.after_start.len() as u64;
        let rebuild = match &settings.beacon {
            _ if pre_queue + after_start == 0 => Err(StartedOver::NoPlaces),
            _ if history.revealed => revealed(history, settings.token_seconds).ok_or(StartedOver::Gaps),
            None => history.opened_seed().map(|seed| sealed(history, seed)).ok_or_else(|| unopened(history)),
            Some(_) => Ok(unrevealed(history)),
        };
        let rebuild = match rebuild {
            Ok(rebuild) => rebuild,
            Err(why) => {
                let existed = self.room(voucher).await?.is_some();
                self.open_room_with(voucher, settings).await?;
                return Ok(if existed {
                    RoomRestored::Kept
                } else {
                    RoomRestored::StartedOver { why, pre_queue, after_start }
                });
            }
        };
        if !self.write_room(voucher, settings, &rebuild).await? {
            return Ok(RoomRestored::Kept);
        }
        self.list_room(voucher).await?;
        tracing::info!(%voucher, pre_queue, after_start, revealed = history.revealed, "A waiting room Redis lost was rebuilt from the log.");
        if !history.revealed {
            return Ok(if settings.beacon.is_some() {
                RoomRestored::Rebuilt { pre_queue, after_start }
            } else {
                RoomRestored::RebuiltSealed { pre_queue, after_start }
            });
        }
        let spent = history.used.len() as u64;
        let served = history.issued.len() as u64;
        let skipped = history.skipped.len() as u64;
        Ok(RoomRestored::RebuiltServing { pre_queue, after_start, served, spent, skipped })
    }

    /// Writes `rebuild` step by step, the room last; false when the room
    /// is there (Redis had it, or an ingress opened it meanwhile).
    async fn write_room(
        &self,
        voucher: VoucherId,
        settings: &QueueSettings,
        rebuild: &RoomRebuild,
    ) -> RedisResult<bool> {
        for step in rebuild.places.chunks(MOST_PLACES_PER_RESTORE) {
            let mut call = self.queue_restore_call(voucher, "places");
            for placed in step {
                call.arg(&placed.score).arg(&placed.user).arg(placed.attempt).arg(&placed.value);
            }
            if !self.run_queue_restore(call).await? {
                return Ok(false);
            }
        }
        for step in rebuild.holds.chunks(MOST_PLACES_PER_RESTORE) {
            let mut call = self.queue_restore_call(voucher, "holds");
            for (entry, until) in step {
                call.arg(entry).arg(until);
            }
            if !self.run_queue_restore(call).await? {
                return Ok(false);
            }
        }
        let (round, chain) = match &settings.beacon {
            Some(plan) => (
                plan.round.to_string(),
                serde_json::to_string(&plan.chain).map_err(|e| unexpected("a beacon chain", e.to_string()))?,
            ),
            None => (String::new(), String::new()),
        };
        let mut call = self.queue_restore_call(voucher, "room");
        call.arg(&rebuild.seed)
            .arg(queue::new_seed())
            .arg(settings.opens_at.timestamp_millis())
            .arg(settings.factor_percent)
            .arg(settings.entry_rate)
            .arg(u64::from(settings.idle_seconds) * 1000)
            .arg(u64::from(settings.token_seconds) * 1000)
            .arg(round)
            .arg(chain);
        for (field, value) in &rebuild.fields {
            call.arg(*field).arg(value);
        }
        self.run_queue_restore(call).await
    }

    fn queue_restore_call(&self, voucher: VoucherId, step: &str) -> redis::ScriptInvocation<'_> {
        let keys = self.keys(voucher);
        let staged = |key: &str| format!("{key}:restoring");
        let mut invocation = self.scripts.queue_restore.prepare_invoke();
        invocation
            .key(&keys.voucher)
            .key(&keys.room)
            .key(&keys.line)
            .key(&keys.places)
            .key(&keys.seen)
            .key(&keys.holds)
            .key(staged(&keys.line))
            .key(staged(&keys.places))
            .key(staged(&keys.seen))
            .key(staged(&keys.holds))
            .arg(step)
            .arg(self.ended_sale_ttl_ms);
        invocation
    }

    /// Runs one step; false when the room is there (or the voucher is not).
    async fn run_queue_restore(&self, call: redis::ScriptInvocation<'_>) -> RedisResult<bool> {
        let answer: String = self.timed("queue_restore", call.invoke_async(&mut self.redis.clone())).await?;
        match answer.as_str() {
            "written" => Ok(true),
            "exists" | "unknown" => Ok(false),
            _ => Err(unexpected("queue_restore.lua answered", answer)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(prefix: &str, count: usize) -> impl Iterator<Item = UserId> + '_ {
        (0..count).map(move |i| UserId::parse(&format!("{prefix}{i:05}")).expect("valid"))
    }

    #[test]
    fn an_unrevealed_room_is_its_pre_queue_unkeyed_then_its_joins_by_seq() {
        let mut history = RoomHistory::default();
        history.pre_queue.extend(users("p", 2));
        history.after_start.insert(7, UserId::parse("late").expect("valid"));
        let rebuild = unrevealed(&history);
        let line: Vec<(&str, &str, &str)> =
            rebuild.places.iter().map(|p| (p.score.as_str(), p.user.as_str(), p.value.as_str())).collect();
        let late = (AFTER_START + 7).to_string();
        assert_eq!(line, [("-1", "p00000", "1|w||"), ("-1", "p00001", "1|w||"), (late.as_str(), "late", "1|w||")]);
        assert!(rebuild.holds.is_empty() && rebuild.fields.is_empty());
        assert!(queue::is_seed(&rebuild.seed), "a fresh seed, for the ingresses to commit");
    }

    #[test]
    fn a_sealed_room_is_its_pre_queue_keyed_by_its_seed_then_its_joins_by_seq() {
        let mut history = RoomHistory::default();
        history.pre_queue.extend(users("p", 2));
        history.after_start.insert(3, UserId::parse("late").expect("valid"));
        let seed = queue::new_seed();
        let rebuild = sealed(&history, &seed);
        let key = |user: &str| queue::shuffle_key(&seed, &UserId::parse(user).expect("valid")).to_string();
        let line: Vec<(String, &str, &str)> =
            rebuild.places.iter().map(|p| (p.score.clone(), p.user.as_str(), p.value.as_str())).collect();
        let late = (AFTER_START + 3).to_string();
        assert_eq!(
            line,
            [(key("p00000"), "p00000", "1|w||"), (key("p00001"), "p00001", "1|w||"), (late, "late", "1|w||")]
        );
        assert_eq!(rebuild.seed, seed, "the seed committed to");
        assert_eq!(rebuild.fields, [("committed", "1".to_owned())], "its hash is in the log already");
        assert!(rebuild.holds.is_empty());
    }

    #[test]
    fn an_unopened_seed_says_whether_it_was_sealed_and_a_key_tried() {
        use seckill_core::event::{Event, QueueSeedCommitted};
        use seckill_core::sealed_seed;

        let voucher = VoucherId::generate();
        let seed = queue::new_seed();
        let key = b"the operator's key, 32 characters".as_slice();
        let committed = |sealed_seed| {
            Event::QueueSeedCommitted(QueueSeedCommitted {
                voucher_id: voucher,
                seed_hash: queue::seed_commitment(&seed),
                sealed_seed,
            })
        };
        let mut unsealed = RoomHistory::default();
        unsealed.apply(uuid::Uuid::now_v7(), &committed(None));
        unsealed.open_sealed_seed(voucher, key);
        assert_eq!(unopened(&unsealed), StartedOver::NoBeacon);
        let mut history = RoomHistory::default();
        history.apply(uuid::Uuid::now_v7(), &committed(sealed_seed::seal(key, voucher, &seed)));
        assert_eq!(unopened(&history), StartedOver::NoSealKey);
        assert!(!history.open_sealed_seed(voucher, b"another key"));
        assert_eq!(unopened(&history), StartedOver::WrongSealKey);
        assert!(history.open_sealed_seed(voucher, key));
        assert_eq!(history.opened_seed(), Some(seed.as_str()));
    }

    #[test]
    fn reconcile_says_what_became_of_the_room_with_its_counts() {
        let rebuilt = RoomRestored::Rebuilt { pre_queue: 1200, after_start: 3 };
        assert_eq!(
            rebuilt.to_string(),
            "room rebuilt from the log before its reveal: 1200 pre-queue places (keyed again once its beacon round \
             is in) and 3 later joins"
        );
        let serving = RoomRestored::RebuiltServing { pre_queue: 9, after_start: 2, served: 4, spent: 1, skipped: 1 };
        assert_eq!(
            serving.to_string(),
            "room rebuilt from the log after its reveal: 9 pre-queue places in the order revealed and 2 later joins; \
             4 served (1 spent), 1 skipped"
        );
        let lost = RoomRestored::StartedOver { why: StartedOver::NoBeacon, pre_queue: 4, after_start: 1 };
        assert_eq!(
            lost.to_string(),
            "room started over empty (no beacon, not revealed, its seed not sealed in the log: its order's seed was \
             Redis's secret): 4 pre-queue places and 1 later joins in the log not brought back"
        );
        let unkeyed = RoomRestored::StartedOver { why: StartedOver::NoSealKey, pre_queue: 4, after_start: 0 };
        assert!(unkeyed.to_string().contains("sealed in the log, but no seal key was given"), "{unkeyed}");
        let wrong = RoomRestored::StartedOver { why: StartedOver::WrongSealKey, pre_queue: 4, after_start: 0 };
        assert!(wrong.to_string().contains("does not open its sealed seed"), "{wrong}");
        let sealed = RoomRestored::RebuiltSealed { pre_queue: 30, after_start: 2 };
        assert_eq!(
            sealed.to_string(),
            "room rebuilt from the log before its reveal with the seed it committed to (opened from its seal): 30 \
             pre-queue places keyed as before and 2 later joins"
        );
        let gaps = RoomRestored::StartedOver { why: StartedOver::Gaps, pre_queue: 2, after_start: 0 };
        assert!(gaps.to_string().contains("the log's places do not add up"), "{gaps}");
        assert_eq!(RoomRestored::Kept.to_string(), "room kept: Redis still had it");
    }
}
