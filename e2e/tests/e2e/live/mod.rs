//! The read side: phases and the server clock, cacheable voucher pages,
//! orders readable from their `202` in every layout, long-polls and
//! streams woken by events, across ingress replicas.

mod own_orders;
mod pages;
pub mod sse;
mod streams;
mod waits;

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::Platform;

/// `GET base + path` as `user` (the admin when None): status, headers, body.
pub async fn read(
    platform: &Platform,
    base: &str,
    path: &str,
    user: Option<&str>,
    headers: &[(&str, &str)],
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let authorization = user.map_or_else(Platform::as_admin, Platform::as_user);
    let mut request = platform.http.get(format!("{base}{path}")).header("authorization", authorization);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the ingress answers");
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.json().await.unwrap_or(Value::Null))
}

/// `POST base + path` as `user`: status and body.
pub async fn act(platform: &Platform, base: &str, path: &str, user: &str) -> (StatusCode, Value) {
    let response = platform
        .http
        .post(format!("{base}{path}"))
        .header("authorization", Platform::as_user(user))
        .send()
        .await
        .expect("the ingress answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A header's value as text.
pub fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}
