//! Request bodies, bounded: the length is checked before a byte is read, so
//! no caller can make the sandbox buffer more than [`MAX_BODY_BYTES`].

use serde::de::DeserializeOwned;
use warp::http::StatusCode;
use warp::{Filter, Rejection};

use crate::failure::Failure;

/// Largest body accepted; Stripe's parameters for one call are far below.
pub(crate) const MAX_BODY_BYTES: u64 = 16 * 1024;

/// Refuses a declared length past the bound (`413`) and a body of unknown
/// length (`400`); a request without either has no body.
fn limited() -> impl Filter<Extract = (), Error = Rejection> + Copy {
    warp::header::optional::<u64>("content-length")
        .and(warp::header::optional::<String>("transfer-encoding"))
        .and_then(|length: Option<u64>, encoding: Option<String>| async move {
            match (length, encoding) {
                (Some(length), _) if length > MAX_BODY_BYTES => Err(warp::reject::custom(too_large())),
                (None, Some(_)) => Err(warp::reject::custom(Failure::invalid(
                    "parameter_invalid",
                    "Send a Content-Length; chunked bodies are not accepted.",
                ))),
                _ => Ok(()),
            }
        })
        .untuple_one()
}

fn too_large() -> Failure {
    Failure {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        ..Failure::invalid("parameter_invalid", format!("Bodies are limited to {MAX_BODY_BYTES} bytes."))
    }
}

/// Form parameters, in order, repeated names kept (`expand[]`).
pub(crate) fn form() -> impl Filter<Extract = (Vec<(String, String)>,), Error = Rejection> + Copy {
    limited().and(warp::body::form())
}

/// A JSON body.
pub(crate) fn json<T: DeserializeOwned + Send>() -> impl Filter<Extract = (T,), Error = Rejection> + Copy {
    limited().and(warp::body::json())
}
