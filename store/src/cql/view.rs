//! The order-status view in ScyllaDB.
//!
//! Written like the stock (see `super::stock`): events are grouped by
//! voucher; each group is decided by the shared view rules on a snapshot of
//! the voucher's partition and written as bounded conditional batches in
//! sequence, the first `IF version = <read>`, each next one conditioned on
//! the version the previous wrote, each carrying whole events with the
//! record and counters after them (see `super::chunks`); retried on a
//! concurrent writer. The lookup tables
//! (order → voucher, user → orders, the voucher list) are written first and
//! idempotently, so a row is never visible without them.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::try_join_all;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use seckill_core::event::Event;
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use uuid::Uuid;

use super::chunks::{into_chunks, write_in_sequence, BatchLimits, Chunk, FirstDecisions, RowWrite, Step};
use super::{
    expected_version, group_by_voucher, refused_too_often, same_partition, unreadable, write_conditional_batch,
    MAX_ATTEMPTS, ORDER, UPDATE,
};
use crate::view::{OrderView, VoucherCounters, VoucherRecord, VoucherView, MAX_PAGE};
use crate::view_rules::{apply_event, ViewState};
use crate::{StoreError, ViewReader, ViewStore};

/// Estimated bytes of the statics statement's values: a voucher record
/// and its counters as JSON (a few hundred bytes), the versions and the
/// partition key, with the per-cell overhead.
const STATICS_BYTES: usize = 1024;

/// The projector's view in a CQL keyspace.
#[derive(Debug, Clone)]
pub struct CqlViewStore {
    session: Arc<Session>,
    statements: Arc<Statements>,
    limits: BatchLimits,
}

#[derive(Debug)]
struct Statements {
    read_statics: PreparedStatement,
    read_row: PreparedStatement,
    init_version: PreparedStatement,
    write_statics: PreparedStatement,
    write_row: PreparedStatement,
    put_index: PreparedStatement,
    read_index: PreparedStatement,
    put_user_order: PreparedStatement,
    user_orders: PreparedStatement,
    put_listed: PreparedStatement,
    list: PreparedStatement,
    list_before: PreparedStatement,
}

impl CqlViewStore {
    /// Prepares the statements on `session` (connected to a migrated
    /// keyspace, see [`super::connect`]), with the default batch limits.
    pub async fn new(session: Arc<Session>) -> Result<Self, StoreError> {
        let prepare = |cql: &'static str| {
            let session = Arc::clone(&session);
            async move { session.prepare(cql).await }
        };
        let statements = Statements {
            read_statics: prepare("SELECT record, counters, version FROM view_vouchers WHERE voucher_id = ? LIMIT 1")
                .await?,
            read_row: prepare("SELECT row FROM view_vouchers WHERE voucher_id = ? AND kind = ? AND id = ?").await?,
            init_version: prepare("INSERT INTO view_vouchers (voucher_id, version) VALUES (?, 0) IF NOT EXISTS")
                .await?,
            write_statics: prepare(
                "UPDATE view_vouchers SET record = ?, counters = ?, version = ? WHERE voucher_id = ? IF version = ?",
            )
            .await?,
            write_row: prepare("INSERT INTO view_vouchers (voucher_id, kind, id, row) VALUES (?, ?, ?, ?)").await?,
            put_index: prepare("INSERT INTO view_order_index (order_id, voucher_id) VALUES (?, ?)").await?,
            read_index: prepare("SELECT voucher_id FROM view_order_index WHERE order_id = ?").await?,
            put_user_order: prepare("INSERT INTO view_user_orders (user_id, order_id, voucher_id) VALUES (?, ?, ?)")
                .await?,
            user_orders: prepare("SELECT order_id, voucher_id FROM view_user_orders WHERE user_id = ? LIMIT ?").await?,
            put_listed: prepare("INSERT INTO view_voucher_list (shard, voucher_id) VALUES (0, ?)").await?,
            list: prepare("SELECT voucher_id FROM view_voucher_list WHERE shard = 0 LIMIT ?").await?,
            list_before: prepare("SELECT voucher_id FROM view_voucher_list WHERE shard = 0 AND voucher_id < ? LIMIT ?")
                .await?,
        };
        Ok(Self { session, statements: Arc::new(statements), limits: BatchLimits::default() })
    }

    /// Bounds each conditional batch by `limits` instead of the defaults.
    pub fn with_batch_limits(self, limits: BatchLimits) -> Self {
        Self { limits, ..self }
    }

    async fn read_statics(
        &self,
        voucher: VoucherId,
    ) -> Result<(Option<VoucherRecord>, VoucherCounters, Option<i64>), StoreError> {
        type Statics = (Option<Vec<u8>>, Option<Vec<u8>>, Option<i64>);
        let rows = self
            .session
            .execute_unpaged(&self.statements.read_statics, (voucher.as_uuid(),))
            .await?
            .into_rows_result()
            .map_err(unreadable)?;
        let Some((record, counters, version)) = rows.maybe_first_row::<Statics>().map_err(unreadable)? else {
            return Ok((None, VoucherCounters::default(), None));
        };
        let record = record.map(|raw| serde_json::from_slice(&raw)).transpose()?;
        let counters = counters.map(|raw| serde_json::from_slice(&raw)).transpose()?.unwrap_or_default();
        Ok((record, counters, version))
    }

    /// One row: Some(its JSON, if any) when it exists.
    async fn read_row(&self, voucher: VoucherId, kind: &str, id: Uuid) -> Result<Option<Option<Vec<u8>>>, StoreError> {
        let rows = self
            .session
            .execute_unpaged(&self.statements.read_row, (voucher.as_uuid(), kind, id))
            .await?
            .into_rows_result()
            .map_err(unreadable)?;
        Ok(rows.maybe_first_row::<(Option<Vec<u8>>,)>().map_err(unreadable)?.map(|(row,)| row))
    }

    async fn read_order(&self, voucher: VoucherId, order: OrderId) -> Result<Option<OrderView>, StoreError> {
        match self.read_row(voucher, ORDER, order.as_uuid()).await?.flatten() {
            Some(raw) => Ok(Some(serde_json::from_slice(&raw)?)),
            None => Ok(None),
        }
    }

    async fn snapshot(&self, voucher: VoucherId, events: &[&Envelope]) -> Result<StagedView, StoreError> {
        let (record, counters, version) = self.read_statics(voucher).await?;
        let wanted: Vec<(&'static str, Uuid)> = events
            .iter()
            .filter_map(|envelope| match &envelope.event {
                Event::VoucherUpdated(_) => Some((UPDATE, envelope.event_id)),
                event => OrderView::from_event(event).map(|row| (ORDER, row.order_id.as_uuid())),
            })
            .collect();
        let found = try_join_all(wanted.iter().map(|(kind, id)| self.read_row(voucher, kind, *id))).await?;
        let mut rows = HashMap::new();
        for (key, row) in wanted.into_iter().zip(found) {
            if let Some(row) = row {
                let parsed = row.map(|raw| serde_json::from_slice::<OrderView>(&raw)).transpose()?;
                rows.insert(key, parsed);
            }
        }
        Ok(StagedView {
            voucher,
            record,
            counters,
            version,
            rows,
            steps: Vec::new(),
            step_rows: Vec::new(),
            statics_written: false,
            created: false,
            first_seen: Vec::new(),
            written_orders: Vec::new(),
        })
    }

    async fn apply_voucher(&self, voucher: VoucherId, events: Vec<&Envelope>) -> Result<Vec<bool>, StoreError> {
        let mut first = FirstDecisions::new(events.len());
        for _ in 0..MAX_ATTEMPTS {
            let mut staged = self.snapshot(voucher, &events).await?;
            let mut changed = Vec::with_capacity(events.len());
            for envelope in &events {
                changed.push(apply_event(&mut staged, envelope)?);
                staged.end_step();
            }
            if !staged.statics_written && staged.steps.iter().all(|step| step.rows.is_empty()) {
                return Ok(first.merge(|index| changed[index]));
            }
            self.write_lookups(&staged).await?;
            let committed = self.write(voucher, staged.version, std::mem::take(&mut staged.steps)).await?;
            first.keep(committed, |index| changed[index]);
            if committed == events.len() {
                return Ok(first.merge(|index| changed[index]));
            }
            tracing::debug!(%voucher, "Another projector changed the voucher; applying again.");
        }
        Err(refused_too_often(voucher))
    }

    /// The lookup rows of what `staged` is about to write; idempotent.
    async fn write_lookups(&self, staged: &StagedView) -> Result<(), StoreError> {
        let voucher = staged.voucher.as_uuid();
        if staged.created {
            self.session.execute_unpaged(&self.statements.put_listed, (voucher,)).await?;
        }
        for order in &staged.written_orders {
            self.session.execute_unpaged(&self.statements.put_index, (order.as_uuid(), voucher)).await?;
        }
        for (user, order) in &staged.first_seen {
            self.session
                .execute_unpaged(&self.statements.put_user_order, (user.as_str(), order.as_uuid(), voucher))
                .await?;
        }
        Ok(())
    }

    /// Writes `steps` as bounded conditional batches in sequence, each
    /// conditioned on the version the previous one wrote. Returns how many
    /// steps committed: fewer than all when another writer got there first
    /// (the batches before it stay: they hold whole events and the statics
    /// after them, which the next attempt reads).
    async fn write(
        &self,
        voucher: VoucherId,
        read: Option<i64>,
        steps: Vec<Step<Statics>>,
    ) -> Result<usize, StoreError> {
        let expected = expected_version(&self.session, &self.statements.init_version, voucher, read).await?;
        let chunks = into_chunks(steps, self.limits, |_| STATICS_BYTES);
        write_in_sequence(voucher, expected, chunks, |expected, chunk| self.write_chunk(voucher, expected, chunk)).await
    }

    /// One conditional batch: the statics after the chunk's events and their
    /// rows, `IF version = expected`; false when refused.
    async fn write_chunk(&self, voucher: VoucherId, expected: i64, chunk: Chunk<Statics>) -> Result<bool, StoreError> {
        let (record, counters) = &chunk.statics;
        let statics = (
            record.as_ref().map(serde_json::to_vec).transpose()?,
            serde_json::to_vec(counters)?,
            expected + 1,
            voucher.as_uuid(),
            expected,
        );
        let statements = &self.statements;
        write_conditional_batch(
            &self.session,
            &statements.write_statics,
            statics,
            &statements.write_row,
            voucher,
            chunk.rows,
        )
        .await
    }

    async fn voucher_view(&self, voucher: VoucherId) -> Result<Option<VoucherView>, StoreError> {
        let (record, counters, _) = self.read_statics(voucher).await?;
        Ok(record.map(|record| VoucherView::new(&record, counters)))
    }
}

/// A voucher partition's static values as a batch writes them.
type Statics = (Option<VoucherRecord>, VoucherCounters);

/// One voucher's partition as read, plus what the rules changed.
struct StagedView {
    voucher: VoucherId,
    record: Option<VoucherRecord>,
    counters: VoucherCounters,
    version: Option<i64>,
    rows: HashMap<(&'static str, Uuid), Option<OrderView>>,
    /// What each applied event wrote, in order, with the statics after it.
    steps: Vec<Step<Statics>>,
    /// The rows the event being applied has written so far.
    step_rows: Vec<RowWrite>,
    statics_written: bool,
    /// The voucher was defined by this batch (it joins the list).
    created: bool,
    first_seen: Vec<(UserId, OrderId)>,
    written_orders: Vec<OrderId>,
}

impl StagedView {
    fn check(&self, voucher: VoucherId) -> Result<(), StoreError> {
        same_partition(voucher, self.voucher)
    }

    /// Closes the step of the event just applied.
    fn end_step(&mut self) {
        let statics = (self.record.clone(), self.counters);
        self.steps.push(Step { rows: std::mem::take(&mut self.step_rows), statics });
    }
}

impl ViewState for StagedView {
    fn voucher(&self, voucher: VoucherId) -> Result<Option<VoucherRecord>, StoreError> {
        self.check(voucher)?;
        Ok(self.record.clone())
    }

    fn put_voucher(&mut self, record: &VoucherRecord) -> Result<(), StoreError> {
        self.check(record.definition.voucher_id)?;
        self.created |= self.record.is_none();
        self.record = Some(record.clone());
        self.statics_written = true;
        Ok(())
    }

    fn update_applied(&self, voucher: VoucherId, update: Uuid) -> Result<bool, StoreError> {
        self.check(voucher)?;
        Ok(self.rows.contains_key(&(UPDATE, update)))
    }

    fn mark_update(&mut self, voucher: VoucherId, update: Uuid) -> Result<(), StoreError> {
        self.check(voucher)?;
        self.rows.insert((UPDATE, update), None);
        self.step_rows.push(((UPDATE, update), None));
        Ok(())
    }

    fn order(&self, voucher: VoucherId, order: OrderId) -> Result<Option<OrderView>, StoreError> {
        self.check(voucher)?;
        Ok(self.rows.get(&(ORDER, order.as_uuid())).cloned().flatten())
    }

    fn put_order(&mut self, row: &OrderView, first_seen: bool) -> Result<(), StoreError> {
        self.check(row.voucher_id)?;
        self.rows.insert((ORDER, row.order_id.as_uuid()), Some(row.clone()));
        self.step_rows.push(((ORDER, row.order_id.as_uuid()), Some(serde_json::to_vec(row)?)));
        self.written_orders.push(row.order_id);
        if first_seen {
            self.first_seen.push((row.user_id.clone(), row.order_id));
        }
        Ok(())
    }

    fn counters(&self, voucher: VoucherId) -> Result<VoucherCounters, StoreError> {
        self.check(voucher)?;
        Ok(self.counters)
    }

    fn put_counters(&mut self, voucher: VoucherId, counters: &VoucherCounters) -> Result<(), StoreError> {
        self.check(voucher)?;
        self.counters = *counters;
        self.statics_written = true;
        Ok(())
    }
}

#[async_trait]
impl ViewStore for CqlViewStore {
    async fn apply(&self, events: Vec<Envelope>) -> Result<Vec<bool>, StoreError> {
        let groups = group_by_voucher(events.iter().map(|envelope| envelope.event.voucher_id()));
        let events = &events;
        let results = try_join_all(groups.into_iter().map(|(voucher, indices)| async move {
            let group: Vec<&Envelope> = indices.iter().map(|i| &events[*i]).collect();
            let changed = self.apply_voucher(voucher, group).await?;
            Ok::<_, StoreError>(indices.into_iter().zip(changed))
        }))
        .await?;
        let mut changed = vec![false; events.len()];
        for (index, flag) in results.into_iter().flatten() {
            changed[index] = flag;
        }
        Ok(changed)
    }
}

#[async_trait]
impl ViewReader for CqlViewStore {
    async fn order(&self, order: OrderId) -> Result<Option<OrderView>, StoreError> {
        let rows = self
            .session
            .execute_unpaged(&self.statements.read_index, (order.as_uuid(),))
            .await?
            .into_rows_result()
            .map_err(unreadable)?;
        let Some((voucher,)) = rows.maybe_first_row::<(Uuid,)>().map_err(unreadable)? else { return Ok(None) };
        self.read_order(VoucherId::from(voucher), order).await
    }

    async fn user_orders(&self, user: &UserId, limit: usize) -> Result<Vec<OrderView>, StoreError> {
        let limit = i32::try_from(limit.min(MAX_PAGE)).unwrap_or(1);
        let rows = self
            .session
            .execute_unpaged(&self.statements.user_orders, (user.as_str(), limit))
            .await?
            .into_rows_result()
            .map_err(unreadable)?;
        let listed: Vec<(Uuid, Uuid)> =
            rows.rows::<(Uuid, Uuid)>().map_err(unreadable)?.collect::<Result<_, _>>().map_err(unreadable)?;
        let found = try_join_all(
            listed.into_iter().map(|(order, voucher)| self.read_order(VoucherId::from(voucher), OrderId::from(order))),
        )
        .await?;
        Ok(found.into_iter().flatten().collect())
    }

    async fn voucher(&self, voucher: VoucherId) -> Result<Option<VoucherView>, StoreError> {
        self.voucher_view(voucher).await
    }

    async fn vouchers(&self, before: Option<VoucherId>, limit: usize) -> Result<Vec<VoucherView>, StoreError> {
        let limit = i32::try_from(limit.min(MAX_PAGE)).unwrap_or(1);
        let result = match before {
            Some(before) => {
                self.session.execute_unpaged(&self.statements.list_before, (before.as_uuid(), limit)).await?
            }
            None => self.session.execute_unpaged(&self.statements.list, (limit,)).await?,
        };
        let rows = result.into_rows_result().map_err(unreadable)?;
        let ids: Vec<(Uuid,)> =
            rows.rows::<(Uuid,)>().map_err(unreadable)?.collect::<Result<_, _>>().map_err(unreadable)?;
        let found = try_join_all(ids.into_iter().map(|(voucher,)| self.voucher_view(VoucherId::from(voucher)))).await?;
        Ok(found.into_iter().flatten().collect())
    }
}
