//! The projector: folds the sales and orders topics into the order-status
//! view and serves it.
//!
//! Events of one order arrive from two topics in no fixed relative order and
//! possibly more than once; the view's merge rule (statuses only move
//! forward, counters move only on a transition) makes applying them
//! idempotent and order-independent. Offsets are stored only after a batch
//! is committed to the view.

mod app;
pub mod config;
mod error;
mod pipeline;

pub use app::{run_standalone, App};
pub use config::ProjectorConfig;
pub use error::ProjectorError;
