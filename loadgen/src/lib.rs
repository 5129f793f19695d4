//! `seckill loadgen`: a flash sale driven over HTTP against a running
//! platform, measured from the client's side.
//!
//! It creates a voucher, sends the order requests either closed-loop (a
//! fixed number of connections, each sending its next request when the last
//! is answered) or open-loop (requests scheduled at a fixed arrival rate,
//! latency measured from the scheduled time, so a slow server cannot hide
//! its queueing: no coordinated omission), waits until every admitted order
//! is final in the status view, and reports throughput, answers, latency
//! percentiles, end-to-end latency (from the view's timestamps, and as a
//! client sees it for a sample of orders), time to sell out, the sale's
//! invariants and the generator's own CPU use. Users send signed tokens, as
//! real clients do.

mod check;
mod client;
mod error;
mod percentiles;
mod plan;
mod report;
mod run;
mod visibility;

pub use check::Checks;
pub use client::Credentials;
pub use error::LoadgenError;
pub use percentiles::Percentiles;
pub use plan::{Pacing, Plan};
pub use report::{Invariants, Report};
pub use run::run;
