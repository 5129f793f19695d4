//! What the clients of each waiting room and draw saw, and what a fault run
//! must show of them: entries were used and wins spent (the room and the
//! draw worked, not merely failed politely), and every answer other than a
//! success is one this fault can explain.

use std::collections::BTreeMap;

use crate::check::Voucher;

/// What the clients of one waiting room or draw saw.
#[derive(Debug, Default)]
pub struct RoomTally {
    /// Entry tokens received (a waiting room) or unused wins read (a draw).
    pub turns: u64,
    /// Orders admitted (`202`) with a token or a win.
    pub admitted: u64,
    /// Every other answer of the room's routes and of its orders, by
    /// `"<status> <error code>"` (`"502"`: no answer).
    pub refused: BTreeMap<String, u64>,
}

impl RoomTally {
    /// Counts an answer that was not a success.
    pub fn refused(&mut self, status: u16, code: &str) {
        let key = if code.is_empty() { status.to_string() } else { format!("{status} {code}") };
        *self.refused.entry(key).or_default() += 1;
    }

    /// Adds what a later round of clients saw.
    pub fn absorb(&mut self, later: RoomTally) {
        self.turns += later.turns;
        self.admitted += later.admitted;
        for (answer, count) in later.refused {
            *self.refused.entry(answer).or_default() += count;
        }
    }
}

/// Answers any fault may bring: the rate bound, no answer, the gate or the
/// log unavailable; an order that lost a race to its own token's or win's
/// end, to its own earlier order, or to the stock; an entry after the draw.
const ALWAYS: [&str; 13] = [
    "429 rate_limited",
    "502",
    "503 unavailable",
    "403 entry_token_expired",
    "409 entry_token_used",
    "403 not_a_winner",
    "403 purchase_window_closed",
    "409 win_used",
    "409 draw_closed",
    "409 sold_out",
    "409 duplicate_order",
    "409 limit_exceeded",
    "409 paused",
];

/// Answers only a Redis that lost its data explains: the voucher, its room
/// or the user's place gone until `seckill reconcile` restores them (a
/// restored room signs its tokens with a new key, and one that started over
/// is empty, so an older token is no longer the user's).
const AFTER_DATA_LOSS: [&str; 4] =
    ["404 unknown_voucher", "409 queue_not_open", "409 draw_not_open", "403 entry_token_invalid"];

/// Whether Redis lost its data, or some of it, in `fault`.
fn redis_lost_data(fault: &str) -> bool {
    fault.contains("data loss") || (fault.contains("Redis") && (fault.contains("SIGKILL") || fault.contains("flush")))
}

/// Whether `fault` explains `answer`.
fn explained(answer: &str, fault: &str) -> bool {
    ALWAYS.contains(&answer) || (redis_lost_data(fault) && AFTER_DATA_LOSS.contains(&answer))
}

/// Every waiting room and draw of `vouchers` served entries that were used
/// and wins that were spent, and answered nothing this fault cannot
/// explain.
pub fn check(rooms: &BTreeMap<String, RoomTally>, vouchers: &[Voucher], fault: &str) {
    for voucher in vouchers.iter().filter(|voucher| voucher.queued || voucher.drawn) {
        let what = if voucher.queued { "waiting room" } else { "draw" };
        let seen = rooms.get(&voucher.id);
        let (turns, admitted) = seen.map_or((0, 0), |seen| (seen.turns, seen.admitted));
        let turn = if voucher.queued { "entry tokens served" } else { "wins read" };
        assert!(turns > 0, "[{fault}] the {what} {}: no {turn} (refused {:?})", voucher.id, seen.map(|s| &s.refused));
        assert!(
            admitted > 0,
            "[{fault}] the {what} {}: {turns} {turn}, no order admitted with one (refused {:?})",
            voucher.id,
            seen.map(|s| &s.refused)
        );
        let unexplained: Vec<(&String, &u64)> = seen
            .map(|seen| seen.refused.iter().filter(|(answer, _)| !explained(answer, fault)).collect())
            .unwrap_or_default();
        assert!(unexplained.is_empty(), "[{fault}] the {what} {} answered {unexplained:?}", voucher.id);
        println!(
            "[{fault}] {what}: {turns} {turn}, {admitted} orders admitted, refused {:?}",
            seen.map(|s| &s.refused)
        );
    }
}
