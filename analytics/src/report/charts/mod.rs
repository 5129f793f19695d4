//! The report's charts, drawn with `plotters` into SVG: what they share
//! (size, fonts, colours, the time axis, step lines) and the charts, in
//! `bars` and `lines`.
//!
//! Text is emitted as SVG `<text>` in a generic family, so the browser lays
//! it out with its own fonts: nothing is embedded or fetched.

mod bars;
mod lines;

use chrono::{DateTime, TimeDelta, Utc};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::sale::{Buckets, Step};
use crate::AnalyticsError;

pub(super) use bars::{accepted, cancellations, latency_distribution, payments};
pub(super) use lines::{latency_over_time, returned_and_resold, units_left, waiting_room};

/// Every chart's size in pixels; the page scales it to the window.
const SIZE: (u32, u32) = (1100, 340);
/// Font size of tick labels and the legend (plotters draws `size / 1.24`
/// px: about 14.5 px).
const LABEL_SIZE: f64 = 18.0;
/// Font size of axis descriptions.
const AXIS_SIZE: f64 = 19.0;
/// Most points a step line keeps: a few per horizontal pixel.
const MAX_LINE_POINTS: usize = 4 * SIZE.0 as usize;

/// Text colour.
const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
/// Grid lines.
const GRID: RGBColor = RGBColor(0xE4, 0xE4, 0xE4);
/// Markers (sell-out).
const MARKER: RGBColor = RGBColor(0xB0, 0x00, 0x20);

/// A colour-blind-safe palette (Okabe and Ito).
pub(super) mod palette {
    use plotters::style::RGBColor;

    pub(crate) const BLUE: RGBColor = RGBColor(0x00, 0x72, 0xB2);
    pub(crate) const GREEN: RGBColor = RGBColor(0x00, 0x9E, 0x73);
    pub(crate) const ORANGE: RGBColor = RGBColor(0xE6, 0x9F, 0x00);
    pub(crate) const VERMILLION: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
    pub(crate) const PURPLE: RGBColor = RGBColor(0xCC, 0x79, 0xA7);
    pub(crate) const SKY: RGBColor = RGBColor(0x56, 0xB4, 0xE9);
    pub(crate) const GREY: RGBColor = RGBColor(0x99, 0x99, 0x99);
}

/// A drawn chart and the key the page shows above it (in HTML, so it never
/// hides data).
#[derive(Debug)]
pub(in crate::report) struct Chart {
    pub(in crate::report) svg: String,
    pub(in crate::report) key: Vec<KeyEntry>,
}

/// One entry of a chart's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::report) struct KeyEntry {
    pub(in crate::report) name: String,
    /// `#RRGGBB`.
    pub(in crate::report) color: String,
    pub(in crate::report) mark: Mark,
}

/// How a key entry is drawn: like the bars, the lines or the markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::report) enum Mark {
    Bar,
    Line,
    Dashed,
}

impl KeyEntry {
    fn new(name: &str, color: RGBColor, mark: Mark) -> Self {
        Self { name: name.to_owned(), color: format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2), mark }
    }
}

/// What sets one chart's axes apart from another's: their descriptions,
/// how many ticks each gets and how a tick is labelled.
struct Axes<'f, XT, YT> {
    x_desc: &'f str,
    y_desc: &'f str,
    x_ticks: usize,
    y_ticks: usize,
    x_label: &'f dyn Fn(&XT) -> String,
    y_label: &'f dyn Fn(&YT) -> String,
}

/// A chart of [`framed`]: on an SVG, over the coordinates `X` × `Y`.
type Framed<'a, 's, X, Y> = ChartContext<
    'a,
    SVGBackend<'s>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// A white chart over `x` × `y` on `root`, drawn the way every chart of the
/// report is: the same margins and label areas, horizontal grid lines only,
/// the same fonts.
fn framed<'a, 's, X, Y>(
    root: &'a DrawingArea<SVGBackend<'s>, Shift>,
    x: X,
    y: Y,
    axes: Axes<'_, X::Value, Y::Value>,
) -> Result<Framed<'a, 's, X, Y>, AnalyticsError>
where
    X: AsRangedCoord,
    Y: AsRangedCoord,
    X::CoordDescType: ValueFormatter<X::Value>,
    Y::CoordDescType: ValueFormatter<Y::Value>,
{
    root.fill(&WHITE).map_err(chart_error)?;
    let mut chart = ChartBuilder::on(root)
        .margin(14)
        .margin_right(36)
        .x_label_area_size(52)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .x_label_formatter(axes.x_label)
        .y_label_formatter(axes.y_label)
        .x_labels(axes.x_ticks)
        .y_labels(axes.y_ticks)
        .disable_x_mesh()
        .light_line_style(WHITE)
        .bold_line_style(GRID)
        .label_style(label_style())
        .axis_desc_style(axis_style())
        .draw()
        .map_err(chart_error)?;
    Ok(chart)
}

fn chart_error(error: impl std::fmt::Display) -> AnalyticsError {
    AnalyticsError::Chart(error.to_string())
}

fn label_style() -> TextStyle<'static> {
    ("sans-serif", LABEL_SIZE).into_font().color(&INK)
}

fn axis_style() -> TextStyle<'static> {
    ("sans-serif", AXIS_SIZE).into_font().color(&INK)
}

/// Seconds from the axis origin to `at`, as the x coordinate.
fn x_of(buckets: &Buckets, at: DateTime<Utc>) -> f64 {
    let seconds = (at - buckets.origin).num_milliseconds() as f64 / 1_000.0;
    seconds.clamp(0.0, span(buckets))
}

/// The axis length in seconds.
fn span(buckets: &Buckets) -> f64 {
    (buckets.count as i64 * buckets.width_s) as f64
}

/// A tick label: the UTC time `x` seconds after the origin, as precise as
/// the buckets are.
fn time_label(buckets: &Buckets, x: f64) -> String {
    let at = buckets.origin + TimeDelta::milliseconds((x * 1_000.0).round() as i64);
    let format = if span(buckets) > 86_400.0 {
        "%m-%d %H:%M"
    } else if buckets.width_s >= 60 {
        "%H:%M"
    } else {
        "%H:%M:%S"
    };
    at.format(format).to_string()
}

/// How many time ticks an axis gets: at most ten, and never closer than one
/// bucket apart (closer ticks would repeat a label at the buckets' precision).
fn time_ticks(buckets: &Buckets) -> usize {
    (buckets.count + 1).clamp(2, 10)
}

/// "per second", "per 10 s", "per 5 min": what one bucket is.
pub(super) fn per_bucket(buckets: &Buckets) -> String {
    match buckets.width_s {
        1 => "per second".to_owned(),
        w if w < 60 => format!("per {w} s"),
        w if w < 3_600 => format!("per {} min", w / 60),
        w => format!("per {} h", w / 3_600),
    }
}

/// A bucket's start as an attribute value: RFC 3339, UTC, whole seconds.
fn bucket_start(buckets: &Buckets, index: usize) -> String {
    buckets.start(index).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The tooltip time of a bucket.
fn bucket_title(buckets: &Buckets, index: usize) -> String {
    let start = buckets.start(index);
    if buckets.width_s == 1 {
        format!("{} UTC", start.format("%H:%M:%S"))
    } else {
        format!("{}–{} UTC", start.format("%H:%M:%S"), buckets.start(index + 1).format("%H:%M:%S"))
    }
}

/// An axis maximum with room above the tallest value.
fn headroom(max: u64) -> u64 {
    (max + max / 10 + 1).max(1)
}

/// The value of a step series just before `at` (the first value before
/// the series starts).
fn value_before(steps: &[Step], at: DateTime<Utc>) -> Option<i64> {
    let index = steps.partition_point(|step| step.at < at);
    steps.get(index.saturating_sub(1)).map(|step| step.value)
}

/// The corner points of a step line over the whole axis.
fn step_points(buckets: &Buckets, steps: &[Step]) -> Vec<(f64, f64)> {
    let steps = decimate(steps, buckets, MAX_LINE_POINTS / 2);
    let mut points: Vec<(f64, f64)> = Vec::with_capacity(steps.len() * 2 + 1);
    for step in &steps {
        let x = x_of(buckets, step.at);
        if let Some(&(_, previous)) = points.last() {
            points.push((x, previous));
        }
        points.push((x, step.value as f64));
    }
    if let Some(&(_, last)) = points.last() {
        points.push((span(buckets), last));
    }
    points
}

/// At most about `slices * 4` steps: per slice of the axis the first, the
/// lowest, the highest and the last, so the drawn line keeps its extremes.
fn decimate(steps: &[Step], buckets: &Buckets, slices: usize) -> Vec<Step> {
    if steps.len() <= slices * 4 {
        return steps.to_vec();
    }
    let width = span(buckets) / slices as f64;
    let mut kept: Vec<Step> = Vec::with_capacity(slices * 4);
    let mut group: Vec<Step> = Vec::new();
    let mut current = None;
    let flush = |group: &mut Vec<Step>, kept: &mut Vec<Step>| {
        let (Some(first), Some(last)) = (group.first().copied(), group.last().copied()) else { return };
        let low = group.iter().copied().min_by_key(|s| s.value).unwrap_or(first);
        let high = group.iter().copied().max_by_key(|s| s.value).unwrap_or(first);
        let mut picked = [first, low, high, last];
        picked.sort_by_key(|s| s.at);
        for step in picked {
            if kept.last() != Some(&step) {
                kept.push(step);
            }
        }
        group.clear();
    };
    for step in steps {
        let slice = (x_of(buckets, step.at) / width) as usize;
        if current != Some(slice) {
            flush(&mut group, &mut kept);
            current = Some(slice);
        }
        group.push(*step);
    }
    flush(&mut group, &mut kept);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimation_keeps_extremes_and_ends() {
        let origin = DateTime::from_timestamp(1_800_000_000, 0).expect("in range");
        let buckets = Buckets { origin, width_s: 1, count: 10 };
        let steps: Vec<Step> = (0..10_000)
            .map(|i| Step { at: origin + TimeDelta::milliseconds(i), value: if i == 5_000 { -7 } else { i % 13 } })
            .collect();
        let kept = decimate(&steps, &buckets, 20);
        assert!(kept.len() <= 80, "{}", kept.len());
        assert_eq!(kept.first(), steps.first());
        assert_eq!(kept.last(), steps.last());
        assert_eq!(kept.iter().map(|s| s.value).min(), Some(-7));
        assert_eq!(kept.iter().map(|s| s.value).max(), Some(12));
        assert!(kept.windows(2).all(|pair| pair[0].at <= pair[1].at));
        let few = &steps[..50];
        assert_eq!(decimate(few, &buckets, 20), few.to_vec());
    }

    #[test]
    fn values_before_a_time_are_the_last_step_before_it() {
        let origin = DateTime::from_timestamp(1_800_000_000, 0).expect("in range");
        let steps = [Step { at: origin, value: 5 }, Step { at: origin + TimeDelta::seconds(2), value: 3 }];
        assert_eq!(value_before(&steps, origin), Some(5));
        assert_eq!(value_before(&steps, origin + TimeDelta::seconds(2)), Some(5));
        assert_eq!(value_before(&steps, origin + TimeDelta::milliseconds(2_001)), Some(3));
        assert_eq!(value_before(&[], origin), None);
    }

    #[test]
    fn bucket_words_and_labels() {
        let origin = DateTime::from_timestamp(1_800_000_000, 0).expect("in range");
        let second = Buckets { origin, width_s: 1, count: 60 };
        assert_eq!(per_bucket(&second), "per second");
        assert_eq!(per_bucket(&Buckets { width_s: 10, ..second }), "per 10 s");
        assert_eq!(per_bucket(&Buckets { width_s: 300, ..second }), "per 5 min");
        assert_eq!(time_label(&second, 61.0), "08:01:01");
        assert_eq!(bucket_start(&second, 2), "2027-01-15T08:00:02Z");
        assert_eq!(bucket_title(&second, 2), "08:00:02 UTC");
        assert_eq!(bucket_title(&Buckets { width_s: 5, ..second }, 1), "08:00:05–08:00:10 UTC");
    }
}
