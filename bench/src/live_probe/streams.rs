//! Thousands of open event streams, held idle.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use futures::future::join_all;

/// The user a token is for: its `sub` claim.
fn subject(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&claims).ok()?;
    claims["sub"].as_str().map(str::to_owned)
}

/// Opens each token's user stream; once all answered, writes `ready`, holds
/// them `hold`, then reports how many opened.
pub(crate) async fn run(
    url: &str,
    tokens: &[String],
    ready: &Path,
    hold: Duration,
) -> anyhow::Result<serde_json::Value> {
    let clients = super::h2_clients(tokens.len(), Duration::from_secs(3_600))?;
    let started = Instant::now();
    let opens = tokens.iter().enumerate().map(|(index, token)| {
        let client = clients[index % clients.len()].clone();
        let user = subject(token).unwrap_or_default();
        let request = client.get(format!("{url}/api/v1/users/{user}/orders/stream")).bearer_auth(token);
        async move { request.send().await.ok().filter(|response| response.status().is_success()) }
    });
    let streams: Vec<reqwest::Response> = join_all(opens).await.into_iter().flatten().collect();
    let opened = streams.len();
    eprintln!("    {opened} streams open after {:.1} s", started.elapsed().as_secs_f64());
    std::fs::write(ready, b"ready\n")?;
    tokio::time::sleep(hold).await;
    drop(streams);
    Ok(serde_json::json!({ "streams": tokens.len(), "opened": opened, "held_s": hold.as_secs() }))
}
