//! Latency percentiles, nearest rank, in milliseconds.

use serde::Serialize;

/// p50/p90/p99/p99.9/max of a set of durations, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `samples` (milliseconds); all zero when
    /// there are none.
    pub fn of(mut samples: Vec<f64>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            let index = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[index]
        };
        Self {
            count: samples.len(),
            p50_ms: rank(0.50),
            p90_ms: rank(0.90),
            p99_ms: rank(0.99),
            p999_ms: rank(0.999),
            max_ms: samples[samples.len() - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let p = Percentiles::of((1..=1000).map(f64::from).collect());
        assert_eq!((p.p50_ms, p.p90_ms, p.p99_ms, p.p999_ms, p.max_ms), (500.0, 900.0, 990.0, 999.0, 1000.0));
        assert_eq!(Percentiles::of(vec![]).count, 0);
        assert_eq!(Percentiles::of(vec![7.0]).p99_ms, 7.0);
    }
}
