//! What analysts and operators do with the log, as a library the `seckill`
//! command (and the tests) call: the log is the source of truth, and
//! everything here reads it without disturbing the services (no consumer
//! group of theirs is touched).

pub mod audit;
mod beacon_plan;
mod chunks;
pub mod draw;
mod error;
pub mod export;
pub mod groups;
pub mod rebuild;
pub mod rebuild_stock;
pub mod reconcile;
pub mod replay;
pub mod report;
pub mod sale;
pub mod schema;
pub mod stats;
pub mod table;
pub mod topics;
mod wording;

pub use error::AnalyticsError;
