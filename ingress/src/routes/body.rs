//! Strict JSON bodies: bounded size, unknown fields refused, every problem
//! answered as `invalid_request` with serde's description.

use bytes::{Buf, Bytes, BytesMut};
use futures::{Stream, StreamExt};
use seckill_web::ApiError;
use serde::de::DeserializeOwned;
use warp::http::StatusCode;
use warp::{Filter, Rejection};

/// The raw body, refused with `413` above `max_bytes` whether or not the
/// client declared a length (a body-less POST needs no Content-Length).
pub(super) fn bounded(max_bytes: u64) -> impl Filter<Extract = (Bytes,), Error = Rejection> + Clone {
    warp::header::optional::<u64>("content-length").and(warp::body::stream()).and_then(
        move |declared: Option<u64>, stream| async move {
            if declared.is_some_and(|length| length > max_bytes) {
                return Err(too_large(max_bytes));
            }
            collect(stream, max_bytes).await
        },
    )
}

async fn collect<S, B>(stream: S, max_bytes: u64) -> Result<Bytes, Rejection>
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    let mut body = BytesMut::new();
    let mut stream = std::pin::pin!(stream);
    while let Some(chunk) = stream.next().await {
        let mut chunk = chunk.map_err(|e| ApiError::invalid(format!("unreadable body: {e}")))?;
        if (body.len() + chunk.remaining()) as u64 > max_bytes {
            return Err(too_large(max_bytes));
        }
        while chunk.has_remaining() {
            let part = chunk.chunk();
            let taken = part.len();
            body.extend_from_slice(part);
            chunk.advance(taken);
        }
    }
    Ok(body.freeze())
}

fn too_large(max_bytes: u64) -> Rejection {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("request bodies are limited to {max_bytes} bytes"),
    )
    .into()
}

/// Parses a required JSON body: one object. (serde would also build a
/// struct from an array of its fields in order, which no client means.)
pub(super) fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if is_empty(body) {
        return Err(ApiError::invalid("a JSON body is required"));
    }
    if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid("the JSON body must be an object"));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
}

/// Parses an optional JSON body: an empty one is `T::default()`.
pub(super) fn parse_or_default<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if is_empty(body) {
        return Ok(T::default());
    }
    parse(body)
}

fn is_empty(body: &[u8]) -> bool {
    body.iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Order {
        #[allow(dead_code, reason = "only whether it parses matters")]
        quantity: u32,
    }

    #[test]
    fn only_a_json_object_is_a_body() {
        assert!(parse::<Order>(br#" {"quantity": 1}"#).is_ok());
        for refused in [&b"[1]"[..], b"1", b"\"1\"", b"null", b"{\"quantity\": 1} x", b""] {
            assert!(parse::<Order>(refused).is_err(), "{}", String::from_utf8_lossy(refused));
        }
    }
}
