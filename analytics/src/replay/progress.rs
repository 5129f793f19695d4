//! The progress bar a replay draws on stderr when a person is watching.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
            Some(total) => ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} records, {per_sec}, ETA {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            ),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{spinner} {human_pos} records, {per_sec} (following; Ctrl-C stops)")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            ),
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
