//! The report's waiting room, for a queue-mode sale: places taken before
//! and after the start, served, skipped and still waiting, entries spent,
//! and how long the served waited for their entry.

use std::fmt::Write as _;

use super::duration::duration;
use super::html::{escape, figure_row as row};
use crate::sale::Room;

/// The two tables, side by side.
pub(super) fn tables(html: &mut String, room: &Room) {
    html.push_str("<div class=\"tables queue\" data-section=\"waiting-room\">\n");
    places_table(html, room);
    wait_table(html, room);
    html.push_str("</div>\n");
}

/// What became of the places.
fn places_table(html: &mut String, room: &Room) {
    let rows = [
        ("queue_joined_pre_queue", "places taken before the start (shuffled)", room.joined_pre_queue),
        ("queue_joined_after_start", "places taken after the start (in turn)", room.joined_after_start),
        ("queue_users", "users who took a place", room.users),
        ("queue_rejoined", "places taken again after one lapsed", room.rejoined),
        ("queue_served", "served an entry", room.served),
        ("queue_expired", "skipped (holder gone)", room.expired),
        ("queue_waiting", "still waiting", room.waiting),
        ("queue_entries_used", "entries spent on an order", room.entries_used),
    ];
    html.push_str("<div>\n<h3>Waiting room</h3>\n<table class=\"waiting-room\">\n");
    for (field, label, count) in rows {
        row(html, field, label, &count.to_string(), Some(count.to_string()));
    }
    html.push_str("</table>\n</div>\n");
}

/// The waits' percentiles (nearest rank).
fn wait_table(html: &mut String, room: &Room) {
    html.push_str("<div>\n<h3>Wait for an entry</h3>\n<table class=\"queue-wait\">\n");
    match &room.wait {
        Some(wait) => {
            let rows = [
                ("queue_wait_p50_ms", "p50", wait.p50_ms),
                ("queue_wait_p90_ms", "p90", wait.p90_ms),
                ("queue_wait_p99_ms", "p99", wait.p99_ms),
                ("queue_wait_max_ms", "max", wait.max_ms),
            ];
            for (field, label, ms) in rows {
                row(html, field, label, &duration(ms), Some(ms.to_string()));
            }
            let places = wait.places.to_string();
            row(html, "queue_wait_places", "places measured", &places, Some(places.clone()));
        }
        None => html.push_str("<tr><td>Nobody served yet.</td></tr>\n"),
    }
    html.push_str("</table>\n");
    let _ = writeln!(
        html,
        "<p class=\"note\">{}</p>\n</div>",
        escape(
            "From the later of the join and the sale's start to the entry's issue (the Redis clock when the place \
             was served), for the places served."
        )
    );
}
