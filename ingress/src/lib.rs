//! The ingress: the platform's front door.
//!
//! `POST /api/v1/vouchers/{id}/orders` runs one atomic Lua admission check
//! in Redis (window, per-user limit, stock, decrement, record), publishes
//! `OrderAccepted` to the sales topic keyed by voucher and waits for the
//! broker's acknowledgement, then answers `202`. Redis is the fast gate; the
//! log is the record. Admin routes create vouchers; query routes read the
//! order-status view.

mod app;
pub mod config;
mod error;
mod relay;
mod routes;
mod sold_out;

pub use app::{run_standalone, App, Dependencies};
pub use config::IngressConfig;
pub use error::IngressError;
