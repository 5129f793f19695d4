//! The processor's rules, kept pure so every store backend applies the same
//! ones.
//!
//! | order stands at  | cancel (requested) | cancel (expired) | refund (admin) | confirm (free) | payment          |
//! |------------------|--------------------|------------------|----------------|----------------|------------------|
//! | not accepted yet | parked             | parked           | parked         | parked         | parked           |
//! | `OrderFailed`    | ignored            | ignored          | ignored        | ignored        | refunded (late)  |
//! | `OrderCreated`   | cancelled          | cancelled        | ignored        | paid if free   | paid, or refunded|
//! | `OrderPaid`      | cancelled if free  | ignored (paid)   | refunded       | repeated       | repeated, or refunded (duplicate) |
//! | `OrderCancelled` | repeated           | repeated         | repeated       | ignored        | refunded (late)  |
//!
//! "Repeated" emits the order's outcomes again, unchanged: a redelivered
//! request (or one whose outcome was lost in a crash) reaches the same
//! result. "Parked" requests overtook their order on the way to the log
//! (see [`OrderRecord::parked`]) and are decided right after it.
//!
//! A payment pays a created order only if it is for the amount the order
//! owes and the provider completed it before the order's `pay_by`
//! ([`StockLevel::hold_deadline`]): the deadline decides by the provider's
//! time, not by which of the payment and the expiry reaches the log first.
//! Every payment that does not pay its order is refunded, once per payment
//! id ([`OrderRecord::refunds`]).
//!
//! An order is created only if the persistent stock has its units and the
//! user's created orders stay within the per-user limit, and only if it was
//! accepted while the log says the sale was open (not paused, not ended;
//! [`SaleWindow`]): Redis checks all of it first, but Redis can lose its
//! last writes; the log and the store cannot.

mod record;
mod window;

pub use record::{OrderRecord, Request, MAX_CHECKOUTS, MAX_PARKED};
pub use window::{made_at, PauseChange, SaleWindow, MAX_PAUSE_CHANGES};

use chrono::{DateTime, Duration, DurationRound, Utc};
use serde::{Deserialize, Serialize};

use crate::event::{
    CancelReason, Envelope, Event, FailReason, OrderAccepted, OrderCancelled, OrderCreated, OrderFailed, OrderPaid,
    OrderRequest, PaymentReceived, RefundReason, RefundRequested, MAX_STOCK,
};
use crate::ids::OrderId;

/// A voucher's persistent stock as the processor keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockLevel {
    /// Units for sale in all: the initial stock plus every addition.
    pub stock: u64,
    /// Units not taken by a created (and not cancelled) order.
    pub remaining: u64,
    /// The voucher's `payment_seconds` (0: orders never expire).
    #[serde(default)]
    pub hold_seconds: u32,
    /// Most units one user's created orders may hold; None for levels
    /// stored before the processor checked it (nothing is checked then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_user_limit: Option<u32>,
}

impl StockLevel {
    /// A voucher's level as defined: all of its stock left.
    pub fn new(stock: u64, hold_seconds: u32, per_user_limit: u32) -> Self {
        Self { stock, remaining: stock, hold_seconds, per_user_limit: Some(per_user_limit) }
    }

    /// Adds `units` to the stock and to what is left, capped once so the
    /// stock stays within `MAX_STOCK`: both grow by the units that fit (as
    /// `update_voucher.lua` caps them in the gate).
    pub fn add(&mut self, units: u64) {
        let fitting = units.min(MAX_STOCK.saturating_sub(self.stock));
        self.stock += fitting;
        self.remaining = self.remaining.saturating_add(fitting).min(self.stock);
    }

    /// The order's `pay_by`: when a created order expires unless paid; None
    /// when the voucher holds orders without payment. Rounded up to a whole
    /// second, because providers stamp payments in whole seconds (Stripe's
    /// `created`): a payment stamped second `s` happened before a deadline
    /// on a whole second exactly when `s` is before it, so the deadline is
    /// judged without error from the provider's own time. Saturates at the
    /// last instant chrono can hold rather than panic on overflow.
    pub fn hold_deadline(&self, created: &OrderCreated) -> Option<DateTime<Utc>> {
        (self.hold_seconds > 0).then(|| pay_by(created.decided_at, self.hold_seconds))
    }
}

/// `decided_at` + `seconds`, rounded up to the next whole second.
pub fn pay_by(decided_at: DateTime<Utc>, seconds: u32) -> DateTime<Utc> {
    let end = decided_at.checked_add_signed(Duration::seconds(i64::from(seconds))).unwrap_or(DateTime::<Utc>::MAX_UTC);
    match end.duration_trunc(Duration::seconds(1)) {
        Ok(whole) if whole == end => end,
        Ok(whole) => whole.checked_add_signed(Duration::seconds(1)).unwrap_or(DateTime::<Utc>::MAX_UTC),
        Err(_) => end,
    }
}

/// What a request leads to.
#[derive(Clone, Debug, PartialEq)]
// Returned and matched at once, never stored in bulk: an unboxed Envelope
// (a draw's beacon plan made it pass the lint's 200 bytes) costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum FollowUp {
    /// A new outcome to store and emit.
    Apply(Envelope),
    /// The request was decided before: emit the stored outcomes again.
    Repeat,
    /// The order has not arrived yet: keep the request until it does.
    Park,
    /// Nothing to do; the reason is for logs and metrics.
    Ignore(&'static str),
}

/// Decides a cancellation of the order `record` describes; on `Apply`, the
/// units are back in `level`. An admin's refund (reason `refunded`) applies
/// to paid orders only; the owner cancels unpaid ones (or a free claim).
pub fn cancel(
    level: Option<&mut StockLevel>,
    record: &OrderRecord,
    request: &OrderRequest,
    now: DateTime<Utc>,
) -> FollowUp {
    let reason = request.reason.unwrap_or(CancelReason::Requested);
    if reason == CancelReason::Expired && !settled_every_checkout(record, request) {
        // The sweeper settled fewer sessions than the log holds: one it had
        // not read yet may have been paid in time. It settles the order
        // again on a later sweep, this session included.
        return FollowUp::Ignore("unsettled_checkout");
    }
    let (order, since) = match (record.latest().map(|envelope| &envelope.event), reason) {
        (None, _) => return FollowUp::Park,
        (Some(Event::OrderCancelled(_)), _) => return FollowUp::Repeat,
        (Some(Event::OrderCreated(_)), CancelReason::Refunded) => return FollowUp::Ignore("not_paid"),
        (Some(Event::OrderCreated(created)), _) => (&created.order, created.decided_at),
        (Some(Event::OrderPaid(_)), CancelReason::Expired) => return FollowUp::Ignore("paid"),
        // Money was taken: only an admin's refund gives it back.
        (Some(Event::OrderPaid(paid)), CancelReason::Requested) if paid.payment_id.is_some() => {
            return FollowUp::Ignore("paid")
        }
        (Some(Event::OrderPaid(paid)), _) => (&paid.order, paid.paid_at),
        (Some(_), _) => return FollowUp::Ignore("not_created"),
    };
    let Some(level) = level else { return FollowUp::Ignore("unknown_voucher") };
    level.remaining = level.remaining.saturating_add(u64::from(order.quantity)).min(level.stock);
    // Never before the outcome it follows, whatever the clocks did: readers
    // order an order's changes by these times.
    FollowUp::Apply(Envelope::new(Event::OrderCancelled(OrderCancelled {
        order: order.clone(),
        cancelled_at: now.max(since),
        reason,
        remaining: level.remaining,
    })))
}

/// Whether an expiry covers every checkout session the log holds for the
/// order: one asked for without a provider's word covers them all.
fn settled_every_checkout(record: &OrderRecord, request: &OrderRequest) -> bool {
    request
        .settled_checkouts
        .as_ref()
        .is_none_or(|settled| record.checkouts.iter().all(|session| settled.contains(session)))
}

/// Decides a free order's claim (`confirm`), asked for by `request`. The
/// deadline decides by time, not by which of the claim and the expiry
/// reaches the log first: a claim asked for at or after `pay_by` never
/// succeeds (the order expires), one asked for before it does however late
/// it is decided. A priced order is only ever paid.
pub fn confirm(
    level: Option<&StockLevel>,
    record: &OrderRecord,
    request: &OrderRequest,
    now: DateTime<Utc>,
) -> FollowUp {
    match record.latest().map(|envelope| &envelope.event) {
        None => FollowUp::Park,
        Some(Event::OrderCreated(created)) if created.order.amount > 0 => FollowUp::Ignore("payment_required"),
        Some(Event::OrderCreated(created)) => {
            let deadline = level.and_then(|level| level.hold_deadline(created));
            if deadline.is_some_and(|deadline| request.requested_at >= deadline) {
                return FollowUp::Ignore("expired");
            }
            FollowUp::Apply(Envelope::new(Event::OrderPaid(OrderPaid {
                order: created.order.clone(),
                paid_at: now.max(created.decided_at),
                payment_id: None,
            })))
        }
        Some(Event::OrderPaid(_)) => FollowUp::Repeat,
        Some(Event::OrderCancelled(_)) => FollowUp::Ignore("cancelled"),
        Some(_) => FollowUp::Ignore("not_created"),
    }
}

/// Decides a payment the provider reported: `Apply` carries `OrderPaid`,
/// or a `RefundRequested` for a payment that does not pay its order.
pub fn pay(level: Option<&StockLevel>, record: &OrderRecord, payment: &PaymentReceived) -> FollowUp {
    if record.paid_by(&payment.payment_id) || record.refunded(&payment.payment_id) {
        return FollowUp::Repeat;
    }
    let refund = |reason| FollowUp::Apply(refund_request(payment, reason));
    match record.latest().map(|envelope| &envelope.event) {
        None => FollowUp::Park,
        Some(Event::OrderCreated(created)) => {
            let order = &created.order;
            if order.amount != payment.amount || order.currency != Some(payment.currency) {
                return refund(RefundReason::AmountMismatch);
            }
            let deadline = level.and_then(|level| level.hold_deadline(created));
            if deadline.is_some_and(|deadline| payment.paid_at >= deadline) {
                return refund(RefundReason::Late);
            }
            FollowUp::Apply(Envelope::new(Event::OrderPaid(OrderPaid {
                order: order.clone(),
                paid_at: payment.paid_at.max(created.decided_at),
                payment_id: Some(payment.payment_id.clone()),
            })))
        }
        Some(Event::OrderPaid(_)) => refund(RefundReason::Duplicate),
        Some(_) => refund(RefundReason::Late),
    }
}

/// The refund an admin's refund of `paid` asks the provider for; None for
/// a free claim, which took no money.
pub fn admin_refund(paid: &OrderPaid, now: DateTime<Utc>) -> Option<Envelope> {
    let (payment_id, currency) = (paid.payment_id.clone()?, paid.order.currency?);
    Some(Envelope::new(Event::RefundRequested(RefundRequested {
        order_id: paid.order.order_id,
        voucher_id: paid.order.voucher_id,
        payment_id,
        amount: paid.order.amount,
        currency,
        reason: RefundReason::Admin,
        requested_at: now,
    })))
}

/// The refund of `payment`, for `reason`.
pub fn refund_request(payment: &PaymentReceived, reason: RefundReason) -> Envelope {
    Envelope::new(Event::RefundRequested(RefundRequested {
        order_id: payment.order_id,
        voucher_id: payment.voucher_id,
        payment_id: payment.payment_id.clone(),
        amount: payment.amount,
        currency: payment.currency,
        reason,
        requested_at: crate::clock::now(),
    }))
}

/// Decides `order` against `level` (None: the voucher is unknown), given the
/// units `held` by the user's created orders, and, when created, takes its
/// units from `level`.
pub fn decide(level: Option<&mut StockLevel>, held: u64, order: &OrderAccepted) -> Result<u64, FailReason> {
    let level = level.ok_or(FailReason::UnknownVoucher)?;
    let quantity = u64::from(order.quantity);
    if level.per_user_limit.is_some_and(|limit| held.saturating_add(quantity) > u64::from(limit)) {
        return Err(FailReason::LimitExceeded);
    }
    if level.remaining < quantity {
        return Err(FailReason::SoldOut);
    }
    level.remaining -= quantity;
    Ok(level.remaining)
}

/// Decides `order` as [`decide`] does, after its `Idempotency-Key` and the
/// voucher's `window`: `first` is the order the same user's key for this
/// voucher named before, if any. A second order under one key is a retry
/// that Redis admitted again (a failover lost the first admission, so the
/// retry's call found no record of it): it fails as
/// [`FailReason::DuplicateRequest`] and takes nothing, whatever became of
/// the first, which is the request's one order. The first order in the log
/// wins, so every replay decides the same. An order accepted while the log
/// says the sale was paused or over fails [`FailReason::Paused`] or
/// [`FailReason::Ended`] and takes nothing (Redis lost the change it
/// should have refused it by).
pub fn decide_request(
    level: Option<&mut StockLevel>,
    window: Option<&SaleWindow>,
    held: u64,
    first: Option<OrderId>,
    order: &OrderAccepted,
) -> Result<u64, FailReason> {
    if first.is_some_and(|first| first != order.order_id) {
        return Err(FailReason::DuplicateRequest);
    }
    // An unknown voucher stays `unknown_voucher`, whatever its window.
    if let (Some(_), Some(refused)) = (&level, window.and_then(|window| window.refuses(order.accepted_at))) {
        return Err(refused);
    }
    decide(level, held, order)
}

/// The outcome event for a decision.
pub fn outcome(order: OrderAccepted, decision: Result<u64, FailReason>, decided_at: DateTime<Utc>) -> Envelope {
    // An order is never decided before it was accepted, even across clock skew
    // between the ingress and processor hosts.
    let decided_at = decided_at.max(order.accepted_at);
    Envelope::new(match decision {
        Ok(remaining) => Event::OrderCreated(OrderCreated { order, decided_at, remaining, pay_by: None }),
        Err(reason) => Event::OrderFailed(OrderFailed { order, decided_at, reason }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{OrderId, UserId, VoucherId};

    fn order(quantity: u32) -> OrderAccepted {
        OrderAccepted::now(VoucherId::generate(), UserId::parse("u1").expect("valid"), quantity)
    }

    fn level(stock: u64, hold_seconds: u32, per_user_limit: u32) -> StockLevel {
        StockLevel::new(stock, hold_seconds, per_user_limit)
    }

    #[test]
    fn takes_units_until_exactly_zero() {
        let mut level = level(3, 0, 100);
        assert_eq!(decide(Some(&mut level), 0, &order(2)), Ok(1));
        assert_eq!(decide(Some(&mut level), 0, &order(2)), Err(FailReason::SoldOut));
        assert_eq!(decide(Some(&mut level), 0, &order(1)), Ok(0));
        assert_eq!(decide(Some(&mut level), 0, &order(1)), Err(FailReason::SoldOut));
        assert_eq!(level.remaining, 0);
    }

    #[test]
    fn a_second_order_under_one_idempotency_key_is_a_duplicate_and_takes_nothing() {
        let mut level = level(5, 0, 5);
        let first = order(1);
        assert_eq!(decide_request(Some(&mut level), None, 0, None, &first), Ok(4), "the key's first order");
        let retry = OrderAccepted { idempotency_key: Some("k".into()), ..order(1) };
        assert_eq!(
            decide_request(Some(&mut level), None, 1, Some(first.order_id), &retry),
            Err(FailReason::DuplicateRequest)
        );
        assert_eq!(level.remaining, 4, "a duplicate takes nothing");
        assert_eq!(decide_request(None, None, 0, Some(first.order_id), &retry), Err(FailReason::DuplicateRequest));
    }

    /// The window of a sale paused at `paused`, resumed at `resumed`.
    fn paused_between(paused: DateTime<Utc>, resumed: DateTime<Utc>) -> SaleWindow {
        let change = |at: DateTime<Utc>, paused| {
            let millis = u64::try_from(at.timestamp_millis()).expect("after 1970");
            let id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
                uuid::NoContext,
                millis / 1000,
                (millis % 1000) as u32 * 1_000_000,
            ));
            (
                id,
                crate::event::VoucherUpdated { voucher_id: VoucherId::generate(), paused, ends_at: None, add_stock: 0 },
            )
        };
        let mut window = SaleWindow::new(resumed + Duration::hours(1));
        for (id, update) in [change(paused, Some(true)), change(resumed, Some(false))] {
            window.apply(id, &update);
        }
        window
    }

    #[test]
    fn an_order_accepted_inside_a_pause_fails_and_takes_nothing() {
        let now = DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z").expect("time").with_timezone(&Utc);
        let window = paused_between(now, now + Duration::seconds(10));
        let accepted = |at| OrderAccepted { accepted_at: at, ..order(1) };
        let mut level = level(5, 0, 5);
        let before = accepted(now - Duration::milliseconds(1));
        assert_eq!(decide_request(Some(&mut level), Some(&window), 0, None, &before), Ok(4), "before the pause");
        for inside in [now, now + Duration::seconds(5), now + Duration::milliseconds(9_999)] {
            assert_eq!(
                decide_request(Some(&mut level), Some(&window), 1, None, &accepted(inside)),
                Err(FailReason::Paused)
            );
        }
        assert_eq!(level.remaining, 4, "a refused order takes nothing");
        let after = accepted(now + Duration::seconds(10));
        assert_eq!(decide_request(Some(&mut level), Some(&window), 1, None, &after), Ok(3), "after the resume");
        let late = accepted(now + Duration::hours(2));
        assert_eq!(decide_request(Some(&mut level), Some(&window), 2, None, &late), Err(FailReason::Ended));
        assert_eq!(decide_request(None, Some(&window), 0, None, &late), Err(FailReason::UnknownVoucher));
    }

    #[test]
    fn unknown_voucher_fails() {
        assert_eq!(decide(None, 0, &order(1)), Err(FailReason::UnknownVoucher));
    }

    #[test]
    fn the_limit_counts_the_units_the_user_already_holds() {
        let mut level = level(10, 0, 3);
        assert_eq!(decide(Some(&mut level), 1, &order(2)), Ok(8));
        assert_eq!(decide(Some(&mut level), 3, &order(1)), Err(FailReason::LimitExceeded));
        assert_eq!(decide(Some(&mut level), 2, &order(2)), Err(FailReason::LimitExceeded));
        assert_eq!(level.remaining, 8, "a refused order takes nothing");
        let mut unchecked = StockLevel { per_user_limit: None, ..level };
        assert_eq!(decide(Some(&mut unchecked), 1_000, &order(1)), Ok(7), "levels stored before limits were kept");
    }

    fn request(reason: Option<CancelReason>) -> OrderRequest {
        OrderRequest {
            order_id: OrderId::generate(),
            voucher_id: VoucherId::generate(),
            reason,
            requested_at: Utc::now(),
            settled_checkouts: None,
        }
    }

    fn applied(follow_up: FollowUp) -> Envelope {
        match follow_up {
            FollowUp::Apply(envelope) => envelope,
            other => panic!("expected a new outcome, got {other:?}"),
        }
    }

    fn decided(outcome: Envelope) -> OrderRecord {
        OrderRecord { decision: Some(outcome), ..OrderRecord::default() }
    }

    #[test]
    fn cancelling_returns_the_units_once_and_only_for_created_orders() {
        let mut level = level(5, 0, 5);
        let created = decided(outcome(order(2), decide(Some(&mut level), 0, &order(2)), Utc::now()));
        assert_eq!(level.remaining, 3);

        let cancel_request = request(Some(CancelReason::Requested));
        let cancelled = applied(cancel(Some(&mut level), &created, &cancel_request, Utc::now()));
        assert_eq!(level.remaining, 5);
        assert!(matches!(&cancelled.event, Event::OrderCancelled(c) if c.remaining == 5));
        let cancelled = OrderRecord { cancelled: Some(cancelled), ..created };
        assert_eq!(cancel(Some(&mut level), &cancelled, &cancel_request, Utc::now()), FollowUp::Repeat);
        assert_eq!(level.remaining, 5, "a repeated cancellation returns nothing more");

        let failed = decided(outcome(order(1), Err(FailReason::SoldOut), Utc::now()));
        assert_eq!(cancel(Some(&mut level), &failed, &cancel_request, Utc::now()), FollowUp::Ignore("not_created"));
        assert_eq!(confirm(None, &cancelled, &request(None), Utc::now()), FollowUp::Ignore("cancelled"));
    }

    #[test]
    fn an_expiry_is_decided_only_over_every_checkout_the_log_holds() {
        let mut level = level(5, 60, 5);
        let created = decided(outcome(order(2), decide(Some(&mut level), 0, &order(2)), Utc::now()));
        let with_session = OrderRecord { checkouts: vec!["cs_first".into(), "cs_second".into()], ..created };
        let expiry = |settled: Option<Vec<&str>>| OrderRequest {
            settled_checkouts: settled.map(|ids| ids.into_iter().map(String::from).collect()),
            ..request(Some(CancelReason::Expired))
        };

        let behind = expiry(Some(vec!["cs_first"]));
        assert_eq!(
            cancel(Some(&mut level), &with_session, &behind, Utc::now()),
            FollowUp::Ignore("unsettled_checkout")
        );
        assert_eq!(level.remaining, 3, "an expiry that missed a session returns nothing");
        let none_read = expiry(Some(Vec::new()));
        assert_eq!(
            cancel(Some(&mut level), &with_session, &none_read, Utc::now()),
            FollowUp::Ignore("unsettled_checkout")
        );

        let every = expiry(Some(vec!["cs_second", "cs_first"]));
        assert!(matches!(cancel(Some(&mut level), &with_session, &every, Utc::now()), FollowUp::Apply(_)));
        assert_eq!(level.remaining, 5);

        let mut level = StockLevel::new(5, 60, 5);
        let owner = OrderRequest { settled_checkouts: Some(Vec::new()), ..request(Some(CancelReason::Requested)) };
        assert!(
            matches!(cancel(Some(&mut level), &with_session, &owner, Utc::now()), FollowUp::Apply(_)),
            "only an expiry waits for the provider's word; an owner's cancel does not"
        );
        let legacy = expiry(None);
        let mut level = StockLevel::new(5, 60, 5);
        assert!(
            matches!(cancel(Some(&mut level), &with_session, &legacy, Utc::now()), FollowUp::Apply(_)),
            "an expiry without a provider (or from an older log) is decided on the log's word"
        );
    }

    #[test]
    fn requests_before_their_order_are_parked() {
        let mut level = level(5, 0, 5);
        let unknown = OrderRecord::default();
        assert_eq!(
            cancel(Some(&mut level), &unknown, &request(Some(CancelReason::Requested)), Utc::now()),
            FollowUp::Park
        );
        assert_eq!(confirm(Some(&level), &unknown, &request(None), Utc::now()), FollowUp::Park);
        assert_eq!(level.remaining, 5);
    }

    #[test]
    fn a_claimed_free_order_never_expires_but_can_be_cancelled_by_request() {
        let mut level = level(1, 60, 1);
        let created = outcome(order(1), decide(Some(&mut level), 0, &order(1)), Utc::now());
        let Event::OrderCreated(created_event) = &created.event else { panic!("created") };
        assert_eq!(level.hold_deadline(created_event), Some(pay_by(created_event.decided_at, 60)));

        let record = decided(created.clone());
        let confirmed = applied(confirm(Some(&level), &record, &request(None), Utc::now()));
        let record = OrderRecord { paid: Some(confirmed), ..record };
        assert_eq!(confirm(Some(&level), &record, &request(None), Utc::now()), FollowUp::Repeat);
        let expiry = request(Some(CancelReason::Expired));
        assert_eq!(cancel(Some(&mut level), &record, &expiry, Utc::now()), FollowUp::Ignore("paid"));
        assert_eq!(level.remaining, 0);
        let refund = request(Some(CancelReason::Requested));
        applied(cancel(Some(&mut level), &record, &refund, Utc::now()));
        assert_eq!(level.remaining, 1);
    }

    #[test]
    fn the_hold_deadline_decides_a_confirmation_by_when_it_was_asked_for() {
        let mut level = level(2, 60, 2);
        let created = outcome(order(1), decide(Some(&mut level), 0, &order(1)), Utc::now());
        let Event::OrderCreated(created_event) = &created.event else { panic!("created") };
        let deadline = pay_by(created_event.decided_at, 60);
        let record = decided(created.clone());
        let asked_at = |at| OrderRequest { requested_at: at, ..request(None) };
        // Decided an hour after the deadline (the processor was down): what
        // counts is when the owner asked.
        let much_later = deadline + Duration::hours(1);
        let in_time = confirm(Some(&level), &record, &asked_at(deadline - Duration::seconds(1)), much_later);
        assert!(matches!(in_time, FollowUp::Apply(_)), "{in_time:?}");
        for late in [deadline, deadline + Duration::seconds(1)] {
            assert_eq!(confirm(Some(&level), &record, &asked_at(late), much_later), FollowUp::Ignore("expired"));
        }
        // A voucher that holds orders without a deadline has none to miss.
        let unheld = StockLevel { hold_seconds: 0, ..level };
        assert!(matches!(confirm(Some(&unheld), &record, &asked_at(much_later), much_later), FollowUp::Apply(_)));
    }

    #[test]
    fn outcomes_never_precede_the_outcome_they_follow() {
        let mut level = level(1, 0, 1);
        let late = Utc::now() + Duration::hours(1);
        let created = outcome(order(1), decide(Some(&mut level), 0, &order(1)), late);
        let record = decided(created);
        let confirmed = applied(confirm(Some(&level), &record, &request(None), Utc::now()));
        let Event::OrderPaid(c) = &confirmed.event else { panic!("confirmed") };
        assert_eq!(c.paid_at, late, "a processor clock behind the decision's does not reorder");
        let record = OrderRecord { paid: Some(confirmed), ..record };
        let cancelled = applied(cancel(Some(&mut level), &record, &request(None), Utc::now()));
        let Event::OrderCancelled(c) = &cancelled.event else { panic!("cancelled") };
        assert_eq!(c.cancelled_at, late);
    }

    #[test]
    fn added_stock_is_bounded() {
        let mut level = StockLevel { remaining: 0, ..level(2, 0, 1) };
        level.add(3);
        assert_eq!((level.stock, level.remaining), (5, 3));
        level.add(u64::MAX);
        assert_eq!(level.stock, MAX_STOCK);

        // Sold out one unit below the cap: five more add one unit, to both.
        let mut near_cap = StockLevel { stock: MAX_STOCK - 1, remaining: 0, hold_seconds: 0, per_user_limit: None };
        near_cap.add(5);
        assert_eq!((near_cap.stock, near_cap.remaining), (MAX_STOCK, 1));
    }

    fn priced(quantity: u32) -> OrderAccepted {
        let currency = crate::money::Currency::parse("EUR").expect("valid");
        OrderAccepted { amount: 250 * u64::from(quantity), currency: Some(currency), ..order(quantity) }
    }

    fn payment(order: &OrderAccepted, id: &str, paid_at: DateTime<Utc>) -> PaymentReceived {
        PaymentReceived {
            order_id: order.order_id,
            voucher_id: order.voucher_id,
            payment_id: id.to_owned(),
            amount: order.amount,
            currency: order.currency.expect("priced"),
            paid_at,
            source: crate::event::PaymentSource::Webhook,
        }
    }

    fn refund_reason(follow_up: FollowUp) -> RefundReason {
        match applied(follow_up).event {
            Event::RefundRequested(refund) => refund.reason,
            other => panic!("expected a refund, got {other:?}"),
        }
    }

    #[test]
    fn deadlines_are_whole_seconds_never_earlier_than_the_window() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc);
        assert_eq!(pay_by(at("2026-01-01T00:00:00.001Z"), 60), at("2026-01-01T00:01:01Z"));
        assert_eq!(pay_by(at("2026-01-01T00:00:00Z"), 60), at("2026-01-01T00:01:00Z"));
        assert_eq!(pay_by(DateTime::<Utc>::MAX_UTC, 60), DateTime::<Utc>::MAX_UTC);
    }

    #[test]
    fn a_payment_pays_a_created_order_only_in_time_and_for_its_amount() {
        let mut level = level(5, 60, 5);
        let order = priced(2);
        let created = outcome(order.clone(), decide(Some(&mut level), 0, &order), Utc::now());
        let Event::OrderCreated(created_event) = &created.event else { panic!("created") };
        let deadline = pay_by(created_event.decided_at, 60);
        let record = decided(created.clone());

        let in_time = payment(&order, "pi_1", deadline - Duration::milliseconds(1));
        let paid = applied(pay(Some(&level), &record, &in_time));
        assert!(matches!(&paid.event, Event::OrderPaid(p) if p.payment_id.as_deref() == Some("pi_1")));
        for late in [deadline, deadline + Duration::milliseconds(50)] {
            assert_eq!(refund_reason(pay(Some(&level), &record, &payment(&order, "pi_2", late))), RefundReason::Late);
        }
        let short = PaymentReceived { amount: order.amount - 1, ..in_time.clone() };
        assert_eq!(refund_reason(pay(Some(&level), &record, &short)), RefundReason::AmountMismatch);
        let dollars = PaymentReceived { currency: crate::money::Currency::parse("USD").expect("valid"), ..in_time };
        assert_eq!(refund_reason(pay(Some(&level), &record, &dollars)), RefundReason::AmountMismatch);
        assert_eq!(pay(Some(&level), &OrderRecord::default(), &payment(&order, "pi_1", deadline)), FollowUp::Park);
    }

    #[test]
    fn every_payment_that_does_not_pay_its_order_is_refunded_once() {
        let mut level = level(5, 60, 5);
        let order = priced(1);
        let created = outcome(order.clone(), decide(Some(&mut level), 0, &order), Utc::now());
        let now = Utc::now();
        let first = payment(&order, "pi_1", now);
        let record = decided(created);
        let paid = applied(pay(Some(&level), &record, &first));
        let record = OrderRecord { paid: Some(paid), ..record };
        assert_eq!(pay(Some(&level), &record, &first), FollowUp::Repeat, "the same payment reported again");
        let second = payment(&order, "pi_2", now);
        let refund = applied(pay(Some(&level), &record, &second));
        assert!(matches!(&refund.event, Event::RefundRequested(r) if r.reason == RefundReason::Duplicate));
        let record = OrderRecord { refunds: vec![refund], ..record };
        assert_eq!(pay(Some(&level), &record, &second), FollowUp::Repeat, "refunded once, whatever redelivers it");

        // The owner cannot take back a paid order, the sweeper cannot expire
        // it; an admin's refund returns the units and asks for the money.
        let owner = request(Some(CancelReason::Requested));
        assert_eq!(cancel(Some(&mut level), &record, &owner, now), FollowUp::Ignore("paid"));
        assert_eq!(
            cancel(Some(&mut level), &record, &request(Some(CancelReason::Expired)), now),
            FollowUp::Ignore("paid")
        );
        let before = level.remaining;
        let refunded = applied(cancel(Some(&mut level), &record, &request(Some(CancelReason::Refunded)), now));
        assert!(matches!(&refunded.event, Event::OrderCancelled(c) if c.reason == CancelReason::Refunded));
        assert_eq!(level.remaining, before + 1);
        let Some(Event::OrderPaid(paid)) = record.paid.as_ref().map(|e| &e.event) else { panic!("paid") };
        let admin = admin_refund(paid, now).expect("a paid order has money to give back");
        assert!(
            matches!(&admin.event, Event::RefundRequested(r) if r.reason == RefundReason::Admin && r.payment_id == "pi_1")
        );

        // A payment for a cancelled order is late; a free claim takes no money.
        let cancelled = OrderRecord { cancelled: Some(refunded), ..record };
        assert_eq!(refund_reason(pay(Some(&level), &cancelled, &payment(&order, "pi_3", now))), RefundReason::Late);
        assert_eq!(pay(Some(&level), &cancelled, &first), FollowUp::Repeat, "the payment that paid it");
        let free = OrderPaid { order: order.clone(), paid_at: now, payment_id: None };
        assert_eq!(admin_refund(&free, now), None);
        assert_eq!(
            confirm(Some(&level), &decided(outcome(order.clone(), Ok(0), now)), &request(None), now),
            FollowUp::Ignore("payment_required")
        );
    }
}
