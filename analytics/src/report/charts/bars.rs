//! Bar charts: orders accepted per time bucket by final outcome,
//! cancellations per bucket by reason, payments and refunds per bucket
//! side by side, and the latency distribution.

use plotters::prelude::*;

use super::{
    bucket_start, bucket_title, chart_error, framed, headroom, palette, per_bucket, span, time_label, time_ticks, Axes,
    Chart, KeyEntry, Mark, SIZE,
};
use crate::report::overlay::Overlay;
use crate::sale::{Buckets, FinalStatus, LatencyBin, Timeline};
use crate::AnalyticsError;

/// One stacked series: its name in the data and legend, and its colour.
struct Series {
    name: &'static str,
    color: RGBColor,
}

/// The colour of each final status.
fn status_series(status: FinalStatus) -> Series {
    let color = match status {
        FinalStatus::Created => palette::BLUE,
        FinalStatus::Paid => palette::GREEN,
        FinalStatus::Cancelled => palette::ORANGE,
        FinalStatus::Failed => palette::VERMILLION,
        FinalStatus::Pending => palette::GREY,
    };
    Series { name: status.as_str(), color }
}

/// Orders accepted per bucket, stacked by where they ended.
pub(in crate::report) fn accepted(timeline: &Timeline) -> Result<Chart, AnalyticsError> {
    let any_pending = timeline.accepted.iter().any(|counts| counts[4] > 0);
    let series: Vec<Series> = FinalStatus::ALL
        .into_iter()
        .filter(|status| *status != FinalStatus::Pending || any_pending)
        .map(status_series)
        .collect();
    let counts: Vec<&[u64]> = timeline.accepted.iter().map(|counts| &counts[..series.len()]).collect();
    let label = format!("Orders accepted {}, by final outcome", per_bucket(&timeline.buckets));
    time_bars("accepted", &label, &timeline.buckets, &series, &counts, "orders", Layout::Stacked)
}

/// Cancellations per bucket, stacked by reason (admin refunds only when
/// there are some).
pub(in crate::report) fn cancellations(timeline: &Timeline) -> Result<Chart, AnalyticsError> {
    let any_refunded = timeline.cancellations.iter().any(|counts| counts[2] > 0);
    let series = [
        Series { name: "requested", color: palette::ORANGE },
        Series { name: "expired", color: palette::PURPLE },
        Series { name: "refunded", color: palette::VERMILLION },
    ];
    let series = &series[..if any_refunded { 3 } else { 2 }];
    let counts: Vec<&[u64]> = timeline.cancellations.iter().map(|counts| &counts[..series.len()]).collect();
    let label = format!("Cancellations {}, by reason", per_bucket(&timeline.buckets));
    time_bars("cancellations", &label, &timeline.buckets, series, &counts, "cancellations", Layout::Stacked)
}

/// Payments reported paid and refunds acknowledged per bucket, side by
/// side.
pub(in crate::report) fn payments(timeline: &Timeline) -> Result<Chart, AnalyticsError> {
    let series =
        [Series { name: "paid", color: palette::GREEN }, Series { name: "refunded", color: palette::VERMILLION }];
    let counts: Vec<&[u64]> = timeline.payments.iter().map(|counts| &counts[..]).collect();
    let label = format!("Payments paid and refunded {}", per_bucket(&timeline.buckets));
    time_bars("payments", &label, &timeline.buckets, &series, &counts, "payments", Layout::Beside)
}

/// How a bucket's series share its slot.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// One bar, the series on top of each other.
    Stacked,
    /// A narrow bar per series, next to each other.
    Beside,
}

/// A bar chart over the time axis; `counts[bucket][series]`.
fn time_bars(
    name: &'static str,
    label: &str,
    buckets: &Buckets,
    series: &[Series],
    counts: &[&[u64]],
    unit: &str,
    layout: Layout,
) -> Result<Chart, AnalyticsError> {
    let tallest = match layout {
        Layout::Stacked => counts.iter().map(|bucket| bucket.iter().sum::<u64>()).max(),
        Layout::Beside => counts.iter().flat_map(|bucket| bucket.iter().copied()).max(),
    };
    let tallest = tallest.unwrap_or(0);
    let mut overlay = Overlay::new(name);
    overlay.attribute("bucket-seconds", buckets.width_s.to_string());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let x_label = |x: &f64| time_label(buckets, *x);
        let y_label = |y: &u64| y.to_string();
        let y_desc = format!("{unit} {}", per_bucket(buckets));
        let axes = Axes {
            x_desc: "time (UTC)",
            y_desc: &y_desc,
            x_ticks: time_ticks(buckets),
            y_ticks: 6,
            x_label: &x_label,
            y_label: &y_label,
        };
        let mut chart = framed(&root, 0f64..span(buckets), 0u64..headroom(tallest), axes)?;
        let width = buckets.width_s as f64;
        // A gap between neighbouring bars, when there is room for one.
        let gap = width * 0.12;
        let slots = series.len() as f64;
        for (slot, series) in series.iter().enumerate() {
            let mut bars = Vec::new();
            for (index, bucket) in counts.iter().enumerate() {
                let count = bucket[slot];
                if count == 0 {
                    continue;
                }
                let (mut x0, mut x1) = (index as f64 * width + gap, (index + 1) as f64 * width - gap);
                let below: u64 = match layout {
                    Layout::Stacked => bucket[..slot].iter().sum(),
                    Layout::Beside => {
                        let part = (x1 - x0) / slots;
                        (x0, x1) = (x0 + part * slot as f64, x0 + part * (slot + 1) as f64);
                        0
                    }
                };
                let (low, high) = (below, below + count);
                overlay.datum(
                    chart.backend_coord(&(x0, high)),
                    chart.backend_coord(&(x1, low)),
                    &[
                        ("series", series.name.to_owned()),
                        ("start", bucket_start(buckets, index)),
                        ("value", count.to_string()),
                    ],
                    &format!("{}: {count} {unit} {}", bucket_title(buckets, index), series.name),
                );
                bars.push(Rectangle::new([(x0, low), (x1, high)], series.color.filled()));
            }
            chart.draw_series(bars).map_err(chart_error)?;
        }
        root.present().map_err(chart_error)?;
    }
    let key = series.iter().map(|series| KeyEntry::new(series.name, series.color, Mark::Bar)).collect();
    Ok(Chart { svg: overlay.attach(svg, label), key })
}

/// How many orders took how long from acceptance to decision, in 1-2-5
/// bins (ticks mark the bins' edges).
pub(in crate::report) fn latency_distribution(bins: &[LatencyBin]) -> Result<Chart, AnalyticsError> {
    let label = "Accept → decision latency: orders per bin";
    let tallest = bins.iter().map(|bin| bin.orders).max().unwrap_or(0);
    let count = bins.len().max(1) as u32;
    let mut overlay = Overlay::new("latency-distribution");
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let edge = |index: &u32| {
            let index = *index as usize;
            match bins.get(index) {
                Some(bin) => milliseconds(bin.from_ms),
                None => bins.last().and_then(|bin| bin.to_ms).map(milliseconds).unwrap_or_default(),
            }
        };
        let y_label = |y: &u64| y.to_string();
        let axes = Axes {
            x_desc: "accept → decision latency (bins from each tick to the next)",
            y_desc: "orders",
            x_ticks: count as usize + 1,
            y_ticks: 6,
            x_label: &edge,
            y_label: &y_label,
        };
        let mut chart = framed(&root, 0u32..count, 0u64..headroom(tallest), axes)?;
        let mut bars = Vec::new();
        for (index, bin) in bins.iter().enumerate() {
            let (x0, x1) = (index as u32, index as u32 + 1);
            let to = bin.to_ms.map(milliseconds).unwrap_or_else(|| "∞".to_owned());
            let range = format!("{} to {to}", milliseconds(bin.from_ms));
            let mut data = vec![("from-ms", bin.from_ms.to_string()), ("value", bin.orders.to_string())];
            if let Some(to) = bin.to_ms {
                data.push(("to-ms", to.to_string()));
            }
            overlay.datum(
                chart.backend_coord(&(x0, bin.orders)),
                chart.backend_coord(&(x1, 0)),
                &data,
                &format!("{range}: {} orders", bin.orders),
            );
            if bin.orders > 0 {
                // A sliver of white between neighbouring bins.
                let mut bar = Rectangle::new([(x0, 0), (x1, bin.orders)], palette::BLUE.filled());
                bar.set_margin(0, 0, 1, 1);
                bars.push(bar);
            }
        }
        chart.draw_series(bars).map_err(chart_error)?;
        root.present().map_err(chart_error)?;
    }
    Ok(Chart { svg: overlay.attach(svg, label), key: vec![KeyEntry::new("orders", palette::BLUE, Mark::Bar)] })
}

/// A bin edge for people: `0.5 ms`, `20 ms`, `2 s`.
fn milliseconds(ms: f64) -> String {
    if ms >= 1_000.0 {
        format!("{} s", ms / 1_000.0)
    } else {
        format!("{ms} ms")
    }
}
