//! `seckill replay` and `seckill topics` against a scripted sale: every
//! filter and bound returns exactly what the test did, CSV parses back, and
//! the topic overview agrees with the log and the services' groups.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use seckill_analytics::replay::{self, End, Filter, Format, LogTopic, ReplayOptions, Start, Summary, CSV_HEADER};
use seckill_analytics::topics::{self, Overview};
use seckill_kafka::OwnedHeaders;
use serde_json::Value;

use crate::helpers::{eventually, Platform};

/// Between phases, so record timestamps fall clearly on one side of a bound.
const GAP: Duration = Duration::from_millis(1100);

/// Places an order as `user` and waits until it is decided; its id.
async fn order(platform: &Platform, voucher: &str, user: &str) -> String {
    let (status, body) = platform.order(voucher, user).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["order_id"].as_str().expect("order_id").to_owned();
    assert_eq!(platform.wait_final(&id).await["status"], "CREATED");
    id
}

/// A gap, a time stamp, another gap.
async fn mark() -> DateTime<Utc> {
    tokio::time::sleep(GAP).await;
    let now = Utc::now();
    tokio::time::sleep(GAP).await;
    now
}

async fn run(platform: &Platform, options: ReplayOptions) -> (String, Summary) {
    let kafka = platform.kafka.clone();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let summary = replay::replay(&kafka, &options, &mut out, &AtomicBool::new(false)).expect("replay");
        (String::from_utf8(out).expect("utf-8"), summary)
    })
    .await
    .expect("replay thread")
}

/// Events written with `options` changed by `change`, checked against the
/// summary.
async fn count(platform: &Platform, change: impl FnOnce(&mut ReplayOptions)) -> u64 {
    let mut options = ReplayOptions::default();
    change(&mut options);
    let (out, summary) = run(platform, options).await;
    assert_eq!(out.lines().count() as u64, summary.written, "{summary}");
    for line in out.lines() {
        let _: Value = serde_json::from_str(line).expect("every line is JSON");
    }
    summary.written
}

fn filter(types: &[&str], voucher: Option<&str>, user: Option<&str>) -> Filter {
    Filter {
        types: types.iter().map(|t| (*t).to_owned()).collect(),
        voucher: voucher.map(|v| v.parse().expect("voucher id")),
        user: user.map(str::to_owned),
    }
}

/// Splits CSV text into rows of fields, honouring quotes.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let (mut row, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => row.push(std::mem::take(&mut field)),
            ('\n', false) => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (c, _) => field.push(c),
        }
    }
    assert!(field.is_empty() && row.is_empty() && !quoted, "CSV ends with a full row");
    rows
}

async fn overview(platform: &Platform) -> Overview {
    let kafka = platform.kafka.clone();
    let groups =
        vec![format!("{}-processor", platform.infra.namespace), format!("{}-projector", platform.infra.namespace)];
    tokio::task::spawn_blocking(move || topics::overview(&kafka, &groups)).await.expect("thread").expect("overview")
}

#[tokio::test(flavor = "multi_thread")]
async fn replay_and_topics_report_exactly_what_happened() {
    let platform = Platform::start().await;

    // Phase 1: voucher A, four buyers.
    let a = platform.create_voucher(10, 2).await;
    for user in ["a1", "a2", "a3", "a4"] {
        order(&platform, &a, user).await;
    }
    let t1 = mark().await;

    // Phase 2: voucher B, four buyers (a1 again), one cancellation.
    let b = platform.create_voucher(10, 2).await;
    let mut b1_order = String::new();
    for user in ["b1", "b2", "b3", "a1"] {
        let id = order(&platform, &b, user).await;
        if user == "b1" {
            b1_order = id;
        }
    }
    let (status, body) = platform.post(&format!("/api/v1/orders/{b1_order}/cancel"), Some("b1"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_order(&b1_order, |o| o["status"] == "CANCELLED").await;
    let t2 = mark().await;

    // Phase 3: one more order on A and a record that is no event (the
    // processor and the projector each park it).
    order(&platform, &a, "a5").await;
    let sales = platform.kafka.topics().sales;
    platform.producer().send_raw(&sales, Some(a.as_bytes()), b"not an event", OwnedHeaders::new()).await.expect("sent");
    let settled = eventually(|| async {
        let overview = overview(&platform).await;
        let settled = overview
            .topics
            .iter()
            .all(|topic| topic.partitions.iter().all(|p| p.groups.iter().all(|g| g.lag.unwrap_or(0) == 0)))
            && overview.topics[2].records() == 2;
        settled.then_some(overview)
    })
    .await;

    // Sales: VoucherCreated 2, OrderAccepted 9, CancelRequested 1, garbage 1.
    // Orders: OrderCreated 9, OrderCancelled 1. Dead letters: 2.
    let (all, summary) = run(&platform, ReplayOptions::default()).await;
    assert_eq!((summary.written, summary.skipped, summary.undecodable), (22, 0, 1), "{summary}");
    assert!(summary.to_string().starts_with("22 events written, 0 skipped by filters, 1 undecodable, "));
    let kinds = all.lines().fold(HashMap::<String, u64>::new(), |mut kinds, line| {
        let json: Value = serde_json::from_str(line).expect("json");
        *kinds.entry(json["type"].as_str().expect("type").to_owned()).or_default() += 1;
        kinds
    });
    let expected = [("VoucherCreated", 2), ("OrderAccepted", 9), ("CancelRequested", 1)];
    let expected = expected.into_iter().chain([("OrderCreated", 9), ("OrderCancelled", 1)]);
    assert_eq!(kinds, expected.map(|(kind, n)| (kind.to_owned(), n)).collect::<HashMap<_, _>>());

    // Filters.
    assert_eq!(count(&platform, |o| o.filter = filter(&["OrderCreated"], None, None)).await, 9);
    assert_eq!(count(&platform, |o| o.filter = filter(&["OrderAccepted", "OrderCreated"], None, None)).await, 18);
    assert_eq!(count(&platform, |o| o.filter = filter(&[], Some(&a), None)).await, 11);
    assert_eq!(count(&platform, |o| o.filter = filter(&[], Some(&b), None)).await, 11);
    assert_eq!(count(&platform, |o| o.filter = filter(&[], None, Some("a1"))).await, 4);
    assert_eq!(count(&platform, |o| o.filter = filter(&[], None, Some("b1"))).await, 3);
    assert_eq!(count(&platform, |o| o.filter = filter(&["OrderCancelled"], Some(&b), Some("b1"))).await, 1);
    assert_eq!(count(&platform, |o| o.topics = vec![LogTopic::Orders]).await, 10);

    // Bounds.
    assert_eq!(count(&platform, |o| o.start = Start::Time(t1)).await, 13);
    assert_eq!(count(&platform, |o| o.end = End::Time(t2)).await, 20);
    assert_eq!(count(&platform, |o| (o.start, o.end) = (Start::Time(t1), End::Time(t2))).await, 11);
    assert_eq!(count(&platform, |o| o.start = Start::last(Duration::from_secs(600))).await, 22);
    assert_eq!(count(&platform, |o| o.start = Start::Time(Utc::now())).await, 0);

    // CSV: the header, then a row per event that parses back.
    let (csv, summary) = run(&platform, ReplayOptions { format: Format::Csv, ..ReplayOptions::default() }).await;
    let rows = parse_csv(&csv);
    assert_eq!(rows[0].join(","), CSV_HEADER);
    assert_eq!(rows.len() as u64 - 1, summary.written);
    let column = |name: &str| rows[0].iter().position(|c| c == name).expect("column");
    let (kind, user, remaining, offset, voucher) =
        (column("type"), column("user_id"), column("remaining"), column("offset"), column("voucher_id"));
    assert!(rows.iter().all(|row| row.len() == 12), "every row has 12 fields");
    let created: Vec<_> = rows.iter().filter(|row| row[kind] == "VoucherCreated").collect();
    assert!(created.iter().all(|row| row[remaining] == "10" && row[user].is_empty()), "{created:?}");
    assert_eq!(rows.iter().filter(|row| row[user] == "a1").count(), 4);
    assert_eq!(rows.iter().filter(|row| row[voucher] == a).count(), 11);
    let cancelled = rows.iter().find(|row| row[kind] == "OrderCancelled").expect("a cancellation");
    assert_eq!(
        (cancelled[column("status_or_reason")].as_str(), cancelled[remaining].as_str()),
        ("requested", "7"),
        "B had 6 left after four orders"
    );

    // From an offset: per partition, so exactly the rows at or past it.
    let past_one = rows[1..].iter().filter(|row| row[offset].parse::<i64>().expect("offset") >= 1).count() as u64;
    assert_eq!(count(&platform, |o| o.start = Start::Offset(1)).await, past_one);
    assert!(past_one < 22);

    // Dead letters: as JSON objects with their dlq.* headers.
    let (parked, summary) =
        run(&platform, ReplayOptions { topics: vec![LogTopic::DeadLetters], ..ReplayOptions::default() }).await;
    assert_eq!(summary.written, 2, "{summary}");
    let mut services: Vec<String> = parked
        .lines()
        .map(|line| {
            let json: Value = serde_json::from_str(line).expect("json");
            assert_eq!(
                (json["payload"].as_str(), json["source"]["topic"].as_str()),
                (Some("not an event"), Some(sales.as_str()))
            );
            json["service"].as_str().expect("service").to_owned()
        })
        .collect();
    services.sort();
    assert_eq!(services, ["processor", "projector"]);

    // Topics: partition counts, watermarks summing to the records, no lag.
    let by_name: HashMap<&str, _> = settled.topics.iter().map(|topic| (topic.name.as_str(), topic)).collect();
    let names = platform.kafka.topics();
    for topic in &settled.topics {
        assert_eq!(topic.partitions.len() as i32, platform.kafka.partitions, "{}", topic.name);
    }
    assert_eq!(by_name[names.sales.as_str()].records(), 13);
    assert_eq!(by_name[names.orders.as_str()].records(), 10);
    assert_eq!(by_name[names.dead_letters.as_str()].records(), 2);
    for (topic, group, consumes) in
        [(&names.sales, 0, true), (&names.sales, 1, true), (&names.orders, 1, true), (&names.orders, 0, false)]
    {
        for partition in &by_name[topic.as_str()].partitions {
            let position = &partition.groups[group];
            if consumes && partition.high > 0 {
                assert_eq!((position.committed, position.lag), (Some(partition.high), Some(0)), "{position:?}");
            } else if !consumes {
                assert_eq!(position.committed, None, "the processor does not read orders");
            }
        }
    }
    assert!(settled.table().contains("LAG"));
}
