//! What a load run does.

use std::time::Duration;

use crate::Credentials;

/// How requests are sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// `connections` clients, each sending its next request as soon as the
    /// previous one is answered.
    Closed { connections: usize },
    /// Requests scheduled at `per_second`, whatever the answers take; at
    /// most `max_in_flight` outstanding (beyond that the run is overloaded
    /// and the report says how many were late).
    Open { per_second: f64, max_in_flight: usize },
}

/// A flash sale to drive.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The ingress, e.g. `http://127.0.0.1:8080`.
    pub base_url: String,
    /// `Authorization: Bearer` for creating the voucher.
    pub admin_token: Option<String>,
    /// How each request says which user sends it.
    pub credentials: Credentials,
    /// Units for sale (S).
    pub stock: u64,
    /// Most units per user (L).
    pub per_user_limit: u32,
    /// Buckets the gate splits the voucher's stock into (1: not split).
    pub shards: u32,
    /// Order requests to send (R).
    pub requests: usize,
    /// Distinct users (U); request i is sent by user i mod U, so R > U
    /// means repeats.
    pub users: usize,
    /// Units per order.
    pub quantity: u32,
    /// Repeated requests of a user carry the same `Idempotency-Key`, so they
    /// are retries rather than new orders.
    pub idempotency_keys: bool,
    pub pacing: Pacing,
    /// Prefix of the user ids, so runs against one platform do not collide.
    pub user_prefix: String,
    /// Longest wait for every admitted order to be final.
    pub settle_timeout: Duration,
    /// Every this many admitted orders, one is polled from its `202` until
    /// its final status is visible (client-side end-to-end latency); 0: none.
    pub visibility_sample: usize,
}

impl Plan {
    /// The user of request `index`.
    pub(crate) fn user(&self, index: usize) -> String {
        format!("{}{}", self.user_prefix, index % self.users.max(1))
    }
}
