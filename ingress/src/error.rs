//! Errors of building and running the ingress.

/// Why the ingress could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error(transparent)]
    Kafka(#[from] seckill_kafka::KafkaError),
    #[error(transparent)]
    Store(#[from] seckill_store::StoreError),
    #[error("payment provider: {0}")]
    Payments(#[from] seckill_payments::ProviderError),
}

use seckill_web::ApiError;
use warp::http::StatusCode;

use seckill_core::OrderId;
use seckill_gate::Rejection;

/// The `503` of an order request whose outcome the ingress cannot promise
/// either way, because `cause`: the order may exist, so the answer names it
/// (`details.order_id`) for the client to read before ordering again.
pub(crate) fn may_be_admitted(order: OrderId, cause: &str) -> ApiError {
    ApiError::unavailable(format!(
        "{cause}; order {order} may have been admitted: read GET /api/v1/orders/{order} before ordering again"
    ))
    .with_detail("order_id", order.to_string())
}

/// How each gate rejection is answered. State conflicts are `409`; an
/// unknown voucher is `404`.
pub(crate) fn rejection_error(rejection: Rejection) -> ApiError {
    {
        let code = rejection.code();
        match rejection {
            Rejection::UnknownVoucher => ApiError::new(StatusCode::NOT_FOUND, code, "no such voucher"),
            Rejection::NotStarted => ApiError::new(StatusCode::CONFLICT, code, "the sale has not started"),
            Rejection::Ended => ApiError::new(StatusCode::CONFLICT, code, "the sale has ended"),
            Rejection::Paused => ApiError::new(StatusCode::CONFLICT, code, "the sale is paused"),
            Rejection::SoldOut { .. } => ApiError::new(StatusCode::CONFLICT, code, "sold out"),
            Rejection::LimitExceeded { limit } => ApiError::new(
                StatusCode::CONFLICT,
                code,
                format!("this quantity would exceed the per-user limit of {limit}"),
            ),
            Rejection::EntryRequired => ApiError::new(
                StatusCode::FORBIDDEN,
                code,
                "this sale admits through its waiting room: join it (POST /api/v1/vouchers/{id}/queue) and order \
                 with the entry_token your turn gives you",
            ),
            Rejection::EntryInvalid => {
                ApiError::new(StatusCode::FORBIDDEN, code, "the entry_token is not this user's entry to this sale")
            }
            Rejection::EntryExpired => ApiError::new(
                StatusCode::FORBIDDEN,
                code,
                "the entry_token's time is over: join the waiting room again for a new place",
            ),
            Rejection::EntryUsed { order } => {
                let error = ApiError::new(StatusCode::CONFLICT, code, "the entry_token admitted an order already");
                match order {
                    Some(order) => error.with_detail("order_id", order.to_string()),
                    None => error,
                }
            }
            Rejection::NotWon => ApiError::new(
                StatusCode::FORBIDDEN,
                code,
                "this sale is a draw: only its winners order, each within their purchase window (GET \
                 /api/v1/vouchers/{id}/entries/me)",
            ),
            Rejection::WindowClosed => ApiError::new(StatusCode::FORBIDDEN, code, "your purchase window is over"),
            Rejection::WinUsed { order } => {
                let error = ApiError::new(StatusCode::CONFLICT, code, "your win admitted an order already");
                match order {
                    Some(order) => error.with_detail("order_id", order.to_string()),
                    None => error,
                }
            }
            Rejection::RateLimited { retry_after_ms, by_address } => ApiError::rate_limited(
                std::time::Duration::from_millis(retry_after_ms),
                if by_address {
                    "too many order requests from this address for this sale; slow down"
                } else {
                    "too many order requests from this user for this sale; slow down"
                },
            ),
            Rejection::ChallengeRequired { .. }
            | Rejection::ChallengeTooEasy { .. }
            | Rejection::ChallengeExpired
            | Rejection::ChallengeUsed => {
                crate::challenge::rejection_error(&rejection).expect("every challenge rejection has its answer")
            }
            Rejection::DuplicateOrder { existing } => {
                let error = ApiError::new(StatusCode::CONFLICT, code, "this user already holds the per-user limit");
                match existing {
                    Some(order) => error.with_detail("order_id", order.to_string()),
                    None => error,
                }
            }
        }
    }
}
