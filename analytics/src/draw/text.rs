//! The verification for people: a header with the verdict, a line per
//! check, the draw's figures and how long it took.

use std::fmt::Write as _;

use super::{DrawVerification, SourceKind, Stage};

impl DrawVerification {
    /// The text form: `draw of voucher ID  PASS|FAIL`, one line per check
    /// (`PASS`/`FAIL`, what it says, the numbers), the draw's figures, the
    /// verify time, and the verdict alone on the last line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let verdict = if self.pass { "PASS" } else { "FAIL" };
        let _ = writeln!(out, "draw of voucher {}  {verdict}", self.voucher_id);
        let width = self.checks.iter().map(|check| check.title.chars().count()).max().unwrap_or(0);
        for check in &self.checks {
            let mark = if check.pass { "PASS" } else { "FAIL" };
            let pad = width - check.title.chars().count();
            let _ = writeln!(out, "  {mark}  {}{}  {}", check.title, " ".repeat(pad), check.detail);
        }
        let stage = match self.stage {
            Stage::Entering => "entries not closed yet",
            Stage::Revealed => "revealed, no winners yet",
            Stage::Drawn => "drawn",
        };
        let winners = self.winners.map_or_else(|| "no winners yet".to_owned(), |w| format!("{w} winners at the draw"));
        let _ = writeln!(
            out,
            "{stage}: {} entries, {winners}, {} promoted, {} wins used",
            self.entries, self.promoted, self.wins_used
        );
        let _ = write!(out, "verify time: {:.1} ms for {} entries", self.verify_ms, self.entries);
        if let Some(source) = &self.source {
            let from = match source.kind {
                SourceKind::Kafka => "the topics",
                SourceKind::File => "the file",
            };
            let _ = write!(
                out,
                " (log read from {from} {} in {:.1} ms: {} records, {} undecodable)",
                source.name, source.read_ms, source.records, source.undecodable
            );
        }
        let failed: Vec<&str> = self.failed().map(|check| check.check).collect();
        if failed.is_empty() {
            let _ = writeln!(out, "\nPASS");
        } else {
            let _ = writeln!(out, "\nFAIL: {}", failed.join(", "));
        }
        out
    }
}
