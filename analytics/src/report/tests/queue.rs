//! The report of a scripted queue-mode sale: its waiting room's figures,
//! its waits, and the room over time on the chart's data layer.

use super::{about, attribute, data, field, lede, parse};
use crate::report::render;
use crate::sale::queue_script::{passed_ms, queue_sale, AFTER_START, PRE_QUEUE, SKIPPED};
use crate::sale::script::busy_sale;
use crate::sale::Room;

#[test]
fn a_queue_sale_reports_its_waiting_room() {
    let sale = queue_sale().sale();
    let html = render(std::slice::from_ref(&sale), &about()).expect("renders");
    let document = parse(&html);

    let counts = [
        ("queue_joined_pre_queue", PRE_QUEUE),
        ("queue_joined_after_start", AFTER_START),
        ("queue_users", 23),
        ("queue_rejoined", 0),
        ("queue_served", 21),
        ("queue_expired", 2),
        ("queue_waiting", 0),
        ("queue_entries_used", 19),
    ];
    for (name, wanted) in counts {
        assert_eq!(field(&document, name), Some(wanted.to_string()), "{name}");
    }

    // Pre-queue place p waits from the start (-1 s) to its issue; a later
    // join from its join (0.1 s × seq) to its issue.
    let mut waits: Vec<i64> = (1..=PRE_QUEUE)
        .filter(|place| !SKIPPED.contains(place))
        .map(|place| passed_ms(place) + 1_000)
        .chain((1..=AFTER_START).map(|seq| passed_ms(PRE_QUEUE + seq) - seq as i64 * 100))
        .collect();
    waits.sort_unstable();
    assert_eq!(waits.len(), 21);
    let rank = |percentile: usize| waits[(percentile * waits.len()).div_ceil(100) - 1].to_string();
    assert_eq!((rank(50), rank(90), rank(99)), ("2500".to_owned(), "3300".to_owned(), "3500".to_owned()));
    assert_eq!(field(&document, "queue_wait_p50_ms"), Some(rank(50)));
    assert_eq!(field(&document, "queue_wait_p90_ms"), Some(rank(90)));
    assert_eq!(field(&document, "queue_wait_p99_ms"), Some(rank(99)));
    assert_eq!(field(&document, "queue_wait_max_ms"), Some("3500".to_owned()));
    assert_eq!(field(&document, "queue_wait_places"), Some("21".to_owned()));

    // The room over time, cumulative: everyone joined, everyone passed.
    let room = Room::of(&sale.log);
    let buckets = data(&document, "waiting-room");
    assert_eq!(buckets.len(), room.buckets.count);
    let last = buckets.last().expect("a bucket");
    let values: Vec<&str> = ["data-joined", "data-served", "data-expired"].map(|name| attribute(last, name)).to_vec();
    assert_eq!(values, ["23", "21", "2"]);
    let before_start = room.buckets.index(crate::sale::script::at(-2_000));
    assert_eq!(attribute(&buckets[before_start], "data-joined"), "20", "the pre-queue is full before the start");
    assert_eq!(attribute(&buckets[before_start], "data-served"), "0");
    let group = last.parent().expect("the data layer");
    assert_eq!(group.attribute("data-begins-at"), Some("2027-01-15T07:59:59.000Z"));
    let lede = lede(&document);
    assert!(lede.is_some_and(|lede| lede.contains("waiting room from")), "{lede:?}");
}

#[test]
fn redelivered_room_records_change_no_figure() {
    let mut script = queue_sale();
    let before = Room::of(&script.log);
    for (envelope, orders_topic) in script.records.clone() {
        script.put(&envelope, orders_topic);
    }
    assert_eq!(Room::of(&script.log), before);
}

#[test]
fn a_first_come_first_served_sale_has_no_waiting_room() {
    let sale = busy_sale().sale();
    let html = render(std::slice::from_ref(&sale), &about()).expect("renders");
    let document = parse(&html);
    assert!(!document.descendants().any(|n| n.attribute("data-section") == Some("waiting-room")));
    assert!(!document.descendants().any(|n| n.attribute("data-chart") == Some("waiting-room")));
}
