//! Scripted draws for unit tests: the draw's records, stamped with the
//! script's clock, and a clean draw-mode sale to doctor.

use seckill_core::draw::{self, DrawSettings, RANK_CHUNK};
use seckill_core::event::{
    DrawEntered, DrawRanked, DrawSeedCommitted, DrawSeedRevealed, DrawWinUsed, DrawWinnerPromoted, DrawWinnersSelected,
    OrderAccepted,
};
use seckill_core::ids::UserId;
use seckill_core::{queue, Envelope, Event};

use super::script::{at, Mode, Script};

/// Entries in [`draw_sale`].
pub(crate) const ENTRIES: u64 = 2_000;
/// Its units, and so its winners at the draw.
pub(crate) const STOCK: u64 = 20;
/// Ranks that won at the draw and never ordered: their wins lapse.
pub(crate) const UNUSED: [u64; 3] = [5, 12, 18];
/// Ranks promoted when those wins lapsed: 21, 22, 23.
pub(crate) const PROMOTED: u64 = 3;
/// The promoted rank that never ordered either.
pub(crate) const PROMOTED_UNUSED: u64 = 23;
/// When entries close and the draw is made (the sale's start).
pub(crate) const DRAW_MS: i64 = -1_000;
/// How long a winner may order, in seconds.
pub(crate) const PURCHASE_SECONDS: u32 = 600;

/// A clean draw and what the tests doctor it with.
pub(crate) struct DrawSale {
    pub(crate) script: Script,
    pub(crate) seed: String,
    /// The ranking, rank 1 first.
    pub(crate) ranking: Vec<UserId>,
}

impl Script {
    /// A free draw-mode voucher: entries open at -200 s, the draw at
    /// [`DRAW_MS`], when the sale begins.
    pub(crate) fn drawn(stock: u64, limit: u32) -> Self {
        let settings = DrawSettings {
            entries_open_at: at(-200_000),
            draw_at: at(DRAW_MS),
            purchase_seconds: PURCHASE_SECONDS,
            beacon: None,
        };
        Self::defined(stock, limit, 0, 0, None, Mode::Draw(settings))
    }

    pub(crate) fn draw_commit(&mut self, seed: &str, ms: i64) -> Envelope {
        let seed_hash = queue::seed_commitment(seed);
        self.sales_at(
            Event::DrawSeedCommitted(DrawSeedCommitted { voucher_id: self.voucher, seed_hash, sealed_seed: None }),
            ms,
        )
    }

    pub(crate) fn enter(&mut self, user: &UserId, seq: u64, ms: i64) -> Envelope {
        let entered = DrawEntered { voucher_id: self.voucher, user_id: user.clone(), entered_at: at(ms), seq };
        self.sales_at(Event::DrawEntered(entered), ms)
    }

    /// The reveal of `seed` over `entrants` (in seq order).
    pub(crate) fn draw_reveal(&mut self, seed: &str, entrants: &[UserId], ms: i64) -> Envelope {
        let reveal = DrawSeedRevealed {
            voucher_id: self.voucher,
            seed: seed.to_owned(),
            entries: entrants.len() as u64,
            entries_hash: draw::entries_hash(entrants),
            beacon: None,
        };
        self.sales_at(Event::DrawSeedRevealed(reveal), ms)
    }

    /// The whole ranking, [`RANK_CHUNK`] users a record.
    pub(crate) fn rank(&mut self, ranking: &[UserId], ms: i64) {
        let chunks = ranking.len().div_ceil(RANK_CHUNK) as u64;
        for (chunk, users) in (0u64..).zip(ranking.chunks(RANK_CHUNK)) {
            let ranked = DrawRanked {
                voucher_id: self.voucher,
                chunk,
                chunks,
                first_rank: chunk * RANK_CHUNK as u64 + 1,
                users: users.to_vec(),
            };
            self.sales_at(Event::DrawRanked(ranked), ms);
        }
    }

    pub(crate) fn select(&mut self, winners: u64, ms: i64) -> Envelope {
        let purchase_until = at(ms + i64::from(PURCHASE_SECONDS) * 1_000);
        self.sales_at(
            Event::DrawWinnersSelected(DrawWinnersSelected { voucher_id: self.voucher, winners, purchase_until }),
            ms,
        )
    }

    pub(crate) fn promote(&mut self, user: &UserId, rank: u64, ms: i64) -> Envelope {
        let promoted = DrawWinnerPromoted {
            voucher_id: self.voucher,
            user_id: user.clone(),
            rank,
            purchase_until: at(ms + i64::from(PURCHASE_SECONDS) * 1_000),
        };
        self.sales_at(Event::DrawWinnerPromoted(promoted), ms)
    }

    /// The win of `rank` spent on `order` (admitted with it).
    pub(crate) fn use_win(&mut self, order: &OrderAccepted, rank: u64) -> Envelope {
        let used =
            DrawWinUsed { voucher_id: self.voucher, user_id: order.user_id.clone(), rank, order_id: order.order_id };
        self.sales_at(Event::DrawWinUsed(used), (order.accepted_at - at(0)).num_milliseconds())
    }

    /// A winner's order: accepted, its win spent, created.
    pub(crate) fn order_with_win(&mut self, user: &UserId, rank: u64, ms: i64) -> OrderAccepted {
        let order = self.accept(user.as_str(), 1, ms);
        self.use_win(&order, rank);
        self.decide(&order, ms + 10);
        order
    }
}

/// The `i`-th entrant of [`draw_sale`] (from 1).
pub(crate) fn entrant(i: u64) -> UserId {
    UserId::parse(&format!("e{i:04}")).expect("valid user")
}

/// A clean draw: [`STOCK`] units, one per user. The seed is committed at
/// -210 s; [`ENTRIES`] users enter from -190 s, one every 50 ms; at
/// [`DRAW_MS`] the seed is revealed and the ranking logged (two chunks),
/// and ranks 1..=20 win. Each winner but ranks [`UNUSED`] orders 100 ms
/// apart from 1 s; when their windows lapse (600 s) ranks 21, 22 and 23
/// are promoted, and 21 and 22 order: 19 orders, all created.
pub(crate) fn draw_sale() -> DrawSale {
    let mut script = Script::drawn(STOCK, 1);
    let seed = queue::new_seed();
    script.draw_commit(&seed, -210_000);
    let entrants: Vec<UserId> = (1..=ENTRIES).map(entrant).collect();
    for (user, seq) in entrants.iter().zip(1u64..) {
        script.enter(user, seq, -190_000 + seq as i64 * 50);
    }
    script.draw_reveal(&seed, &entrants, DRAW_MS);
    let ranking = draw::ranking(&seed, &entrants);
    script.rank(&ranking, DRAW_MS + 10);
    script.select(STOCK, DRAW_MS + 20);
    for rank in (1..=STOCK).filter(|rank| !UNUSED.contains(rank)) {
        script.order_with_win(&ranking[rank as usize - 1], rank, 1_000 + rank as i64 * 100);
    }
    let lapsed = DRAW_MS + 20 + i64::from(PURCHASE_SECONDS) * 1_000;
    for rank in STOCK + 1..=STOCK + PROMOTED {
        script.promote(&ranking[rank as usize - 1], rank, lapsed + rank as i64);
    }
    for rank in STOCK + 1..STOCK + PROMOTED {
        script.order_with_win(&ranking[rank as usize - 1], rank, lapsed + 1_000 + rank as i64 * 100);
    }
    debug_assert_eq!(PROMOTED_UNUSED, STOCK + PROMOTED);
    DrawSale { script, seed, ranking }
}
