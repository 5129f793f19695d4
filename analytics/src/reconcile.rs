//! Rebuilding the Redis admission state from the log (`seckill reconcile`),
//! while the platform runs.
//!
//! After Redis lost data (or drifted), each voucher's gate state (stock,
//! remaining, window, pause, per-user counts, latest orders, the released,
//! admitted and applied sets) is recomputed from the sales and orders topics
//! (the history the persistent stock is derived from) plus the orders still
//! in the outbox, and written back by `restore.lua`, one atomic step per
//! voucher.
//!
//! Correct while processors, relays and ingresses run:
//! - the outbox is read before the log: an entry a relay moves between the
//!   two reads is in both (harmless: orders are folded by id), never in
//!   neither;
//! - what lands in Redis after the reads is counted by `restore.lua`, which
//!   runs after it: an order `release.lua` gave back keeps its units
//!   returned, an order `admit.lua` admitted holds its units, an update
//!   applied keeps its added units and newer settings.
//!
//! The steps are named ([`Step`]) and the caller is called back between
//! them, so a test can make something happen at an exact point.

use seckill_core::config::{DrawConfig, KafkaConfig};
use seckill_core::{Envelope, VoucherId};
use seckill_gate::{Gate, Ledger, RestoreAction, RestoreMode, RestoreOutcome};
use seckill_kafka::Message;

use crate::AnalyticsError;

/// Most outbox records taken into account.
const MAX_OUTBOX: usize = 10_000_000;

/// The points between the steps of a reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Between reading the outbox and reading the log.
    BetweenReads,
    /// Everything is read; nothing is written yet.
    BeforeWrites,
}

/// Whether a reconcile writes what it found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Only report what would change.
    DryRun,
    /// Write every voucher that differs.
    Write,
}

/// One voucher: what the log implies and how Redis compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoucherReconciled {
    pub voucher_id: VoucherId,
    /// Units for sale in all, as the log has them.
    pub stock: u64,
    pub outcome: RestoreOutcome,
}

impl VoucherReconciled {
    /// Whether Redis differed (and, unless a dry run, was rewritten).
    pub fn changed(&self) -> bool {
        matches!(self.outcome.action, RestoreAction::Corrected | RestoreAction::Restored)
    }

    /// The action, as the report prints it.
    pub fn action(&self) -> &'static str {
        match self.outcome.action {
            RestoreAction::Unchanged => "unchanged",
            RestoreAction::Corrected => "corrected",
            RestoreAction::Restored => "restored (was missing)",
            RestoreAction::Expired => "expired (the sale is over; not restored)",
        }
    }
}

/// What a reconcile read and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Records read from the sales and orders topics.
    pub log_records: u64,
    /// Records that are not events (skipped).
    pub undecodable: u64,
    /// Admitted orders read from the outbox.
    pub outbox_records: usize,
    pub vouchers: Vec<VoucherReconciled>,
}

impl ReconcileReport {
    /// Vouchers that differed from the log (and were written, unless a dry run).
    pub fn changed(&self) -> usize {
        self.vouchers.iter().filter(|v| v.changed()).count()
    }
}

/// Rebuilds (or, in a dry run, compares) the admission state of every
/// voucher the log defines, calling `at` between the steps.
pub async fn reconcile(
    gate: &Gate,
    kafka: &KafkaConfig,
    draw: &DrawConfig,
    mode: Mode,
    mut at: impl AsyncFnMut(Step),
) -> Result<ReconcileReport, AnalyticsError> {
    let mut report = ReconcileReport::default();
    // The outbox first: an entry leaves it only once the log has it.
    let outbox = gate.outbox_records(MAX_OUTBOX).await?;
    report.outbox_records = outbox.len();
    at(Step::BetweenReads).await;
    let mut ledger = read_log(kafka, &mut report).await?;
    for record in &outbox {
        if let Ok(envelope) = Envelope::decode(record) {
            ledger.apply(&envelope);
        }
    }
    at(Step::BeforeWrites).await;
    let mode = match mode {
        Mode::DryRun => RestoreMode::Check,
        Mode::Write => RestoreMode::Write,
    };
    for mut state in ledger.admissions() {
        // A draw, or a waiting room without a beacon, lost before its
        // reveal keeps its seed if the log has it sealed and the key opens
        // it.
        if let Some(key) = draw.seal_key() {
            state.draw_history.open_sealed_seed(state.voucher_id, key);
            state.room_history.open_sealed_seed(state.voucher_id, key);
        }
        let outcome = gate.restore(&state, mode).await?;
        report.vouchers.push(VoucherReconciled { voucher_id: state.voucher_id, stock: state.stock, outcome });
    }
    Ok(report)
}

/// Folds the sales and orders topics, to the watermarks present now.
async fn read_log(kafka: &KafkaConfig, report: &mut ReconcileReport) -> Result<Ledger, AnalyticsError> {
    let topics = kafka.topics();
    let brokers = kafka.brokers.clone();
    let (ledger, read, undecodable) = tokio::task::spawn_blocking(move || {
        let mut ledger = Ledger::default();
        let mut undecodable = 0u64;
        let read = seckill_kafka::read_to_end(&brokers, &[&topics.sales, &topics.orders], |message| {
            match Envelope::decode(message.payload().unwrap_or_default()) {
                Ok(envelope) => ledger.apply(&envelope),
                Err(_) => undecodable += 1,
            }
        });
        (ledger, read, undecodable)
    })
    .await
    .map_err(|e| AnalyticsError::Task(e.to_string()))?;
    report.log_records = read?;
    report.undecodable = undecodable;
    Ok(ledger)
}
