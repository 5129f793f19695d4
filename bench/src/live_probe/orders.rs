//! Placing the orders the read-side scenarios poll, wait on and stream.

use std::path::Path;

use futures::stream::{self, StreamExt};

/// Places one order per token on `voucher`, `concurrency` at a time;
/// writes `token order_id` for every `202` to `out`.
pub(crate) async fn place(
    url: &str,
    voucher: &str,
    tokens: &[String],
    out: &Path,
    concurrency: usize,
) -> anyhow::Result<serde_json::Value> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(concurrency).build()?;
    let endpoint = format!("{url}/api/v1/vouchers/{voucher}/orders");
    let placed: Vec<Option<String>> = stream::iter(tokens)
        .map(|token| {
            let (client, endpoint) = (client.clone(), endpoint.clone());
            async move {
                let response = client.post(endpoint).bearer_auth(token).send().await.ok()?;
                if response.status() != reqwest::StatusCode::ACCEPTED {
                    return None;
                }
                let body: serde_json::Value = response.json().await.ok()?;
                Some(format!("{token} {}", body["order_id"].as_str()?))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let admitted: Vec<String> = placed.into_iter().flatten().collect();
    std::fs::write(out, admitted.join("\n") + "\n")?;
    Ok(serde_json::json!({ "tokens": tokens.len(), "admitted": admitted.len() }))
}
