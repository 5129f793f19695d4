//! Writing text into the report's HTML.

use std::fmt::Write as _;

/// Text safe inside an element or a quoted attribute.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One row of a figures table: `shown` for people, `value` (when there is
/// one) in `data-value` for machines, the row named by `data-field`.
pub(super) fn figure_row(html: &mut String, field: &str, label: &str, shown: &str, value: Option<String>) {
    let value = value.map(|v| format!(" data-value=\"{}\"", escape(&v))).unwrap_or_default();
    let _ = writeln!(
        html,
        "<tr data-field=\"{field}\"><th>{}</th><td class=\"n\"{value}>{}</td></tr>",
        escape(label),
        escape(shown)
    );
}
