//! The rules a draw-mode sale must satisfy, from the log alone: the checks
//! of `seckill draw verify` ([`crate::draw`]), run once and grouped into
//! four rules, so the audit and the verification cannot disagree.

use serde_json::{json, Map};

use super::RuleResult;
use crate::draw::Check;
use crate::sale::VoucherLog;

/// Each rule, and the checks it is made of.
const RULES: [((&str, &str), &[&str]); 4] = [
    (
        ("draw_seed_committed", "the draw's seed was committed before the first entry"),
        &["commitment", "beacon", "timing"],
    ),
    (
        ("draw_ranking_reproduced", "the draw's ranking recomputed from the log = the logged one"),
        &["entries", "entries_hash", "entry_count", "ranking"],
    ),
    (("draw_orders_by_winners", "orders only by winners, each win once, promotions in order"), &["winners", "orders"]),
    (
        ("draw_windows_kept", "every window full and kept, every promotion needed"),
        &["window_lengths", "wins_in_window", "promotions_needed"],
    ),
];

/// The draw rules of `log`'s sale.
pub(super) fn rules(log: &VoucherLog) -> Vec<RuleResult> {
    let checks = crate::draw::run(log);
    RULES.iter().map(|(rule, names)| rule_of(*rule, names, &checks)).collect()
}

/// A rule that holds when its checks pass. Its detail is theirs: every
/// check's when all pass, else the failing ones', each named.
fn rule_of(rule: (&'static str, &'static str), names: &[&str], checks: &[Check]) -> RuleResult {
    let own: Vec<&Check> = checks.iter().filter(|check| names.contains(&check.check)).collect();
    let pass = own.iter().all(|check| check.pass);
    let shown = own.iter().filter(|check| pass || !check.pass);
    let detail = shown.map(|check| format!("{}: {}", check.check, check.detail)).collect::<Vec<_>>().join("; ");
    let figures: Map<String, serde_json::Value> = own
        .iter()
        .map(|check| (check.check.to_owned(), json!({"pass": check.pass, "figures": check.figures})))
        .collect();
    RuleResult::new(rule, pass, detail, serde_json::Value::Object(figures))
}
