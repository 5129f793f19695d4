//! `GET /api/v1/openapi.json`: the HTTP API's OpenAPI 3 document
//! (`ingress/openapi.json`), compiled in so the served document is always
//! the one of this build; a unit test in `routes` keeps it in step with the
//! routes. The document also says which methods each path answers: a
//! request with another method gets `405` with the `Allow` header RFC 9110
//! asks for.

use std::sync::LazyLock;

use seckill_web::ApiError;
use warp::http::{header, HeaderValue, Method, StatusCode};
use warp::path::FullPath;
use warp::{Filter, Rejection, Reply};

/// The document, as written in the repository.
pub(crate) const OPENAPI_JSON: &str = include_str!("../../openapi.json");

pub(super) fn document() -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "openapi.json")
        .and(warp::get())
        .map(|| warp::reply::with_header(OPENAPI_JSON, "content-type", "application/json"))
}

/// Each documented path's segments (`None` for a `{parameter}`) and the
/// methods it answers, as an `Allow` value.
static ALLOWED: LazyLock<Vec<(Vec<Option<String>>, String)>> = LazyLock::new(|| {
    let document: serde_json::Value = serde_json::from_str(OPENAPI_JSON).expect("the compiled-in document is JSON");
    let paths = document["paths"].as_object().cloned().unwrap_or_default();
    paths
        .into_iter()
        .map(|(path, operations)| {
            let segments =
                path.split('/').map(|segment| (!segment.starts_with('{')).then(|| segment.to_owned())).collect();
            let mut methods: Vec<String> = operations
                .as_object()
                .map(|operations| operations.keys().map(|method| method.to_uppercase()).collect())
                .unwrap_or_default();
            methods.retain(|method| Method::from_bytes(method.as_bytes()).is_ok() && method != "PARAMETERS");
            methods.sort();
            (segments, methods.join(", "))
        })
        .collect()
});

/// The methods `path` answers, if it is a documented path.
pub(crate) fn allowed_methods(path: &str) -> Option<&'static str> {
    let segments: Vec<&str> = path.split('/').collect();
    ALLOWED.iter().find_map(|(template, allow)| {
        let matches = template.len() == segments.len()
            && template.iter().zip(&segments).all(|(expected, segment)| match expected {
                Some(expected) => expected == segment,
                None => !segment.is_empty(),
            });
        matches.then_some(allow.as_str())
    })
}

/// `405` with `Allow` for a documented path asked with a method it does not
/// answer; rejects (not found, the least relevant rejection) otherwise, so
/// the routes' own rejection is what the client hears.
pub(super) fn method_not_allowed() -> impl Filter<Extract = (warp::reply::Response,), Error = Rejection> + Clone {
    warp::path::full().and(warp::method()).and_then(|path: FullPath, method: Method| async move {
        let Some(allow) = allowed_methods(path.as_str()) else { return Err(warp::reject::not_found()) };
        if allow.split(", ").any(|allowed| allowed == method.as_str()) {
            return Err(warp::reject::not_found());
        }
        let message = format!("{method} is not answered here; use {allow}");
        let mut response = ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", message).into_response();
        if let Ok(allow) = HeaderValue::from_str(allow) {
            response.headers_mut().insert(header::ALLOW, allow);
        }
        Ok(response)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_path_knows_its_methods() {
        assert_eq!(allowed_methods("/api/v1/vouchers"), Some("GET, POST"));
        assert_eq!(allowed_methods("/api/v1/vouchers/0192f0c4-7a7e-7cc1-8000-00000000a001"), Some("GET, PATCH"));
        assert_eq!(allowed_methods("/api/v1/orders/x/cancel"), Some("POST"));
        assert_eq!(allowed_methods("/api/v1/orders//cancel"), None, "an empty parameter is no path of ours");
        assert_eq!(allowed_methods("/nowhere"), None);
    }
}
