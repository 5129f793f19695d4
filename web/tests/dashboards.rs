//! Structural check of the provisioned Grafana dashboards
//! (`grafana/dashboards/*.json`): what Grafana needs to load them and what
//! the queries need to be runnable and to chart metrics that exist. Whether
//! every query returns data is checked against a real Prometheus elsewhere;
//! this test needs nothing running.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::Path;

use seckill_web::dashboards::{all_panels, dashboard_queries, dashboards_dir, load_dashboards};
use serde_json::Value;

/// The datasource every panel and target names (provisioned by
/// `grafana/provisioning/datasources/prometheus.yml`).
const DATASOURCE_UID: &str = "prometheus";
/// Panel types the dashboards may use; a `row` only groups other panels.
const PANEL_TYPES: &[&str] = &["timeseries", "stat", "gauge", "bargauge", "row"];
/// Grafana's grid is 24 columns wide.
const GRID_COLUMNS: i64 = 24;

fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str).filter(|s| !s.trim().is_empty())
}

/// `text` with the contents of PromQL string literals (`"..."`, `'...'`,
/// `` `...` ``) blanked out, so label values are not taken for metric names
/// or range selectors.
fn without_strings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q != '`' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                    out.push(c);
                    continue;
                }
                out.push(' ');
            }
            None => {
                if matches!(c, '"' | '\'' | '`') {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Every `seckill_*` metric name in `expr`, histogram series suffixes
/// (`_bucket`, `_sum`, `_count`) stripped.
fn metric_names(expr: &str) -> Vec<String> {
    let code = without_strings(expr);
    let mut names = Vec::new();
    let mut rest = code.as_str();
    let mut previous: Option<char> = None;
    while let Some(at) = rest.find("seckill_") {
        let before = if at == 0 { previous } else { rest[..at].chars().next_back() };
        let len = rest[at..].find(|c: char| !is_name_char(c)).unwrap_or(rest.len() - at);
        let token = &rest[at..at + len];
        if !before.is_some_and(is_name_char) {
            let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| token.strip_suffix(s)).unwrap_or(token);
            names.push(base.to_string());
        }
        previous = token.chars().next_back();
        rest = &rest[at + len..];
    }
    names
}

/// The contents of every `[...]` (range selectors, subqueries) in `expr`.
fn range_selectors(expr: &str) -> Vec<String> {
    let code = without_strings(expr);
    let mut ranges = Vec::new();
    let mut rest = code.as_str();
    while let Some(open) = rest.find('[') {
        let close = rest[open..].find(']').map_or(rest.len(), |i| open + i);
        ranges.push(rest[open + 1..close].trim().to_string());
        rest = &rest[(close + 1).min(rest.len())..];
    }
    ranges
}

/// Whether some `by (...)` clause of `expr` keeps the `le` label, as
/// `histogram_quantile` over summed buckets needs.
fn groups_by_le(expr: &str) -> bool {
    let code = without_strings(expr);
    code.match_indices("by").any(|(at, _)| {
        let boundary = !code[..at].chars().next_back().is_some_and(is_name_char);
        let after = code[at + 2..].trim_start();
        boundary
            && after.starts_with('(')
            && after[1..].split(')').next().is_some_and(|labels| labels.split(',').any(|l| l.trim() == "le"))
    })
}

/// The metric names `core/src/metrics/` defines: each appears there as a
/// string literal.
fn defined_in_core(name: &str) -> bool {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src/metrics");
    let files = fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    files.flatten().any(|file| {
        let source = fs::read_to_string(file.path()).unwrap_or_default();
        source.contains(&format!("\"{name}\""))
    })
}

fn check_datasource(owner: &str, value: &Value, problems: &mut Vec<String>) {
    let uid = value.get("datasource").and_then(|d| d.get("uid")).and_then(Value::as_str);
    if uid != Some(DATASOURCE_UID) {
        problems.push(format!("{owner}: datasource uid is {uid:?}, not {DATASOURCE_UID:?}"));
    }
    let kind = value.get("datasource").and_then(|d| d.get("type")).and_then(Value::as_str);
    if kind != Some("prometheus") {
        problems.push(format!("{owner}: datasource type is {kind:?}, not \"prometheus\""));
    }
}

/// `(x, y, w, h)` of a panel, if its `gridPos` is complete and fits the grid.
fn grid_pos(name: &str, panel: &Value, problems: &mut Vec<String>) -> Option<(i64, i64, i64, i64)> {
    let field = |key: &str| panel.get("gridPos").and_then(|g| g.get(key)).and_then(Value::as_i64);
    match (field("x"), field("y"), field("w"), field("h")) {
        (Some(x), Some(y), Some(w), Some(h)) if x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= GRID_COLUMNS => {
            Some((x, y, w, h))
        }
        _ => {
            problems.push(format!("{name}: gridPos missing, incomplete or off the {GRID_COLUMNS}-column grid"));
            None
        }
    }
}

fn check_targets(name: &str, panel: &Value, problems: &mut Vec<String>) {
    let targets = panel.get("targets").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if targets.is_empty() {
        problems.push(format!("{name}: no targets"));
    }
    let mut ref_ids = HashSet::new();
    for (i, target) in targets.iter().enumerate() {
        let owner = format!("{name} target {i}");
        check_datasource(&owner, target, problems);
        match str_field(target, "refId") {
            Some(ref_id) if !ref_ids.insert(ref_id) => problems.push(format!("{owner}: refId {ref_id} used twice")),
            Some(_) => {}
            None => problems.push(format!("{owner}: no refId")),
        }
        if str_field(target, "expr").is_none() {
            problems.push(format!("{owner}: empty expr"));
        }
        if target.get("legendFormat").and_then(Value::as_str).is_none() {
            problems.push(format!("{owner}: no legendFormat"));
        }
    }
}

/// Every problem with one dashboard's layout and panels.
fn dashboard_problems(file: &str, dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if dashboard.get("schemaVersion").and_then(Value::as_i64).is_none() {
        problems.push(format!("{file}: no schemaVersion"));
    }
    let tags = dashboard.get("tags").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if !tags.iter().any(|t| t == "seckill") {
        problems.push(format!("{file}: not tagged \"seckill\""));
    }
    if ["from", "to"].iter().any(|k| dashboard.get("time").and_then(|t| t.get(k)).and_then(Value::as_str).is_none()) {
        problems.push(format!("{file}: no time range"));
    }

    let panels = all_panels(dashboard);
    if panels.is_empty() {
        problems.push(format!("{file}: no panels"));
    }
    let mut ids = HashSet::new();
    for panel in &panels {
        let title = str_field(panel, "title");
        let name = format!("{file} panel {:?}", title.unwrap_or("<untitled>"));
        match panel.get("id").and_then(Value::as_i64) {
            Some(id) if !ids.insert(id) => problems.push(format!("{name}: id {id} used twice")),
            Some(_) => {}
            None => problems.push(format!("{name}: no integer id")),
        }
        if title.is_none() {
            problems.push(format!("{name}: no title"));
        }
        let kind = str_field(panel, "type");
        if !kind.is_some_and(|k| PANEL_TYPES.contains(&k)) {
            problems.push(format!("{name}: type {kind:?} is not one of {PANEL_TYPES:?}"));
        }
        grid_pos(&name, panel, &mut problems);
        if kind == Some("row") {
            continue;
        }
        check_datasource(&name, panel, &mut problems);
        let unit = panel.get("fieldConfig").and_then(|f| f.get("defaults")).and_then(|d| str_field(d, "unit"));
        if unit.is_none() {
            problems.push(format!("{name}: no fieldConfig.defaults.unit"));
        }
        check_targets(&name, panel, &mut problems);
    }

    // Top-level panels must not overlap (Grafana would silently move them).
    let top: Vec<(String, (i64, i64, i64, i64))> = dashboard
        .get("panels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| Some((str_field(p, "title")?.to_string(), grid_pos("", p, &mut Vec::new())?)))
        .collect();
    for (i, (a, (ax, ay, aw, ah))) in top.iter().enumerate() {
        for (b, (bx, by, bw, bh)) in &top[i + 1..] {
            if ax < &(bx + bw) && bx < &(ax + aw) && ay < &(by + bh) && by < &(ay + ah) {
                problems.push(format!("{file}: panels {a:?} and {b:?} overlap"));
            }
        }
    }
    problems
}

#[test]
fn dashboards_are_well_formed() {
    let dashboards = load_dashboards(&dashboards_dir());
    assert!(dashboards.len() >= 2, "expected the provisioned dashboards in {}", dashboards_dir().display());

    let mut problems = Vec::new();
    let mut uids = BTreeMap::new();
    let mut titles = BTreeMap::new();
    for (path, dashboard) in &dashboards {
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for (key, seen) in [("uid", &mut uids), ("title", &mut titles)] {
            match str_field(dashboard, key) {
                Some(value) => {
                    if let Some(other) = seen.insert(value.to_string(), file.clone()) {
                        problems.push(format!("{file}: {key} {value:?} is also used by {other}"));
                    }
                }
                None => problems.push(format!("{file}: no {key}")),
            }
        }
        problems.extend(dashboard_problems(&file, dashboard));
    }
    assert!(problems.is_empty(), "dashboard problems:\n{}", problems.join("\n"));
}

#[test]
fn queries_chart_defined_metrics_and_run_outside_grafana() {
    let queries = dashboard_queries(&dashboards_dir());
    assert!(!queries.is_empty(), "no queries found");

    let mut problems = Vec::new();
    for (panel, expr) in &queries {
        if expr.contains('$') {
            problems.push(format!("{panel}: a variable is left after substitution: {expr}"));
        }
        if expr.contains("_bucket") && !(expr.contains("histogram_quantile") && groups_by_le(expr)) {
            problems.push(format!("{panel}: histogram buckets outside histogram_quantile(.., sum by (le) ..): {expr}"));
        }
        let names = metric_names(expr);
        if names.is_empty() {
            problems.push(format!("{panel}: charts no seckill metric: {expr}"));
        }
        for name in names {
            if !defined_in_core(&name) {
                problems.push(format!("{panel}: {name} is not defined in core/src/metrics/"));
            }
        }
    }
    assert!(problems.is_empty(), "query problems:\n{}", problems.join("\n"));
}

/// Ranges come from Grafana's variables, so they follow the scrape interval
/// and the chosen time range instead of a hard-coded window.
#[test]
fn ranges_use_grafana_variables() {
    let mut problems = Vec::new();
    for (_, dashboard) in load_dashboards(&dashboards_dir()) {
        for panel in all_panels(&dashboard) {
            for target in panel.get("targets").and_then(Value::as_array).into_iter().flatten() {
                let expr = target.get("expr").and_then(Value::as_str).unwrap_or_default();
                for range in range_selectors(expr) {
                    if !["$__rate_interval", "$__interval", "$__range"].contains(&range.as_str()) {
                        problems.push(format!("{:?}: range [{range}] in {expr}", panel.get("title")));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "hard-coded ranges:\n{}", problems.join("\n"));
}

#[test]
fn expression_scanning() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (le) (rate(seckill_a_seconds_bucket{topic="seckill_x"}[1m])))"#
        ),
        ["seckill_a_seconds"]
    );
    assert_eq!(
        metric_names("sum(seckill_b_total) / sum(seckill_c_count) + not_seckill_d + seckill_e_sum"),
        ["seckill_b_total", "seckill_c", "seckill_e"]
    );
    assert!(groups_by_le("histogram_quantile(0.5, sum by (service, le) (rate(x_bucket[1m])))"));
    assert!(!groups_by_le("histogram_quantile(0.5, sum by (service) (rate(x_bucket[1m])))"));
    assert_eq!(
        range_selectors(r#"rate(x{route=~"[a-z]+"}[$__rate_interval]) + y[5m:1m]"#),
        ["$__rate_interval", "5m:1m"]
    );
}
