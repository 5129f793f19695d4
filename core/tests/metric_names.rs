//! Every metric an alert rule or a dashboard reads is one the platform
//! defines (in `core/src/metrics`, the one place metric names live).
//!
//! A renamed metric leaves a rule that can never fire: Prometheus answers
//! an unknown name with an empty result, which reads as "all is well",
//! and promtool's rule tests feed the rules the old name, so they pass
//! too. This test reads the names as the source defines them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace's root: this crate lives one folder below it.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `seckill_…` name in `text`.
fn names_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("seckill_") {
        let preceded_by_word = rest[..at].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let tail = &rest[at..];
        let end =
            tail.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')).unwrap_or(tail.len());
        if !preceded_by_word {
            names.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// The names the metrics modules define: quoted `"seckill_…"` literals.
fn defined() -> BTreeSet<String> {
    let dir = root().join("core/src/metrics");
    let mut defined = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("core/src/metrics is readable") {
        let path = entry.expect("a directory entry").path();
        let source = std::fs::read_to_string(&path).expect("a metrics module is readable");
        for quoted in source.split('"').skip(1).step_by(2) {
            if quoted.starts_with("seckill_") && names_in(quoted).len() == 1 && names_in(quoted).contains(quoted) {
                defined.insert(quoted.to_owned());
            }
        }
    }
    assert!(defined.len() > 40, "the metrics modules define the platform's metrics: found {defined:?}");
    defined
}

/// Whether `used` is `defined`, or one of the series a histogram exports.
fn is_defined(used: &str, defined: &BTreeSet<String>) -> bool {
    defined.contains(used)
        || ["_bucket", "_sum", "_count"]
            .iter()
            .any(|suffix| used.strip_suffix(suffix).is_some_and(|base| defined.contains(base)))
}

fn undefined_in(file: &str, defined: &BTreeSet<String>) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let used = names_in(&text);
    assert!(!used.is_empty(), "{file} reads the platform's metrics");
    used.into_iter().filter(|name| !is_defined(name, defined)).collect()
}

#[test]
fn every_alert_reads_a_defined_metric() {
    let defined = defined();
    let undefined = undefined_in("prometheus/alerts.yml", &defined);
    assert!(undefined.is_empty(), "prometheus/alerts.yml reads metrics nothing defines: {undefined:?}");
}

#[test]
fn every_dashboard_reads_a_defined_metric() {
    let defined = defined();
    for dashboard in ["grafana/dashboards/flash-sale-live.json", "grafana/dashboards/pipeline-health.json"] {
        let undefined = undefined_in(dashboard, &defined);
        assert!(undefined.is_empty(), "{dashboard} reads metrics nothing defines: {undefined:?}");
    }
}

#[test]
fn a_renamed_metric_is_caught() {
    let defined = BTreeSet::from(["seckill_outbox_entries".to_owned(), "seckill_admit_seconds".to_owned()]);
    let rule = "max by (instance) (seckill_outbox_entrys) > 1000 and rate(seckill_admit_seconds_bucket[1m]) > 0";
    let undefined: Vec<String> = names_in(rule).into_iter().filter(|name| !is_defined(name, &defined)).collect();
    assert_eq!(undefined, ["seckill_outbox_entrys"]);
}
