//! Voucher admin: `POST /api/v1/vouchers` opens a flash sale,
//! `PATCH /api/v1/vouchers/{id}` pauses, resumes, moves the end or adds stock.
//!
//! Every change is published first (`VoucherCreated` / `VoucherUpdated` on
//! the sales topic, acknowledged), then applied to Redis. In that order an
//! admitted order never precedes, in the log, the definition or the added
//! stock it was admitted with. The processor applies the same records to
//! Redis again as it follows the log (both scripts act once), so an ingress
//! that dies between the two steps leaves nothing behind.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use seckill_core::event::{Event, VoucherCreated, VoucherUpdated, MAX_STOCK};
use seckill_core::{Envelope, VoucherId};
use seckill_gate::UpdateResult;
use seckill_web::ApiError;
use serde::Deserialize;
use warp::http::StatusCode;
use warp::{Filter, Rejection, Reply};

use super::{auth, body, Ingress};

/// The admin's request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateVoucher {
    stock: u64,
    begins_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    #[serde(default = "one")]
    per_user_limit: u32,
    #[serde(default)]
    hold_seconds: u32,
}

/// The admin's change; each field left out stays as it is (`null` is not
/// a way to leave one out: it is refused like any other wrong type).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateVoucher {
    #[serde(default, deserialize_with = "present")]
    paused: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    ends_at: Option<DateTime<Utc>>,
    #[serde(default)]
    add_stock: u64,
}

/// An optional field that, when present, holds a value.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

fn one() -> u32 {
    1
}

pub(super) fn create(
    ingress: Arc<Ingress>,
    max_body_bytes: u64,
) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers")
        .and(warp::post())
        .and(auth::admin(Arc::clone(&ingress)))
        .and(body::bounded(max_body_bytes))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle_create)
}

pub(super) fn update(
    ingress: Arc<Ingress>,
    max_body_bytes: u64,
) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String)
        .and(warp::patch())
        .and(auth::admin(Arc::clone(&ingress)))
        .and(body::bounded(max_body_bytes))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle_update)
}

async fn handle_create(raw: bytes::Bytes, ingress: Arc<Ingress>) -> Result<warp::reply::Response, Rejection> {
    let request: CreateVoucher = body::parse(&raw)?;
    let definition = VoucherCreated {
        voucher_id: VoucherId::generate(),
        stock: request.stock,
        per_user_limit: request.per_user_limit,
        begins_at: request.begins_at,
        ends_at: request.ends_at,
        hold_seconds: request.hold_seconds,
    };
    definition.validate().map_err(|e| ApiError::invalid(e.to_string().replace("event is out of range: ", "")))?;

    let envelope = Envelope::new(Event::VoucherCreated(definition.clone()));
    ingress.producer.send(&ingress.topics.sales, &envelope).await.map_err(|e| {
        ingress.metrics.produce_errors.inc();
        tracing::warn!(error = %e, "Voucher definition not published.");
        ApiError::unavailable("the event log is unavailable; the voucher was not created")
    })?;
    ingress.gate.load_voucher(&definition).await.map_err(|e| {
        tracing::warn!(error = %e, voucher_id = %definition.voucher_id, "Voucher not loaded into Redis.");
        ApiError::unavailable("the admission gate is unavailable; retry the request")
    })?;
    ingress.live.voucher_changed(definition.voucher_id);
    tracing::info!(voucher_id = %definition.voucher_id, stock = definition.stock, "Voucher created.");
    Ok(warp::reply::with_status(warp::reply::json(&definition), StatusCode::CREATED).into_response())
}

async fn handle_update(
    raw_id: String,
    raw: bytes::Bytes,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Response, Rejection> {
    let voucher_id: VoucherId = raw_id.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    let request: UpdateVoucher = body::parse(&raw)?;
    let update =
        VoucherUpdated { voucher_id, paused: request.paused, ends_at: request.ends_at, add_stock: request.add_stock };
    update.validate().map_err(|e| ApiError::invalid(e.to_string().replace("event is out of range: ", "")))?;

    let gate_unavailable = |e: redis::RedisError| {
        tracing::warn!(error = %e, %voucher_id, "Voucher update not applied to Redis.");
        ApiError::unavailable("the admission gate is unavailable; retry the request")
    };
    let current = ingress.gate.voucher(voucher_id).await.map_err(gate_unavailable)?;
    let current = current.ok_or_else(|| ApiError::unknown_voucher(voucher_id))?;
    if let Some(ends_at) = update.ends_at {
        if ends_at <= current.begins_at {
            return Err(ApiError::invalid("ends_at must be after begins_at").into());
        }
    }
    if current.stock.saturating_add(update.add_stock) > MAX_STOCK {
        return Err(ApiError::invalid(format!("the stock would exceed {MAX_STOCK}")).into());
    }

    let envelope = Envelope::new(Event::VoucherUpdated(update.clone()));
    ingress.producer.send(&ingress.topics.sales, &envelope).await.map_err(|e| {
        ingress.metrics.produce_errors.inc();
        tracing::warn!(error = %e, "Voucher update not published.");
        ApiError::unavailable("the event log is unavailable; the voucher was not changed")
    })?;
    // Published: the processor will apply it to Redis even if this fails.
    let applied = match ingress.gate.update_voucher(envelope.event_id, &update).await.map_err(gate_unavailable)? {
        UpdateResult::Applied(voucher) | UpdateResult::Repeated(voucher) => voucher,
        UpdateResult::UnknownVoucher => return Err(ApiError::unknown_voucher(voucher_id).into()),
    };
    ingress.live.voucher_changed(voucher_id);
    tracing::info!(%voucher_id, ?update, "Voucher updated.");
    let body = serde_json::json!({
        "voucher_id": voucher_id,
        "update_id": envelope.event_id,
        "stock": applied.stock,
        "paused": applied.paused,
        "begins_at": applied.begins_at,
        "ends_at": applied.ends_at,
    });
    Ok(warp::reply::json(&body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_is_not_a_way_to_leave_a_field_out() {
        let parsed: UpdateVoucher = serde_json::from_str(r#"{"paused": true}"#).expect("valid");
        assert_eq!((parsed.paused, parsed.ends_at, parsed.add_stock), (Some(true), None, 0));
        for refused in [r#"{"ends_at": null}"#, r#"{"paused": null}"#, r#"{"add_stock": null}"#, r#"{"x": 1}"#] {
            assert!(serde_json::from_str::<UpdateVoucher>(refused).is_err(), "{refused}");
        }
    }
}
