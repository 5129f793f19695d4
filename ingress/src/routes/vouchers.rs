//! `POST /api/v1/vouchers` (admin): open a flash sale.
//!
//! The definition is published first (`VoucherCreated` on the sales topic,
//! acknowledged), then loaded into Redis. In that order an admitted order can
//! never precede its voucher's definition in the log.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use seckill_core::event::{Event, VoucherCreated};
use seckill_core::{Envelope, VoucherId};
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
        .and(auth::admin(ingress.admin_token.clone()))
        .and(body::bounded(max_body_bytes))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle)
}

async fn handle(raw: bytes::Bytes, ingress: Arc<Ingress>) -> Result<warp::reply::Response, Rejection> {
    let request: CreateVoucher = body::parse(&raw)?;
    let definition = VoucherCreated {
        voucher_id: VoucherId::generate(),
        stock: request.stock,
        per_user_limit: request.per_user_limit,
        begins_at: request.begins_at,
        ends_at: request.ends_at,
    };
    definition.validate().map_err(|e| ApiError::invalid(e.to_string().replace("event is out of range: ", "")))?;

    let envelope = Envelope::new(Event::VoucherCreated(definition.clone()));
    ingress.producer.send(&ingress.topics.sales, &envelope).await.map_err(|e| {
        ingress.metrics.produce_errors.inc();
        tracing::warn!(error = %e, "Voucher definition not published.");
        ApiError::unavailable("the event log is unavailable; the voucher was not created")
    })?;
    ingress
        .gate
        .load_voucher(
            definition.voucher_id,
            definition.stock,
            definition.begins_at,
            definition.ends_at,
            definition.per_user_limit,
        )
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, voucher_id = %definition.voucher_id, "Voucher not loaded into Redis.");
            ApiError::unavailable("the admission gate is unavailable; retry the request")
        })?;
    tracing::info!(voucher_id = %definition.voucher_id, stock = definition.stock, "Voucher created.");
    Ok(warp::reply::with_status(warp::reply::json(&definition), StatusCode::CREATED).into_response())
}
