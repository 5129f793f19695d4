//! The processor: turns admitted orders into decisions.
//!
//! It consumes the sales topic in a consumer group (a voucher's events are
//! one partition, so one instance decides all of a voucher's orders, in
//! order), applies each batch to the persistent stock atomically, produces
//! the outcomes to the orders topic, waits for their acknowledgement, and
//! only then stores the batch's offsets. Deciding needs no Redis: the units
//! of failed and cancelled orders go back to Redis from the orders topic,
//! in a consumer group of its own (`gate_follower`). A crash replays unacknowledged
//! batches; the store recognises decided orders and re-emits their original
//! outcome, so a replay changes nothing.
//!
//! Payments are decided the same way (`PaymentReceived` on the sales
//! topic). With a payment provider configured it also settles orders with
//! the provider before closing them unpaid (`reconcile`), by the checkout
//! sessions the log recorded for each order (`CheckoutOpened`), gives back
//! every payment it refunds, and expires the checkouts of every order that
//! closes, in a consumer group of its own (`refunds`, `closer`).

mod app;
mod closer;
pub mod config;
mod error;
mod expiry;
mod gate_follower;
mod pending_refunds;
mod pipeline;
mod reconcile;
mod refunds;
mod stock_gauge;
mod watch;

pub use app::{run_standalone, App};
pub use config::ProcessorConfig;
pub use error::ProcessorError;
