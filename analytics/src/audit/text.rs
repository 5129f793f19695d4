//! The audit for people: a block per voucher, a line per rule.

use std::fmt::Write as _;

use super::Audit;

impl Audit {
    /// The text form: per voucher a header with its verdict, then one line
    /// per rule (`PASS`/`FAIL`, what the rule says, the numbers), then a
    /// closing count.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let width = self.vouchers.iter().flat_map(|v| &v.rules).map(|rule| rule.title.chars().count()).max();
        let width = width.unwrap_or(0);
        for voucher in &self.vouchers {
            let verdict = if voucher.pass { "PASS" } else { "FAIL" };
            let _ = writeln!(out, "voucher {}  {verdict}", voucher.voucher_id);
            for rule in &voucher.rules {
                let mark = if rule.pass { "PASS" } else { "FAIL" };
                let pad = width - rule.title.chars().count();
                let _ = writeln!(out, "  {mark}  {}{}  {}", rule.title, " ".repeat(pad), rule.detail);
            }
            out.push('\n');
        }
        let failing = self.vouchers.iter().filter(|voucher| !voucher.pass).count();
        let passing = self.vouchers.len() - failing;
        let scope = match (self.live, self.provider) {
            (false, false) => "against the log",
            (true, false) => "against the log and the live stores",
            (false, true) => "against the log and the payment provider",
            (true, true) => "against the log, the live stores and the payment provider",
        };
        let vouchers = if self.vouchers.len() == 1 { "voucher" } else { "vouchers" };
        let _ = writeln!(
            out,
            "{} {vouchers} audited {scope}: {passing} {}, {failing} {}.",
            self.vouchers.len(),
            if passing == 1 { "passes" } else { "pass" },
            if failing == 1 { "fails" } else { "fail" }
        );
        out
    }
}
