//! Domain types shared by every seckill service.
//!
//! Nothing here talks to the network: ids, the versioned event schema, the
//! order-decision rule, topic names, layered configuration, metric
//! definitions, the platform's clock and the shutdown signal. Infrastructure adapters live in their
//! own crates (`seckill-kafka`, `seckill-store`) and depend on this one.

pub mod beacon;
pub mod challenge;
pub mod clock;
pub mod config;
pub mod decision;
pub mod draw;
pub mod event;
pub mod ids;
pub mod metrics;
pub mod money;
pub mod phase;
pub mod queue;
pub mod sealed_seed;
pub mod shutdown;
pub mod telemetry;
pub mod topics;

pub use event::{Envelope, Event, EventError, FailReason};
pub use ids::{OrderId, UserId, VoucherId};
