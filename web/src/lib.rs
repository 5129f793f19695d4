//! HTTP pieces shared by the services.
//!
//! One error shape for every response (`{"error": CODE, "message": ...}`,
//! mapped in [`error`] only), the operational routes (`/healthz`,
//! `/metrics`), the order-status query API over any [`ViewReader`], and
//! [`serve`], which runs a filter on a bound listener until shutdown, and
//! the dependency [`probes`] behind `seckill_dependency_up`, and the
//! [`payments`] provider as the services call it.
//!
//! [`ViewReader`]: seckill_store::ViewReader

mod clock;
pub mod dashboards;
pub mod error;
mod ops;
pub mod payments;
pub mod probes;
mod query;
mod remote_view;
mod server;

pub use clock::{ServerClock, MAX_ROUND_TRIP};
pub use error::{recover, ApiError};
pub use ops::{healthz, instrumented, metrics};
pub use query::{page_limit, query_routes, voucher_routes, ListQuery};
pub use remote_view::RemoteView;
pub use server::{counted_address, peer_address, serve, PeerAddress, Serving};
