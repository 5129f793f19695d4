//! The provisioned Grafana dashboards (`grafana/dashboards/*.json`), read
//! back for tests: the structural check (`web/tests/dashboards.rs`) and the
//! check that runs every query against a Prometheus that scraped a sale.
//!
//! Panels may nest (a collapsed row keeps its panels in its own `panels`);
//! every function here walks them all.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// What Grafana's interval variables are replaced with to run a query
/// outside Grafana: `$__rate_interval` and `$__interval` become this.
pub const RATE_INTERVAL: &str = "30s";
/// What `$__range` (the dashboard's time range) is replaced with.
pub const RANGE: &str = "5m";

/// The repository's `grafana/dashboards` directory.
pub fn dashboards_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("grafana").join("dashboards")
}

/// Every `*.json` file in `dir`, sorted by path, with its parsed content.
///
/// # Panics
///
/// If the directory cannot be read or a file is not valid JSON: these are
/// test helpers, and the message names the file.
pub fn load_dashboards(dir: &Path) -> Vec<(PathBuf, Value)> {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| entry.unwrap_or_else(|e| panic!("listing {}: {e}", dir.display())).path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let json =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()));
            (path, json)
        })
        .collect()
}

/// Every panel of a dashboard, nested ones (inside rows) included, in
/// document order (a panel before the panels it contains).
pub fn all_panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(panels: Option<&'a Value>, out: &mut Vec<&'a Value>) {
        for panel in panels.and_then(Value::as_array).into_iter().flatten() {
            out.push(panel);
            walk(panel.get("panels"), out);
        }
    }
    let mut out = Vec::new();
    walk(dashboard.get("panels"), &mut out);
    out
}

/// `expr` with Grafana's time variables replaced by fixed values
/// ([`RATE_INTERVAL`], [`RANGE`]), so Prometheus can run it as is.
pub fn substitute_variables(expr: &str) -> String {
    expr.replace("${__rate_interval}", RATE_INTERVAL)
        .replace("$__rate_interval", RATE_INTERVAL)
        .replace("${__interval}", RATE_INTERVAL)
        .replace("$__interval", RATE_INTERVAL)
        .replace("${__range}", RANGE)
        .replace("$__range", RANGE)
}

/// Every PromQL query of every dashboard in `dir`: `("<dashboard title> /
/// <panel title>", expr)`, one entry per target (a panel with two targets
/// gives two entries with the same name), the time variables replaced (see
/// [`substitute_variables`]). Targets without an `expr` are skipped.
///
/// # Panics
///
/// As [`load_dashboards`].
pub fn dashboard_queries(dir: &Path) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for (_, dashboard) in load_dashboards(dir) {
        let dashboard_title = dashboard.get("title").and_then(Value::as_str).unwrap_or_default();
        for panel in all_panels(&dashboard) {
            let panel_title = panel.get("title").and_then(Value::as_str).unwrap_or_default();
            for target in panel.get("targets").and_then(Value::as_array).into_iter().flatten() {
                if let Some(expr) = target.get("expr").and_then(Value::as_str) {
                    queries.push((format!("{dashboard_title} / {panel_title}"), substitute_variables(expr)));
                }
            }
        }
    }
    queries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_replaced() {
        assert_eq!(
            substitute_variables("rate(x[$__rate_interval]) + rate(y[${__interval}]) + increase(z[$__range])"),
            "rate(x[30s]) + rate(y[30s]) + increase(z[5m])"
        );
    }

    #[test]
    fn nested_panels_are_found() {
        let dashboard = serde_json::json!({
            "title": "D",
            "panels": [
                {"id": 1, "title": "top", "targets": [{"refId": "A", "expr": "up"}]},
                {"id": 2, "type": "row", "title": "row", "panels": [
                    {"id": 3, "title": "inner", "targets": [
                        {"refId": "A", "expr": "rate(a[$__rate_interval])"},
                        {"refId": "B"}
                    ]}
                ]}
            ]
        });
        let titles: Vec<&str> = all_panels(&dashboard).iter().filter_map(|p| p["title"].as_str()).collect();
        assert_eq!(titles, ["top", "row", "inner"]);
    }
}
