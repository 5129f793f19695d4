//! Rebuilding a draw Redis lost, from the log (`seckill reconcile`, after
//! [`Gate::restore`] rebuilt the voucher itself).
//!
//! The log holds every entry, and from the reveal on everything the draw
//! decided: the seed, the ranking, the winners and their windows, the
//! promotions, the wins spent, and the stalls that moved the windows' ends
//! (`WindowsExtended`): a window comes back ending where the log says. So a draw lost after its reveal comes back
//! exactly as it stood; the scripts then go on from it (promotions continue
//! at the next rank, a spent win stays spent). Before the reveal the entries
//! come back with their seqs and the list's hash, and the seed with them if
//! the log holds it sealed and the caller opened it
//! ([`DrawHistory::open_sealed_seed`]); otherwise the seed was Redis's secret
//! alone, the draw gets a new one whose commitment the ingresses log, and
//! `seckill draw verify` reports the second commitment.
//!
//! `lua/draw_restore.lua` writes only while the room is missing, into
//! staging keys it moves in with the room hash in its last, atomic step, so
//! a draw Redis still has is never touched, an ingress sees no draw until
//! all of it is back, and a draw opened meanwhile (a redelivered
//! `VoucherCreated` reaching an ingress between two steps) is left whole,
//! never mixed with half a rebuild.

use std::collections::HashMap;

use seckill_core::draw::{self, DrawSettings, RANK_CHUNK};
use seckill_core::{queue, UserId, VoucherId};

use crate::draw_history::DrawHistory;
use crate::Gate;

/// What became of a draw-mode voucher's draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrawRestored {
    /// Redis still had it: untouched.
    Kept,
    /// The log has nothing of it yet: opened new, as at the voucher's
    /// creation.
    Opened,
    /// The log's entries have gaps (records lost before they were logged):
    /// rebuilt from what the log holds, every logged entrant keeping their
    /// entry; `missing` entries are not in the log (`draw verify` reports
    /// the gap). After the ranking was logged whole, it names the missing
    /// entrants too, and they come back as well (`missing` 0).
    RebuiltWithGaps {
        /// As in [`DrawRestored::Rebuilt`].
        stage: &'static str,
        entries: u64,
        missing: u64,
    },
    /// Rebuilt from the log.
    Rebuilt {
        /// How far the draw had gone: `entering`, `ranking` (revealed, the
        /// logged ranking incomplete: ranked again from the entries),
        /// `ranked` (winners not chosen yet) or `drawn`.
        stage: &'static str,
        entries: u64,
        /// Wins given (at the draw and promoted since) and spent.
        wins: u64,
        wins_used: u64,
        /// The seed was lost with the draw (not revealed yet): a new one.
        new_seed: bool,
    },
}

/// One entrant's rebuilt place.
struct Placed {
    user: String,
    seq: u64,
    /// 0: not ranked (yet).
    rank: u64,
    /// The places hash's value (`lua/draw_restore.lua` lists the forms).
    value: String,
}

/// What the log says the draw is to be put back as.
struct Rebuild {
    stage: &'static str,
    places: Vec<Placed>,
    /// The wins not spent, with their window's end (ms).
    holds: Vec<(u64, i64)>,
    /// The room hash's fields.
    room: Vec<(&'static str, String)>,
    entries: u64,
    wins: u64,
    /// The seed is not the one the log committed to.
    new_seed: bool,
}

/// The entrants the log holds, in seq order, when its entries have gaps;
/// after a ranking logged whole, with the ranked users the entries miss
/// (their seq does not matter once ranked) after them. And how many the
/// draw had that the log does not name, and the highest seq it logged.
fn entrants_with_gaps(history: &DrawHistory) -> (Vec<UserId>, u64, u64) {
    let mut entrants: Vec<UserId> = history.entries.values().cloned().collect();
    if let Some(ranking) = history.ranking() {
        let logged: std::collections::HashSet<&UserId> = history.entries.values().collect();
        let unlogged: Vec<UserId> = ranking.iter().filter(|user| !logged.contains(user)).cloned().collect();
        entrants.extend(unlogged);
    }
    let last_seq = history.entries.keys().next_back().copied().unwrap_or(0);
    let had = history.reveal().map_or(last_seq, |reveal| reveal.entries).max(last_seq);
    let missing = had.saturating_sub(entrants.len() as u64);
    (entrants, missing, last_seq)
}

impl Rebuild {
    /// The draw of `history` (its entrants in seq order: `entrants`, every
    /// one, or on a log with gaps those it names) as far as the log took
    /// it.
    fn of(settings: &DrawSettings, history: &DrawHistory, entrants: &[UserId]) -> Self {
        let entries = entrants.len() as u64;
        let reveal = history.reveal();
        let ranking = history.ranking();
        let selection = history.selection();
        // Before the reveal: the seed the log committed to, if it was sealed
        // into the log and opened, else a new one to commit.
        let opened = history.opened_seed().filter(|_| reveal.is_none()).map(str::to_owned);
        let committed = reveal.is_some() || opened.is_some();
        let (stage, seed, chain) = match (reveal, &ranking, selection) {
            (None, _, _) => ("entering", opened.unwrap_or_else(queue::new_seed), draw::entries_hash(entrants)),
            (Some(reveal), None, _) => ("ranking", reveal.seed.clone(), reveal.entries_hash.clone()),
            (Some(reveal), Some(_), None) => ("ranked", reveal.seed.clone(), reveal.entries_hash.clone()),
            (Some(reveal), Some(_), Some(_)) => ("drawn", reveal.seed.clone(), reveal.entries_hash.clone()),
        };
        // Lost while the ranking was being logged, it is ranked again.
        let ranking = ranking.filter(|_| stage != "ranking");
        let (places, holds) = places(history, entrants, ranking.as_deref(), settings.purchase_seconds);

        let winners = selection.map_or(0, |selection| selection.winners);
        let promoted_to = history.promotions.keys().next_back().copied().unwrap_or(0);
        let cursor = if stage == "drawn" { winners.max(promoted_to) } else { 0 };
        let ranked = if matches!(stage, "ranked" | "drawn") { entries } else { 0 };
        let phase = match stage {
            "entering" | "ranking" => stage,
            _ => "drawn",
        };
        let mut room: Vec<(&'static str, String)> = vec![
            ("kind", "draw".to_owned()),
            ("seed", seed),
            ("token_key", queue::new_seed()),
            ("entries_ms", settings.entries_open_at.timestamp_millis().to_string()),
            ("draw_ms", settings.draw_at.timestamp_millis().to_string()),
            ("purchase_ms", (u64::from(settings.purchase_seconds) * 1000).to_string()),
            // A new seed waits for an ingress to log its commitment.
            ("committed", if committed { "1" } else { "0" }.to_owned()),
            ("phase", phase.to_owned()),
            ("entries", entries.to_string()),
            ("chain", chain),
            ("ranked", ranked.to_string()),
            ("published", ranked.to_string()),
            ("cursor", cursor.to_string()),
        ];
        if let (Some(selection), "drawn") = (selection, stage) {
            room.push(("selected", winners.to_string()));
            room.push(("selected_until", selection.purchase_until.timestamp_millis().to_string()));
        }
        Self { stage, places, holds, room, entries, wins: cursor, new_seed: !committed }
    }
}

/// Each entrant's place: entered; once ranked, its rank; once won, its
/// window (and a hold while unspent) or the order its win admitted.
fn places(
    history: &DrawHistory,
    entrants: &[UserId],
    ranking: Option<&[UserId]>,
    purchase_seconds: u32,
) -> (Vec<Placed>, Vec<(u64, i64)>) {
    let ranks: HashMap<&str, u64> =
        ranking.into_iter().flatten().zip(1u64..).map(|(user, rank)| (user.as_str(), rank)).collect();
    // Each window ends where the log says: as granted, moved by the
    // stalls logged since (the rebuilt window clock starts with none lost).
    let window_of = |rank: u64| history.window_of(rank, purchase_seconds).map(|end| end.timestamp_millis());
    let mut holds = Vec::new();
    let places = entrants
        .iter()
        .zip(1u64..)
        .map(|(user, seq)| {
            let rank = ranks.get(user.as_str()).copied().unwrap_or(0);
            let value = match (rank, history.wins_used.get(&rank), window_of(rank)) {
                (0, _, _) => format!("1|e|{seq}|"),
                (_, Some(used), _) => format!("1|u|{rank}|{}", used.order_id),
                (_, None, Some(until)) => {
                    holds.push((rank, until));
                    format!("1|s|{rank}|{until}")
                }
                (_, None, None) => format!("1|r|{rank}|"),
            };
            Placed { user: user.to_string(), seq, rank, value }
        })
        .collect();
    (places, holds)
}

impl Gate {
    /// Rebuilds `voucher`'s draw from `history` if Redis has none.
    pub(crate) async fn restore_draw(
        &self,
        voucher: VoucherId,
        settings: &DrawSettings,
        history: &DrawHistory,
    ) -> redis::RedisResult<DrawRestored> {
        let keys = self.keys(voucher);
        let exists: bool = redis::cmd("EXISTS").arg(&keys.room).query_async(&mut self.redis.clone()).await?;
        if exists {
            self.list_room(voucher).await?;
            return Ok(DrawRestored::Kept);
        }
        if history.is_empty() {
            self.open_draw_with(voucher, settings).await?;
            return Ok(DrawRestored::Opened);
        }
        // With gaps (records lost before they were logged), every entrant
        // the log names keeps their entry: nobody answered `201` whose
        // entry is in the log loses it for one that is not.
        let gaps = history.entrants().is_none();
        let (entrants, missing, last_seq) = match history.entrants() {
            Some(entrants) => (entrants, 0, 0),
            None => entrants_with_gaps(history),
        };
        let mut rebuild = Rebuild::of(settings, history, &entrants);
        if gaps && rebuild.stage == "entering" {
            // Entries still open: the ones taken from now on are logged
            // with seqs after the last one logged, never one of its seqs.
            let offset = last_seq.saturating_sub(rebuild.entries);
            rebuild.room.push(("seq_offset", offset.to_string()));
        }
        if !self.write_rebuild(voucher, &rebuild).await? {
            return Ok(DrawRestored::Kept);
        }
        self.list_room(voucher).await?;
        let Rebuild { stage, entries, wins, new_seed, .. } = rebuild;
        if gaps {
            tracing::warn!(%voucher, stage, entries, missing, "A draw Redis lost was rebuilt from a log with gaps.");
            return Ok(DrawRestored::RebuiltWithGaps { stage, entries, missing });
        }
        tracing::info!(%voucher, stage, entries, wins, "A draw Redis lost was rebuilt from the log.");
        Ok(DrawRestored::Rebuilt { stage, entries, wins, wins_used: history.wins_used.len() as u64, new_seed })
    }

    /// Writes `rebuild`, the room hash last; false when the room appeared
    /// meanwhile (someone else restored or opened it: it is theirs).
    async fn write_rebuild(&self, voucher: VoucherId, rebuild: &Rebuild) -> redis::RedisResult<bool> {
        for chunk in rebuild.places.chunks(RANK_CHUNK) {
            let mut call = self.draw_restore_call(voucher, "places");
            for placed in chunk {
                call.arg(&placed.user).arg(placed.seq).arg(placed.rank).arg(&placed.value);
            }
            if !self.run_draw_restore(call).await? {
                return Ok(false);
            }
        }
        for chunk in rebuild.holds.chunks(RANK_CHUNK) {
            let mut call = self.draw_restore_call(voucher, "holds");
            for (rank, until) in chunk {
                call.arg(rank).arg(until);
            }
            if !self.run_draw_restore(call).await? {
                return Ok(false);
            }
        }
        let mut call = self.draw_restore_call(voucher, "room");
        for (field, value) in &rebuild.room {
            call.arg(*field).arg(value);
        }
        self.run_draw_restore(call).await
    }

    fn draw_restore_call(&self, voucher: VoucherId, step: &str) -> redis::ScriptInvocation<'_> {
        let keys = self.keys(voucher);
        let staged = |key: &str| format!("{key}:restoring");
        let mut invocation = self.scripts.draw_restore.prepare_invoke();
        invocation
            .key(&keys.voucher)
            .key(&keys.room)
            .key(&keys.line)
            .key(&keys.places)
            .key(&keys.ranks)
            .key(&keys.holds)
            .key(staged(&keys.line))
            .key(staged(&keys.places))
            .key(staged(&keys.ranks))
            .key(staged(&keys.holds))
            .arg(step)
            .arg(self.ended_sale_ttl_ms);
        invocation
    }

    /// Runs one step; false when the room is there (or the voucher is
    /// not).
    async fn run_draw_restore(&self, call: redis::ScriptInvocation<'_>) -> redis::RedisResult<bool> {
        let answer: String = self.timed("draw_restore", call.invoke_async(&mut self.redis.clone())).await?;
        match answer.as_str() {
            "written" => Ok(true),
            "exists" | "unknown" => Ok(false),
            _ => Err(crate::gate::unexpected("draw_restore.lua answered", answer)),
        }
    }
}
