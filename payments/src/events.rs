//! The provider's event types the platform's webhook endpoint subscribes
//! to (Stripe's `enabled_events`), in one place: the ingress acts on the
//! first two and acknowledges the rest, operators register exactly these
//! (docs/OPERATIONS.md, "Payments with Stripe"), and the tests' sandbox
//! sends only these.

/// A buyer finished a checkout: paid, or a bank debit still settling
/// (`payment_status` tells).
pub const CHECKOUT_COMPLETED: &str = "checkout.session.completed";
/// A checkout's bank debit settled.
pub const CHECKOUT_ASYNC_SUCCEEDED: &str = "checkout.session.async_payment_succeeded";
/// A checkout's bank debit failed: the order stays unpaid and expires.
pub const CHECKOUT_ASYNC_FAILED: &str = "checkout.session.async_payment_failed";
/// A checkout expired unpaid.
pub const CHECKOUT_EXPIRED: &str = "checkout.session.expired";

/// Every type the endpoint subscribes to: the two that pay an order, then
/// those acknowledged without a record (an expiry or failed debit closes
/// nothing before `pay_by`; refunds are followed by the refund worker,
/// which asks the provider itself).
pub const SUBSCRIBED: [&str; 7] = [
    CHECKOUT_COMPLETED,
    CHECKOUT_ASYNC_SUCCEEDED,
    CHECKOUT_ASYNC_FAILED,
    CHECKOUT_EXPIRED,
    "charge.refunded",
    "refund.updated",
    "refund.failed",
];
