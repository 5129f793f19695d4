//! The platform's alert rules with every duration shortened, for tests that
//! provoke a fault for real and watch its alert on a real Prometheus:
//! `prometheus/alerts.yml` with each `for:` and range window divided by a
//! factor, so minutes of production patience take seconds; what the rules
//! fire on is unchanged. `prometheus/alerts.test.yml` tests the real
//! durations with promtool.

use std::path::{Path, PathBuf};

use crate::DevstackError;

/// `source` (an alert rules file) with its durations divided by
/// `compression`, written as `alerts.yml` into `dir`; its path.
pub fn compressed_rules(source: &Path, dir: &Path, compression: u64) -> Result<PathBuf, DevstackError> {
    let failed = |source| DevstackError::Spawn { what: "the compressed alert rules".into(), source };
    let rules = std::fs::read_to_string(source).map_err(failed)?;
    let compressed = rules.lines().map(|line| compress_line(line, compression)).collect::<Result<Vec<_>, _>>()?;
    let path = dir.join("alerts.yml");
    std::fs::write(&path, compressed.join("\n")).map_err(failed)?;
    Ok(path)
}

/// `for: 1m` and `[2m]` in one line, each divided by `compression`
/// (written in milliseconds); comments are left alone.
pub fn compress_line(line: &str, compression: u64) -> Result<String, DevstackError> {
    if line.trim_start().starts_with('#') {
        return Ok(line.to_owned());
    }
    if let Some(duration) = line.trim_start().strip_prefix("for: ") {
        let indent = &line[..line.len() - line.trim_start().len()];
        return Ok(format!("{indent}for: {}", compress(duration.trim(), compression)?));
    }
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']') else { break };
        out.push_str(&rest[..=open]);
        out.push_str(&compress(&rest[open + 1..open + close], compression)?);
        out.push(']');
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn compress(duration: &str, compression: u64) -> Result<String, DevstackError> {
    let unreadable = || DevstackError::Setup(format!("a duration like 30s or 5m in the alert rules: {duration:?}"));
    let (number, unit) = duration.split_at(duration.len().checked_sub(1).ok_or_else(unreadable)?);
    let seconds: u64 = number.parse().map_err(|_| unreadable())?;
    let millis = match unit {
        "s" => seconds * 1_000,
        "m" => seconds * 60_000,
        _ => return Err(unreadable()),
    };
    Ok(format!("{}ms", millis / compression.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_compressed_and_nothing_else_changes() {
        let line = |line: &str| compress_line(line, 12).expect("compresses");
        assert_eq!(line("        for: 1m"), "        for: 5000ms");
        assert_eq!(line("        for: 30s"), "        for: 2500ms");
        assert_eq!(
            line("expr: sum by (x) (rate(a_total{b=\"c\"}[1m])) / changes(d[2m])"),
            "expr: sum by (x) (rate(a_total{b=\"c\"}[5000ms])) / changes(d[10000ms])"
        );
        assert_eq!(line("# a comment naming [5m]"), "# a comment naming [5m]");
        assert_eq!(line("summary: \"{{ $value }}\""), "summary: \"{{ $value }}\"");
        assert!(compress_line("for: 5h", 12).is_err(), "an unknown unit is an error, not a silent change");
    }
}
