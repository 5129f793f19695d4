//! Who may call and how fast: the caller's identity (a user's token, the
//! admin token) and the rate limits per user and per client address, with
//! the warp filters that check them, for the write side ([`crate::routes`])
//! and the read side ([`crate::live`]) alike.

pub(crate) mod auth;
pub(crate) mod limits;

use seckill_core::metrics::AdmissionMetrics;

pub(crate) use self::auth::{Authenticator, Caller};
pub(crate) use self::limits::{reading_client_address, Limits};

/// What the filters check callers with, and where they count refusals.
#[derive(Debug)]
pub(crate) struct Access {
    pub(crate) auth: Authenticator,
    pub(crate) limits: Limits,
    pub(crate) metrics: AdmissionMetrics,
}
