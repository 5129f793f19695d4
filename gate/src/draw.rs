//! A draw sale, kept in Redis under the voucher's hash tag beside the
//! waiting rooms (`lua/draw_*.lua` say what each key holds): opening it,
//! entering it, moving it on (closing, ranking, publishing the ranking,
//! choosing and promoting winners), reading an entry.
//!
//! Every record a user could dispute is appended to the outbox by the
//! script that makes the change, as for the waiting room; only the seed's
//! commitment is logged by the caller, before the draw takes its first
//! entry (`Gate::seed_committed`).

use chrono::{DateTime, Utc};
use seckill_core::beacon::{BeaconPlan, BeaconRound};
use seckill_core::draw::{DrawSettings, RANK_CHUNK};
use seckill_core::event::{DrawEntered, Event, SCHEMA_VERSION};
use seckill_core::{queue, Envelope, OrderId, UserId, VoucherId};
use uuid::Uuid;

use crate::admission::Proof;
use crate::gate::{encoded_without, millis, unexpected};
use crate::room::{Room, RoomState, RoomSummary};
use crate::{Gate, Rejection};

/// What an entry did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entered {
    /// A new entry (its `DrawEntered` is in the outbox), the `seq`-th.
    New { seq: u64 },
    /// The user entered before; nothing changed.
    Held,
    /// A new entry (`entered`) or the one held, that no Redis replica
    /// acknowledged in time (`redis.replica_acks`): it may be lost with the
    /// master, so it is no promise. Entering again answers `Held` once a
    /// replica has it, or enters anew if it was lost.
    Unacknowledged { entered: bool },
    /// The outbox is full (the log is down); nothing changed.
    Backlogged,
    /// No draw-mode voucher of that id.
    UnknownVoucher,
    /// Before entries open (or before the seed is committed).
    NotOpen { opens_at: Option<DateTime<Utc>> },
    /// Entries closed at `draw_at`.
    Closed { draw_at: Option<DateTime<Utc>> },
    /// The proof of work was missing, too easy, expired or spent.
    Challenge(Rejection),
}

/// Where a user's entry stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryState {
    /// Entered; the draw is not made (or not logged) yet.
    Entered { seq: u64 },
    /// Drawn at `rank`, not (yet) a winner.
    Ranked { rank: u64 },
    /// A winner: may order once until `until`.
    Won { rank: u64, until: DateTime<Utc> },
    /// The win admitted `order`.
    Used { rank: u64, order: Option<OrderId> },
}

/// A user's entry and the draw's progress, read in one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// None: the user never entered.
    pub state: Option<EntryState>,
    /// Ranks that won so far (1..=cursor).
    pub cursor: u64,
    /// Ranks that won at the draw (None before it).
    pub selected: Option<u64>,
    pub entries: u64,
    /// The Redis clock.
    pub now: DateTime<Utc>,
    /// The draw's settings.
    pub entries_open_at: DateTime<Utc>,
    pub draw_at: DateTime<Utc>,
    pub purchase_seconds: u64,
}

impl Entry {
    /// Whether this is a win whose window is over, unused.
    pub fn lapsed(&self) -> bool {
        matches!(self.state, Some(EntryState::Won { until, .. }) if until <= self.now)
    }
}

impl Gate {
    /// Opens `voucher`'s draw with `settings` unless it is open.
    pub(crate) async fn open_draw_with(
        &self,
        voucher: VoucherId,
        settings: &DrawSettings,
    ) -> redis::RedisResult<Option<Room>> {
        let keys = self.keys(voucher);
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
            .arg("open_draw")
            .arg(queue::new_seed())
            .arg(queue::new_seed())
            .arg(settings.entries_open_at.timestamp_millis())
            .arg(settings.draw_at.timestamp_millis())
            .arg(u64::from(settings.purchase_seconds) * 1000)
            .arg(self.ended_sale_ttl_ms)
            .arg(round)
            .arg(chain)
            .invoke_async(&mut self.redis.clone())
            .await?;
        if seed.is_empty() {
            return Ok(None);
        }
        self.list_room(voucher).await?;
        Ok(Some(Room { seed, token_key, committed: committed == "1", draw: true }))
    }

    /// `user` enters `voucher`'s draw (or is told they did before),
    /// presenting `proof` when the voucher asks for one.
    pub async fn enter_draw(
        &self,
        voucher: VoucherId,
        user: &UserId,
        proof: Option<&Proof>,
    ) -> redis::RedisResult<Entered> {
        let keys = self.keys(voucher);
        let outbox = self.outbox_of(&keys).to_owned();
        // seq is the script's to add.
        let record = Envelope::new(Event::DrawEntered(DrawEntered {
            voucher_id: voucher,
            user_id: user.clone(),
            entered_at: seckill_core::clock::now(),
            seq: 1,
        }));
        let encoded = encoded_without(&record, &["seq"])?;
        let mut invocation = self.scripts.draw_enter.prepare_invoke();
        invocation
            .key(&keys.voucher)
            .key(&keys.room)
            .key(&keys.line)
            .key(&keys.places)
            .key(&keys.solved)
            .key(&outbox)
            .arg(user.as_str())
            .arg(encoded)
            .arg(voucher.to_string())
            .arg(self.outbox_limit)
            .arg(proof.map(|proof| proof.nonce.as_str()).unwrap_or_default())
            .arg(proof.map_or(0, |proof| proof.bits))
            .arg(proof.map_or(0, |proof| proof.expires_ms));
        // An entry is a promise, as an admission is: behind a replica's
        // acknowledgement where Redis has replicas.
        let ((code, detail), acknowledged): ((String, String), bool) =
            self.invoke_acknowledged("draw_enter", Gate::room_slot(voucher), &invocation).await?;
        let number = |text: &str| text.parse::<u64>().ok();
        let bits = || detail.parse().unwrap_or_default();
        Ok(match code.as_str() {
            "entered" => {
                self.touch_outbox(&outbox);
                if !acknowledged {
                    return Ok(Entered::Unacknowledged { entered: true });
                }
                Entered::New { seq: number(&detail).unwrap_or_default() }
            }
            "held" if !acknowledged => Entered::Unacknowledged { entered: false },
            "held" => Entered::Held,
            "backlog_full" => Entered::Backlogged,
            "unknown_voucher" => Entered::UnknownVoucher,
            "not_open" => Entered::NotOpen { opens_at: detail.parse().ok().map(millis) },
            "closed" => Entered::Closed { draw_at: detail.parse().ok().map(millis) },
            "challenge_required" => Entered::Challenge(Rejection::ChallengeRequired { bits: bits() }),
            "challenge_too_easy" => Entered::Challenge(Rejection::ChallengeTooEasy { bits: bits() }),
            "challenge_expired" => Entered::Challenge(Rejection::ChallengeExpired),
            "challenge_used" => Entered::Challenge(Rejection::ChallengeUsed),
            other => return Err(unexpected("draw_enter.lua returned an unknown code", other.to_owned())),
        })
    }

    /// Moves `voucher`'s draw on by one step (closing and revealing at
    /// `draw_at`, ranking, logging the ranking, choosing or promoting
    /// winners) and says where it stands. A call that did a whole step's
    /// work (`served_now` of [`RANK_CHUNK`]) leaves more to do.
    pub async fn advance_draw(&self, voucher: VoucherId) -> redis::RedisResult<RoomSummary> {
        let keys = self.keys(voucher);
        let outbox = self.outbox_of(&keys).to_owned();
        let mut invocation = self.scripts.draw_advance.prepare_invoke();
        invocation
            .key(&keys.voucher)
            .key(&keys.room)
            .key(&keys.line)
            .key(&keys.places)
            .key(&keys.ranks)
            .key(&keys.holds)
            .key(&outbox)
            .arg(Uuid::now_v7().to_string())
            .arg(voucher.to_string())
            .arg(self.outbox_limit)
            .arg(RANK_CHUNK)
            .arg(SCHEMA_VERSION);
        let reply: Vec<String> = self.timed("draw_advance", invocation.invoke_async(&mut self.redis.clone())).await?;
        let summary = RoomSummary::parse("draw_advance.lua", reply)?;
        if summary.served_now > 0 || summary.state == RoomState::Ranking {
            self.touch_outbox(&outbox);
        }
        Ok(summary)
    }

    /// The beacon round `voucher`'s draw (or waiting room) waits for (None:
    /// no such draw or room, no beacon planned, or its round is in already).
    pub async fn awaited_beacon(&self, voucher: VoucherId) -> redis::RedisResult<Option<BeaconPlan>> {
        let keys = self.keys(voucher);
        type Fields = (Option<String>, Option<String>, Option<String>, Option<String>, Option<String>, Option<String>);
        let (wait, phase, round, chain, kind, revealed): Fields = redis::cmd("HMGET")
            .arg(&keys.room)
            .arg(&["beacon_wait", "phase", "beacon_round", "beacon_chain", "kind", "revealed"])
            .query_async(&mut self.redis.clone())
            .await?;
        // draw_beacon.lua applies a round only while entering (a room's:
        // before its reveal); a draw restored past its reveal keeps the
        // flag and waits for nothing.
        let open = match kind.as_deref() {
            Some("draw") => phase.as_deref() == Some("entering"),
            _ => revealed.as_deref() != Some("1"),
        };
        if wait.as_deref() != Some("1") || !open {
            return Ok(None);
        }
        let round = round.and_then(|round| round.parse().ok());
        let chain = chain.and_then(|chain| serde_json::from_str(&chain).ok());
        Ok(round.zip(chain).map(|(round, chain)| BeaconPlan { chain, round }))
    }

    /// Puts `round` (fetched, its signature checked, `randomness` derived
    /// from it) in place of `voucher`'s draw seed, once entries closed; the
    /// next advance reveals it. Whether this call put it there.
    pub async fn apply_beacon(
        &self,
        voucher: VoucherId,
        round: &BeaconRound,
        randomness: &str,
    ) -> redis::RedisResult<bool> {
        let keys = self.keys(voucher);
        let code: String = self
            .scripts
            .draw_beacon
            .key(&keys.room)
            .arg(round.round)
            .arg(randomness)
            .arg(&round.signature)
            .invoke_async(&mut self.redis.clone())
            .await?;
        match code.as_str() {
            "applied" => Ok(true),
            "not_waiting" | "wrong_round" | "too_soon" => Ok(false),
            other => Err(unexpected("draw_beacon.lua returned an unknown code", other.to_owned())),
        }
    }

    /// `user`'s entry in `voucher`'s draw (None: no such draw).
    pub async fn draw_entry(&self, voucher: VoucherId, user: &UserId) -> redis::RedisResult<Option<Entry>> {
        let keys = self.keys(voucher);
        let mut invocation = self.scripts.draw_status.prepare_invoke();
        invocation.key(&keys.room).key(&keys.places).arg(user.as_str());
        let reply: Vec<String> = self.timed("draw_status", invocation.invoke_async(&mut self.redis.clone())).await?;
        let [place, phase, cursor, selected, entries, now, entries_ms, draw_ms, purchase_ms] =
            <[String; 9]>::try_from(reply).map_err(|r| unexpected("draw_status.lua answered", format!("{r:?}")))?;
        if phase.is_empty() {
            return Ok(None);
        }
        let time = |ms: &str| millis(ms.parse().unwrap_or_default());
        let state = if place.is_empty() { None } else { Some(entry_state(&place)?) };
        Ok(Some(Entry {
            state,
            cursor: cursor.parse().unwrap_or_default(),
            selected: selected.parse().ok(),
            entries: entries.parse().unwrap_or_default(),
            now: time(&now),
            entries_open_at: time(&entries_ms),
            draw_at: time(&draw_ms),
            purchase_seconds: purchase_ms.parse::<u64>().unwrap_or_default() / 1000,
        }))
    }
}

/// An entry as the places hash holds it: `1|<state>|<number>|<extra>`.
fn entry_state(place: &str) -> redis::RedisResult<EntryState> {
    let mut fields = place.splitn(4, '|').skip(1);
    let (state, number, extra) = (fields.next(), fields.next().unwrap_or(""), fields.next().unwrap_or(""));
    let number = number.parse::<u64>().map_err(|_| unexpected("an entry's number", place.to_owned()))?;
    Ok(match state {
        Some("e") => EntryState::Entered { seq: number },
        Some("r") => EntryState::Ranked { rank: number },
        Some("s") => EntryState::Won {
            rank: number,
            until: millis(extra.parse().map_err(|_| unexpected("a window's end", place.to_owned()))?),
        },
        Some("u") => EntryState::Used { rank: number, order: extra.parse().ok() },
        _ => return Err(unexpected("draw_status.lua read an unknown entry", place.to_owned())),
    })
}
