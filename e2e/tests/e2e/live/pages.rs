//! The product page's reads: phase and server clock, and caching.

use chrono::{DateTime, Duration, Utc};
use reqwest::StatusCode;
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

    // Upcoming, readable the moment its 201 is sent.
    let begins = Utc::now() + Duration::seconds(2);
    let voucher = platform.create_voucher_between(1, 1, begins, begins + Duration::hours(1)).await;
    let path = format!("/api/v1/vouchers/{voucher}");
    let (status, headers, shown) = read(&platform, &base, &path, None, &[]).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["phase"], "upcoming", "{shown}");
    let opens_in = shown["opens_in_ms"].as_i64().expect("opens_in_ms");
    let expected = (begins - time(&shown["server_time"])).num_milliseconds();
    // Both ends are whole milliseconds apart from rounding.
    assert!((opens_in - expected).abs() <= 1, "counted from server_time: {opens_in} vs {expected}");
    assert!(opens_in > 0 && opens_in <= 2_000, "{opens_in}");
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
async fn voucher_reads_carry_a_strong_etag_and_answer_304_while_it_is_current() {
    let platform = Platform::start_configured(None, |config| config.live.voucher_refresh_ms = 1_000).await;
    let base = platform.base.clone();
    let voucher = platform.create_voucher(5, 1).await;
    for path in [format!("/api/v1/vouchers/{voucher}"), "/api/v1/vouchers?limit=5".to_owned()] {
        // A representation lives up to a second: ask again at once until one
        // round trip falls within it (a rebuild in between has a new tag).
        let not_modified = eventually(|| async {
            let (status, headers, body) = read(&platform, &base, &path, None, &[]).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let etag = header(&headers, "etag").expect("an ETag").to_owned();
            assert!(etag.starts_with('"'), "a strong validator: {etag}");
            let (status, headers, _) = read(&platform, &base, &path, None, &[("if-none-match", &etag)]).await;
            match status {
                StatusCode::NOT_MODIFIED => {
                    assert_eq!(header(&headers, "etag"), Some(etag.as_str()));
                    assert!(header(&headers, "cache-control").is_some());
                    Some(())
                }
                StatusCode::OK => {
                    assert_ne!(
                        header(&headers, "etag"),
                        Some(etag.as_str()),
                        "a current tag is never answered in full"
                    );
                    None
                }
                other => panic!("{path}: {other}"),
            }
        });
        not_modified.await;
        let (status, _, _) = read(&platform, &base, &path, None, &[("if-none-match", "\"stale\"")]).await;
        assert_eq!(status, StatusCode::OK, "another tag gets the body");
    }
    let metrics =
        platform.http.get(format!("{base}/metrics")).send().await.expect("metrics").text().await.expect("text");
    assert!(
        metrics.contains(r#"seckill_read_answers_total{resource="voucher",service="ingress",source="not_modified"}"#),
        "{metrics}"
    );
}
