//! `GET /api/v1/openapi.json`: the HTTP API's OpenAPI 3 document
//! (`ingress/openapi.json`), compiled in so the served document is always
//! the one of this build. `ingress/tests/api/openapi.rs` keeps it in step
//! with the routes.

use warp::{Filter, Rejection, Reply};

/// The document, as written in the repository.
pub(crate) const OPENAPI_JSON: &str = include_str!("../../openapi.json");

pub(super) fn document() -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "openapi.json")
        .and(warp::get())
        .map(|| warp::reply::with_header(OPENAPI_JSON, "content-type", "application/json"))
}
