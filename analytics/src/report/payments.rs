//! The report's money, for a sale that takes payments: paid, refunded and
//! net per currency (in major units with the code, `EUR 12.50`; the exact
//! minor units in `data-*`), and what became of the payments.

use std::fmt::Write as _;

use seckill_core::event::RefundReason;

use super::html::escape;
use crate::sale::{Money, Revenue, REFUND_REASONS};

/// The two tables, side by side.
pub(super) fn tables(html: &mut String, revenue: &Revenue) {
    html.push_str("<div class=\"tables payments\">\n");
    money_table(html, revenue);
    counts_table(html, revenue);
    html.push_str("</div>\n");
}

/// Paid, refunded and net per currency.
fn money_table(html: &mut String, revenue: &Revenue) {
    html.push_str(
        "<div>\n<h3>Revenue</h3>\n<table class=\"revenue\">\n<thead><tr><th>currency</th><th class=\"n\">paid</th>\
         <th class=\"n\">refunded</th><th class=\"n\">net</th></tr></thead>\n<tbody>\n",
    );
    for (currency, totals) in &revenue.by_currency {
        let cell = |name: &str, minor: i128| {
            format!(
                "<td class=\"n\" data-{name}=\"{minor}\">{}</td>",
                escape(&Money::new(*currency, minor).to_string())
            )
        };
        let _ = writeln!(
            html,
            "<tr data-currency=\"{code}\"><td>{code}</td>{}{}{}</tr>",
            cell("paid", totals.paid.into()),
            cell("refunded", totals.refunded.into()),
            cell("net", totals.net()),
            code = currency.as_str()
        );
    }
    if revenue.by_currency.is_empty() {
        html.push_str("<tr><td colspan=\"4\">No payment yet.</td></tr>\n");
    }
    html.push_str("</tbody>\n</table>\n</div>\n");
}

/// Payments reported, paying an order, refunded by reason, pending.
fn counts_table(html: &mut String, revenue: &Revenue) {
    let reason_label = |reason: RefundReason| match reason {
        RefundReason::Late => "of which late",
        RefundReason::Duplicate => "of which duplicates",
        RefundReason::Admin => "of which by an admin",
        RefundReason::AmountMismatch => "of which for a wrong amount",
    };
    let mut rows: Vec<(String, &str, u64)> = vec![
        ("payments".to_owned(), "payments reported", revenue.payments),
        ("paid_orders".to_owned(), "paid an order", revenue.paid_orders),
        ("refunded".to_owned(), "refunded", revenue.refunded()),
    ];
    for reason in REFUND_REASONS {
        let count = revenue.refunded_by_reason.get(reason.as_str()).copied().unwrap_or(0);
        rows.push((format!("refunded_{}", reason.as_str()), reason_label(reason), count));
    }
    if let Some(unknown) = revenue.refunded_by_reason.get("unknown") {
        rows.push(("refunded_unknown".to_owned(), "of which without a request in the log", *unknown));
    }
    rows.push(("refund_pending".to_owned(), "refunds asked for, not done", revenue.refund_pending));
    html.push_str("<div>\n<h3>Payments</h3>\n<table class=\"payments\">\n");
    for (field, label, count) in rows {
        let _ = writeln!(
            html,
            "<tr data-field=\"{field}\"><th>{}</th><td class=\"n\" data-value=\"{count}\">{count}</td></tr>",
            escape(label)
        );
    }
    html.push_str("</table>\n</div>\n");
}
