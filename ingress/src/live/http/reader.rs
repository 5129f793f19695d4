//! The reader's own part of a voucher read: `GET /api/v1/vouchers/{id}`
//! with a user's credentials (a bearer token, or the development user
//! header) answers, for a draw, the sale as every reader sees it plus
//! `me`: the reader's own state in the draw and, while they hold a win,
//! when its window ends.
//!
//! The shared representation (`crate::live::vouchers`) stays shared: `me`
//! is read per request (one Redis read of the entry) and spliced into its
//! body, and such an answer carries a tag of its own (the sale's tag and
//! the reader's state), `Cache-Control: private, no-cache` and `Vary:
//! Authorization`, so no shared cache hands one reader's state to another.

use std::hash::{DefaultHasher, Hash, Hasher};

use chrono::{DateTime, Utc};
use seckill_core::{OrderId, UserId, VoucherId};
use serde::Serialize;
use warp::http::{header, HeaderValue, StatusCode};
use warp::hyper::body::Bytes;
use warp::reply::Response;

use super::Reading;
use crate::live::vouchers::Served;

/// `me` in a voucher read.
#[derive(Debug, Serialize, Hash)]
pub(super) struct Me {
    pub(super) user_id: UserId,
    /// `not_entered`, `entered` (the draw is not made yet), `not_selected`
    /// (drawn past the winners; a returned unit may still promote the
    /// entry), `won`, `promoted` (won later, as a unit came free), `used`
    /// (the win admitted `order_id`) or `lapsed` (the window closed unused).
    pub(super) state: &'static str,
    /// The rank the draw gave; absent before the draw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) rank: Option<u64>,
    /// While the win is open (`won`, `promoted`): when its window ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) purchase_until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) order_id: Option<OrderId>,
}

/// `user`'s state in `voucher`'s draw as of `now`; None when the voucher
/// is not a draw, or the draw cannot be read (the sale is answered alone).
pub(super) async fn draw_state(reading: &Reading, voucher: VoucherId, user: UserId, now: DateTime<Utc>) -> Option<Me> {
    let handle = reading.rooms.draw_of(voucher).await.ok()?;
    let (mut entry, _) = match reading.rooms.entry_status(&handle, &user).await {
        Ok(answer) => answer?,
        Err(error) => {
            tracing::warn!(%error, %voucher, "A reader's entry could not be read; answering the sale alone.");
            return None;
        }
    };
    // Told as of when it is sent: a window that closed meanwhile is lapsed.
    entry.now = entry.now.max(now);
    let status = handle.draw_status(&entry, &handle.view());
    let state = if status.order_id.is_some() { "used" } else { status.state };
    let open = matches!(state, "won" | "promoted");
    Some(Me {
        user_id: user,
        state,
        rank: status.rank,
        purchase_until: status.purchase_until.filter(|_| open),
        order_id: status.order_id,
    })
}

/// The voucher read with `me`: `304` when the reader's copy is current.
pub(super) fn answer(served: &Served, me: &Me, if_none_match: Option<&str>, now: DateTime<Utc>) -> Response {
    let representation = &served.representation;
    let mut hasher = DefaultHasher::new();
    me.hash(&mut hasher);
    let etag = format!("{}-{:016x}\"", representation.etag.trim_end_matches('"'), hasher.finish());
    let bare = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    let not_modified =
        if_none_match.is_some_and(|header| header.split(',').any(|tag| tag.trim() == "*" || bare(tag) == bare(&etag)));
    let mut response = if not_modified {
        let mut response = Response::new(Bytes::new().into());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        let mut body = representation.body(now, served.stale).to_vec();
        // The representation is one JSON object: `me` goes before its end.
        body.pop();
        body.extend_from_slice(b",\"me\":");
        body.extend(serde_json::to_vec(me).expect("states serialize"));
        body.push(b'}');
        let mut response = Response::new(Bytes::from(body).into());
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    };
    let headers = response.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, etag);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    headers.insert(header::VARY, HeaderValue::from_static("authorization, x-user-id"));
    response
}
