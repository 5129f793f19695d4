//! The data layer laid over each chart: an invisible box per bar (or per
//! time bucket of a line) carrying the numbers it stands for as `data-*`
//! attributes and a `<title>` (the browser shows it as a tooltip). People
//! get exact values on hover; tests and scripts read the numbers back from
//! the SVG without guessing them from pixel heights.

use std::fmt::Write as _;

use super::html::escape;

/// A point in the chart's pixels.
pub(super) type Pixel = (i32, i32);

/// The overlay of one chart.
#[derive(Debug)]
pub(super) struct Overlay {
    chart: &'static str,
    /// Extra attributes of the group (`name`, `value`).
    attributes: Vec<(&'static str, String)>,
    boxes: String,
}

impl Overlay {
    pub(super) fn new(chart: &'static str) -> Self {
        Self { chart, attributes: Vec::new(), boxes: String::new() }
    }

    /// An attribute of the whole chart (e.g. the sell-out time).
    pub(super) fn attribute(&mut self, name: &'static str, value: String) {
        self.attributes.push((name, value));
    }

    /// A box between two corners in pixels, with `data-*` attributes and a
    /// tooltip. Its geometry is the one the charting library gives the bar
    /// it covers, so the two can be matched.
    pub(super) fn datum(&mut self, a: Pixel, b: Pixel, data: &[(&str, String)], title: &str) {
        let (x, y) = (a.0.min(b.0), a.1.min(b.1));
        let (width, height) = ((a.0 - b.0).abs(), (a.1 - b.1).abs());
        let _ = write!(
            self.boxes,
            r##"<rect class="datum" x="{x}" y="{y}" width="{width}" height="{height}" fill="#000" fill-opacity="0""##
        );
        for (name, value) in data {
            let _ = write!(self.boxes, r#" data-{name}="{}""#, escape(value));
        }
        let _ = writeln!(self.boxes, "><title>{}</title></rect>", escape(title));
    }

    /// Adds the overlay to `svg` (as drawn by the charting library) and
    /// names the chart on its root element, for styling and for readers.
    pub(super) fn attach(self, svg: String, label: &str) -> String {
        let mut group = format!(r#"<g class="data" data-chart="{}""#, self.chart);
        for (name, value) in &self.attributes {
            let _ = write!(group, r#" data-{name}="{}""#, escape(value));
        }
        group.push_str(">\n");
        group.push_str(&self.boxes);
        group.push_str("</g>\n");
        let root =
            format!(r#"<svg class="chart" data-chart="{}" role="img" aria-label="{}" "#, self.chart, escape(label));
        let mut svg = svg.replacen("<svg ", &root, 1);
        match svg.rfind("</svg>") {
            Some(end) => svg.insert_str(end, &group),
            None => svg.push_str(&group),
        }
        svg
    }
}
