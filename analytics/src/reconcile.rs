//! Rebuilding the Redis admission state from the log (`seckill reconcile`).
//!
//! After Redis lost data (or drifted), the gate's stock and per-user counts
//! are recomputed from the sales and orders topics (the history the
//! persistent stock is derived from) plus the orders still in the outbox,
//! then written back voucher by voucher, each in one MULTI transaction.
//!
//! The steps are named ([`Step`]) and the caller is called back between
//! them, so a test can make something happen at an exact point.

use seckill_core::config::KafkaConfig;
use seckill_core::{Envelope, VoucherId};
use seckill_gate::{Gate, Ledger, VoucherAdmission};
use seckill_kafka::Message;

use crate::AnalyticsError;

/// Most outbox records taken into account.
const MAX_OUTBOX: usize = 10_000_000;

/// The points between the steps of a reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Between reading the log and reading the outbox.
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

/// One voucher: what the log implies and how Redis differed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoucherReconciled {
    pub voucher_id: VoucherId,
    /// Units for sale in all, as the log has them.
    pub stock: u64,
    /// Remaining in Redis before (None: not there), and as restored.
    pub remaining_before: Option<u64>,
    pub remaining_after: u64,
    /// Users whose units in Redis differed.
    pub users_fixed: usize,
    /// `unchanged`, `corrected` or `restored (was missing)`.
    pub action: &'static str,
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
        self.vouchers.iter().filter(|v| v.action != "unchanged").count()
    }
}

/// Rebuilds (or, in a dry run, compares) the admission state of every
/// voucher the log defines, calling `at` between the steps.
pub async fn reconcile(
    gate: &Gate,
    kafka: &KafkaConfig,
    mode: Mode,
    mut at: impl AsyncFnMut(Step),
) -> Result<ReconcileReport, AnalyticsError> {
    let mut report = ReconcileReport::default();
    let mut ledger = read_log(kafka, &mut report).await?;
    at(Step::BetweenReads).await;
    let outbox = gate.outbox_records(MAX_OUTBOX).await?;
    report.outbox_records = outbox.len();
    for record in &outbox {
        if let Ok(envelope) = Envelope::decode(record) {
            ledger.apply(&envelope);
        }
    }
    at(Step::BeforeWrites).await;
    for state in ledger.admissions() {
        let reconciled = describe(gate, &state).await?;
        if reconciled.action != "unchanged" && mode == Mode::Write {
            gate.restore(&state).await?;
        }
        report.vouchers.push(reconciled);
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

/// How Redis differs from `state`.
async fn describe(gate: &Gate, state: &VoucherAdmission) -> Result<VoucherReconciled, AnalyticsError> {
    let base = VoucherReconciled {
        voucher_id: state.voucher_id,
        stock: state.stock,
        remaining_before: None,
        remaining_after: state.remaining,
        users_fixed: state.bought.len(),
        action: "restored (was missing)",
    };
    let Some(current) = gate.admission_snapshot(state.voucher_id).await? else {
        return Ok(base);
    };
    let mut users_fixed =
        state.bought.iter().filter(|(user, units)| current.bought.get(user.as_str()) != Some(units)).count();
    users_fixed += current.bought.keys().filter(|user| !state.bought.keys().any(|u| u.as_str() == *user)).count();
    let same = current.stock == state.stock && current.remaining == state.remaining && users_fixed == 0;
    Ok(VoucherReconciled {
        remaining_before: Some(current.remaining),
        users_fixed,
        action: if same { "unchanged" } else { "corrected" },
        ..base
    })
}
