//! `Idempotency-Key` on the admin routes: a retry completes the change the
//! first request prepared and answers what it answered.
//!
//! The first request with a key prepares its change (the event, with its
//! ids) and claims the key with it in Redis before publishing anything;
//! every later request with that key, concurrent or after a failure,
//! carries out that same event. Publishing it again is harmless (it has the
//! same event id, and every consumer applies an event id once), and so is
//! applying it to the gate again, so any number of retries make one
//! change. The first answer given is kept, and every retry gives it. A key
//! used again for a different request is refused (`422`), as is a key that
//! is not 1 to 128 visible ASCII characters (`400`).

use std::time::Duration;

use seckill_core::Envelope;
use seckill_gate::{AdminRequest, AdminRetryKey};
use seckill_web::ApiError;
use serde::{Deserialize, Serialize};
use warp::http::StatusCode;
use warp::Reply;

use super::Ingress;

/// What is remembered under a key: what the request asked and the change
/// it prepared.
#[derive(Debug, Serialize, Deserialize)]
struct Remembered {
    /// The request, canonical: a key used for another one is refused.
    request: String,
    /// The encoded event.
    event: String,
}

/// The answer kept under a key.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    status: u16,
    body: serde_json::Value,
}

/// Where a request with a key stands.
#[derive(Debug)]
pub(super) enum Prepared {
    /// Carry out this change (this request's, or the first request's).
    Change(Box<Envelope>),
    /// The change was carried out; this is its answer.
    Answered(warp::reply::Response),
}

/// A request's `Idempotency-Key`, with what the request asks.
#[derive(Debug)]
pub(super) struct AdminRetry<'a> {
    ingress: &'a Ingress,
    key: AdminRetryKey,
    request: String,
    ttl: Duration,
}

impl<'a> AdminRetry<'a> {
    /// None without a key; `400` for a malformed one. `request` is the
    /// request, canonical (the same for every retry of it).
    pub(super) fn new(
        ingress: &'a Ingress,
        header: Option<String>,
        request: serde_json::Value,
    ) -> Result<Option<Self>, ApiError> {
        let Some(header) = header else {
            return Ok(None);
        };
        let key = AdminRetryKey::new(ingress.gate.prefix(), &header).map_err(ApiError::invalid)?;
        Ok(Some(Self { ingress, key, request: request.to_string(), ttl: ingress.admin_retry_ttl }))
    }

    /// What an earlier request with this key prepared or answered, if any.
    pub(super) async fn remembered(&self) -> Result<Option<Prepared>, ApiError> {
        let found = self.ingress.gate.admin_request(&self.key).await.map_err(gate_unavailable)?;
        found.map(|found| self.prepared(found)).transpose()
    }

    /// Claims the key with `change`, unless an earlier request did: then
    /// that request's change, or its answer.
    pub(super) async fn claim(&self, change: Envelope) -> Result<Prepared, ApiError> {
        let remembered = Remembered { request: self.request.clone(), event: encoded(&change) };
        let bytes = serde_json::to_vec(&remembered).expect("plain data serializes");
        match self.ingress.gate.claim_admin_request(&self.key, &bytes, self.ttl).await.map_err(gate_unavailable)? {
            None => Ok(Prepared::Change(Box::new(change))),
            Some(first) => self.prepared(first),
        }
    }

    /// Keeps `status` and `body` as the answer, unless an earlier request
    /// kept one; answers the one kept.
    pub(super) async fn answer(&self, status: StatusCode, body: serde_json::Value) -> warp::reply::Response {
        let kept = Kept { status: status.as_u16(), body };
        let bytes = serde_json::to_vec(&kept).expect("plain data serializes");
        match self.ingress.gate.answer_admin_request(&self.key, &bytes, self.ttl).await {
            Ok(first) => replay(&first).unwrap_or_else(|| reply(status, &kept.body)),
            Err(error) => {
                tracing::warn!(%error, "The answer to an admin request was not kept; a retry answers afresh.");
                reply(status, &kept.body)
            }
        }
    }

    fn prepared(&self, found: AdminRequest) -> Result<Prepared, ApiError> {
        let remembered: Remembered = serde_json::from_slice(&found.change)
            .map_err(|e| ApiError::internal(&format!("an unreadable admin request record: {e}")))?;
        if remembered.request != self.request {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "this Idempotency-Key was used for a different request; use a new key for a new change",
            ));
        }
        if let Some(answer) = found.answer.as_deref().and_then(replay) {
            return Ok(Prepared::Answered(answer));
        }
        let change = Envelope::decode(remembered.event.as_bytes())
            .map_err(|e| ApiError::internal(&format!("an unreadable admin request event: {e}")))?;
        Ok(Prepared::Change(Box::new(change)))
    }
}

fn encoded(change: &Envelope) -> String {
    String::from_utf8(change.encode()).expect("events encode as JSON")
}

fn replay(kept: &[u8]) -> Option<warp::reply::Response> {
    let kept: Kept = serde_json::from_slice(kept).ok()?;
    Some(reply(StatusCode::from_u16(kept.status).ok()?, &kept.body))
}

fn reply(status: StatusCode, body: &serde_json::Value) -> warp::reply::Response {
    warp::reply::with_status(warp::reply::json(body), status).into_response()
}

/// Redis could not be asked before anything was published.
pub(super) fn gate_unavailable(error: redis::RedisError) -> ApiError {
    tracing::warn!(%error, "Admission gate unavailable for an admin request.");
    ApiError::unavailable("the admission gate is unavailable; nothing was changed, retry the request")
}
