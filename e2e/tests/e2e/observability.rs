//! The dashboards against real data: a real Prometheus scrapes the platform
//! during a short sale (and a payment started at the provider's sandbox),
//! then every PromQL expression of every dashboard panel must return data;
//! and every service's `/metrics` passes `promtool check metrics`.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use futures::stream::{self, StreamExt};
use reqwest::StatusCode;
use seckill_devstack::{Prometheus, TempDir};
use serde_json::{json, Value};

use crate::helpers::{eventually, Platform};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_data_and_metrics_pass_promtool() {
    // The payment provider's sandbox, so the payment panels have calls to show.
    let sandbox = seckill_sandbox::Sandbox::build(seckill_sandbox::SandboxConfig {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        ..seckill_sandbox::SandboxConfig::default()
    })
    .await
    .expect("the sandbox starts");
    let provider = format!("http://{}", sandbox.local_addr());
    let _sandbox =
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(sandbox.run(tokio_util::sync::CancellationToken::new())));
    let platform = Arc::new(
        Platform::start_configured(None, |config| {
            config.payments = seckill_core::config::PaymentsConfig {
                return_url: "http://127.0.0.1:9/sale/{voucher_id}".to_owned(),
                ..seckill_core::config::PaymentsConfig::sandbox(&provider)
            };
        })
        .await,
    );
    let services = [
        platform.base.trim_start_matches("http://").to_owned(),
        platform.processor_addr.to_string(),
        platform.projector_addr.to_string(),
    ];
    let dir = TempDir::new().expect("dir");
    let prometheus = Prometheus::start(dir.path(), &services).expect("prometheus starts (run scripts/setup)");
    let query = |expr: String| {
        let (http, url) = (platform.http.clone(), format!("{}/api/v1/query", prometheus.url()));
        async move {
            let response = http.get(url).query(&[("query", expr.as_str())]).send().await.ok()?;
            let body: Value = response.json().await.ok()?;
            (body["status"] == "success").then(|| body["data"]["result"].as_array().cloned().unwrap_or_default())
        }
    };
    eventually(|| async { (query("up == 1".to_owned()).await?.len() == 3).then_some(()) }).await;

    // A short sale: sells out, with a cancellation and a free claim (paid).
    let voucher = Arc::new(platform.create_voucher(40, 1).await);
    let answers: Vec<_> = stream::iter(0..200)
        .map(|i| {
            let (platform, voucher) = (Arc::clone(&platform), Arc::clone(&voucher));
            async move { (format!("watcher-{i}"), platform.order(&voucher, &format!("watcher-{i}")).await) }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let admitted: Vec<(String, String)> = answers
        .into_iter()
        .filter(|(_, (status, _))| *status == StatusCode::ACCEPTED)
        .map(|(user, (_, body))| (user, body["order_id"].as_str().expect("order_id").to_owned()))
        .collect();
    assert_eq!(admitted.len(), 40);
    for (action, (user, order)) in ["cancel", "confirm"].into_iter().zip(&admitted) {
        platform.wait_final(order).await;
        let (status, body) = platform.post(&format!("/api/v1/orders/{order}/{action}"), Some(user), None).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    platform.wait_voucher(&voucher, |v| v["cancelled"] == 1 && v["paid"] == 1).await;
    // A priced sale: its buyer starts paying at the provider.
    let now = chrono::Utc::now();
    let priced = platform
        .create_voucher_from(json!({
            "stock": 1, "per_user_limit": 1, "begins_at": now - chrono::Duration::seconds(1),
            "ends_at": now + chrono::Duration::hours(1), "payment_seconds": 120, "price": 500, "currency": "EUR",
        }))
        .await;
    let (status, body) = platform.order(&priced, "payer").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let order = body["order_id"].as_str().expect("order_id").to_owned();
    assert_eq!(platform.wait_final(&order).await["status"], "CREATED");
    let (status, body) = platform.post(&format!("/api/v1/orders/{order}/payment"), Some("payer"), None).await;
    assert_eq!((status, body["amount"].as_u64()), (StatusCode::OK, Some(500)), "{body}");
    // The read side: a voucher stream held open, a long-poll that times
    // out, and a revalidated voucher read.
    let stream_url = format!("{}/api/v1/vouchers/{voucher}/stream", platform.base);
    let _stream = crate::live::sse::SseStream::open(&platform.http, &stream_url, &[]).await;
    let (user, order) = &admitted[2];
    let poll = format!("{}/api/v1/orders/{order}?wait=200ms&status=CREATED", platform.base);
    let answer = platform.http.get(poll).header("authorization", Platform::as_user(user)).send().await;
    assert_eq!(answer.expect("answers").status(), StatusCode::OK);
    // A client without a token: refused at the door, and counted.
    let anonymous = platform.http.post(format!("{}/api/v1/vouchers/{voucher}/orders", platform.base)).send().await;
    assert_eq!(anonymous.expect("answers").status(), StatusCode::UNAUTHORIZED);

    let dashboards = Path::new(env!("CARGO_MANIFEST_DIR")).join("../grafana/dashboards");
    let queries = seckill_web::dashboards::dashboard_queries(&dashboards);
    assert!(queries.len() >= 15, "the dashboards have their panels: {queries:?}");
    for (panel, expr) in &queries {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if query(expr.clone()).await.is_some_and(|result| !result.is_empty()) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "no data for panel {panel}: {expr}");
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }
    println!("observability: {} panel queries returned data", queries.len());

    for service in &services {
        let text = platform.http.get(format!("http://{service}/metrics")).send().await.expect("metrics");
        let text = text.text().await.expect("text");
        let output = tokio::task::block_in_place(|| {
            let mut promtool = std::process::Command::new("promtool")
                .args(["check", "metrics"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("promtool runs (run scripts/setup)");
            promtool.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("written");
            promtool.wait_with_output().expect("promtool finishes")
        });
        assert!(
            output.status.success(),
            "promtool check metrics on {service}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
