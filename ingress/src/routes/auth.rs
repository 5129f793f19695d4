//! Who is calling: the admin token and the user's identity.

use seckill_core::config::Secret;
use seckill_core::UserId;
use seckill_web::ApiError;
use warp::http::StatusCode;
use warp::{Filter, Rejection};

/// Passes when no admin token is configured, or the request carries
/// `Authorization: Bearer <token>`.
pub(super) fn admin(token: Option<Secret>) -> impl Filter<Extract = (), Error = Rejection> + Clone {
    warp::header::optional::<String>("authorization")
        .and_then(move |header: Option<String>| {
            let token = token.clone();
            async move {
                let Some(token) = token else { return Ok(()) };
                let presented = header.as_deref().and_then(|h| h.strip_prefix("Bearer "));
                match presented {
                    Some(presented) if constant_time_eq(presented.as_bytes(), token.expose().as_bytes()) => Ok(()),
                    Some(_) => Err(warp::reject::custom(ApiError::new(
                        StatusCode::FORBIDDEN,
                        "forbidden",
                        "the admin token is not valid",
                    ))),
                    None => Err(warp::reject::custom(ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        "admin routes need Authorization: Bearer <admin token>",
                    ))),
                }
            }
        })
        .untuple_one()
}

/// The calling user, from `X-User-Id` (authentication proper is a later
/// addition; the header is the development identity).
pub(super) fn user() -> impl Filter<Extract = (UserId,), Error = Rejection> + Clone {
    warp::header::optional::<String>("x-user-id").and_then(|header: Option<String>| async move { parse_user(header) })
}

fn parse_user(header: Option<String>) -> Result<UserId, Rejection> {
    let raw = header.ok_or_else(|| {
        warp::reject::custom(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "an X-User-Id header is required"))
    })?;
    UserId::parse(&raw).map_err(|e| warp::reject::custom(ApiError::invalid(format!("X-User-Id: {e}"))))
}

/// Who acts on an order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Caller {
    /// Presented the configured admin token: may act on any order.
    Admin,
    /// May act on their own orders only.
    User(UserId),
}

/// The admin when the request carries the configured admin token, else the
/// `X-User-Id` user. A wrong token is refused rather than ignored.
pub(super) fn caller(token: Option<Secret>) -> impl Filter<Extract = (Caller,), Error = Rejection> + Clone {
    warp::header::optional::<String>("authorization").and(warp::header::optional::<String>("x-user-id")).and_then(
        move |authorization: Option<String>, user: Option<String>| {
            let token = token.clone();
            async move {
                let presented = authorization.as_deref().and_then(|h| h.strip_prefix("Bearer "));
                match (token, presented) {
                    (Some(token), Some(presented))
                        if constant_time_eq(presented.as_bytes(), token.expose().as_bytes()) =>
                    {
                        return Ok(Caller::Admin);
                    }
                    (Some(_), Some(_)) => {
                        return Err(warp::reject::custom(ApiError::new(
                            StatusCode::FORBIDDEN,
                            "forbidden",
                            "the admin token is not valid",
                        )));
                    }
                    _ => {}
                }
                parse_user(user).map(Caller::User)
            }
        },
    )
}

/// Compares without an early exit, so timing does not leak the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
