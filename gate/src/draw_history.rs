//! A draw as the log tells it, for rebuilding the draw's state in Redis
//! after Redis lost it ([`crate::Gate::restore`]): who entered with which
//! seq, the revealed seed, the logged ranking, the winners and promotions
//! with their windows, the stalls that lengthened those windows
//! (`WindowsExtended`), and the wins spent.
//!
//! Before the reveal the seed is secret; a commitment logged with the seed
//! sealed under the operator's key (`seckill_core::sealed_seed`) gives it
//! back to whoever holds the key ([`DrawHistory::open_sealed_seed`]).
//!
//! Folded like the rest of the [`crate::Ledger`]: records in any order and
//! any number of times. Where copies of one fact disagree (two selections,
//! say), the earliest record by event id (UUIDv7: by time) is taken; `seckill
//! draw verify` is what reports such a log.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use seckill_core::event::{DrawRanked, DrawSeedRevealed, DrawWinUsed, DrawWinnerPromoted, DrawWinnersSelected, Event};
use seckill_core::{UserId, VoucherId};
use uuid::Uuid;

use crate::seed_commitments::SeedCommitments;

/// One draw's records, folded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrawHistory {
    /// The seed's commitments, and its seed once opened from one.
    pub commitments: SeedCommitments,
    /// Entries by seq (the first user logged with each).
    pub entries: BTreeMap<u64, UserId>,
    reveal: Option<(Uuid, DrawSeedRevealed)>,
    /// The ranking's records by chunk.
    pub ranked: BTreeMap<u64, DrawRanked>,
    selection: Option<(Uuid, DrawWinnersSelected)>,
    /// Wins given after the draw, by rank.
    pub promotions: BTreeMap<u64, DrawWinnerPromoted>,
    /// Wins spent on an order, by rank.
    pub wins_used: BTreeMap<u64, DrawWinUsed>,
    /// The logged stalls (`WindowsExtended`: from, until), by start: each
    /// moves the end of every window open at its start.
    pub stalls: BTreeSet<(DateTime<Utc>, DateTime<Utc>)>,
}

impl DrawHistory {
    /// Takes one record into account (others change nothing).
    pub(crate) fn apply(&mut self, event_id: Uuid, event: &Event) {
        match event {
            Event::DrawSeedCommitted(commitment) => {
                self.commitments.record(event_id, &commitment.seed_hash, commitment.sealed_seed.as_ref());
            }
            Event::DrawEntered(entered) => {
                self.entries.entry(entered.seq).or_insert_with(|| entered.user_id.clone());
            }
            Event::DrawSeedRevealed(reveal) => keep_earliest(&mut self.reveal, event_id, reveal),
            Event::DrawRanked(ranked) => {
                self.ranked.entry(ranked.chunk).or_insert_with(|| ranked.clone());
            }
            Event::DrawWinnersSelected(selection) => keep_earliest(&mut self.selection, event_id, selection),
            Event::DrawWinnerPromoted(promoted) => {
                self.promotions.entry(promoted.rank).or_insert_with(|| promoted.clone());
            }
            Event::DrawWinUsed(used) => {
                self.wins_used.entry(used.rank).or_insert_with(|| used.clone());
            }
            Event::WindowsExtended(stall) if stall.until > stall.from => {
                self.stalls.insert((stall.from, stall.until));
            }
            _ => {}
        }
    }

    /// Whether the log holds anything of the draw.
    pub fn is_empty(&self) -> bool {
        self.commitments.is_empty() && self.entries.is_empty() && self.reveal.is_none()
    }

    /// Opens the newest commitment's sealed seed with `key`; whether it did
    /// (a seed whose SHA-256 is the commitment).
    pub fn open_sealed_seed(&mut self, voucher: VoucherId, key: &[u8]) -> bool {
        self.commitments.open(voucher, key)
    }

    /// The secret seed before its reveal, when it was opened.
    pub fn opened_seed(&self) -> Option<&str> {
        self.commitments.opened()
    }

    /// The reveal: the seed, the entry count and the list's hash.
    pub fn reveal(&self) -> Option<&DrawSeedRevealed> {
        self.reveal.as_ref().map(|(_, reveal)| reveal)
    }

    /// The winners chosen at the draw.
    pub fn selection(&self) -> Option<&DrawWinnersSelected> {
        self.selection.as_ref().map(|(_, selection)| selection)
    }

    /// The entrants in seq order, when the log has every seq from 1 to the
    /// last (or, once revealed, to the revealed count) and no more.
    pub fn entrants(&self) -> Option<Vec<UserId>> {
        let count = self.reveal().map_or(self.entries.len() as u64, |reveal| reveal.entries);
        let entrants: Vec<UserId> = (1..=count).map_while(|seq| self.entries.get(&seq).cloned()).collect();
        (entrants.len() as u64 == count && self.entries.len() as u64 == count).then_some(entrants)
    }

    /// The whole logged ranking, rank 1 first, when every chunk of it is
    /// in the log and they add up to the revealed count.
    pub fn ranking(&self) -> Option<Vec<UserId>> {
        let reveal = self.reveal()?;
        let chunks = self.ranked.values().next().map_or(0, |first| first.chunks);
        if reveal.entries == 0 {
            return Some(Vec::new());
        }
        if self.ranked.len() as u64 != chunks || self.ranked.keys().copied().ne(0..chunks) {
            return None;
        }
        let mut ranking = Vec::with_capacity(usize::try_from(reveal.entries).unwrap_or(0));
        for chunk in self.ranked.values() {
            if chunk.first_rank != ranking.len() as u64 + 1 {
                return None;
            }
            ranking.extend(chunk.users.iter().cloned());
        }
        (ranking.len() as u64 == reveal.entries).then_some(ranking)
    }
}

impl DrawHistory {
    /// Where a window granted at `opened` and due at `due` really ends:
    /// each logged stall that starts at or after its opening and before its
    /// end (as moved so far) moves it by the stall's length, as the
    /// scripts' window clock did (`lua/draw_advance.lua`) and as `seckill
    /// draw verify` recomputes it.
    pub fn window_end(&self, opened: DateTime<Utc>, due: DateTime<Utc>) -> DateTime<Utc> {
        window_end(&self.stalls, opened, due)
    }

    /// The end of rank `rank`'s window, stalls included (None: it did not
    /// win). A window is granted `purchase_seconds` before its record's
    /// `purchase_until`.
    pub fn window_of(&self, rank: u64, purchase_seconds: u32) -> Option<DateTime<Utc>> {
        let selection = self.selection()?;
        let due = if rank <= selection.winners {
            selection.purchase_until
        } else {
            self.promotions.get(&rank)?.purchase_until
        };
        Some(self.window_end(due - Duration::seconds(i64::from(purchase_seconds)), due))
    }
}

/// [`DrawHistory::window_end`] under `stalls` (from, until), for a waiting
/// room's entry tokens too (the same window clock).
pub(crate) fn window_end(
    stalls: &BTreeSet<(DateTime<Utc>, DateTime<Utc>)>,
    opened: DateTime<Utc>,
    due: DateTime<Utc>,
) -> DateTime<Utc> {
    let mut end = due;
    for &(from, until) in stalls {
        if from >= opened && from < end {
            end += until - from;
        }
    }
    end
}

fn keep_earliest<T: Clone>(kept: &mut Option<(Uuid, T)>, event_id: Uuid, record: &T) {
    if kept.as_ref().is_none_or(|(id, _)| event_id < *id) {
        *kept = Some((event_id, record.clone()));
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use seckill_core::event::DrawEntered;
    use seckill_core::VoucherId;

    use super::*;

    fn entered(voucher: VoucherId, user: &str, seq: u64) -> Event {
        let user_id = UserId::parse(user).expect("valid");
        Event::DrawEntered(DrawEntered { voucher_id: voucher, user_id, entered_at: Utc::now(), seq })
    }

    #[test]
    fn the_list_and_the_ranking_are_taken_only_whole() {
        let voucher = VoucherId::generate();
        let mut history = DrawHistory::default();
        for (user, seq) in [("a", 1), ("b", 2), ("a", 1), ("d", 4)] {
            history.apply(Uuid::now_v7(), &entered(voucher, user, seq));
        }
        assert_eq!(history.entrants(), None, "seq 3 is missing");
        history.apply(Uuid::now_v7(), &entered(voucher, "c", 3));
        let entrants = history.entrants().expect("1..4");
        assert_eq!(entrants.iter().map(UserId::as_str).collect::<Vec<_>>(), ["a", "b", "c", "d"]);

        let seed = "5".repeat(64);
        let reveal = DrawSeedRevealed {
            voucher_id: voucher,
            seed: seed.clone(),
            entries: 4,
            entries_hash: seckill_core::draw::entries_hash(&entrants),
            beacon: None,
        };
        history.apply(Uuid::now_v7(), &Event::DrawSeedRevealed(reveal));
        let ranking = seckill_core::draw::ranking(&seed, &entrants);
        let chunk = |chunk: u64, first: usize, users: &[UserId]| {
            Event::DrawRanked(DrawRanked {
                voucher_id: voucher,
                chunk,
                chunks: 2,
                first_rank: first as u64 + 1,
                users: users.to_vec(),
            })
        };
        history.apply(Uuid::now_v7(), &chunk(1, 2, &ranking[2..]));
        assert_eq!(history.ranking(), None, "chunk 0 is missing");
        history.apply(Uuid::now_v7(), &chunk(0, 0, &ranking[..2]));
        assert_eq!(history.ranking(), Some(ranking));
    }

    #[test]
    fn of_two_selections_the_earliest_counts() {
        let voucher = VoucherId::generate();
        let (earlier, later) = (Uuid::now_v7(), Uuid::now_v7());
        let selected = |winners| {
            Event::DrawWinnersSelected(DrawWinnersSelected { voucher_id: voucher, winners, purchase_until: Utc::now() })
        };
        let mut history = DrawHistory::default();
        history.apply(later, &selected(9));
        history.apply(earlier, &selected(3));
        history.apply(later, &selected(9));
        assert_eq!(history.selection().map(|selection| selection.winners), Some(3));
    }

    #[test]
    fn the_newest_commitments_sealed_seed_opens_with_the_key() {
        use seckill_core::event::DrawSeedCommitted;
        use seckill_core::{queue, sealed_seed};

        let voucher = VoucherId::generate();
        let key = b"the operator's key, 32 characters".as_slice();
        let (old, new) = (queue::new_seed(), queue::new_seed());
        let committed = |seed: &str, sealed: bool| {
            Event::DrawSeedCommitted(DrawSeedCommitted {
                voucher_id: voucher,
                seed_hash: queue::seed_commitment(seed),
                sealed_seed: sealed.then(|| sealed_seed::seal(key, voucher, seed).expect("a seed")),
            })
        };
        let mut history = DrawHistory::default();
        history.apply(Uuid::now_v7(), &committed(&old, true));
        let newest = Uuid::now_v7();
        history.apply(newest, &committed(&new, false));
        assert!(!history.open_sealed_seed(voucher, key), "the newest commitment is not sealed");
        history.apply(newest, &committed(&new, true));
        assert!(!history.open_sealed_seed(voucher, b"another key"));
        assert!(history.open_sealed_seed(voucher, key));
        assert_eq!(history.opened_seed(), Some(new.as_str()));
    }
}
