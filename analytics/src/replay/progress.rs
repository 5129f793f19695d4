//! The progress bar a replay draws on stderr when a person is watching.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// The bar over a known number of records; `{rate}` is [`rate`].
const BAR: &str = "{bar:40} {human_pos}/{human_len} records, {rate}, ETA {eta}";
/// The spinner while following; `{rate}` is [`rate`].
const SPINNER: &str = "{spinner} {human_pos} records, {rate} (following; Ctrl-C stops)";

/// A progress bar, or nothing when output is piped.
#[derive(Debug)]
pub(super) struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar over `total` records (a spinner when following), or a no-op
    /// unless `show`.
    pub(super) fn new(show: bool, total: Option<u64>) -> Self {
        if !show {
            return Self(None);
        }
        let bar = match total {
            Some(total) => ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
                .with_style(style(BAR).unwrap_or_else(|_| ProgressStyle::default_bar())),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
                .with_style(style(SPINNER).unwrap_or_else(|_| ProgressStyle::default_spinner())),
        };
        Self(Some(bar))
    }

    /// Records read so far.
    pub(super) fn set(&self, read: u64) {
        if let Some(bar) = &self.0 {
            bar.set_position(read);
        }
    }

    /// Removes the bar, so the summary line stands alone.
    pub(super) fn finish(&self, read: u64) {
        if let Some(bar) = &self.0 {
            bar.set_position(read);
            bar.finish_and_clear();
        }
    }
}

/// `template` with its `{rate}` key written by [`rate`].
fn style(template: &str) -> Result<ProgressStyle, indicatif::style::TemplateError> {
    Ok(ProgressStyle::with_template(template)?.with_key(
        "rate",
        |state: &ProgressState, out: &mut dyn std::fmt::Write| {
            let _ = out.write_str(&rate(state.per_sec()));
        },
    ))
}

/// Records a second, whole, with thousands separated: `12,345 records/s`
/// (indicatif's own `{per_sec}` shows four decimals).
fn rate(per_second: f64) -> String {
    let whole = if per_second.is_finite() && per_second > 0.0 { per_second.round() as u64 } else { 0 };
    let digits = whole.to_string();
    let mut out = String::with_capacity(digits.len() + 12);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out.push_str(" records/s");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_whole_records_a_second() {
        assert_eq!(rate(0.0), "0 records/s");
        assert_eq!(rate(7.4999), "7 records/s");
        assert_eq!(rate(999.5), "1,000 records/s");
        assert_eq!(rate(123_456.789), "123,457 records/s");
        assert_eq!(rate(1_234_567.0), "1,234,567 records/s");
        assert_eq!(rate(f64::NAN), "0 records/s");
        assert_eq!(rate(f64::INFINITY), "0 records/s");
    }

    #[test]
    fn the_bar_and_the_spinner_show_that_rate() {
        for template in [BAR, SPINNER] {
            assert!(template.contains("{rate}") && !template.contains("per_sec"), "{template}");
            assert!(style(template).is_ok(), "{template}");
        }
    }
}
