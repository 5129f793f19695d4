//! The product page's reads: phase and server clock, and caching.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use reqwest::StatusCode;
use seckill_core::{OrderId, UserId, VoucherId};
use seckill_store::{OrderView, StoreError, ViewReader, VoucherView};
use seckill_web::RemoteView;
use serde_json::json;

use super::{header, read};
use crate::helpers::{eventually, Platform};

fn time(value: &serde_json::Value) -> DateTime<Utc> {
    value.as_str().and_then(|raw| raw.parse().ok()).expect("an RFC 3339 time")
}

#[tokio::test]
async fn a_vouchers_phase_follows_the_admission_clock_through_window_sell_out_pause_and_end() {
    let platform = Platform::start().await;
    let base = platform.base.clone();

    // The server clock is the Redis server's: the one admission judges by.
    let (status, _, clock) = read(&platform, &base, "/api/v1/time", None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let (seconds, micros): (i64, i64) =
        redis::cmd("TIME").query_async(&mut platform.redis_connection().await).await.expect("TIME");
    let redis_ms = seconds * 1_000 + micros / 1_000;
    let served_ms = clock["unix_ms"].as_i64().expect("unix_ms");
    assert!((served_ms - redis_ms).abs() < 1_000, "server time {served_ms} vs Redis {redis_ms}");
    assert!(clock["server_time"].as_str().expect("a time").ends_with('Z'));

    // Upcoming, readable the moment its 201 is sent: judged by the server's
    // own clock in the answer, so a machine that stalled past begins_at
    // tries a later start rather than failing.
    let mut upcoming = None;
    for lead in [2, 5, 15] {
        let begins = Utc::now() + Duration::seconds(lead);
        let voucher = platform.create_voucher_between(1, 1, begins, begins + Duration::hours(1)).await;
        let path = format!("/api/v1/vouchers/{voucher}");
        let (status, headers, shown) = read(&platform, &base, &path, None, &[]).await;
        assert_eq!(status, StatusCode::OK, "{shown}");
        if time(&shown["server_time"]) < begins {
            upcoming = Some((begins, voucher, path, headers, shown));
            break;
        }
    }
    let (begins, voucher, path, headers, shown) = upcoming.expect("a sale read before its start");
    assert_eq!(shown["phase"], "upcoming", "{shown}");
    let opens_in = shown["opens_in_ms"].as_i64().expect("opens_in_ms");
    let expected = (begins - time(&shown["server_time"])).num_milliseconds();
    // Both ends are whole milliseconds apart from rounding.
    assert!((opens_in - expected).abs() <= 1, "counted from server_time: {opens_in} vs {expected}");
    assert!(opens_in > 0, "{opens_in}");
    assert_eq!(header(&headers, "cache-control"), Some("public, max-age=1"));

    // Open at begins_at, by the same clock.
    let shown = platform.wait_voucher(&voucher, |v| v["phase"] == "open").await;
    assert!(time(&shown["server_time"]) >= begins);
    assert_eq!((shown["opens_in_ms"].as_i64(), shown["available"].as_u64()), (Some(0), Some(1)));

    // Sold out: never shown available for longer than the staleness bound.
    let (status, _) = platform.order(&voucher, "buyer").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let shown = platform.wait_voucher(&voucher, |v| v["phase"] == "sold_out").await;
    assert_eq!(shown["available"], 0);

    // Stock added, then a pause, then the end moved to the past's edge.
    platform.update_voucher(&voucher, json!({"add_stock": 1})).await;
    platform.wait_voucher(&voucher, |v| v["phase"] == "open" && v["available"] == 1).await;
    platform.update_voucher(&voucher, json!({"paused": true})).await;
    platform.wait_voucher(&voucher, |v| v["phase"] == "paused").await;
    let ends = Utc::now() + Duration::milliseconds(500);
    let (status, body) = platform.update_voucher(&voucher, json!({"ends_at": ends})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let shown = platform.wait_voucher(&voucher, |v| v["phase"] == "ended").await;
    assert_eq!(shown["closes_in_ms"], 0);
    let (_, headers, _) = read(&platform, &base, &path, None, &[]).await;
    assert_eq!(header(&headers, "cache-control"), Some("public, max-age=60"), "an ended sale changes no more");
}

#[tokio::test]
async fn an_unchanged_sale_revalidates_to_304_across_refreshes_while_its_clock_moves() {
    // Representations are rebuilt every 50 ms; the tag names the sale's
    // state, so an unchanged sale keeps its tag across rebuilds.
    let platform = Platform::start_configured(None, |config| config.live.voucher_refresh_ms = 50).await;
    let base = platform.base.clone();
    let voucher = platform.create_voucher(5, 1).await;
    listed(&platform, &base).await;
    for path in [format!("/api/v1/vouchers/{voucher}"), "/api/v1/vouchers?limit=5".to_owned()] {
        let (status, headers, first) = read(&platform, &base, &path, None, &[]).await;
        assert_eq!(status, StatusCode::OK, "{first}");
        let etag = header(&headers, "etag").expect("an ETag").to_owned();
        assert!(etag.starts_with("W/\""), "a weak validator (the clock fields differ per answer): {etag}");
        for round in 0..5 {
            tokio::time::sleep(std::time::Duration::from_millis(120)).await;
            let (status, headers, _) = read(&platform, &base, &path, None, &[("if-none-match", &etag)]).await;
            assert_eq!(status, StatusCode::NOT_MODIFIED, "{path}, round {round}: the sale did not change");
            assert_eq!(header(&headers, "etag"), Some(etag.as_str()));
            assert!(header(&headers, "cache-control").is_some());
        }
        let (status, headers, later) = read(&platform, &base, &path, None, &[("if-none-match", "\"other\"")]).await;
        assert_eq!(status, StatusCode::OK, "another tag gets the body");
        assert_eq!(header(&headers, "etag"), Some(etag.as_str()));
        let server_time = |body: &serde_json::Value| {
            time(if body["vouchers"].is_array() { &body["vouchers"][0]["server_time"] } else { &body["server_time"] })
        };
        assert!(server_time(&later) > server_time(&first), "the clock fields are this answer's: {first} {later}");
    }

    // A change of the sale changes the tag.
    let (_, headers, _) = read(&platform, &base, &format!("/api/v1/vouchers/{voucher}"), None, &[]).await;
    let before = header(&headers, "etag").expect("an ETag").to_owned();
    let (status, _) = platform.order(&voucher, "buyer").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let path = format!("/api/v1/vouchers/{voucher}");
    eventually(|| async {
        let (status, _, _) = read(&platform, &base, &path, None, &[("if-none-match", &before)]).await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    let metrics =
        platform.http.get(format!("{base}/metrics")).send().await.expect("metrics").text().await.expect("text");
    assert!(
        metrics.contains(r#"seckill_read_answers_total{resource="voucher",service="ingress",source="not_modified"}"#),
        "{metrics}"
    );
}

/// Waits until the voucher list shows a voucher (the projector wrote it).
async fn listed(platform: &Platform, base: &str) {
    eventually(|| async {
        let (_, _, body) = read(platform, base, "/api/v1/vouchers?limit=5", None, &[]).await;
        body["vouchers"].as_array().is_some_and(|vouchers| !vouchers.is_empty()).then_some(())
    })
    .await;
}

/// The view through the projector's API, counting the list reads that
/// reach it.
#[derive(Debug)]
struct CountingView {
    inner: RemoteView,
    list_reads: AtomicUsize,
}

#[async_trait::async_trait]
impl ViewReader for CountingView {
    async fn order(&self, order: OrderId) -> Result<Option<OrderView>, StoreError> {
        self.inner.order(order).await
    }
    async fn user_orders(&self, user: &UserId, limit: usize) -> Result<Vec<OrderView>, StoreError> {
        self.inner.user_orders(user, limit).await
    }
    async fn voucher(&self, voucher: VoucherId) -> Result<Option<VoucherView>, StoreError> {
        self.inner.voucher(voucher).await
    }
    async fn vouchers(&self, before: Option<VoucherId>, limit: usize) -> Result<Vec<VoucherView>, StoreError> {
        self.list_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.vouchers(before, limit).await
    }
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").arg(signal).arg(pid.to_string()).status().expect("kill runs");
    assert!(status.success(), "kill {signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_redis_or_view_never_shows_an_open_sale_as_sold_out_and_costs_one_rebuild() {
    let mut platform = Platform::start_configured(None, |config| {
        config.live.voucher_refresh_ms = 1_000;
        config.redis.response_timeout_ms = 500;
    })
    .await;
    let base = platform.base.clone();
    let voucher = platform.create_voucher(5, 1).await;
    listed(&platform, &base).await;
    let path = format!("/api/v1/vouchers/{voucher}");
    let (status, _, good) = read(&platform, &base, &path, None, &[]).await;
    assert_eq!((status, &good["phase"], &good["available"]), (StatusCode::OK, &json!("open"), &json!(5)));

    // Redis frozen: every read answers the last good state, marked stale,
    // never "no stock left".
    let redis = platform.infra.redis.pid().expect("Redis runs");
    signal(redis, "-STOP");
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let reads = (0..20).map(|_| read(&platform, &base, &path, None, &[]));
    let answers = futures::future::join_all(reads).await;
    signal(redis, "-CONT");
    for (status, headers, body) in &answers {
        assert_eq!(*status, StatusCode::OK, "{body}");
        assert_eq!((&body["phase"], &body["available"], &body["stale"]), (&json!("open"), &json!(5), &json!(true)));
        assert_eq!(header(headers, "cache-control"), Some("no-store"));
    }
    eventually(|| async {
        let (_, _, body) = read(&platform, &base, &path, None, &[]).await;
        body.get("stale").is_none().then_some(())
    })
    .await;

    // The projector stopped: an ingress reading the view through its API
    // tries once per refresh interval, whoever is waiting.
    let view = Arc::new(CountingView {
        inner: RemoteView::new(&format!("http://{}", platform.projector_addr)).expect("view client"),
        list_reads: AtomicUsize::new(0),
    });
    let (other, _running) = platform.ingress_on_view(Arc::clone(&view) as Arc<dyn ViewReader>).await;
    let list = "/api/v1/vouchers?limit=5";
    let (status, _, listed_before) = read(&platform, &other, list, None, &[]).await;
    assert_eq!(status, StatusCode::OK, "{listed_before}");
    platform.projector.take().expect("the projector runs").stop().await;
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    view.list_reads.store(0, Ordering::SeqCst);
    let reads = (0..50).map(|_| read(&platform, &other, list, None, &[]));
    let answers = futures::future::join_all(reads).await;
    let tries = view.list_reads.load(Ordering::SeqCst);
    assert!(tries <= 2, "{tries} list reads reached the stopped view for 50 requests");
    for (status, _, body) in &answers {
        assert_eq!(*status, StatusCode::OK, "{body}");
        assert_eq!(body["vouchers"][0]["stale"], true, "{body}");
        assert_eq!(body["vouchers"][0]["available"], 5, "{body}");
    }
    // Redis still answers: the voucher itself is current, with the counters
    // it last had.
    let (status, _, shown) = read(&platform, &other, &path, None, &[]).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!((&shown["phase"], &shown["available"], shown.get("stale")), (&json!("open"), &json!(5), None));
}
