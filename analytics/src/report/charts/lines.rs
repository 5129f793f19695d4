//! Line charts: units left (the gate's and the persistent stock's) with
//! the sell-out marked, accept → decision latency over time, units
//! returned and re-sold, and a waiting room's places over time.

use chrono::{DateTime, SecondsFormat, Utc};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    bucket_start, bucket_title, chart_error, framed, label_style, palette, per_bucket, span, step_points, time_label,
    time_ticks, value_before, x_of, Axes, Chart, KeyEntry, Mark, MARKER, SIZE,
};
use crate::report::overlay::Overlay;
use crate::sale::{Buckets, LatencyPoint, Room, Step, Timeline};
use crate::AnalyticsError;

/// A step line: its name in the data and key, colour, width and steps.
struct Line<'s> {
    name: &'static str,
    color: RGBColor,
    /// Wider lines are drawn first, so a narrower one on top of the same
    /// values leaves both visible.
    width: u32,
    steps: &'s [Step],
}

/// Units left at the gate and in the persistent stock, with the sell-out
/// and added stock marked.
pub(in crate::report) fn units_left(timeline: &Timeline) -> Result<Chart, AnalyticsError> {
    let lines = [
        Line { name: "gate (from acceptances)", color: palette::SKY, width: 7, steps: &timeline.admission_left },
        Line {
            name: "persistent stock (from decisions)",
            color: palette::VERMILLION,
            width: 2,
            steps: &timeline.stock_left,
        },
    ];
    let mut overlay = Overlay::new("units-left");
    if let Some(at) = timeline.sold_out_at {
        overlay.attribute("sold-out-at", at.to_rfc3339_opts(SecondsFormat::Millis, true));
    }
    let markers: Vec<Marker> = timeline
        .sold_out_at
        .map(|at| Marker { at, text: format!("sold out {} UTC", at.format("%H:%M:%S%.3f")), color: MARKER })
        .into_iter()
        .chain(timeline.added.iter().map(|(at, units)| Marker {
            at: *at,
            text: format!("+{units} stock"),
            color: palette::GREEN,
        }))
        .collect();
    let mut chart =
        steps_chart(&timeline.buckets, "Units left", "units", &lines, &markers, overlay, &["gate", "stock"])?;
    if timeline.sold_out_at.is_some() {
        chart.key.push(KeyEntry::new("sold out (the last unit's acceptance)", MARKER, Mark::Dashed));
    }
    if !timeline.added.is_empty() {
        chart.key.push(KeyEntry::new("stock added", palette::GREEN, Mark::Dashed));
    }
    Ok(chart)
}

/// Units given back by cancellations and units sold again, cumulative.
pub(in crate::report) fn returned_and_resold(timeline: &Timeline) -> Result<Chart, AnalyticsError> {
    let lines = [
        Line { name: "returned by cancellations", color: palette::ORANGE, width: 3, steps: &timeline.returned },
        Line { name: "sold again", color: palette::GREEN, width: 3, steps: &timeline.resold },
    ];
    let overlay = Overlay::new("returned");
    let keys = ["returned", "resold"];
    steps_chart(&timeline.buckets, "Units returned and re-sold", "units", &lines, &[], overlay, &keys)
}

/// A waiting room's places over its own time axis, cumulative: taken,
/// served an entry, skipped; the sale's start marked.
pub(in crate::report) fn waiting_room(room: &Room) -> Result<Chart, AnalyticsError> {
    let lines = [
        Line { name: "places taken", color: palette::SKY, width: 3, steps: &room.joined_steps },
        Line { name: "served an entry", color: palette::GREEN, width: 3, steps: &room.served_steps },
        Line { name: "skipped (holder gone)", color: palette::PURPLE, width: 3, steps: &room.expired_steps },
    ];
    let mut overlay = Overlay::new("waiting-room");
    if let Some(at) = room.begins_at {
        overlay.attribute("begins-at", at.to_rfc3339_opts(SecondsFormat::Millis, true));
    }
    let markers: Vec<Marker> = room
        .begins_at
        .map(|at| Marker { at, text: format!("sale starts {} UTC", at.format("%H:%M:%S")), color: MARKER })
        .into_iter()
        .collect();
    let keys = ["joined", "served", "expired"];
    let mut chart = steps_chart(&room.buckets, "Waiting room", "places", &lines, &markers, overlay, &keys)?;
    if room.begins_at.is_some() {
        chart.key.push(KeyEntry::new("the sale's start (the seed revealed)", MARKER, Mark::Dashed));
    }
    Ok(chart)
}

/// A vertical line with a label.
struct Marker {
    at: DateTime<Utc>,
    text: String,
    color: RGBColor,
}

/// Step lines over the time axis; the overlay gets one column per bucket
/// with each line's value at the bucket's end, under `keys`.
fn steps_chart(
    buckets: &Buckets,
    label: &str,
    y_desc: &str,
    lines: &[Line<'_>],
    markers: &[Marker],
    mut overlay: Overlay,
    keys: &[&'static str],
) -> Result<Chart, AnalyticsError> {
    let values = lines.iter().flat_map(|line| line.steps.iter().map(|step| step.value));
    let (low, high) = values.fold((0i64, 0i64), |(low, high), value| (low.min(value), high.max(value)));
    let (y_low, y_high) = (low as f64, (high as f64 * 1.1).max(high as f64 + 1.0));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let x_label = |x: &f64| time_label(buckets, *x);
        let y_label = |y: &f64| format!("{y:.0}");
        let axes = Axes {
            x_desc: "time (UTC)",
            y_desc,
            x_ticks: time_ticks(buckets),
            y_ticks: 6,
            x_label: &x_label,
            y_label: &y_label,
        };
        let mut chart = framed(&root, 0f64..span(buckets), y_low..y_high, axes)?;
        for marker in markers {
            let x = x_of(buckets, marker.at);
            let style = marker.color.stroke_width(2);
            chart.draw_series(DashedLineSeries::new([(x, y_low), (x, y_high)], 6, 4, style)).map_err(chart_error)?;
            // Labels near the right edge grow leftwards.
            let (anchor, shift) = if x > span(buckets) * 0.7 {
                (HPos::Right, -span(buckets) * 0.005)
            } else {
                (HPos::Left, span(buckets) * 0.005)
            };
            let text = label_style().color(&marker.color).pos(Pos::new(anchor, VPos::Top));
            chart
                .draw_series(std::iter::once(Text::new(marker.text.clone(), (x + shift, y_high), text)))
                .map_err(chart_error)?;
        }
        for line in lines {
            let style = line.color.stroke_width(line.width);
            chart.draw_series(LineSeries::new(step_points(buckets, line.steps), style)).map_err(chart_error)?;
        }
        let width = buckets.width_s as f64;
        for index in 0..buckets.count {
            let end = buckets.start(index + 1);
            let mut data = vec![("start", bucket_start(buckets, index))];
            let mut parts = Vec::new();
            for (line, key) in lines.iter().zip(keys) {
                let value = value_before(line.steps, end).unwrap_or(0);
                data.push((*key, value.to_string()));
                parts.push(format!("{} {value}", line.name));
            }
            let title = format!("{}, at its end: {}", bucket_title(buckets, index), parts.join(", "));
            let (x0, x1) = (index as f64 * width, (index + 1) as f64 * width);
            overlay.datum(chart.backend_coord(&(x0, y_high)), chart.backend_coord(&(x1, y_low)), &data, &title);
        }
        root.present().map_err(chart_error)?;
    }
    let key = lines.iter().map(|line| KeyEntry::new(line.name, line.color, Mark::Line)).collect();
    Ok(Chart { svg: overlay.attach(svg, label), key })
}

/// p50 and p99 of accept → decision latency of the orders accepted in each
/// bucket, on a logarithmic axis.
pub(in crate::report) fn latency_over_time(timeline: &Timeline) -> Result<Chart, AnalyticsError> {
    let buckets = &timeline.buckets;
    let label = format!("Accept → decision latency {}, p50 and p99", per_bucket(buckets));
    // Zero latencies (decided within the millisecond) sit on the floor.
    const FLOOR_MS: f64 = 0.01;
    let present = timeline.latency.iter().flatten();
    let (low, high) = present.fold((f64::MAX, 0f64), |(low, high), point| {
        (low.min(point.p50_ms.max(FLOOR_MS)), high.max(point.p99_ms.max(FLOOR_MS)))
    });
    let (y_low, y_high) = if high > 0.0 { (decade_below(low), decade_above(high)) } else { (0.1, 10.0) };
    let mut overlay = Overlay::new("latency");
    overlay.attribute("bucket-seconds", buckets.width_s.to_string());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let x_label = |x: &f64| time_label(buckets, *x);
        let y_label = |y: &f64| format!("{y}");
        let axes = Axes {
            x_desc: "time of acceptance (UTC)",
            y_desc: "milliseconds (log scale)",
            x_ticks: time_ticks(buckets),
            y_ticks: 8,
            x_label: &x_label,
            y_label: &y_label,
        };
        let mut chart = framed(&root, 0f64..span(buckets), (y_low..y_high).log_scale(), axes)?;
        let width = buckets.width_s as f64;
        let centre = |index: usize| (index as f64 + 0.5) * width;
        for percentile in PERCENTILES {
            // One line per run of buckets with decisions: no line across a gap.
            let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
            for (index, point) in timeline.latency.iter().enumerate() {
                match point {
                    Some(point) => runs.last_mut().into_iter().for_each(|run| {
                        run.push((centre(index), (percentile.value)(point).max(FLOOR_MS)));
                    }),
                    None if runs.last().is_some_and(|run| !run.is_empty()) => runs.push(Vec::new()),
                    None => {}
                }
            }
            let style = percentile.color.stroke_width(2);
            for run in runs.into_iter().filter(|run| !run.is_empty()) {
                chart.draw_series(LineSeries::new(run, style).point_size(3)).map_err(chart_error)?;
            }
        }
        for (index, point) in timeline.latency.iter().enumerate() {
            let Some(point) = point else { continue };
            let (x0, x1) = (index as f64 * width, (index + 1) as f64 * width);
            overlay.datum(
                chart.backend_coord(&(x0, y_high)),
                chart.backend_coord(&(x1, y_low)),
                &[
                    ("start", bucket_start(buckets, index)),
                    ("p50-ms", point.p50_ms.to_string()),
                    ("p99-ms", point.p99_ms.to_string()),
                    ("orders", point.orders.to_string()),
                ],
                &format!(
                    "{}: p50 {:.3} ms, p99 {:.3} ms over {} orders",
                    bucket_title(buckets, index),
                    point.p50_ms,
                    point.p99_ms,
                    point.orders
                ),
            );
        }
        root.present().map_err(chart_error)?;
    }
    let key = PERCENTILES.iter().map(|p| KeyEntry::new(p.name, p.color, Mark::Line)).collect();
    Ok(Chart { svg: overlay.attach(svg, &label), key })
}

/// One latency line: its name and colour, and the value it draws.
struct Percentile {
    name: &'static str,
    color: RGBColor,
    value: fn(&LatencyPoint) -> f64,
}

const PERCENTILES: [Percentile; 2] = [
    Percentile { name: "p50", color: palette::BLUE, value: |point| point.p50_ms },
    Percentile { name: "p99", color: palette::VERMILLION, value: |point| point.p99_ms },
];

/// The power of ten at or below `value`.
fn decade_below(value: f64) -> f64 {
    10f64.powf(value.log10().floor())
}

/// The power of ten above `value`.
fn decade_above(value: f64) -> f64 {
    10f64.powf(value.log10().floor() + 1.0)
}
