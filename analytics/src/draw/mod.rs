//! Verifying a draw from the log alone (`seckill draw verify`): anyone
//! holding a copy of the log can recompute the ranking the draw made and
//! check who was allowed to order, without trusting the platform.
//!
//! [`verify`] runs every check on one voucher's fold ([`VoucherLog`]); the
//! audit's draw rules are the same checks, grouped
//! ([`crate::audit::audit_voucher`]). The log comes from Kafka
//! ([`read_kafka`], as `seckill audit` reads it) or from a JSON Lines copy
//! as `seckill replay` writes it ([`read_file`]).
//!
//! The checks, in order (the rule of `seckill_core::draw` is what the
//! recomputation follows):
//! - `entries`: the `DrawEntered` seqs are 1..N without gap, each naming
//!   one user, and no user entered twice;
//! - `commitment`: a `DrawSeedCommitted` precedes every entry and the
//!   reveal, and the SHA-256 of the revealed seed is its hash (unless a
//!   beacon round is planned: then the seed is the round's randomness);
//! - `beacon`: for a draw whose creation record planned a beacon round,
//!   the round is the first of its chain after `draw_at`, the reveal logs
//!   it, its signature verifies under the chain's public key, and the
//!   revealed seed is its randomness; without a plan, that the seed is the
//!   operator's (which trusts the operator);
//! - `entries_hash`: the SHA-1 chain over the logged entries of the list,
//!   in seq order, is the revealed `entries_hash`;
//! - `entry_count`: the log holds exactly the revealed `entries`, and no
//!   entry with a seq past them;
//! - `ranking`: the `DrawRanked` chunks (all of 0..chunks, each starting
//!   at `chunk × 500 + 1`) put together are the ranking recomputed from
//!   the revealed seed and the logged list; else the first rank that
//!   differs;
//! - `winners`: the winners at the draw are at most the stock and the
//!   entries, and promotions take ranks winners + 1, winners + 2, … in log
//!   order, each to the user the logged ranking puts there;
//! - `orders`: every accepted order has a `DrawWinUsed` for it and its user,
//!   of a rank that won (before the use, on the topic) and is that user's
//!   in the logged ranking; no rank admitted two orders;
//! - `timing`: the reveal was emitted at or after `draw_at`, no entry
//!   follows it on the topic, and the whole ranking sits between it and the
//!   selection of winners;
//! - `window_lengths`: the selection's and each promotion's
//!   `purchase_until` is the record's time plus `purchase_seconds`, the
//!   logged stalls (`WindowsExtended`) are sound, and every logged pause
//!   with a window open is one of them;
//! - `wins_in_window`: every win was spent before its window, lengthened by
//!   the stalls that began while it was open, ended;
//! - `promotions_needed`: at each promotion the open wins times the limit
//!   were fewer than the units left (see `windows.rs`).
//!
//! `winners` and `orders` read the logged ranking (the recomputed one where
//! a chunk is missing), which `ranking` compares with the recomputation: a
//! doctored record fails the check it breaks, not every check downstream.
//! Before the reveal, the checks that need it pass with "not revealed
//! yet": a draw taking entries is verified as far as it went.

mod beacon;
mod checks;
mod read;
mod text;
pub(crate) mod windows;

use std::time::Instant;

use serde::Serialize;

use crate::sale::VoucherLog;
use crate::AnalyticsError;
use seckill_core::ids::VoucherId;

pub use read::{read_file, read_kafka, read_lines, DrawRead, Source, SourceKind};

/// One check's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// Stable name, for machines.
    pub check: &'static str,
    /// What the check says, for people.
    pub title: &'static str,
    pub pass: bool,
    /// The numbers, for people: on a failure, what differs.
    pub detail: String,
    /// The numbers, for machines.
    pub figures: serde_json::Value,
}

impl Check {
    fn new(
        (check, title): (&'static str, &'static str),
        pass: bool,
        detail: String,
        figures: serde_json::Value,
    ) -> Self {
        Self { check, title, pass, detail, figures }
    }
}

/// How far the draw went, as its log says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// No reveal yet: taking entries (or not open).
    Entering,
    /// Revealed; no winners selected yet.
    Revealed,
    /// Winners selected.
    Drawn,
}

/// One draw's verification. Field names are the `--json` output's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DrawVerification {
    pub voucher_id: VoucherId,
    /// Every check passed.
    pub pass: bool,
    pub stage: Stage,
    /// Distinct entries (seqs) in the log.
    pub entries: u64,
    /// Ranks that won at the draw, once selected.
    pub winners: Option<u64>,
    /// Promotions in the log.
    pub promoted: u64,
    /// Distinct ranks whose win admitted an order.
    pub wins_used: u64,
    pub checks: Vec<Check>,
    /// How long the checks took (recomputing the ranking is most of it),
    /// in milliseconds; reading the log is apart ([`Source::read_ms`]).
    pub verify_ms: f64,
    /// Where the log was read from, when the caller says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

impl DrawVerification {
    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|check| !check.pass)
    }

    /// Says where the log was read from.
    pub fn read_from(mut self, source: Source) -> Self {
        self.source = Some(source);
        self
    }
}

/// Verifies the draw of `log`'s voucher; an error when the voucher is not
/// a draw (no draw in its definition, no draw record in the log).
pub fn verify(log: &VoucherLog) -> Result<DrawVerification, AnalyticsError> {
    if !log.draw_mode() {
        return Err(AnalyticsError::NotADraw(log.voucher_id));
    }
    let started = Instant::now();
    let checks = run(log);
    let verify_ms = started.elapsed().as_secs_f64() * 1_000.0;
    let draw = &log.draw;
    let selection = draw.selection();
    let stage = match (draw.reveal(), selection) {
        (_, Some(_)) => Stage::Drawn,
        (Some(_), None) => Stage::Revealed,
        (None, None) => Stage::Entering,
    };
    let wins_used: std::collections::BTreeSet<u64> = draw.wins_used.values().map(|used| used.record.rank).collect();
    Ok(DrawVerification {
        voucher_id: log.voucher_id,
        pass: checks.iter().all(|check| check.pass),
        stage,
        entries: draw.entries.len() as u64,
        winners: selection.map(|selection| selection.record.winners),
        promoted: draw.promotions.len() as u64,
        wins_used: wins_used.len() as u64,
        checks,
        verify_ms,
        source: None,
    })
}

/// Every check, in order, recomputing the list and the ranking once.
pub(crate) fn run(log: &VoucherLog) -> Vec<Check> {
    let recomputed = checks::Recomputed::of(log);
    vec![
        checks::entries(&recomputed),
        checks::commitment(&recomputed),
        beacon::beacon(log),
        checks::entries_hash(&recomputed),
        checks::entry_count(&recomputed),
        checks::ranking(&recomputed),
        checks::winners(&recomputed),
        checks::orders(&recomputed),
        checks::timing(&recomputed),
        windows::window_lengths(log),
        windows::wins_in_window(log),
        windows::promotions_needed(log),
    ]
}

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod windows_tests;
