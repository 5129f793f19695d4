//! `POST /api/v1/vouchers/{voucher_id}/orders`: the flash-sale hot path.
//!
//! One EVALSHA decides and, when it admits, writes the order's
//! `OrderAccepted` record into the Redis outbox in the same atomic step; the
//! client hears `202` at once and the relay (`crate::relay`) publishes the
//! record. A `202` therefore means the order is durable in Redis (AOF) and on
//! its way to the log, whatever happens to this process next. While the log
//! is down the outbox grows up to `max_outbox_entries`; past that, orders get
//! `503` before any stock is touched. A call that fails without an answer
//! is settled by the order id before the client hears anything: `202` if
//! the script had admitted the order, `503` only if it had not. Where Redis
//! has replicas, a `202` waits until one has acknowledged the admission
//! (`redis.replica_acks`); if none does in time, the answer is a `503`
//! naming the order, which may still exist.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use seckill_core::event::{OrderAccepted, MAX_QUANTITY};
use seckill_core::metrics::RefusalReason;
use seckill_core::{OrderId, UserId, VoucherId};
use seckill_web::ApiError;
use serde::Deserialize;
use warp::http::{HeaderMap, StatusCode};
use warp::{Filter, Rejection, Reply};

use super::{body, Ingress};
use crate::access::{auth, limits};
use crate::challenge::admission_spent_proof;
use crate::error::{may_be_admitted, rejection_error};
use seckill_gate::{Admission, Presented, Rejection as GateRejection, RetryKey, Settlement};

/// The answer when the gate settled a request as not admitted.
const NOT_ADMITTED: &str = "the admission call failed; nothing was admitted, retry the request";
/// Why an order no replica acknowledged in time is not promised.
const UNACKNOWLEDGED: &str = "no Redis replica acknowledged the order in time";
/// How often the gate is asked what became of a call that failed, and the
/// pause between the attempts (each is bounded by the Redis response
/// timeout).
const SETTLE_ATTEMPTS: u32 = 5;
const SETTLE_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
/// Asks that timed out after which the gate is taken to be unreachable.
const SETTLE_TIMEOUTS: u32 = 3;

/// Vouchers with more holders than this are not remembered as sold out (the
/// snapshot would cost more than it saves).
const MAX_REMEMBERED_HOLDERS: usize = 10_000;

/// The client's request body (optional: an empty body orders one unit).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlaceOrder {
    #[serde(default = "one")]
    quantity: u32,
    /// The waiting room's entry token (queue-mode sales; `GET …/queue/me`
    /// gives it when the user's turn comes).
    #[serde(default)]
    entry_token: Option<String>,
}

impl Default for PlaceOrder {
    fn default() -> Self {
        Self { quantity: 1, entry_token: None }
    }
}

fn one() -> u32 {
    1
}

pub(super) fn place(
    ingress: Arc<Ingress>,
    max_body_bytes: u64,
) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String / "orders")
        .and(warp::post())
        .and(limits::counted_client_address(Arc::clone(&ingress.access)))
        .and(auth::user(Arc::clone(&ingress.access)))
        .and(warp::header::optional::<String>("idempotency-key"))
        .and(warp::header::headers_cloned())
        .and(body::bounded(max_body_bytes))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle)
}

/// Answers every outcome, refusals included, as a response: a rejection
/// would make warp try every other route before recovering, on the path
/// that answers a sell-out storm.
async fn handle(
    voucher: String,
    address: Option<IpAddr>,
    user: UserId,
    idempotency_key: Option<String>,
    headers: HeaderMap,
    raw: bytes::Bytes,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Response, Infallible> {
    let request = Request { voucher, address, user, idempotency_key, headers };
    Ok(place_order(request, raw, ingress).await.unwrap_or_else(Reply::into_response))
}

/// What the route read of a request besides its body.
struct Request {
    voucher: String,
    address: Option<IpAddr>,
    user: UserId,
    idempotency_key: Option<String>,
    headers: HeaderMap,
}

async fn place_order(
    request: Request,
    raw: bytes::Bytes,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Response, ApiError> {
    let Request { voucher, address, user, idempotency_key, headers } = request;
    let voucher: VoucherId = voucher.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    let request: PlaceOrder = body::parse_or_default(&raw)?;
    if !(1..=MAX_QUANTITY).contains(&request.quantity) {
        return Err(ApiError::invalid(format!("quantity must be 1 to {MAX_QUANTITY}")));
    }

    let retry = match &idempotency_key {
        Some(key) => Some(RetryKey::new(&user, key).map_err(ApiError::invalid)?),
        None => None,
    };
    // A retry carrying a key deserves its order even after a sell-out, so
    // only key-less requests take the fast path.
    if let Some(holders) = retry.is_none().then(|| ingress.sold_out.sold_out(voucher, Instant::now())).flatten() {
        let rejection = holders.refusal(&user, request.quantity);
        ingress.metrics.outcomes.with_label_values(&[rejection.code()]).inc();
        return Err(rejection_error(rejection));
    }

    let entry = match &request.entry_token {
        Some(token) => Some(entry_of(&ingress, voucher, &user, token).await?),
        None => None,
    };
    let proof = ingress.challenges.proof(&ingress.gate, voucher, &user, &headers).await.inspect_err(|error| {
        ingress.metrics.outcomes.with_label_values(&[error.code]).inc();
    })?;
    let proved = proof.is_some();
    let presented = Presented { entry, proof, pace: ingress.pace(address) };
    // The key travels with the order, so the processor can tell a retry
    // admitted twice (a failover lost the first admission) from a new order.
    let order = OrderAccepted { idempotency_key, ..OrderAccepted::now(voucher, user, request.quantity) };
    let admission = match ingress.gate.admit_presenting(&order, retry.as_ref(), &presented).await {
        Ok(admission) => admission,
        Err(error) => return settle(&ingress, &order, &error).await,
    };
    if proved && admission_spent_proof(&admission) {
        ingress.challenges.spent(voucher);
    }
    match admission {
        Admission::Admitted { remaining } => {
            if remaining == 0 {
                ingress.live.voucher_changed(voucher);
                // A waiting room (or a draw) tells its crowd the sell-out now.
                if entry.is_some() || ingress.rooms.has_draw(voucher) {
                    ingress.rooms.nudge();
                }
            }
        }
        Admission::Backlogged { entries } => {
            ingress.metrics.outcomes.with_label_values(&["unavailable"]).inc();
            tracing::warn!(entries, "Outbox full: the log is not keeping up; refusing orders.");
            return Err(ApiError::unavailable("the event log is not keeping up; nothing was admitted, retry later"));
        }
        Admission::Fenced => {
            // Only a call that outlived its caller can meet its own fence.
            ingress.metrics.outcomes.with_label_values(&["unavailable"]).inc();
            return Err(ApiError::unavailable(NOT_ADMITTED));
        }
        Admission::Unacknowledged { order } => {
            // It stands on the master, and goes if the master fails before
            // a replica has it: not a promise.
            ingress.metrics.outcomes.with_label_values(&["unacknowledged"]).inc();
            return Err(may_be_admitted(order, UNACKNOWLEDGED));
        }
        Admission::Replayed { order: first, quantity } => {
            ingress.metrics.outcomes.with_label_values(&["replayed"]).inc();
            // The ingress that admitted it may have died before writing its
            // pending record; this one never overwrites it, and writes it
            // only with the first admission's quantity (the retry may ask
            // for another).
            if let Some(quantity) = quantity {
                let replayed = OrderAccepted { order_id: first, quantity, ..order };
                remember(&ingress, &replayed, true).await;
            }
            return Ok(accepted_reply(first));
        }
        Admission::Rejected(rejection) => {
            if let GateRejection::RateLimited { by_address, .. } = rejection {
                let reason = if by_address { RefusalReason::RateLimitedIp } else { RefusalReason::RateLimitedUser };
                ingress.access.metrics.refused.with_label_values(&[reason.as_str()]).inc();
            }
            if rejection == (GateRejection::SoldOut { remaining: 0 }) {
                ingress.live.voucher_changed(voucher);
                remember_sell_out(&ingress, voucher).await;
            }
            ingress.metrics.outcomes.with_label_values(&[rejection.code()]).inc();
            return Err(rejection_error(rejection));
        }
    }
    ingress.metrics.outcomes.with_label_values(&["admitted"]).inc();
    remember(&ingress, &order, false).await;
    Ok(accepted_reply(order.order_id))
}

/// The entry an entry token claims, once its signature checks out: a forged
/// or altered token is refused here, before Redis is asked.
async fn entry_of(ingress: &Ingress, voucher: VoucherId, user: &UserId, token: &str) -> Result<u64, ApiError> {
    let invalid = || {
        ingress.metrics.outcomes.with_label_values(&[GateRejection::EntryInvalid.code()]).inc();
        rejection_error(GateRejection::EntryInvalid)
    };
    let handle = ingress.rooms.room_of(voucher).await.map_err(|error| match error.code {
        // A token for a sale without a room is not a token of this platform.
        "not_queue_mode" => invalid(),
        _ => error,
    })?;
    handle.verify(user, token).map(|entry| entry.entry).map_err(|_| invalid())
}

/// The answer to an admission call that failed without an answer (a
/// timeout, a dropped connection): the script may have run, or may still
/// run. The gate is asked, by the order id, what happened, and the client is
/// told exactly that: `202` if the order was admitted, `503` if it was not
/// (and now never will be). Only if the gate cannot be asked at all, or no
/// replica acknowledged its answer in time, is the answer a `503` that says
/// it may have been, naming the order to look up.
async fn settle(
    ingress: &Ingress,
    order: &OrderAccepted,
    error: &redis::RedisError,
) -> Result<warp::reply::Response, ApiError> {
    tracing::warn!(%error, order_id = %order.order_id, "Admission call failed; asking the gate whether it ran.");
    let mut last_error = None;
    let mut timeouts = 0;
    for attempt in 0..SETTLE_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(SETTLE_PAUSE).await;
        }
        match ingress.gate.settle(order.voucher_id, &order.user_id, order.order_id).await {
            Ok(Settlement::Admitted) => {
                ingress.metrics.settlements.with_label_values(&["admitted"]).inc();
                ingress.metrics.outcomes.with_label_values(&["admitted"]).inc();
                tracing::info!(order_id = %order.order_id, "The admission had run: the order is admitted.");
                remember(ingress, order, false).await;
                return Ok(accepted_reply(order.order_id));
            }
            Ok(Settlement::NotAdmitted) => {
                ingress.metrics.settlements.with_label_values(&["not_admitted"]).inc();
                ingress.metrics.outcomes.with_label_values(&["unavailable"]).inc();
                return Err(ApiError::unavailable(NOT_ADMITTED));
            }
            Ok(Settlement::Unacknowledged) => {
                ingress.metrics.settlements.with_label_values(&["unacknowledged"]).inc();
                ingress.metrics.outcomes.with_label_values(&["unacknowledged"]).inc();
                return Err(may_be_admitted(order.order_id, UNACKNOWLEDGED));
            }
            Err(error) => {
                // Each ask that times out costs the client a whole response
                // timeout: five of them made a silent partition's answer
                // take 12 s. A Redis held for a moment (a pause, a slow
                // fsync) answers within a few; one cut off never does.
                // Quick failures (a refused connection while Redis
                // restarts) are asked again up to the attempts.
                if error.is_timeout() {
                    timeouts += 1;
                }
                last_error = Some(error);
                if timeouts >= SETTLE_TIMEOUTS {
                    break;
                }
            }
        }
    }
    ingress.metrics.settlements.with_label_values(&["unknown"]).inc();
    ingress.metrics.outcomes.with_label_values(&["unavailable"]).inc();
    tracing::error!(error = ?last_error, order_id = %order.order_id, "Could not find out whether an order was admitted.");
    Err(may_be_admitted(order.order_id, "the admission gate did not answer"))
}

/// Makes the admitted order readable by its owner through any ingress
/// before the `202` goes out. The order is admitted whatever happens here:
/// a failure is logged, and the order becomes readable once the log has it.
async fn remember(ingress: &Ingress, order: &OrderAccepted, replayed: bool) {
    if let Err(error) = ingress.live.admitted(order, replayed).await {
        tracing::warn!(%error, order_id = %order.order_id, "Admitted order not recorded as pending in Redis.");
    }
}

/// Snapshots who holds units once the gate reports none left. Nobody gains
/// units while none are left, so the snapshot stays right until stock
/// returns, and the memo expires well before anyone could notice. One
/// request per voucher takes it; the others simply answer what Redis said.
async fn remember_sell_out(ingress: &Ingress, voucher: VoucherId) {
    let Some(_snapshotting) = ingress.sold_out.begin_snapshot(voucher, Instant::now()) else {
        return;
    };
    match ingress.gate.holders(voucher, MAX_REMEMBERED_HOLDERS).await {
        Ok(Some(holders)) => ingress.sold_out.mark(voucher, holders, Instant::now()),
        Ok(None) => {}
        Err(error) => tracing::debug!(%error, "Could not snapshot the holders of a sold-out voucher."),
    }
}

/// `202 {"order_id", "status": "PENDING"}`, for new orders and replays alike.
fn accepted_reply(order_id: OrderId) -> warp::reply::Response {
    #[derive(serde::Serialize)]
    struct Accepted {
        order_id: OrderId,
        status: &'static str,
    }
    let body = Accepted { order_id, status: "PENDING" };
    warp::reply::with_status(warp::reply::json(&body), StatusCode::ACCEPTED).into_response()
}
