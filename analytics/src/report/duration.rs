//! Durations written for people, in every section of the report.

/// A duration in milliseconds for people: `0.42 ms`, `850 ms`, `1.234 s`,
/// `2 min 03 s`.
pub(super) fn duration(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 1_000.0 {
        format!("{ms:.0} ms")
    } else if ms < 60_000.0 {
        format!("{:.3} s", ms / 1_000.0)
    } else {
        let seconds = (ms / 1_000.0).round() as u64;
        format!("{} min {:02} s", seconds / 60, seconds % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(0.4249), "0.42 ms");
        assert_eq!(duration(850.2), "850 ms");
        assert_eq!(duration(1_234.0), "1.234 s");
        assert_eq!(duration(123_456.0), "2 min 03 s");
    }
}
