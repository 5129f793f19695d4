//! Admin retries: a create or an update that was published but could not be
//! applied to the gate answers `503` saying so, and a retry with the same
//! `Idempotency-Key` completes that very change (same voucher, same update
//! id, applied once); concurrent retries make one change; a key reused for
//! another request is refused.
//!
//! The gate is made to fail after the publish by forbidding EVALSHA to
//! Redis's default user (every script call answers NOPERM) while plain
//! commands still work.

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{eventually, Platform};

impl Platform {
    async fn scripts_allowed(&self, allowed: bool) {
        let rule = if allowed { "+evalsha" } else { "-evalsha" };
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("default")
            .arg(rule)
            .query_async(&mut self.redis_connection().await)
            .await
            .expect("ACL SETUSER");
    }

    /// `method path` as the admin, with `key` as its Idempotency-Key.
    async fn admin_call(&self, method: reqwest::Method, path: &str, key: &str, body: &Value) -> (StatusCode, Value) {
        let response = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("authorization", Platform::as_admin())
            .header("idempotency-key", key)
            .json(body)
            .send()
            .await
            .expect("ingress answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Distinct vouchers defined on the sales topic (everything published
    /// so far: every answer came after its publish).
    async fn sales_defined(&self) -> usize {
        let (brokers, topic) = (self.kafka.brokers.clone(), self.kafka.topics().sales);
        tokio::task::spawn_blocking(move || {
            let mut defined = std::collections::HashSet::new();
            seckill_kafka::read_to_end(&brokers, &[&topic], |message| {
                use seckill_kafka::Message;
                if let Ok(envelope) = seckill_core::Envelope::decode(message.payload().unwrap_or_default()) {
                    if let seckill_core::Event::VoucherCreated(created) = envelope.event {
                        defined.insert(created.voucher_id);
                    }
                }
            })
            .expect("the sales topic reads");
            defined.len()
        })
        .await
        .expect("reader task")
    }

    async fn stock_everywhere(&self, voucher: &str, stock: u64) {
        let url = format!("http://{}/api/v1/stock/{voucher}", self.processor_addr);
        eventually(|| async {
            let (_, persistent) = self.get(&url).await;
            let (_, shown) = self.get(&format!("{}/api/v1/vouchers/{voucher}", self.base)).await;
            (persistent["stock"] == stock && shown["stock"] == stock).then_some(())
        })
        .await;
    }
}

fn sale(stock: u64) -> Value {
    let begins = chrono::Utc::now() - chrono::Duration::seconds(1);
    json!({"stock": stock, "per_user_limit": 1, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1)})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_published_but_not_applied_is_completed_once_by_its_retry() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(10, 1).await;
    let path = format!("/api/v1/vouchers/{voucher}");
    let add = json!({"add_stock": 5});

    platform.scripts_allowed(false).await;
    let (status, failed) = platform.admin_call(reqwest::Method::PATCH, &path, "restock-1", &add).await;
    platform.scripts_allowed(true).await;
    assert_eq!((status, failed["error"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{failed}");
    let message = failed["message"].as_str().expect("message");
    assert!(message.contains("published") && message.contains("Idempotency-Key"), "{failed}");

    let (status, first) = platform.admin_call(reqwest::Method::PATCH, &path, "restock-1", &add).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["update_id"], failed["update_id"], "the retry completed the published update");
    assert_eq!(first["stock"], 15, "{first}");
    // Asked again, even after other changes, the same answer.
    platform.update_voucher(&voucher, json!({"paused": true})).await;
    let (status, again) = platform.admin_call(reqwest::Method::PATCH, &path, "restock-1", &add).await;
    assert_eq!((status, &again), (StatusCode::OK, &first));
    platform.stock_everywhere(&voucher, 15).await;
    assert_eq!(platform.redis_remaining(&voucher).await, 15, "added once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_published_but_not_loaded_is_completed_by_its_retry_not_opened_twice() {
    let platform = Platform::start().await;
    let request = sale(7);

    platform.scripts_allowed(false).await;
    let (status, failed) = platform.admin_call(reqwest::Method::POST, "/api/v1/vouchers", "sale-1", &request).await;
    platform.scripts_allowed(true).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{failed}");
    let (status, created) = platform.admin_call(reqwest::Method::POST, "/api/v1/vouchers", "sale-1", &request).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["voucher_id"], failed["voucher_id"], "the retry names the voucher the first call published");
    let voucher = created["voucher_id"].as_str().expect("voucher_id").to_owned();
    platform.stock_everywhere(&voucher, 7).await;
    assert_eq!(platform.sales_defined().await, 1, "one sale opened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_with_one_key_make_one_change_and_a_reused_key_is_refused() {
    let platform = Platform::start().await;
    let voucher = platform.create_voucher(10, 1).await;
    let path = format!("/api/v1/vouchers/{voucher}");
    let add = json!({"add_stock": 3});
    let answers =
        join_all((0..20).map(|_| platform.admin_call(reqwest::Method::PATCH, &path, "restock-7", &add))).await;
    assert!(answers.iter().all(|(status, _)| *status == StatusCode::OK), "{answers:?}");
    assert!(answers.iter().all(|(_, body)| *body == answers[0].1), "one answer: {answers:?}");
    platform.stock_everywhere(&voucher, 13).await;

    let request = sale(2);
    let creates =
        join_all((0..20).map(|_| platform.admin_call(reqwest::Method::POST, "/api/v1/vouchers", "sale-7", &request)))
            .await;
    assert!(creates.iter().all(|(status, _)| *status == StatusCode::CREATED), "{creates:?}");
    let ids: std::collections::HashSet<_> = creates.iter().map(|(_, body)| body["voucher_id"].clone()).collect();
    assert_eq!(ids.len(), 1, "one sale: {creates:?}");
    assert_eq!(platform.sales_defined().await, 2, "the first voucher and this one");

    // The same key for another request: refused, nothing changed.
    let (status, body) =
        platform.admin_call(reqwest::Method::PATCH, &path, "restock-7", &json!({"add_stock": 4})).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("idempotency_key_reused")));
    let (status, body) = platform.admin_call(reqwest::Method::PATCH, &path, "has space", &add).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_request")), "{body}");
    platform.stock_everywhere(&voucher, 13).await;
}
