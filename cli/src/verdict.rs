//! How a command that judges the log ends (`seckill audit`, `seckill draw
//! verify`): its verdict printed as text or JSON, and an exit status a
//! script can branch on: 0 when everything passed, [`FAILED`] when
//! something failed, [`BROKEN`] when nothing could be judged (the log or a
//! store unreachable, bad flags, the output not written).

use anyhow::Context;
use serde::Serialize;

/// Exit status when a rule or check failed.
pub(crate) const FAILED: i32 = 1;
/// Exit status when there is no verdict.
pub(crate) const BROKEN: i32 = 2;

/// A judgement of the log.
pub(crate) trait Verdict: Serialize {
    /// Whether everything passed.
    fn passed(&self) -> bool;
    /// The verdict for people.
    fn text(&self) -> String;
}

impl Verdict for seckill_analytics::audit::Audit {
    fn passed(&self) -> bool {
        self.pass
    }

    fn text(&self) -> String {
        Self::text(self)
    }
}

impl Verdict for seckill_analytics::draw::DrawVerification {
    fn passed(&self) -> bool {
        self.pass
    }

    fn text(&self) -> String {
        Self::text(self)
    }
}

/// Prints `judged` (`what` names it in errors) and exits with its status
/// unless it passed.
pub(crate) fn conclude<V: Verdict>(judged: anyhow::Result<V>, json: bool, what: &str) -> anyhow::Result<()> {
    let shown = judged.and_then(|verdict| {
        let text = if json {
            serde_json::to_string_pretty(&verdict)
                .map(|json| json + "\n")
                .with_context(|| format!("encoding the {what}"))?
        } else {
            verdict.text()
        };
        crate::output::emit(&text).with_context(|| format!("writing the {what}"))?;
        Ok(verdict)
    });
    let status = match &shown {
        Ok(verdict) => exit_status(Some(verdict)),
        Err(error) => {
            eprintln!("Error: {error:#}");
            exit_status::<V>(None)
        }
    };
    if status != 0 {
        std::process::exit(status);
    }
    Ok(())
}

/// 0 when `verdict` passed, [`FAILED`] when it did not, [`BROKEN`] without
/// one.
pub(crate) fn exit_status<V: Verdict>(verdict: Option<&V>) -> i32 {
    match verdict {
        Some(verdict) if verdict.passed() => 0,
        Some(_) => FAILED,
        None => BROKEN,
    }
}
