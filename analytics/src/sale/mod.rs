//! One sale as the log tells it, for the report and the audit.
//!
//! [`read_sales`] reads the sales and orders topics (with the replay's
//! reader: no consumer group) and folds each chosen voucher's events into a
//! [`VoucherLog`]: every fact about the voucher and its orders, each event
//! once by its id, with where it first appeared in its topic. From that:
//! - [`VoucherLog::books`]: units offered, sold, returned and left, orders
//!   by outcome ([`Books`]);
//! - [`Timeline::of`]: the sale over time, as the report draws it;
//! - [`VoucherLog::buyers`]: how units were spread over users;
//! - [`VoucherLog::revenue`]: money paid and refunded, per currency, and
//!   what became of each payment ([`Revenue`]);
//! - [`VoucherLog::queue`]: a queue-mode sale's waiting room ([`QueueLog`]),
//!   and [`Room::of`] its figures and waits for the report;
//! - [`VoucherLog::draw`]: a draw-mode sale's draw ([`DrawLog`]), which
//!   [`crate::draw`] verifies.

mod books;
mod draw;
mod fold;
mod position;
mod queue;
mod read;
mod revenue;
mod room;
mod timeline;
mod users;

pub(crate) use books::signed;
pub use books::{Books, ChangeKind, Resale, StockChange};
pub use draw::DrawLog;
pub use fold::{
    FinalStatus, OrderLog, Outcome, OutcomeKind, PaymentLog, Position, RefundDone, RefundRequest, Settlement,
    StockUpdate, VoucherLog,
};
pub use queue::{Holders, Logged, Pass, QueueLog};
pub use read::{read_sales, SaleRead, Selection, VoucherSale, MAX_ORDERS};
pub use revenue::{decimals, Money, Revenue, Totals, REFUND_REASONS};
pub use room::{Room, Wait};
pub use timeline::{Buckets, LatencyBin, LatencyPoint, Step, Timeline, MAX_BUCKETS};
pub use users::{Buyers, UserOrders, TOP_USERS};

#[cfg(test)]
pub(crate) mod draw_script;
#[cfg(test)]
pub(crate) mod queue_script;
#[cfg(test)]
pub(crate) mod script;
#[cfg(test)]
mod tests;
