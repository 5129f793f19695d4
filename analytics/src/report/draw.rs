//! The report's draw, for a draw-mode sale: entries, winners at the draw,
//! promotions and wins spent, how long the ranking took, and the draw
//! verified from the very log the report was drawn from (the checks of
//! `seckill draw verify`).

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};

use super::duration::duration;
use super::html::{escape, figure_row as row};
use crate::draw::DrawVerification;
use crate::sale::VoucherLog;

/// The two tables, side by side.
pub(super) fn tables(html: &mut String, log: &VoucherLog, verification: &DrawVerification) {
    html.push_str("<div class=\"tables draw\" data-section=\"draw\">\n");
    figures_table(html, log, verification);
    checks_table(html, verification);
    html.push_str("</div>\n");
}

/// What the draw came to.
fn figures_table(html: &mut String, log: &VoucherLog, verification: &DrawVerification) {
    let draw = &log.draw;
    let settings = log.definition.as_ref().and_then(|definition| definition.draw.as_ref());
    let count = |field: &str, label: &str, n: u64, html: &mut String| {
        row(html, field, label, &n.to_string(), Some(n.to_string()));
    };
    html.push_str("<div>\n<h3>Draw</h3>\n<table class=\"draw-figures\">\n");
    if let Some(settings) = settings {
        let time = |at: DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::Millis, true);
        let shown = |at: DateTime<Utc>| at.format("%H:%M:%S%.3f UTC").to_string();
        row(
            html,
            "draw_entries_open_at",
            "entries open",
            &shown(settings.entries_open_at),
            Some(time(settings.entries_open_at)),
        );
        row(html, "draw_at", "the draw", &shown(settings.draw_at), Some(time(settings.draw_at)));
    }
    count("draw_entries", "entries", verification.entries, html);
    let ranked = draw.ranked.len() as u64;
    count("draw_ranking_records", "ranking records (DrawRanked)", ranked, html);
    let selection = draw.selection();
    match (selection, settings) {
        (Some(selection), Some(settings)) => {
            // Both by the Redis clock the scripts keep, in whole milliseconds.
            let ms = selection.emitted_at.timestamp_millis() - settings.draw_at.timestamp_millis();
            row(
                html,
                "draw_winners_after_ms",
                "winners chosen after the draw",
                &duration(ms as f64),
                Some(ms.to_string()),
            );
        }
        _ => row(html, "draw_winners_after_ms", "winners chosen after the draw", "–", None),
    }
    match verification.winners {
        Some(winners) => count("draw_winners", "winners at the draw", winners, html),
        None => row(html, "draw_winners", "winners at the draw", "not drawn yet", None),
    }
    count("draw_promoted", "promoted later (a unit came free)", verification.promoted, html);
    count("draw_wins_used", "wins spent on an order", verification.wins_used, html);
    let given = verification.winners.unwrap_or(0) + verification.promoted;
    count(
        "draw_wins_unspent",
        "wins not spent (lapsed or still open)",
        given.saturating_sub(verification.wins_used),
        html,
    );
    html.push_str("</table>\n</div>\n");
}

/// Each check of `seckill draw verify`, run on this report's log.
fn checks_table(html: &mut String, verification: &DrawVerification) {
    let passed = verification.checks.iter().filter(|check| check.pass).count();
    let _ = writeln!(
        html,
        "<div>\n<h3>Verified from this log</h3>\n<table class=\"draw-checks\" data-pass=\"{}\">",
        verification.pass
    );
    for check in &verification.checks {
        let (shown, value) = if check.pass { ("PASS", "pass") } else { ("FAIL", "fail") };
        row(html, &format!("draw_check_{}", check.check), check.title, shown, Some(value.to_owned()));
    }
    html.push_str("</table>\n");
    let _ = writeln!(
        html,
        "<p class=\"note\">{}</p>",
        escape(&format!(
            "{passed} of {} checks pass: the ranking recomputed from the revealed seed and the logged entries, \
             the winners and their orders, as `seckill draw verify --voucher {}` prints them.",
            verification.checks.len(),
            verification.voucher_id
        ))
    );
    let failed: Vec<_> = verification.failed().collect();
    if !failed.is_empty() {
        html.push_str("<ul class=\"draw-failures\">\n");
        for check in failed {
            let _ = writeln!(html, "<li><code>{}</code>: {}</li>", check.check, escape(&check.detail));
        }
        html.push_str("</ul>\n");
    }
    html.push_str("</div>\n");
}
