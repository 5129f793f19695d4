//! Rebuilding the order-status view from the log, and comparing two views.
//!
//! The log is the source of truth: applying the sales and orders topics to
//! an empty store must give exactly the view the projector built. A rebuild
//! reads both topics to the watermarks present when it starts (no consumer
//! group), in bounded chunks with backpressure, into the store it is given.
//! `verify` then compares that store with the live one row by row: every
//! order and every voucher the log mentions.

use std::collections::BTreeSet;
use std::sync::Arc;

use seckill_core::config::KafkaConfig;
use seckill_core::{OrderId, VoucherId};
use seckill_store::{OrderView, StoreError, ViewReader, ViewStore, VoucherView};
use serde::Serialize;

use crate::chunks::{counts, read_in_chunks};
use crate::AnalyticsError;

/// What a rebuild read and built.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RebuildReport {
    /// Records read from the sales and orders topics.
    pub records: u64,
    /// Records that are not events (they are dead letters' business).
    pub undecodable: u64,
    /// Every order the log mentions.
    pub orders: BTreeSet<OrderId>,
    /// Every voucher the log mentions.
    pub vouchers: BTreeSet<VoucherId>,
}

/// Applies the sales and orders topics, as they are now, to `target`.
pub async fn rebuild_view(kafka: &KafkaConfig, target: Arc<dyn ViewStore>) -> Result<RebuildReport, AnalyticsError> {
    let topics = kafka.topics();
    let (mut received, reader) =
        read_in_chunks(kafka.brokers.clone(), vec![topics.sales.clone(), topics.orders.clone()]);

    let mut report = RebuildReport::default();
    while let Some(chunk) = received.recv().await {
        for envelope in &chunk {
            report.vouchers.insert(envelope.event.voucher_id());
            if let Some(row) = OrderView::from_event(&envelope.event) {
                report.orders.insert(row.order_id);
            }
        }
        target.apply(chunk).await?;
    }
    let (records, undecodable) = counts(reader).await?;
    report.records = records;
    report.undecodable = undecodable;
    Ok(report)
}

/// One row that differs between the rebuilt and the live view.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    /// `order` or `voucher`.
    pub row: &'static str,
    pub id: String,
    /// The row as the log implies it (None: missing).
    pub rebuilt: Option<serde_json::Value>,
    /// The row as the live view has it (None: missing).
    pub live: Option<serde_json::Value>,
}

/// Compares every order and voucher of `report` between `rebuilt` and
/// `live`; returns each row that differs.
pub async fn verify(
    report: &RebuildReport,
    rebuilt: &dyn ViewReader,
    live: &dyn ViewReader,
) -> Result<Vec<Difference>, AnalyticsError> {
    let mut differences = Vec::new();
    for order in &report.orders {
        let (ours, theirs) = (rebuilt.order(*order).await?, live.order(*order).await?);
        push_if_different(&mut differences, "order", order.to_string(), ours.as_ref(), theirs.as_ref())?;
    }
    for voucher in &report.vouchers {
        let (ours, theirs): (Option<VoucherView>, Option<VoucherView>) =
            (rebuilt.voucher(*voucher).await?, live.voucher(*voucher).await?);
        push_if_different(&mut differences, "voucher", voucher.to_string(), ours.as_ref(), theirs.as_ref())?;
    }
    Ok(differences)
}

fn push_if_different<T: Serialize + PartialEq>(
    differences: &mut Vec<Difference>,
    row: &'static str,
    id: String,
    rebuilt: Option<&T>,
    live: Option<&T>,
) -> Result<(), StoreError> {
    if rebuilt == live {
        return Ok(());
    }
    let json = |value: Option<&T>| value.map(serde_json::to_value).transpose();
    differences.push(Difference { row, id, rebuilt: json(rebuilt)?, live: json(live)? });
    Ok(())
}
