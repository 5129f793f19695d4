//! The audit of a sale's books, from the log alone or against the live
//! stores: one line per rule, PASS or FAIL, with its numbers.
//!
//! From the log ([`audit_voucher`] without live figures):
//! - `stock_balance`: stock + added stock = units sold + units left;
//! - `one_decision_per_acceptance`: every accepted order was decided
//!   exactly once (a re-emitted outcome keeps its event id and is the same
//!   decision), and no decision lacks an acceptance;
//! - `cancel_confirm_after_creation`: every cancellation and payment
//!   (`OrderPaid`, a free claim included) follows a creation of its order
//!   on the orders topic;
//! - `per_user_limit`: no user held more units at once than the limit,
//!   walking the sales topic in the processor's order;
//! - `returns_resold_or_left`: units given back by cancellations were sold
//!   again or are still left.
//!
//! For a sale that takes money ([`VoucherLog::takes_payments`]), also from
//! the log:
//! - `payments_settled`: every payment reported (`PaymentReceived`) paid
//!   the one order it was made for and was kept, or was refunded exactly
//!   once (one provider refund id; a refund request repeated is a
//!   redelivery). A refund asked for and not done fails it as pending:
//!   audit a quiet platform.
//! - `no_order_paid_twice`: no order's `OrderPaid` events name two
//!   payments, and each paid order an admin refunded had its payment
//!   refunded exactly once;
//! - `paid_in_time`: each `OrderPaid` with a payment is dated before the
//!   order's `pay_by`, and each refund as `late` is for a payment made at
//!   or after it, or for an order failed or cancelled before the payment
//!   was decided;
//! - `amounts_match`: each order owes price × quantity, each payment that
//!   paid an order is for its amount and currency, each refund (asked and
//!   done) gives back its payment's amount.
//!
//! For a queue-mode sale ([`VoucherLog::queue_mode`]), also from the log:
//! - `queue_seed_committed`: a `QueueSeedCommitted` precedes every
//!   `QueueJoined` and the `QueueSeedRevealed` on the topic, and the SHA-256
//!   of the revealed seed is a committed hash (no place is passed before
//!   the reveal);
//! - `queue_served_in_shuffle`: the places passed (`QueueEntryIssued` or
//!   `QueuePlaceExpired`), in the order the room passed them, are 1, 2, 3, … without gap or
//!   repeat, and each went to its holder: place p ≤ P (the reveal's
//!   `pre_queued`, which must equal the pre-queue joins logged) to the p-th
//!   of the shuffle of the pre-queue under the revealed seed, place p > P to
//!   the join with seq p − P;
//! - `queue_entries_single_use`: no entry was spent on two orders, every
//!   entry spent was issued to the user who spent it, and every accepted
//!   order has an entry spent on it;
//! - `queue_entries_in_time`: every token's `expires_at` is its issue time
//!   plus `token_seconds`, and every entry was spent before its expiry,
//!   moved by the logged stalls that began while it was open;
//! - `queue_beacon`: for a room whose creation record planned a beacon
//!   round, the round is the first published after the start (the
//!   pre-queue closed before it), the reveal logs it, its signature
//!   verifies under the chain's public key, the revealed seed is its
//!   randomness and the revealed pre-queue hash is the logged pre-queue's
//!   (then `queue_seed_committed` asks no commitment of that seed); without
//!   a plan it passes, saying the operator's seed trusts the operator.
//!
//! For a draw-mode sale ([`VoucherLog::draw_mode`]), also from the log,
//! the checks of `seckill draw verify` ([`crate::draw`]) in four rules:
//! - `draw_seed_committed`: a `DrawSeedCommitted` precedes every entry
//!   and the reveal, the SHA-256 of the revealed seed is its hash, and the
//!   reveal was emitted at or after `draw_at`, with no entry after it and
//!   the whole ranking between it and the winners;
//! - `draw_ranking_reproduced`: the entries' seqs are 1..N, each once; the
//!   SHA-1 chain over them is the revealed hash and their count the
//!   revealed one; the `DrawRanked` chunks are the ranking recomputed from
//!   the revealed seed and the logged entries;
//! - `draw_orders_by_winners`: winners at most the stock and the entries,
//!   promotions to the next rank each time, and every accepted order spent
//!   a win of its own user's rank, no win twice;
//! - `draw_windows_kept`: every window's `purchase_until` is its record's
//!   time plus `purchase_seconds`, every win was spent before its window,
//!   moved by the logged stalls, ended, and every promotion was needed.
//!
//! With [`LiveFigures`] (`--live`), also: `view_matches_log`,
//! `stock_matches_log` and `gate_matches_log`. See [`crate::sale::Books`]
//! for how each figure is computed.
//!
//! With [`ProviderFigures`] (`--payments-url`), for a sale that takes money:
//! `provider_agrees`: kept payments succeeded at the provider with nothing
//! refunded, refunded ones were refunded in full, no succeeded payment of
//! the sale's orders is missing from the log, and paid and refunded sums
//! per currency are equal on both sides.

mod draw;
pub mod live;
mod payments;
pub mod provider;
mod queue;
mod queue_beacon;
mod queue_windows;
mod rules;
mod text;

use serde::Serialize;

use crate::sale::{Books, VoucherLog};
use seckill_core::ids::VoucherId;

pub use live::{GateFigures, LiveFigures, LiveSources, StockFigures};
pub use provider::{ProviderFigures, ProviderIntent, ProviderSource};

/// One rule's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleResult {
    /// Stable name, for machines.
    pub rule: &'static str,
    /// What the rule says, for people.
    pub title: &'static str,
    pub pass: bool,
    /// The numbers, for people.
    pub detail: String,
    /// The numbers, for machines.
    pub figures: serde_json::Value,
}

impl RuleResult {
    fn new(
        (rule, title): (&'static str, &'static str),
        pass: bool,
        detail: String,
        figures: serde_json::Value,
    ) -> Self {
        Self { rule, title, pass, detail, figures }
    }
}

/// One voucher's audit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VoucherAudit {
    pub voucher_id: VoucherId,
    /// Every rule passed.
    pub pass: bool,
    pub rules: Vec<RuleResult>,
    /// The log's figures the rules were checked on.
    pub books: Books,
}

impl VoucherAudit {
    /// The rules that failed.
    pub fn failed(&self) -> impl Iterator<Item = &RuleResult> {
        self.rules.iter().filter(|rule| !rule.pass)
    }
}

/// The audit of every chosen voucher.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Audit {
    /// Every voucher passed.
    pub pass: bool,
    /// Whether the live stores were compared.
    pub live: bool,
    /// Whether the payment provider was compared.
    pub provider: bool,
    pub vouchers: Vec<VoucherAudit>,
}

impl Audit {
    /// Gathers voucher audits.
    pub fn new(vouchers: Vec<VoucherAudit>, live: bool) -> Self {
        Self { pass: vouchers.iter().all(|voucher| voucher.pass), live, provider: false, vouchers }
    }

    /// Says the vouchers were also compared with the payment provider.
    pub fn against_provider(mut self) -> Self {
        self.provider = true;
        self
    }
}

/// Checks `log`'s books, and against `live` when given.
pub fn audit_voucher(log: &VoucherLog, live: Option<&LiveFigures>) -> VoucherAudit {
    audit_voucher_against(log, live, None)
}

/// Checks `log`'s books, against `live` and against the payment
/// `provider`'s answers when given (the provider's rule applies to sales
/// that take money).
pub fn audit_voucher_against(
    log: &VoucherLog,
    live: Option<&LiveFigures>,
    provider: Option<&ProviderFigures>,
) -> VoucherAudit {
    let books = log.books();
    let mut rules = vec![
        rules::stock_balance(log, &books),
        rules::one_decision_per_acceptance(log, &books),
        rules::cancel_confirm_after_creation(log),
        rules::per_user_limit(log),
        rules::returns_resold_or_left(&books),
    ];
    let takes_payments = log.takes_payments();
    if takes_payments {
        rules.push(payments::payments_settled(log));
        rules.push(payments::no_order_paid_twice(log));
        rules.push(payments::paid_in_time(log));
        rules.push(payments::amounts_match(log));
    }
    if log.queue_mode() {
        rules.push(queue::seed_committed(log));
        rules.push(queue::served_in_shuffle(log));
        rules.push(queue::entries_single_use(log));
        rules.push(queue_windows::entries_in_time(log));
        rules.push(queue_beacon::beacon(log));
    }
    if log.draw_mode() {
        rules.extend(draw::rules(log));
    }
    if let Some(live) = live {
        rules.push(rules::view_matches_log(&books, live));
        rules.push(rules::stock_matches_log(&books, live));
        rules.push(rules::gate_matches_log(log, &books, live));
    }
    if let (Some(provider), true) = (provider, takes_payments) {
        rules.push(payments::provider_agrees(log, provider));
    }
    VoucherAudit { voucher_id: log.voucher_id, pass: rules.iter().all(|rule| rule.pass), rules, books }
}

#[cfg(test)]
mod tests;
