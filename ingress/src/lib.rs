//! The ingress: the platform's front door.
//!
//! `POST /api/v1/vouchers/{id}/orders` takes the user from a verified HS256
//! token, checks the address's and the user's rate, then runs one atomic Lua
//! admission check in Redis (window, per-user limit, stock, decrement, and
//! the order's `OrderAccepted` record appended to the Redis outbox) and
//! answers `202`. The relay publishes the outbox to the sales topic, keyed
//! by voucher. Redis is the fast gate; the log is the record. Admin routes
//! (admin token) create and change vouchers; users read and act on their
//! own orders and pay them through the payment provider, whose signed
//! callbacks arrive at `POST /api/v1/payments/webhook`. A queue-mode sale
//! admits through a waiting room (`ingress/src/room/`): users take a place
//! (`POST …/queue`), watch it (`GET …/queue/me`), and order with the entry
//! token their turn gives them. The API is described by `openapi.json`.

mod access;
mod app;
mod challenge;
pub mod config;
mod error;
mod live;
mod payments;
mod rate_limit;
mod relay;
mod room;
mod routes;
mod sold_out;
mod watch;

pub use app::{run_standalone, App, Dependencies};
pub use config::{AuthConfig, IngressConfig, LiveConfig, RateLimitConfig, WatchConfig};
pub use error::IngressError;
