//! The alert rules on a real Prometheus scraping the platform: three faults
//! provoked for real (the processor stopped mid-traffic, a poison record,
//! Redis frozen), each alert seen going from pending to firing through
//! Prometheus's API and resolving once the fault is removed.
//!
//! The rules are `prometheus/alerts.yml` with every duration (each `for:`
//! and range window) divided by [`COMPRESSION`]
//! (`seckill_devstack::compressed_rules`), so minutes of production
//! patience take seconds here; what they fire on is unchanged.
//! `prometheus/alerts.test.yml` tests the real durations.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::{AlertWatch, Prometheus, TempDir};
use seckill_kafka::OwnedHeaders;
use serde_json::Value;

use crate::helpers::{eventually, Platform};

/// How many times shorter every duration of the rules is here.
const COMPRESSION: u64 = 12;
/// How long one alert may take to fire or to resolve.
const ALERT_DEADLINE: Duration = Duration::from_secs(90);

/// `alerts.yml` with its durations compressed, written into `dir`.
fn compressed_rules(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../prometheus/alerts.yml");
    seckill_devstack::compressed_rules(&source, dir, COMPRESSION).expect("prometheus/alerts.yml compressed")
}

/// Waits until the alert is firing, having seen it pending first.
async fn pending_then_firing(prometheus: &str, name: &str, labels: &[(&str, &str)]) {
    let (after, seen_pending) =
        AlertWatch::new(prometheus).firing(name, labels, ALERT_DEADLINE).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(seen_pending, "{name} {labels:?} fired without being seen pending first");
    println!("alerts: {name} {labels:?} pending, then firing {after:?} after the watch began");
}

/// Waits until no alert named `name` with `labels` is active.
async fn resolved(prometheus: &str, name: &str, labels: &[(&str, &str)]) {
    let after =
        AlertWatch::new(prometheus).resolved(name, labels, ALERT_DEADLINE).await.unwrap_or_else(|e| panic!("{e}"));
    println!("alerts: {name} {labels:?} resolved {after:?} after the fault was removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_processor_a_poison_record_and_a_frozen_redis_fire_their_alerts_and_resolve() {
    let mut platform = Platform::start_configured(None, |config| config.watch.interval_ms = 1_000).await;
    let services = [
        platform.base.trim_start_matches("http://").to_owned(),
        platform.processor_addr.to_string(),
        platform.projector_addr.to_string(),
    ];
    let dir = TempDir::new().expect("dir");
    let rules = compressed_rules(dir.path());
    let prometheus = Prometheus::start_with_rules(&dir.path().join("prometheus"), &services, Some(&rules))
        .expect("prometheus starts (run scripts/setup)");
    let prometheus = prometheus.url();
    let ns = platform.infra.namespace.clone();
    let processor_group = format!("{ns}-processor");
    let sales = platform.kafka.topics().sales;
    let voucher = platform.create_voucher(10_000, 1).await;
    // Healthy first: an order decided, and no alert about this platform's
    // groups or dependencies.
    let (status, body) = platform.order(&voucher, "before").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_final(body["order_id"].as_str().expect("order_id")).await;
    eventually(|| async {
        let up = platform.http.get(format!("{prometheus}/api/v1/query")).query(&[("query", "up == 1")]).send().await;
        let body: Value = up.ok()?.json().await.ok()?;
        (body["data"]["result"].as_array()?.len() == 3).then_some(())
    })
    .await;

    // 1. The processor stops mid-traffic: orders keep being admitted, its
    //    group stops committing, and the lag alert fires. And a poison
    //    record on the orders topic, which the projector dead-letters. Both
    //    are watched from before their fault, so their pending is seen.
    let stuck: [(&str, &str); 2] = [("group", &processor_group), ("topic", &sales)];
    let processor = platform.processor.take().expect("the processor runs");
    let watched = async {
        tokio::join!(
            pending_then_firing(&prometheus, "SeckillConsumerGroupStuck", &stuck),
            pending_then_firing(&prometheus, "SeckillDeadLetters", &[("service", "projector")]),
        )
    };
    let faults = async {
        processor.stop().await;
        for i in 0..5 {
            let (status, body) = platform.order(&voucher, &format!("while-stopped-{i}")).await;
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        }
        let orders = platform.kafka.topics().orders;
        platform
            .producer()
            .send_raw(&orders, Some(voucher.as_bytes()), b"{poison", OwnedHeaders::new())
            .await
            .expect("poison produced");
    };
    tokio::join!(watched, faults);

    // The processor back: it decides what waited, and both resolve (the
    // dead letter once it leaves the rule's window).
    platform.start_processor().await;
    resolved(&prometheus, "SeckillConsumerGroupStuck", &stuck).await;
    resolved(&prometheus, "SeckillDeadLetters", &[("service", "projector")]).await;

    // 2. Redis frozen: the ingress's probe goes unanswered, orders are
    //    refused with 503; thawed, the alert resolves.
    let redis = platform.infra.redis.pid().expect("Redis runs");
    let signal = |signal: &str| {
        let status = std::process::Command::new("kill").arg(signal).arg(redis.to_string()).status().expect("kill");
        assert!(status.success());
    };
    signal("-STOP");
    let frozen = [("dependency", "redis"), ("service", "ingress")];
    let firing = pending_then_firing(&prometheus, "SeckillDependencyDown", &frozen);
    let refused = platform.order(&voucher, "in-the-freeze");
    let ((), (status, body)) = tokio::join!(firing, refused);
    signal("-CONT");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    resolved(&prometheus, "SeckillDependencyDown", &frozen).await;
}

/// `POST /api/v2/alerts`: `alerts` as Prometheus sends them, `ends_at` for
/// all of them.
async fn send_alerts(
    http: &reqwest::Client,
    alertmanager: &str,
    alerts: &[Value],
    ends_at: chrono::DateTime<chrono::Utc>,
) {
    let body: Vec<Value> = alerts
        .iter()
        .map(|labels| {
            serde_json::json!({
                "labels": labels,
                "annotations": {"summary": "from the test"},
                "startsAt": chrono::Utc::now() - chrono::Duration::minutes(1),
                "endsAt": ends_at,
            })
        })
        .collect();
    let answer = http.post(format!("{alertmanager}/api/v2/alerts")).json(&body).send().await.expect("answers");
    assert_eq!(answer.status(), StatusCode::OK, "{}", answer.text().await.unwrap_or_default());
}

/// Each alert Alertmanager holds: its name, state (`active`,
/// `suppressed`), receivers and the alerts inhibiting it.
async fn held(http: &reqwest::Client, alertmanager: &str) -> Vec<(String, String, Vec<String>, usize)> {
    let Ok(answer) = http.get(format!("{alertmanager}/api/v2/alerts")).send().await else { return Vec::new() };
    let alerts: Vec<Value> = answer.json().await.unwrap_or_default();
    let mut held: Vec<_> = alerts
        .iter()
        .map(|alert| {
            let receivers = alert["receivers"].as_array().into_iter().flatten();
            (
                alert["labels"]["alertname"].as_str().unwrap_or_default().to_owned(),
                alert["status"]["state"].as_str().unwrap_or_default().to_owned(),
                receivers.filter_map(|receiver| receiver["name"].as_str().map(str::to_owned)).collect(),
                alert["status"]["inhibitedBy"].as_array().map_or(0, Vec::len),
            )
        })
        .collect();
    held.sort();
    held
}

#[tokio::test]
async fn alertmanager_routes_by_severity_and_keeps_symptoms_quiet_while_their_cause_fires() {
    let dir = TempDir::new().expect("dir");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../compose/alertmanager.yml");
    let alertmanager =
        seckill_devstack::Alertmanager::start(dir.path(), &config).expect("alertmanager starts (run scripts/setup)");
    let (http, url) = (reqwest::Client::new(), alertmanager.url());
    let redis_down = serde_json::json!({
        "alertname": "SeckillDependencyDown", "dependency": "redis", "service": "ingress",
        "instance": "ingress-1:8080", "severity": "critical",
    });
    let errors =
        serde_json::json!({"alertname": "SeckillIngressErrors", "instance": "ingress-1:8080", "severity": "critical"});
    let dead_letters =
        serde_json::json!({"alertname": "SeckillDeadLetters", "service": "projector", "severity": "warning"});
    let an_hour = chrono::Utc::now() + chrono::Duration::hours(1);
    send_alerts(&http, &url, &[redis_down.clone(), errors.clone(), dead_letters], an_hour).await;

    // Critical pages, warnings make tickets; the 5xx alert is the
    // unreachable Redis seen from the buyers' side, and stays quiet.
    let expected = |errors_state: &str, inhibitors: usize| {
        vec![
            ("SeckillDeadLetters".to_owned(), "active".to_owned(), vec!["ticket".to_owned()], 0),
            ("SeckillDependencyDown".to_owned(), "active".to_owned(), vec!["page".to_owned()], 0),
            ("SeckillIngressErrors".to_owned(), errors_state.to_owned(), vec!["page".to_owned()], inhibitors),
        ]
    };
    let want = expected("suppressed", 1);
    eventually(|| {
        let (http, url, want) = (&http, &url, &want);
        async move { (held(http, url).await == *want).then_some(()) }
    })
    .await;

    // Redis back (its alert resolved): the 5xx alert, if it still fires,
    // is news again.
    send_alerts(&http, &url, &[redis_down], chrono::Utc::now()).await;
    send_alerts(&http, &url, &[errors], an_hour).await;
    eventually(|| {
        let (http, url) = (&http, &url);
        async move {
            let now = held(http, url).await;
            now.iter()
                .any(|(name, state, _, inhibitors)| {
                    name == "SeckillIngressErrors" && state == "active" && *inhibitors == 0
                })
                .then_some(())
        }
    })
    .await;
}
