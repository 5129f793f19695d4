//! The OpenAPI document and the code stay in step: the ingress serves the
//! document of the repository, and every operation it documents is routed
//! (answered by its handler, never "no such route").

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::helpers::Platform;

/// The keys of a path item that are operations (OpenAPI 3.0 §4.7.9).
const HTTP_METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/// The repository's document.
fn document() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../ingress/openapi.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("ingress/openapi.json")).expect("valid JSON")
}

#[tokio::test]
async fn the_served_document_is_the_repositorys_and_every_operation_is_routed() {
    let platform = Platform::start().await;
    let (status, served) = platform.get(&format!("{}/api/v1/openapi.json", platform.base)).await;
    assert_eq!(status, StatusCode::OK);
    let document = document();
    assert_eq!(served, document, "the ingress serves ingress/openapi.json as built");
    assert!(document["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "an OpenAPI 3 document");

    let mut operations = 0;
    for (template, item) in document["paths"].as_object().expect("paths") {
        // Every path parameter gets a well-formed value of its kind.
        let path = template
            .replace("{voucher_id}", &uuid::Uuid::now_v7().to_string())
            .replace("{order_id}", &uuid::Uuid::now_v7().to_string())
            .replace("{user_id}", "alice")
            .replace("{file}", "sale.js");
        assert!(!path.contains('{'), "{template}: a path parameter this test does not know");
        // A path item's other keys (`parameters`, `summary`) are not operations.
        let methods = item.as_object().expect("path item").keys().filter(|key| HTTP_METHODS.contains(&key.as_str()));
        for method in methods {
            let method: Method = method.to_uppercase().parse().expect("an HTTP method");
            let response = platform
                .http
                .request(method.clone(), format!("{}{path}", platform.base))
                .header("authorization", Platform::as_admin())
                .send()
                .await
                .expect("answers");
            let status = response.status();
            // An event stream never ends: its status and type say enough.
            let streaming = response
                .headers()
                .get("content-type")
                .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
            let body: Value = if streaming { Value::Null } else { response.json().await.unwrap_or(Value::Null) };
            let unrouted = status == StatusCode::METHOD_NOT_ALLOWED || body["message"] == "no such route";
            assert!(!unrouted, "{method} {template} is documented but not routed: {status} {body}");
            operations += 1;
        }
    }
    assert!(operations >= 12, "{operations} operations documented");
}
