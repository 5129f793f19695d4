//! A sale's money as the log tells it: what the provider reported paid,
//! what was refunded, per currency, and what became of each payment.
//!
//! - `paid`: the amounts of the payments `PaymentReceived` reported, each
//!   payment id once (late, duplicate and mismatched ones included: the
//!   money was taken);
//! - `refunded`: the amounts of the refunds `PaymentRefunded` acknowledged,
//!   each provider refund id once;
//! - `net`: paid minus refunded, the money the platform keeps. Once every
//!   refund asked for is done it equals the view's `revenue`.

use std::collections::BTreeMap;
use std::fmt;

use seckill_core::event::RefundReason;
use seckill_core::money::Currency;
use serde::Serialize;

use super::fold::{Settlement, VoucherLog};

/// Currencies whose minor unit is the major one (ISO 4217 exponent 0).
const NO_DECIMALS: [&str; 17] = [
    "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF",
    "XPF",
];
/// Currencies with a thousandth as minor unit (ISO 4217 exponent 3).
const THREE_DECIMALS: [&str; 7] = ["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"];

/// Every refund reason, in the order tables list them.
pub const REFUND_REASONS: [RefundReason; 4] =
    [RefundReason::Late, RefundReason::Duplicate, RefundReason::Admin, RefundReason::AmountMismatch];

/// An amount in a currency's minor unit, shown in its major unit with the
/// code: `EUR 12.50`, `JPY 1200`, `EUR -3.00`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Money {
    pub currency: Currency,
    /// Minor units; signed so a net can be shown.
    pub minor: i128,
}

impl Money {
    pub fn new(currency: Currency, minor: impl Into<i128>) -> Self {
        Self { currency, minor: minor.into() }
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = self.currency.as_str();
        let digits = decimals(self.currency);
        let sign = if self.minor < 0 { "-" } else { "" };
        let magnitude = self.minor.unsigned_abs();
        if digits == 0 {
            return write!(f, "{code} {sign}{magnitude}");
        }
        let scale = 10u128.pow(digits);
        let width = digits as usize;
        write!(f, "{code} {sign}{}.{:0width$}", magnitude / scale, magnitude % scale)
    }
}

/// How many digits of `currency`'s minor unit follow the decimal point.
pub fn decimals(currency: Currency) -> u32 {
    if NO_DECIMALS.contains(&currency.as_str()) {
        0
    } else if THREE_DECIMALS.contains(&currency.as_str()) {
        3
    } else {
        2
    }
}

/// One currency's money.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Minor units reported paid.
    pub paid: u64,
    /// Minor units refunded.
    pub refunded: u64,
}

impl Totals {
    /// Paid minus refunded (negative only in a broken log).
    pub fn net(&self) -> i128 {
        i128::from(self.paid) - i128::from(self.refunded)
    }
}

/// A sale's money and payments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Revenue {
    /// Paid and refunded per currency.
    pub by_currency: BTreeMap<Currency, Totals>,
    /// Payments reported by `PaymentReceived`, each payment id once.
    pub payments: u64,
    /// Of those, the ones that paid an order (refunded later or not).
    pub paid_orders: u64,
    /// Payments refunded, by the reason of their refund request
    /// (`unknown` when the log has the refund but not its request).
    pub refunded_by_reason: BTreeMap<&'static str, u64>,
    /// Payments whose refund was asked for and not acknowledged yet.
    pub refund_pending: u64,
}

impl Revenue {
    /// Payments refunded, whatever the reason.
    pub fn refunded(&self) -> u64 {
        self.refunded_by_reason.values().sum()
    }
}

impl VoucherLog {
    /// The sale's money and what became of its payments.
    pub fn revenue(&self) -> Revenue {
        let mut revenue = Revenue::default();
        for payment in self.payments.values() {
            if let (true, Some(currency)) = (payment.is_reported(), payment.currency) {
                let totals = revenue.by_currency.entry(currency).or_default();
                totals.paid = totals.paid.saturating_add(payment.amount);
                revenue.payments += 1;
                revenue.paid_orders += u64::from(!payment.paid.is_empty());
            }
            for refund in payment.refunds.values() {
                let totals = revenue.by_currency.entry(refund.currency).or_default();
                totals.refunded = totals.refunded.saturating_add(refund.amount);
            }
            if !payment.refunds.is_empty() {
                let reason = payment.refund_reason().map_or("unknown", RefundReason::as_str);
                *revenue.refunded_by_reason.entry(reason).or_default() += 1;
            }
            revenue.refund_pending += u64::from(payment.settlement() == Settlement::RefundPending);
        }
        revenue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn currency(code: &str) -> Currency {
        Currency::parse(code).expect("valid")
    }

    #[test]
    fn amounts_read_in_major_units_with_their_code() {
        assert_eq!(Money::new(currency("EUR"), 1_250).to_string(), "EUR 12.50");
        assert_eq!(Money::new(currency("EUR"), 5).to_string(), "EUR 0.05");
        assert_eq!(Money::new(currency("USD"), -300).to_string(), "USD -3.00");
        assert_eq!(Money::new(currency("JPY"), 1_200).to_string(), "JPY 1200");
        assert_eq!(Money::new(currency("KWD"), 1_005).to_string(), "KWD 1.005");
        assert_eq!(Money::new(currency("EUR"), 0).to_string(), "EUR 0.00");
    }
}
