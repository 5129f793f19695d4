//! Rate limits on the order routes: per client address before the caller is
//! even authenticated, per user right after, both before Redis is touched.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use seckill_core::metrics::RefusalReason;
use seckill_core::UserId;
use seckill_web::ApiError;
use warp::{Filter, Rejection};

use super::auth::{self, Caller};
use super::Ingress;
use crate::config::RateLimitConfig;
use crate::rate_limit::{RateLimiter, Verdict};

/// The configured limiters; a `None` limit is switched off.
#[derive(Debug)]
pub(crate) struct Limits {
    per_user: Option<RateLimiter<UserId>>,
    per_ip: Option<RateLimiter<IpAddr>>,
    trust_x_forwarded_for: bool,
}

impl Limits {
    pub(crate) fn new(config: &RateLimitConfig) -> Self {
        Self {
            per_user: RateLimiter::new(
                f64::from(config.per_user_per_second),
                config.per_user_burst,
                config.max_tracked_keys,
            ),
            per_ip: RateLimiter::new(f64::from(config.per_ip_per_second), config.per_ip_burst, config.max_tracked_keys),
            trust_x_forwarded_for: config.trust_x_forwarded_for,
        }
    }

    /// The client's address: the socket's peer, or, behind a trusted proxy,
    /// the last `X-Forwarded-For` entry (the one that proxy added; earlier
    /// entries are whatever the client claimed).
    fn client_address(&self, peer: Option<SocketAddr>, forwarded_for: Option<&str>) -> Option<IpAddr> {
        let forwarded = forwarded_for
            .filter(|_| self.trust_x_forwarded_for)
            .and_then(|header| header.rsplit(',').next())
            .and_then(|last| last.trim().parse().ok());
        forwarded.or(peer.map(|peer| peer.ip()))
    }
}

/// The client's address (see [`Limits::client_address`]), for bounds that
/// count per address.
pub(crate) fn client_address(
    ingress: Arc<Ingress>,
) -> impl Filter<Extract = (Option<IpAddr>,), Error = Rejection> + Clone {
    warp::addr::remote().and(warp::header::optional::<String>("x-forwarded-for")).map(
        move |peer: Option<SocketAddr>, forwarded_for: Option<String>| {
            ingress.limits.client_address(peer, forwarded_for.as_deref())
        },
    )
}

fn verdict_to_result(verdict: Verdict, ingress: &Ingress, reason: RefusalReason, whose: &str) -> Result<(), Rejection> {
    match verdict {
        Verdict::Allowed => Ok(()),
        Verdict::Limited { retry_after } => {
            ingress.metrics.refused.with_label_values(&[reason.as_str()]).inc();
            Err(ApiError::rate_limited(retry_after, format!("too many order requests from this {whose}; slow down"))
                .into())
        }
    }
}

/// Passes while the client's address is under its rate.
pub(super) fn per_client_address(ingress: Arc<Ingress>) -> impl Filter<Extract = (), Error = Rejection> + Clone {
    warp::addr::remote()
        .and(warp::header::optional::<String>("x-forwarded-for"))
        .and_then(move |peer: Option<SocketAddr>, forwarded_for: Option<String>| {
            let ingress = Arc::clone(&ingress);
            async move {
                let limits = &ingress.limits;
                let (Some(limiter), Some(address)) =
                    (&limits.per_ip, limits.client_address(peer, forwarded_for.as_deref()))
                else {
                    return Ok(());
                };
                verdict_to_result(
                    limiter.check(&address, Instant::now()),
                    &ingress,
                    RefusalReason::RateLimitedIp,
                    "address",
                )
            }
        })
        .untuple_one()
}

fn check_user(ingress: &Ingress, user: &UserId) -> Result<(), Rejection> {
    let Some(limiter) = &ingress.limits.per_user else { return Ok(()) };
    verdict_to_result(limiter.check(user, Instant::now()), ingress, RefusalReason::RateLimitedUser, "user")
}

/// The authenticated user (see [`auth::user`]), while under their rate.
pub(super) fn rate_limited_user(ingress: Arc<Ingress>) -> impl Filter<Extract = (UserId,), Error = Rejection> + Clone {
    let limiting = Arc::clone(&ingress);
    auth::user(ingress).and_then(move |user: UserId| {
        let ingress = Arc::clone(&limiting);
        async move { check_user(&ingress, &user).map(|()| user) }
    })
}

/// The authenticated caller (see [`auth::caller`]); a user only while under
/// their rate (the admin has none).
pub(super) fn rate_limited_caller(
    ingress: Arc<Ingress>,
) -> impl Filter<Extract = (Caller,), Error = Rejection> + Clone {
    let limiting = Arc::clone(&ingress);
    auth::caller(ingress).and_then(move |caller: Caller| {
        let ingress = Arc::clone(&limiting);
        async move {
            if let Caller::User(user) = &caller {
                check_user(&ingress, user)?;
            }
            Ok::<_, Rejection>(caller)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_addresses_count_only_behind_a_trusted_proxy() {
        let peer = Some(SocketAddr::from(([10, 0, 0, 1], 40000)));
        let header = Some("1.2.3.4, 203.0.113.7");
        let direct = Limits::new(&RateLimitConfig::default());
        assert_eq!(direct.client_address(peer, header), Some(IpAddr::from([10, 0, 0, 1])));
        let proxied = Limits::new(&RateLimitConfig { trust_x_forwarded_for: true, ..RateLimitConfig::default() });
        assert_eq!(proxied.client_address(peer, header), Some(IpAddr::from([203, 0, 113, 7])));
        assert_eq!(proxied.client_address(peer, Some("garbage")), Some(IpAddr::from([10, 0, 0, 1])));
    }
}
