//! `seckill report` against a scripted sale (cancellation, expiry, added
//! stock, a failure, sell-out): the page parses as XML, its charts hold
//! the numbers the test works out from the status view, and headless
//! Chromium renders it, painting the bars the SVG declares.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use reqwest::StatusCode;
use roxmltree::{Document, Node, ParsingOptions};
use seckill_analytics::report::{self, About};
use seckill_analytics::sale::{read_sales, Selection};
use serde_json::json;

use crate::helpers::{eventually, Platform};

/// Unpaid orders of the scripted sale expire after this long.
const HOLD_SECONDS: u64 = 3;
/// How long Chromium may take to render the page.
const BROWSER_DEADLINE: Duration = Duration::from_secs(90);

/// One order as the status view ended up showing it.
#[derive(Debug)]
struct Seen {
    user: String,
    quantity: u64,
    status: String,
    reason: Option<String>,
    accepted_at: DateTime<Utc>,
    decided_at: Option<DateTime<Utc>>,
    cancelled_at: Option<DateTime<Utc>>,
}

async fn place(platform: &Platform, voucher: &str, user: &str, units: u32) -> String {
    let body = eventually(|| async {
        // The sold-out memo may refuse for a moment after units come back.
        let (status, body) = platform.order_units(voucher, user, units).await;
        (status == StatusCode::ACCEPTED).then_some(body)
    })
    .await;
    body["order_id"].as_str().expect("order_id").to_owned()
}

async fn created(platform: &Platform, voucher: &str, user: &str, units: u32) -> String {
    let order = place(platform, voucher, user, units).await;
    assert_eq!(platform.wait_final(&order).await["status"], "CREATED");
    order
}

async fn claim(platform: &Platform, order: &str, user: &str) {
    let (status, body) = platform.post(&format!("/api/v1/orders/{order}/confirm"), Some(user), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_order(order, |o| o["status"] == "PAID").await;
}

async fn seen(platform: &Platform, orders: &[(String, String)]) -> Vec<Seen> {
    let mut all = Vec::new();
    for (user, order) in orders {
        let view = platform.wait_final(order).await;
        let time = |field: &str| serde_json::from_value::<DateTime<Utc>>(view[field].clone()).ok();
        all.push(Seen {
            user: user.clone(),
            quantity: view["quantity"].as_u64().expect("quantity"),
            status: view["status"].as_str().expect("status").to_owned(),
            reason: view["reason"].as_str().map(str::to_owned),
            accepted_at: time("accepted_at").expect("accepted_at"),
            decided_at: time("decided_at"),
            cancelled_at: time("cancelled_at"),
        });
    }
    all
}

/// The UTC second `at` falls in, as the report names it.
fn second(at: DateTime<Utc>) -> String {
    DateTime::from_timestamp(at.timestamp(), 0).expect("in range").to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn ms(delta: TimeDelta) -> f64 {
    delta.num_microseconds().expect("short") as f64 / 1000.0
}

fn nearest_rank(sorted: &[f64], percent: usize) -> f64 {
    sorted[(percent * sorted.len()).div_ceil(100).max(1) - 1]
}

/// `seckill report`'s page of the vouchers `selection` names, read from
/// `platform`'s topics as the command reads them.
pub(crate) async fn rendered(platform: &Platform, selection: &Selection) -> String {
    let read = read_sales(&platform.kafka, selection).await.expect("the log is read");
    let topics = platform.kafka.topics();
    let about = About {
        generated_at: Utc::now(),
        records: read.records,
        sales_topic: topics.sales.clone(),
        orders_topic: topics.orders.clone(),
    };
    report::render(&read.sales, &about).expect("the report renders")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_of_a_scripted_sale_holds_its_numbers_and_renders_in_chromium() {
    let platform = Platform::start().await;
    let begins_at = Utc::now() - TimeDelta::seconds(1);
    let window = json!({"begins_at": begins_at, "ends_at": begins_at + TimeDelta::hours(1)});
    let mut definition = json!({"stock": 3, "per_user_limit": 2, "hold_seconds": HOLD_SECONDS});
    definition.as_object_mut().expect("object").extend(window.as_object().expect("object").clone());
    let sale = platform.create_voucher_from(definition).await;

    // Three buyers take the stock; the first claims hers at once (paid).
    let mut orders = Vec::new();
    for user in ["r1", "r2", "r3"] {
        orders.push((user.to_owned(), created(&platform, &sale, user, 1).await));
    }
    claim(&platform, &orders[0].1, "r1").await;
    let (status, body) = platform.order(&sale, "r4").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("sold_out")), "{body}");

    // r2 cancels; r5 buys the unit again and claims it.
    let (status, body) = platform.post(&format!("/api/v1/orders/{}/cancel", orders[1].1), Some("r2"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_order(&orders[1].1, |o| o["status"] == "CANCELLED").await;
    let r5 = created(&platform, &sale, "r5", 1).await;
    claim(&platform, &r5, "r5").await;
    orders.push(("r5".to_owned(), r5));

    // Two units are added; r6 takes both and claims them.
    let (status, body) = platform.update_voucher(&sale, json!({"add_stock": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let r6 = created(&platform, &sale, "r6", 2).await;
    claim(&platform, &r6, "r6").await;
    orders.push(("r6".to_owned(), r6));

    // r3 never claims: the hold ends and its unit comes back; r7 takes
    // it, the last unit, and claims it.
    platform.wait_order(&orders[2].1, |o| o["status"] == "CANCELLED").await;
    let r7 = created(&platform, &sale, "r7", 1).await;
    claim(&platform, &r7, "r7").await;
    orders.push(("r7".to_owned(), r7.clone()));

    // A unit the gate has and the persistent stock has not: accepted, failed.
    platform.add_redis_units(&sale, 1).await;
    let failed = place(&platform, &sale, "r8", 1).await;
    assert_eq!(platform.wait_final(&failed).await["status"], "FAILED");
    orders.push(("r8".to_owned(), failed));

    // A second, quiet voucher: two buyers, no hold, in the same report.
    let quiet = platform.create_voucher(5, 1).await;
    let quiet_orders = vec![
        ("q1".to_owned(), created(&platform, &quiet, "q1", 1).await),
        ("q2".to_owned(), created(&platform, &quiet, "q2", 1).await),
    ];

    // What the test expects, from the view.
    let view = seen(&platform, &orders).await;
    let quiet_view = seen(&platform, &quiet_orders).await;
    let statuses: Vec<&str> = view.iter().map(|o| o.status.as_str()).collect();
    assert_eq!(statuses, ["PAID", "CANCELLED", "CANCELLED", "PAID", "PAID", "PAID", "FAILED"]);
    assert_eq!(view[2].reason.as_deref(), Some("expired"), "{view:?}");

    let selection = Selection::vouchers(vec![sale.parse().expect("id"), quiet.parse().expect("id")]);
    let html = rendered(&platform, &selection).await;
    let artifacts = artifacts_dir();
    let page = artifacts.join("report-scripted-sale.html");
    std::fs::write(&page, &html).expect("the report is written");
    println!("report: {}", page.display());

    let document = Document::parse_with_options(&html, ParsingOptions { allow_dtd: true, ..ParsingOptions::default() })
        .unwrap_or_else(|error| panic!("the report is well-formed XML: {error}"));
    assert!(!html.contains("<script") && !html.contains("https://"), "self-contained");
    let svgs = document.descendants().filter(|n| n.has_tag_name("svg")).count();
    assert_eq!(svgs, 12, "six charts per voucher");
    let section = voucher_section(&document, &sale);

    // Orders accepted per second, by final outcome.
    let mut expected: BTreeMap<(String, String), u64> = BTreeMap::new();
    for order in &view {
        *expected.entry((second(order.accepted_at), order.status.to_lowercase())).or_default() += 1;
    }
    let chart = data(section, "accepted");
    assert_eq!(chart.attribute("data-bucket-seconds"), Some("1"), "a short sale is drawn per second");
    assert_eq!(bars(chart, "value"), expected);

    // Every data box lies on a bar drawn in its outcome's colour.
    let svg = chart.parent().expect("the chart's svg");
    let drawn: Vec<([&str; 4], String)> = svg
        .children()
        .filter(|n| n.has_tag_name("rect"))
        .map(|n| (geometry(&n), n.attribute("fill").unwrap_or_default().to_ascii_lowercase()))
        .collect();
    for bar in chart.children().filter(Node::is_element) {
        let colour = colour_of(bar.attribute("data-series").expect("series"));
        assert!(drawn.contains(&(geometry(&bar), colour.to_owned())), "a bar is drawn under {bar:?}");
    }

    // Cancellations and expiries per second.
    let mut expected: BTreeMap<(String, String), u64> = BTreeMap::new();
    for order in view.iter().filter(|o| o.status == "CANCELLED") {
        let key = (second(order.cancelled_at.expect("cancelled_at")), order.reason.clone().expect("reason"));
        *expected.entry(key).or_default() += 1;
    }
    assert_eq!(bars(data(section, "cancellations"), "value"), expected);

    // Latency: p50 and p99 of the orders accepted in each second, and the
    // distribution over every decided order.
    let mut latencies: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for order in &view {
        let latency = ms(order.decided_at.expect("decided") - order.accepted_at);
        latencies.entry(second(order.accepted_at)).or_default().push(latency);
    }
    let latency = data(section, "latency");
    let points: BTreeMap<String, (f64, f64)> = latency
        .children()
        .filter(Node::is_element)
        .map(|point| {
            let number = |name: &str| point.attribute(name).and_then(|v| v.parse::<f64>().ok()).expect(name);
            (point.attribute("data-start").expect("start").to_owned(), (number("data-p50-ms"), number("data-p99-ms")))
        })
        .collect();
    assert_eq!(points.keys().collect::<Vec<_>>(), latencies.keys().collect::<Vec<_>>());
    for (start, mut values) in latencies {
        values.sort_by(f64::total_cmp);
        let (p50, p99) = points[&start];
        assert!((p50 - nearest_rank(&values, 50)).abs() < 1e-6, "{start}: p50 {p50} vs {values:?}");
        assert!((p99 - nearest_rank(&values, 99)).abs() < 1e-6, "{start}: p99 {p99} vs {values:?}");
    }
    let distributed: u64 = data(section, "latency-distribution")
        .children()
        .filter(Node::is_element)
        .map(|bin| bin.attribute("data-value").and_then(|v| v.parse::<u64>().ok()).expect("a count"))
        .sum();
    assert_eq!(distributed, view.len() as u64);

    // Units left: nothing at the end, the sell-out at the last unit's
    // acceptance (r7's), two units returned and both sold again.
    let units = data(section, "units-left");
    let last = units.children().rfind(Node::is_element).expect("a bucket");
    assert_eq!((last.attribute("data-gate"), last.attribute("data-stock")), (Some("0"), Some("0")));
    let r7_accepted = view[5].accepted_at.to_rfc3339_opts(SecondsFormat::Millis, true);
    assert_eq!(units.attribute("data-sold-out-at"), Some(r7_accepted.as_str()));
    let returned = data(section, "returned").children().rfind(Node::is_element).expect("a bucket");
    assert_eq!((returned.attribute("data-returned"), returned.attribute("data-resold")), (Some("2"), Some("2")));

    // The summary: stats figures, units per user, top users.
    let field = |name: &str| {
        let row = section.descendants().find(|n| n.attribute("data-field") == Some(name)).expect("a row");
        row.descendants().find_map(|n| n.attribute("data-value")).map(str::to_owned)
    };
    for (name, value) in [
        ("stock", "5"),
        ("added_stock", "2"),
        ("accepted", "7"),
        ("created", "6"),
        ("failed", "1"),
        ("cancelled", "2"),
        ("expired", "1"),
        ("paid", "4"),
        ("units_sold", "5"),
        ("resold_units", "2"),
    ] {
        assert_eq!(field(name).as_deref(), Some(value), "{name}");
    }
    let units_per_user: BTreeMap<u64, u64> =
        view.iter().filter(|o| o.status == "PAID").fold(BTreeMap::new(), |mut users, o| {
            *users.entry(o.quantity).or_default() += 1;
            users
        });
    for (units, users) in units_per_user {
        let row = section
            .descendants()
            .find(|n| n.attribute("data-units") == Some(units.to_string().as_str()))
            .expect("a row");
        assert_eq!(row.last_element_child().and_then(|td| td.text()), Some(users.to_string().as_str()));
    }
    let top = section.descendants().find_map(|n| n.attribute("data-user")).expect("a top user");
    assert_eq!(top, "r6", "every buyer has one order; r6 holds the most units");
    assert!(view.iter().any(|o| o.user == "r6" && o.quantity == 2));

    // The quiet voucher: its own section with its own two orders.
    let quiet_section = voucher_section(&document, &quiet);
    let expected: BTreeMap<(String, String), u64> = quiet_view.iter().fold(BTreeMap::new(), |mut counts, o| {
        *counts.entry((second(o.accepted_at), "created".to_owned())).or_default() += 1;
        counts
    });
    assert_eq!(bars(data(quiet_section, "accepted"), "value"), expected);

    // Chromium renders it and paints the paid and cancelled bars.
    let shot = artifacts.join("report-scripted-sale.png");
    screenshot(&page, &shot).await;
    println!("screenshot: {}", shot.display());
    let image = decode_png(&shot);
    assert_eq!((image.width, image.height), (1280, 2000));
    for series in ["paid", "cancelled"] {
        let declared: f64 = chart
            .children()
            .filter(|n| n.attribute("data-series") == Some(series))
            .map(|n| {
                let [_, _, width, height] = geometry(&n);
                width.parse::<f64>().expect("width") * height.parse::<f64>().expect("height")
            })
            .sum();
        let painted = image.count(colour_of(series));
        assert!(
            painted as f64 > declared * 0.5,
            "{series}: {painted} pixels painted for {declared} px² of bars ({})",
            shot.display()
        );
    }
}

/// Where test artifacts go: `target/test-artifacts/` of the workspace.
fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir).expect("the artifacts directory");
    dir.canonicalize().unwrap_or(dir)
}

fn voucher_section<'a, 'i>(document: &'a Document<'i>, voucher: &str) -> Node<'a, 'i> {
    document
        .descendants()
        .find(|n| n.has_tag_name("section") && n.attribute("data-voucher") == Some(voucher))
        .unwrap_or_else(|| panic!("a section for voucher {voucher}"))
}

/// The data layer of one chart.
fn data<'a, 'i>(section: Node<'a, 'i>, chart: &str) -> Node<'a, 'i> {
    section
        .descendants()
        .find(|n| n.has_tag_name("g") && n.attribute("data-chart") == Some(chart))
        .unwrap_or_else(|| panic!("chart {chart} has a data layer"))
}

/// `(start, series) → data-<field>` of every box of a bar chart.
fn bars(chart: Node<'_, '_>, field: &str) -> BTreeMap<(String, String), u64> {
    let field = format!("data-{field}");
    chart
        .children()
        .filter(Node::is_element)
        .map(|bar| {
            let key = (
                bar.attribute("data-start").expect("start").to_owned(),
                bar.attribute("data-series").expect("series").to_owned(),
            );
            (key, bar.attribute(field.as_str()).and_then(|v| v.parse().ok()).expect("a count"))
        })
        .collect()
}

fn geometry<'a>(node: &Node<'a, '_>) -> [&'a str; 4] {
    ["x", "y", "width", "height"].map(|name| node.attribute(name).unwrap_or_else(|| panic!("{name} of {node:?}")))
}

/// The fill of each outcome's bars.
fn colour_of(series: &str) -> &'static str {
    match series {
        "created" => "#0072b2",
        "paid" => "#009e73",
        "cancelled" => "#e69f00",
        "failed" => "#d55e00",
        other => panic!("no colour for {other}"),
    }
}

/// Renders `page` with headless Chromium into `shot`, failing the test if
/// the browser fails or writes no picture.
async fn screenshot(page: &std::path::Path, shot: &std::path::Path) {
    let profile = tempfile::tempdir().expect("a browser profile directory");
    let _ = std::fs::remove_file(shot);
    let mut browser = tokio::process::Command::new("/usr/bin/chromium");
    browser
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-quic",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,2000")
        .arg(format!("file://{}", page.canonicalize().expect("the page exists").display()))
        .kill_on_drop(true);
    let output = tokio::time::timeout(BROWSER_DEADLINE, browser.output())
        .await
        .expect("Chromium renders within the deadline")
        .expect("Chromium runs (scripts/setup installs it)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "Chromium failed: {}\n{stderr}", output.status);
    assert!(shot.exists(), "Chromium wrote no screenshot:\n{stderr}");
}

/// A decoded RGB(A) picture.
struct Image {
    width: u32,
    height: u32,
    /// Bytes per pixel.
    channels: usize,
    pixels: Vec<u8>,
}

impl Image {
    /// Pixels of exactly `#rrggbb`.
    fn count(&self, colour: &str) -> usize {
        let hex = |i: usize| u8::from_str_radix(&colour[i..i + 2], 16).expect("hex");
        let rgb = [hex(1), hex(3), hex(5)];
        self.pixels.chunks_exact(self.channels).filter(|pixel| pixel[..3] == rgb).count()
    }
}

fn decode_png(path: &std::path::Path) -> Image {
    let file = std::fs::File::open(path).expect("the screenshot");
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size().expect("a size")];
    let frame = reader.next_frame(&mut pixels).expect("a frame");
    pixels.truncate(frame.buffer_size());
    let channels = match frame.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    Image { width: frame.width, height: frame.height, channels, pixels }
}
