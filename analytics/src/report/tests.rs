//! The report of a scripted sale: the page is well-formed, and every chart
//! holds the timeline's numbers, on the very bars it draws.

use std::collections::BTreeMap;

use roxmltree::{Document, Node, ParsingOptions};

use super::*;
use crate::sale::script::{at, busy_sale};
use crate::sale::{FinalStatus, Timeline};

mod draw;
mod queue;

fn about() -> About {
    About {
        generated_at: at(10_000),
        records: 42,
        sales_topic: "seckill.sales".to_owned(),
        orders_topic: "seckill.orders".to_owned(),
    }
}

fn parse(html: &str) -> Document<'_> {
    let options = ParsingOptions { allow_dtd: true, ..ParsingOptions::default() };
    Document::parse_with_options(html, options).unwrap_or_else(|error| panic!("the page is XML: {error}"))
}

/// The overlay boxes of one chart.
fn data<'a>(document: &'a Document<'a>, chart: &str) -> Vec<Node<'a, 'a>> {
    let group = document
        .descendants()
        .find(|n| n.has_tag_name("g") && n.attribute("data-chart") == Some(chart))
        .unwrap_or_else(|| panic!("chart {chart} has a data layer"));
    group.children().filter(|n| n.is_element()).collect()
}

fn attribute<'a>(node: &Node<'a, '_>, name: &str) -> &'a str {
    node.attribute(name).unwrap_or_else(|| panic!("{name} on {node:?}"))
}

/// The `data-value` of the summary tables' row `name` (None: the row has
/// none).
fn field(document: &Document<'_>, name: &str) -> Option<String> {
    let row = document
        .descendants()
        .find(|n| n.has_tag_name("tr") && n.attribute("data-field") == Some(name))
        .unwrap_or_else(|| panic!("row {name}"));
    row.descendants().find(|n| n.has_tag_name("td")).and_then(|td| td.attribute("data-value")).map(str::to_owned)
}

/// The first section's sentence under its heading.
fn lede<'a>(document: &'a Document<'_>) -> Option<&'a str> {
    document.descendants().find(|n| n.attribute("class") == Some("lede")).and_then(|n| n.text())
}

/// `(x, y, width, height)` of an element.
fn geometry(node: &Node<'_, '_>) -> [String; 4] {
    ["x", "y", "width", "height"].map(|name| attribute(node, name).to_owned())
}

#[test]
fn the_report_is_well_formed_and_its_charts_hold_the_timeline() {
    let sale = busy_sale().sale();
    let html = render(std::slice::from_ref(&sale), &about()).expect("renders");
    assert!(!html.contains("<script"), "no scripts");
    assert!(!html.contains("https://") && !html.contains("url("), "nothing fetched");
    let document = parse(&html);
    let timeline = Timeline::of(&sale.log, &sale.stats);

    // The stacked bars: one box per non-empty (second, outcome).
    let mut expected = BTreeMap::new();
    for (index, counts) in timeline.accepted.iter().enumerate() {
        for (slot, count) in counts.iter().enumerate().filter(|(_, count)| **count > 0) {
            let start = timeline.buckets.start(index).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            expected.insert((start, FinalStatus::ALL[slot].as_str().to_owned()), *count);
        }
    }
    let bars = data(&document, "accepted");
    let found: BTreeMap<(String, String), u64> = bars
        .iter()
        .map(|bar| {
            let key = (attribute(bar, "data-start").to_owned(), attribute(bar, "data-series").to_owned());
            (key, attribute(bar, "data-value").parse().expect("a count"))
        })
        .collect();
    assert_eq!(found, expected);
    assert_eq!(found.values().sum::<u64>(), 7);

    // Each box lies exactly on a bar the charting library drew, in its colour.
    let svg = bars[0].parent().and_then(|g| g.parent()).expect("the chart");
    let drawn: Vec<([String; 4], String)> = svg
        .children()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class").is_none())
        .map(|n| (geometry(&n), attribute(&n, "fill").to_ascii_lowercase()))
        .collect();
    let colour = |series: &str| match series {
        "created" => "#0072b2",
        "paid" => "#009e73",
        "cancelled" => "#e69f00",
        "failed" => "#d55e00",
        other => panic!("unexpected series {other}"),
    };
    for bar in &bars {
        let wanted = (geometry(bar), colour(attribute(bar, "data-series")).to_owned());
        assert!(drawn.contains(&wanted), "a drawn bar under {wanted:?}");
    }

    // Cancellations by reason.
    let cancellations: Vec<(String, String)> = data(&document, "cancellations")
        .iter()
        .map(|bar| (attribute(bar, "data-series").to_owned(), attribute(bar, "data-value").to_owned()))
        .collect();
    assert_eq!(cancellations, [("requested".to_owned(), "1".to_owned()), ("expired".to_owned(), "1".to_owned())]);

    // Units left at the end of each second: the sell-out leaves nothing.
    let units = data(&document, "units-left");
    assert_eq!(units.len(), timeline.buckets.count);
    let last = units.last().expect("a bucket");
    assert_eq!((attribute(last, "data-gate"), attribute(last, "data-stock")), ("0", "0"));
    assert_eq!((attribute(&units[0], "data-gate"), attribute(&units[0], "data-stock")), ("1", "1"));
    assert_eq!((attribute(&units[2], "data-gate"), attribute(&units[2], "data-stock")), ("0", "0"));
    assert_eq!((attribute(&units[3], "data-gate"), attribute(&units[3], "data-stock")), ("1", "1"));
    let group = last.parent().expect("the data layer");
    assert_eq!(group.attribute("data-sold-out-at"), Some("2027-01-15T08:00:06.700Z"));

    // Latency per second and its distribution.
    let latency: Vec<(String, String)> = data(&document, "latency")
        .iter()
        .map(|point| (attribute(point, "data-p50-ms").to_owned(), attribute(point, "data-p99-ms").to_owned()))
        .collect();
    assert_eq!(latency.first(), Some(&("5".to_owned(), "10".to_owned())));
    assert_eq!(latency.last(), Some(&("20".to_owned(), "100".to_owned())));
    let bins: u64 = data(&document, "latency-distribution")
        .iter()
        .map(|bin| attribute(bin, "data-value").parse::<u64>().expect("a count"))
        .sum();
    assert_eq!(bins, 7);

    // Returned and re-sold, at the end.
    let returned = data(&document, "returned");
    let last = returned.last().expect("a bucket");
    assert_eq!((attribute(last, "data-returned"), attribute(last, "data-resold")), ("3", "3"));

    // The summary tables.
    let field = |name: &str| field(&document, name);
    assert_eq!(field("accepted").as_deref(), Some("7"));
    assert_eq!(field("expired").as_deref(), Some("1"));
    assert_eq!(field("resold_units").as_deref(), Some("3"));
    assert_eq!(field("sold_out_at").as_deref(), Some("2027-01-15T08:00:06.700Z"));
    let top = document.descendants().find(|n| n.attribute("data-user").is_some()).expect("a top user");
    assert_eq!(top.attribute("data-user"), Some("dave"), "two units, one order");
    let twos = document.descendants().find(|n| n.attribute("data-units") == Some("2")).expect("a row");
    assert_eq!(twos.last_element_child().and_then(|td| td.text()), Some("2"));
}

#[test]
fn several_vouchers_get_a_section_each() {
    let one = busy_sale().sale();
    let mut other = crate::sale::script::Script::new(1, 1, 0);
    let order = other.accept("mail@example.com", 1, 0);
    other.decide(&order, 1);
    let other = other.sale();
    let html = render(&[one.clone(), other.clone()], &about()).expect("renders");
    let document = parse(&html);
    let sections: Vec<&str> = document.descendants().filter_map(|n| n.attribute("data-voucher")).collect();
    assert_eq!(sections, [one.log.voucher_id.to_string(), other.log.voucher_id.to_string()]);
    assert!(document.descendants().any(|n| n.attribute("data-user") == Some("mail@example.com")));
    let empty = render(&[], &about()).expect("renders");
    assert!(parse(&empty).descendants().any(|n| n.text() == Some("No voucher matched.")));
}

#[test]
fn a_paid_sale_reports_its_money_and_payments() {
    let sale = crate::sale::script::paid_sale().sale();
    let html = render(std::slice::from_ref(&sale), &about()).expect("renders");
    let document = parse(&html);
    let timeline = Timeline::of(&sale.log, &sale.stats);

    let eur = document
        .descendants()
        .find(|n| n.has_tag_name("tr") && n.attribute("data-currency") == Some("EUR"))
        .expect("a EUR row");
    let values: Vec<&str> = ["data-paid", "data-refunded", "data-net"]
        .iter()
        .zip(eur.children().filter(|n| n.has_tag_name("td")).skip(1))
        .map(|(name, td)| td.attribute(*name).unwrap_or_else(|| panic!("{name}")))
        .collect();
    assert_eq!(values, ["10999", "5999", "5000"]);
    let shown: Vec<&str> = eur.children().filter(|n| n.has_tag_name("td")).skip(1).filter_map(|td| td.text()).collect();
    assert_eq!(shown, ["EUR 109.99", "EUR 59.99", "EUR 50.00"]);

    let field = |name: &str| field(&document, name);
    let counts: Vec<(&str, Option<String>)> = [
        "payments",
        "paid_orders",
        "refunded",
        "refunded_late",
        "refunded_duplicate",
        "refunded_admin",
        "refunded_amount_mismatch",
        "refund_pending",
    ]
    .into_iter()
    .map(|name| (name, field(name)))
    .collect();
    let expected = [7, 4, 4, 1, 1, 1, 1, 0];
    for ((name, found), wanted) in counts.iter().zip(expected) {
        assert_eq!(found.as_deref(), Some(wanted.to_string().as_str()), "{name}");
    }

    // Payments and refunds per bucket, beside each other, on the very bars drawn.
    let bars = data(&document, "payments");
    let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
    for bar in &bars {
        *sums.entry(attribute(bar, "data-series")).or_default() +=
            attribute(bar, "data-value").parse::<u64>().expect("n");
    }
    assert_eq!(sums, BTreeMap::from([("paid", 7), ("refunded", 4)]));
    let paid_per_bucket: u64 = timeline.payments.iter().map(|counts| counts[0]).sum();
    assert_eq!(paid_per_bucket, 7);
    let late_bucket = timeline.buckets.index(at(62_010));
    assert_eq!(timeline.payments[late_bucket], [1, 1], "the axis reaches the late payment and its refund");
    let svg = bars[0].parent().and_then(|g| g.parent()).expect("the chart");
    let drawn: Vec<[String; 4]> = svg
        .children()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class").is_none())
        .map(|n| geometry(&n))
        .collect();
    for bar in &bars {
        assert!(drawn.contains(&geometry(bar)), "a drawn bar under {bar:?}");
    }
    let late_start = timeline.buckets.start(late_bucket).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let beside: Vec<&str> =
        bars.iter().filter(|bar| attribute(bar, "data-start") == late_start).map(|bar| attribute(bar, "x")).collect();
    assert_eq!(beside.len(), 2);
    assert_ne!(beside[0], beside[1], "the bars of one bucket stand beside each other");

    // The admin refund is a cancellation of its own kind.
    let reasons: Vec<String> =
        data(&document, "cancellations").iter().map(|bar| attribute(bar, "data-series").to_owned()).collect();
    assert_eq!(reasons, ["expired", "refunded"]);
    let lede = lede(&document);
    assert!(lede.is_some_and(|lede| lede.contains("EUR 12.50 per unit · unpaid orders expire after 60 s")), "{lede:?}");
}

#[test]
fn a_free_sale_has_no_payments() {
    let sale = busy_sale().sale();
    let html = render(std::slice::from_ref(&sale), &about()).expect("renders");
    let document = parse(&html);
    assert!(!document.descendants().any(|n| n.attribute("data-chart") == Some("payments")));
    assert!(!document.descendants().any(|n| n.attribute("class") == Some("revenue")));
    assert_eq!(document.descendants().filter(|n| n.has_tag_name("svg")).count(), 6);
}
