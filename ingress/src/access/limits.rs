//! Rate limits on the order routes: per client address before the caller is
//! even authenticated, per user right after, both before Redis is touched.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use seckill_core::metrics::RefusalReason;
use seckill_core::UserId;
use seckill_web::ApiError;
use warp::http::HeaderMap;
use warp::{Filter, Rejection};

use super::auth::{self, Caller};
use super::Access;
use crate::config::RateLimitConfig;
use crate::rate_limit::{RateLimiter, Verdict};

/// The configured limiters; a `None` limit is switched off.
#[derive(Debug)]
pub(crate) struct Limits {
    per_user: Option<RateLimiter<UserId>>,
    per_ip: Option<RateLimiter<IpAddr>>,
    per_ip_reads: Option<RateLimiter<IpAddr>>,
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
            per_ip_reads: RateLimiter::new(
                f64::from(config.per_ip_reads_per_second),
                config.per_ip_reads_burst,
                config.max_tracked_keys,
            ),
            trust_x_forwarded_for: config.trust_x_forwarded_for,
        }
    }

    /// The client's address as limits count it: the socket's peer, or,
    /// behind a trusted proxy, the last `X-Forwarded-For` entry (the one that
    /// proxy added; earlier entries are whatever the client claimed); see
    /// [`seckill_web::counted_address`] for IPv6.
    fn client_address(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        let forwarded = if self.trust_x_forwarded_for { last_forwarded_for(headers) } else { None };
        forwarded.or(peer.map(|peer| peer.ip())).map(seckill_web::counted_address)
    }
}

/// The last `X-Forwarded-For` entry across all the header's lines. Several
/// lines of a list header mean the same as one line joined with commas, and
/// a proxy may append a line of its own instead of extending the client's,
/// so the last entry is on the last line. An unreadable last entry gives
/// None (the peer's address is used): never an earlier, client-written one.
fn last_forwarded_for(headers: &HeaderMap) -> Option<IpAddr> {
    let last_line = headers.get_all("x-forwarded-for").iter().next_back()?;
    let last_entry = last_line.to_str().ok()?.rsplit(',').next()?;
    last_entry.trim().parse().ok()
}

fn verdict_to_result(verdict: Verdict, access: &Access, reason: RefusalReason, what: &str) -> Result<(), Rejection> {
    match verdict {
        Verdict::Allowed => Ok(()),
        Verdict::Limited { retry_after } => {
            access.metrics.refused.with_label_values(&[reason.as_str()]).inc();
            Err(ApiError::rate_limited(retry_after, format!("too many {what}; slow down")).into())
        }
    }
}

/// Passes while the client's address is under its rate of order reads
/// (`per_ip_reads_per_second`); returns the address, for the bounds that
/// count per address.
pub(crate) fn reading_client_address(
    access: Arc<Access>,
) -> impl Filter<Extract = (Option<IpAddr>,), Error = Rejection> + Clone {
    seckill_web::peer_address().and(warp::header::headers_cloned()).and_then(
        move |peer: Option<SocketAddr>, headers: HeaderMap| {
            let access = Arc::clone(&access);
            async move {
                let limits = &access.limits;
                let address = limits.client_address(peer, &headers);
                if let (Some(limiter), Some(address)) = (&limits.per_ip_reads, address) {
                    verdict_to_result(
                        limiter.check(&address, Instant::now()),
                        &access,
                        RefusalReason::RateLimitedIp,
                        "reads from this address",
                    )?;
                }
                Ok::<_, Rejection>(address)
            }
        },
    )
}

/// The client's address as the limits count it (see `client_address`),
/// for the admission buckets `admit.lua` keeps.
pub(crate) fn counted_client_address(
    access: Arc<Access>,
) -> impl Filter<Extract = (Option<IpAddr>,), Error = std::convert::Infallible> + Clone {
    seckill_web::peer_address()
        .and(warp::header::headers_cloned())
        .map(move |peer: Option<SocketAddr>, headers: HeaderMap| access.limits.client_address(peer, &headers))
}

/// Passes while the client's address is under its rate.
pub(crate) fn per_client_address(access: Arc<Access>) -> impl Filter<Extract = (), Error = Rejection> + Clone {
    seckill_web::peer_address()
        .and(warp::header::headers_cloned())
        .and_then(move |peer: Option<SocketAddr>, headers: HeaderMap| {
            let access = Arc::clone(&access);
            async move {
                let limits = &access.limits;
                let (Some(limiter), Some(address)) = (&limits.per_ip, limits.client_address(peer, &headers)) else {
                    return Ok(());
                };
                verdict_to_result(
                    limiter.check(&address, Instant::now()),
                    &access,
                    RefusalReason::RateLimitedIp,
                    "order requests from this address",
                )
            }
        })
        .untuple_one()
}

fn check_user(access: &Access, user: &UserId) -> Result<(), Rejection> {
    let Some(limiter) = &access.limits.per_user else { return Ok(()) };
    verdict_to_result(
        limiter.check(user, Instant::now()),
        access,
        RefusalReason::RateLimitedUser,
        "order requests from this user",
    )
}

/// The authenticated user (see [`auth::user`]), while under their rate.
pub(crate) fn rate_limited_user(access: Arc<Access>) -> impl Filter<Extract = (UserId,), Error = Rejection> + Clone {
    let limiting = Arc::clone(&access);
    auth::user(access).and_then(move |user: UserId| {
        let access = Arc::clone(&limiting);
        async move { check_user(&access, &user).map(|()| user) }
    })
}

/// The authenticated caller (see [`auth::caller`]); a user only while under
/// their rate (the admin has none).
pub(crate) fn rate_limited_caller(access: Arc<Access>) -> impl Filter<Extract = (Caller,), Error = Rejection> + Clone {
    let limiting = Arc::clone(&access);
    auth::caller(access).and_then(move |caller: Caller| {
        let access = Arc::clone(&limiting);
        async move {
            if let Caller::User(user) = &caller {
                check_user(&access, user)?;
            }
            Ok::<_, Rejection>(caller)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarded(lines: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append("x-forwarded-for", line.parse().expect("a header value"));
        }
        headers
    }

    #[test]
    fn forwarded_addresses_count_only_behind_a_trusted_proxy() {
        let peer = Some(SocketAddr::from(([10, 0, 0, 1], 40000)));
        let header = forwarded(&["1.2.3.4, 203.0.113.7"]);
        let direct = Limits::new(&RateLimitConfig::default());
        assert_eq!(direct.client_address(peer, &header), Some(IpAddr::from([10, 0, 0, 1])));
        let proxied = Limits::new(&RateLimitConfig { trust_x_forwarded_for: true, ..RateLimitConfig::default() });
        assert_eq!(proxied.client_address(peer, &header), Some(IpAddr::from([203, 0, 113, 7])));
        assert_eq!(proxied.client_address(peer, &forwarded(&["garbage"])), Some(IpAddr::from([10, 0, 0, 1])));
        assert_eq!(proxied.client_address(peer, &HeaderMap::new()), Some(IpAddr::from([10, 0, 0, 1])));
    }

    #[test]
    fn the_last_entry_counts_across_several_header_lines() {
        let peer = Some(SocketAddr::from(([10, 0, 0, 1], 40000)));
        let proxied = Limits::new(&RateLimitConfig { trust_x_forwarded_for: true, ..RateLimitConfig::default() });
        // The client wrote the first line; the proxy appended its own.
        let appended = forwarded(&["1.2.3.4, 5.6.7.8", "203.0.113.7"]);
        assert_eq!(proxied.client_address(peer, &appended), Some(IpAddr::from([203, 0, 113, 7])));
        let three = forwarded(&["1.2.3.4", "198.51.100.1, 198.51.100.2", "2001:db8::1"]);
        assert_eq!(proxied.client_address(peer, &three), Some("2001:db8::".parse().expect("an address")));
        // An unreadable last line never falls back to a client-written one.
        let broken_last = forwarded(&["1.2.3.4", "1.2.3.4,"]);
        assert_eq!(proxied.client_address(peer, &broken_last), Some(IpAddr::from([10, 0, 0, 1])));
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_client_is_itself() {
        let limits = Limits::new(&RateLimitConfig::default());
        let seen = |peer: &str| {
            let peer = SocketAddr::new(peer.parse().expect("an address"), 40000);
            limits.client_address(Some(peer), &HeaderMap::new()).expect("an address").to_string()
        };
        assert_eq!(seen("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
        assert_eq!(seen("2001:db8:1:2::1"), seen("2001:db8:1:2:ffff::9"), "one /64");
        assert_ne!(seen("2001:db8:1:2::1"), seen("2001:db8:1:3::1"), "another /64");
        assert_eq!(seen("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(seen("203.0.113.7"), "203.0.113.7");
    }
}
