//! The waiting room of a queue-mode sale, kept in Redis under the voucher's
//! hash tag (`lua/queue_*.lua` say what each key holds): opening it, taking
//! a place, moving it on, reading a place, keeping watched places alive.
//!
//! Every change a user could dispute (a join, the seed's reveal, an entry
//! issued, a place skipped) is appended to the outbox in the script that
//! makes it, so the log has it exactly when Redis does, in the order Redis
//! made them. Only the seed's commitment is logged by the caller, before
//! the room takes its first join (`Gate::seed_committed`).

use chrono::{DateTime, Utc};
use seckill_core::event::{Event, QueueJoined, VoucherCreated, SCHEMA_VERSION};
use seckill_core::queue::{self, QueueSettings};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use uuid::Uuid;

use crate::admission::Proof;
use crate::gate::{encoded_without, millis, unexpected};
use crate::keys::rooms_key;
use crate::{Gate, Rejection};

/// Most places one `queue_advance.lua` call passes (served or skipped): a
/// call's time in Redis stays short; the caller calls again while a call
/// used all of it.
pub const MOST_PLACES_PER_ADVANCE: u64 = 1_000;
/// Most users marked watched per `queue_seen.lua` call.
const MOST_SEEN_PER_CALL: usize = 1_000;

/// A room as Redis holds it.
#[derive(Clone, PartialEq, Eq)]
pub struct Room {
    /// The shuffle's secret seed (public once the sale begins).
    pub seed: String,
    /// The key entry tokens are signed with.
    pub token_key: String,
    /// The seed's hash is in the log: the room takes joins.
    pub committed: bool,
    /// A draw's (`crate::draw`), not a waiting room's.
    pub draw: bool,
}

impl std::fmt::Debug for Room {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Room").field("committed", &self.committed).finish_non_exhaustive()
    }
}

/// What a join did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Joined {
    /// A new place (its `QueueJoined` is in the outbox).
    Placed { attempt: u32 },
    /// The user holds a place already; nothing changed.
    Held { attempt: u32 },
    /// A new place (`placed`) or the one held, that no Redis replica
    /// acknowledged in time (`redis.replica_acks`): it may be lost with the
    /// master, so it is no promise. Joining again answers `Held` once a
    /// replica has it, or takes a place anew if it was lost.
    Unacknowledged { placed: bool },
    /// The outbox is full (the log is down); nothing changed.
    Backlogged,
    /// No queue-mode voucher of that id.
    UnknownVoucher,
    /// Before the room opens (or before its seed is committed).
    NotOpen { opens_at: Option<DateTime<Utc>> },
    /// The sale is over.
    Ended,
    /// The proof of work was missing, too easy, expired or spent.
    Challenge(Rejection),
}

/// Where a room stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoomState {
    Unknown,
    /// The seed's hash is not in the log yet.
    Uncommitted,
    /// The sale has not begun: places are taken, none served.
    Before,
    /// Serving as units and the rate allow.
    Open,
    /// Nothing left; places keep their rank for units coming back.
    SoldOut,
    Paused,
    Ended,
    /// The outbox is full: nothing served until the log is back.
    Backlog,
    /// A draw taking entries.
    Entering,
    /// A beacon draw whose entries closed, waiting for its beacon round
    /// (`Gate::apply_beacon`): nothing is ranked until it comes.
    AwaitingBeacon,
    /// A draw whose entries closed and whose ranking is being made and
    /// logged: nobody has won yet.
    Ranking,
}

impl RoomState {
    fn parse(code: &str) -> Option<Self> {
        Some(match code {
            "unknown" => Self::Unknown,
            "uncommitted" => Self::Uncommitted,
            "before" => Self::Before,
            "open" => Self::Open,
            "sold_out" => Self::SoldOut,
            "paused" => Self::Paused,
            "ended" => Self::Ended,
            "backlog" => Self::Backlog,
            "entering" => Self::Entering,
            "awaiting_beacon" => Self::AwaitingBeacon,
            "ranking" => Self::Ranking,
            _ => return None,
        })
    }
}

/// One `queue_advance.lua` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoomSummary {
    pub state: RoomState,
    /// Places passed (served or skipped): the serving number.
    pub cursor: u64,
    /// Places ever taken.
    pub places: u64,
    /// Entries ever issued.
    pub issued: u64,
    /// Entries open (issued, unused, unexpired).
    pub open: u64,
    /// Units the gate still admits.
    pub remaining: u64,
    /// Places taken before the start (None before it).
    pub pre_queued: Option<u64>,
    /// Served and skipped by this call (for a draw, `served_now` counts
    /// the users this call keyed, ranked or passed, `skipped_now` the wins
    /// it gave).
    pub served_now: u64,
    pub skipped_now: u64,
    /// The Redis clock.
    pub now: DateTime<Utc>,
    /// A draw's winners at the draw (None before it, and for a room).
    pub selected: Option<u64>,
}

impl RoomSummary {
    /// Reads the answer of `script` (queue_advance.lua and draw_advance.lua
    /// answer alike).
    pub(crate) fn parse(script: &'static str, reply: Vec<String>) -> redis::RedisResult<Self> {
        let [state, cursor, places, issued, open, remaining, pre_queued, served_now, skipped_now, now, selected] =
            <[String; 11]>::try_from(reply).map_err(|r| unexpected(script, format!("answered {r:?}")))?;
        let state = RoomState::parse(&state).ok_or_else(|| unexpected(script, format!("state {state}")))?;
        let number = |text: &str| text.parse::<u64>().unwrap_or_default();
        Ok(Self {
            state,
            cursor: number(&cursor),
            places: number(&places),
            issued: number(&issued),
            open: number(&open),
            remaining: number(&remaining),
            pre_queued: pre_queued.parse().ok(),
            served_now: number(&served_now),
            skipped_now: number(&skipped_now),
            now: millis(now.parse().unwrap_or_default()),
            selected: selected.parse().ok(),
        })
    }
}

/// Where a user's place stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlaceState {
    Waiting,
    /// The place's turn came: `entry` admits one order until `expires_at`.
    Served {
        entry: u64,
        expires_at: DateTime<Utc>,
    },
    /// The entry admitted `order`.
    Used {
        entry: u64,
        order: Option<OrderId>,
    },
    /// Skipped: its holder had stopped watching when its turn came.
    Expired,
}

/// A user's place, as read (and so kept alive) by its holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The user's how-many-th place in this room.
    pub attempt: u32,
    pub state: PlaceState,
    /// The place's number (1 is served first); None for a pre-queue place
    /// before the seed is revealed.
    pub number: Option<u64>,
    /// The room's serving number.
    pub cursor: u64,
    pub now: DateTime<Utc>,
}

impl Place {
    /// A place served whose entry's time is over reads as expired.
    pub fn lapsed(&self) -> bool {
        matches!(self.state, PlaceState::Served { expires_at, .. } if expires_at <= self.now)
    }
}

impl Gate {
    /// Opens `definition`'s waiting room unless it is open (then returns it
    /// as it is), and lists it among the rooms every ingress moves on.
    pub async fn open_room(&self, definition: &VoucherCreated) -> redis::RedisResult<Option<Room>> {
        match (&definition.queue, &definition.draw) {
            (Some(settings), _) => self.open_room_with(definition.voucher_id, settings).await,
            (None, Some(settings)) => self.open_draw_with(definition.voucher_id, settings).await,
            (None, None) => Ok(None),
        }
    }

    /// Opens `voucher`'s room with `settings` unless it is open.
    pub(crate) async fn open_room_with(
        &self,
        voucher: VoucherId,
        settings: &QueueSettings,
    ) -> redis::RedisResult<Option<Room>> {
        let keys = self.keys(voucher);
        // A planned beacon round: the pre-queue's shuffle waits for it.
        let (round, chain) = match &settings.beacon {
            Some(plan) => (
                plan.round.to_string(),
                serde_json::to_string(&plan.chain).map_err(|e| unexpected("a beacon chain", e.to_string()))?,
            ),
            None => (String::new(), String::new()),
        };
        let (seed, token_key, committed): (String, String, String) = self
            .scripts
            .queue_open
            .key(&keys.voucher)
            .key(&keys.room)
            .arg("open")
            .arg(queue::new_seed())
            .arg(queue::new_seed())
            .arg(settings.opens_at.timestamp_millis())
            .arg(settings.factor_percent)
            .arg(settings.entry_rate)
            .arg(u64::from(settings.idle_seconds) * 1000)
            .arg(u64::from(settings.token_seconds) * 1000)
            .arg(self.ended_sale_ttl_ms)
            .arg(round)
            .arg(chain)
            .invoke_async(&mut self.redis.clone())
            .await?;
        if seed.is_empty() {
            return Ok(None);
        }
        self.list_room(voucher).await?;
        Ok(Some(Room { seed, token_key, committed: committed == "1", draw: false }))
    }

    /// Lists `voucher` among the rooms (and draws) every ingress moves on.
    pub(crate) async fn list_room(&self, voucher: VoucherId) -> redis::RedisResult<()> {
        redis::cmd("SADD")
            .arg(rooms_key(&self.prefix))
            .arg(voucher.to_string())
            .query_async::<()>(&mut self.redis.clone())
            .await
    }

    /// Marks `seed` committed: its hash is in the log, the room takes joins.
    pub async fn seed_committed(&self, voucher: VoucherId, seed: &str) -> redis::RedisResult<()> {
        let keys = self.keys(voucher);
        let _: Vec<String> = self
            .scripts
            .queue_open
            .key(&keys.voucher)
            .key(&keys.room)
            .arg("committed")
            .arg(seed)
            .invoke_async(&mut self.redis.clone())
            .await?;
        Ok(())
    }

    /// `voucher`'s room as Redis has it (None: no room, or its sale's keys
    /// expired).
    pub async fn room(&self, voucher: VoucherId) -> redis::RedisResult<Option<Room>> {
        let (seed, token_key, committed, kind): (Option<String>, Option<String>, Option<String>, Option<String>) =
            redis::cmd("HMGET")
                .arg(self.keys(voucher).room)
                .arg(&["seed", "token_key", "committed", "kind"])
                .query_async(&mut self.redis.clone())
                .await?;
        Ok(seed.zip(token_key).map(|(seed, token_key)| Room {
            seed,
            token_key,
            committed: committed.as_deref() == Some("1"),
            draw: kind.as_deref() == Some("draw"),
        }))
    }

    /// The vouchers with a waiting room (some may have ended).
    pub async fn rooms(&self) -> redis::RedisResult<Vec<VoucherId>> {
        let members: Vec<String> =
            redis::cmd("SMEMBERS").arg(rooms_key(&self.prefix)).query_async(&mut self.redis.clone()).await?;
        Ok(members.iter().filter_map(|member| member.parse().ok()).collect())
    }

    /// Takes `voucher` off the rooms list (its keys expired).
    pub async fn forget_room(&self, voucher: VoucherId) -> redis::RedisResult<()> {
        redis::cmd("SREM")
            .arg(rooms_key(&self.prefix))
            .arg(voucher.to_string())
            .query_async(&mut self.redis.clone())
            .await
    }

    /// `user` takes a place in `voucher`'s room (or keeps the one held).
    pub async fn join_queue(
        &self,
        voucher: VoucherId,
        user: &UserId,
        proof: Option<&Proof>,
    ) -> redis::RedisResult<Joined> {
        let keys = self.keys(voucher);
        let outbox = self.outbox_of(&keys).to_owned();
        // pre_queue, seq and attempt are the script's to add.
        let record = Envelope::new(Event::QueueJoined(QueueJoined {
            voucher_id: voucher,
            user_id: user.clone(),
            joined_at: seckill_core::clock::now(),
            pre_queue: true,
            seq: None,
            attempt: 1,
        }));
        let encoded = encoded_without(&record, &["pre_queue", "seq", "attempt"])?;
        let mut invocation = self.scripts.queue_join.prepare_invoke();
        invocation
            .key(&keys.voucher)
            .key(&keys.room)
            .key(&keys.line)
            .key(&keys.places)
            .key(&keys.seen)
            .key(&keys.solved)
            .key(&outbox)
            .arg(user.as_str())
            .arg(encoded)
            .arg(voucher.to_string())
            .arg(self.outbox_limit)
            .arg(proof.map(|proof| proof.nonce.as_str()).unwrap_or_default())
            .arg(proof.map_or(0, |proof| proof.bits))
            .arg(proof.map_or(0, |proof| proof.expires_ms));
        // A place is a promise, as an admission is: behind a replica's
        // acknowledgement where Redis has replicas.
        let ((code, detail, _state), acknowledged): ((String, String, String), bool) =
            self.invoke_acknowledged("queue_join", Gate::room_slot(voucher), &invocation).await?;
        let number = |text: &str| text.parse::<u32>().unwrap_or(1);
        let bits = || detail.parse().unwrap_or_default();
        Ok(match code.as_str() {
            "joined" => {
                self.touch_outbox(&outbox);
                if !acknowledged {
                    return Ok(Joined::Unacknowledged { placed: true });
                }
                Joined::Placed { attempt: number(&detail) }
            }
            "held" if !acknowledged => Joined::Unacknowledged { placed: false },
            "held" => Joined::Held { attempt: number(&detail) },
            "backlog_full" => Joined::Backlogged,
            "unknown_voucher" => Joined::UnknownVoucher,
            "not_open" => Joined::NotOpen { opens_at: detail.parse().ok().map(millis) },
            "ended" => Joined::Ended,
            "challenge_required" => Joined::Challenge(Rejection::ChallengeRequired { bits: bits() }),
            "challenge_too_easy" => Joined::Challenge(Rejection::ChallengeTooEasy { bits: bits() }),
            "challenge_expired" => Joined::Challenge(Rejection::ChallengeExpired),
            "challenge_used" => Joined::Challenge(Rejection::ChallengeUsed),
            other => return Err(unexpected("queue_join.lua returned an unknown code", other.to_owned())),
        })
    }

    /// Moves `voucher`'s room on (serves the next places as units and the
    /// rate allow; reveals the seed at the start) and says where it stands.
    pub async fn advance_room(&self, voucher: VoucherId) -> redis::RedisResult<RoomSummary> {
        let keys = self.keys(voucher);
        let outbox = self.outbox_of(&keys).to_owned();
        let mut invocation = self.scripts.queue_advance.prepare_invoke();
        invocation
            .key(&keys.voucher)
            .key(&keys.room)
            .key(&keys.line)
            .key(&keys.places)
            .key(&keys.seen)
            .key(&keys.holds)
            .key(&outbox)
            .arg(Uuid::now_v7().to_string())
            .arg(voucher.to_string())
            .arg(self.outbox_limit)
            .arg(MOST_PLACES_PER_ADVANCE)
            .arg(SCHEMA_VERSION);
        let reply: Vec<String> = self.timed("queue_advance", invocation.invoke_async(&mut self.redis.clone())).await?;
        let summary = RoomSummary::parse("queue_advance.lua", reply)?;
        let state = summary.state;
        if summary.served_now + summary.skipped_now > 0 || state == RoomState::Open && summary.cursor == 0 {
            self.touch_outbox(&outbox);
        }
        Ok(summary)
    }

    /// `user`'s place in `voucher`'s room (None: never joined), read as its
    /// holder watching it: a waiting place is marked seen.
    pub async fn place(&self, voucher: VoucherId, user: &UserId) -> redis::RedisResult<Option<Place>> {
        let keys = self.keys(voucher);
        let mut invocation = self.scripts.queue_status.prepare_invoke();
        invocation.key(&keys.room).key(&keys.line).key(&keys.places).key(&keys.seen).arg(user.as_str());
        let (place, rank, cursor, revealed, now): (String, i64, String, String, String) =
            self.timed("queue_status", invocation.invoke_async(&mut self.redis.clone())).await?;
        if place.is_empty() {
            return Ok(None);
        }
        let now = millis(now.parse().unwrap_or_default());
        let mut fields = place.splitn(4, '|');
        let (attempt, state, entry, extra) =
            (fields.next(), fields.next(), fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        let entry_number = || entry.parse::<u64>().map_err(|_| unexpected("a place's entry", place.clone()));
        let state = match state {
            Some("w") => PlaceState::Waiting,
            Some("s") => PlaceState::Served {
                entry: entry_number()?,
                expires_at: millis(extra.parse().map_err(|_| unexpected("an entry's expiry", place.clone()))?),
            },
            Some("u") => PlaceState::Used { entry: entry_number()?, order: extra.parse().ok() },
            Some("x") => PlaceState::Expired,
            _ => return Err(unexpected("queue_status.lua read an unknown place", place)),
        };
        // Before the reveal a pre-queue place's rank would leak the shuffle.
        let shown = u64::try_from(rank).ok().map(|rank| rank + 1).filter(|_| revealed == "1");
        Ok(Some(Place {
            attempt: attempt.and_then(|a| a.parse().ok()).unwrap_or(1),
            state,
            number: shown,
            cursor: cursor.parse().unwrap_or_default(),
            now,
        }))
    }

    /// Marks the waiting places of `users` watched now (their holders keep
    /// a stream open on this process).
    pub async fn mark_seen(&self, voucher: VoucherId, users: &[UserId]) -> redis::RedisResult<u64> {
        let keys = self.keys(voucher);
        let mut marked = 0;
        for chunk in users.chunks(MOST_SEEN_PER_CALL) {
            let mut invocation = self.scripts.queue_seen.prepare_invoke();
            invocation.key(&keys.places).key(&keys.seen);
            for user in chunk {
                invocation.arg(user.as_str());
            }
            let count: u64 = self.timed("queue_seen", invocation.invoke_async(&mut self.redis.clone())).await?;
            marked += count;
        }
        Ok(marked)
    }

    /// Lets this process's relay know `outbox` has new entries (a cluster
    /// has one outbox per voucher).
    pub(crate) fn touch_outbox(&self, outbox: &str) {
        if let (Some(hints), true) = (&self.hints, self.redis.is_cluster()) {
            hints.touch(outbox);
        }
    }
}
