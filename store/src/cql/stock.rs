//! Persistent stock in ScyllaDB.
//!
//! A processor batch is split by voucher. For each voucher: read its
//! partition (level, version, the voucher's settings, window and fence
//! rows, and the rows of the orders and updates the batch mentions), run
//! the shared stock rules on that snapshot, then write
//! everything they changed as conditional batches on the partition, the
//! first `IF version = <the version read>`, each bumping the version and the
//! next conditioned on it; each batch is bounded in rows and bytes and
//! carries whole decisions with the level after them (see `super::chunks`).
//! If another processor wrote the partition in between (a rebalance gave it
//! the same Kafka partition for a moment), a batch is refused and the
//! voucher is read and decided again, now finding the other's decisions and
//! any of its own batches that committed: no decrement is applied twice or
//! lost.
//!
//! Fencing: a processor takes an epoch after each partition assignment
//! (`take_epoch`, one conditional update of `processor_epochs`) and writes
//! it into the fence row of every voucher partition it writes, inside the
//! same conditional batch. A processor that reads a fence row later than
//! its own epoch is refused (`StoreError::Fenced`): another took the
//! voucher's Kafka partition after it, and the version check makes the
//! read and the write one step, so a zombie (cut off from Kafka past its
//! session, still working) cannot decide against the stock once the new
//! owner has written the voucher, nor its late batch undo a decision.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::future::try_join_all;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use seckill_core::decision::{OrderRecord, SaleWindow, StockLevel};
use seckill_core::event::{CancelReason, Event, OrderRequest};
use seckill_core::{OrderId, UserId, VoucherId};
use uuid::Uuid;

use super::chunks::{into_chunks, write_in_sequence, BatchLimits, Chunk, FirstDecisions, RowWrite, Step};
use super::{
    expected_version, group_by_voucher, refused_too_often, same_partition, unreadable, user_row_id, was_applied,
    write_conditional_batch, FENCE, MAX_ATTEMPTS, ORDER, UPDATE, USER, VOUCHER,
};
use crate::stock::{DueHold, HoldCursor, PendingRefund, MAX_EXPIRED_PAGE, MAX_PENDING_REFUNDS_PAGE};
use crate::stock_rules::{apply_input, Outcomes, StockState};
use crate::{Decided, StockInput, StockStore, StoreError};

/// The holds table's single partition.
const HOLD_SHARD: i32 = 0;
/// Estimated bytes of the level statement's values (three numbers, the
/// versions and the partition key, with the per-cell overhead).
const LEVEL_BYTES: usize = 256;

/// The processor's stock in a CQL keyspace.
#[derive(Debug, Clone)]
pub struct CqlStockStore {
    session: Arc<Session>,
    statements: Arc<Statements>,
    limits: BatchLimits,
    /// The fencing epoch this store writes under (0: none taken, nothing
    /// fenced: tools and tests that open the store).
    epoch: Arc<AtomicI64>,
}

#[derive(Debug)]
struct Statements {
    read_level: PreparedStatement,
    read_row: PreparedStatement,
    init_version: PreparedStatement,
    write_level: PreparedStatement,
    write_row: PreparedStatement,
    put_hold: PreparedStatement,
    delete_hold: PreparedStatement,
    due_holds: PreparedStatement,
    /// Due holds at one deadline after one order: a page's continuation.
    due_holds_at: PreparedStatement,
    /// Due holds after one deadline.
    due_holds_after: PreparedStatement,
    put_pending_refund: PreparedStatement,
    due_pending_refunds: PreparedStatement,
    delete_pending_refund: PreparedStatement,
    read_epoch: PreparedStatement,
    init_epoch: PreparedStatement,
    bump_epoch: PreparedStatement,
}

/// The `processor_epochs` row the processors share.
const EPOCHS: &str = "processor";

impl CqlStockStore {
    /// Prepares the statements on `session` (connected to a migrated
    /// keyspace, see [`super::connect`]), with the default batch limits.
    pub async fn new(session: Arc<Session>) -> Result<Self, StoreError> {
        let prepare = |cql: &'static str| {
            let session = Arc::clone(&session);
            async move { session.prepare(cql).await }
        };
        let statements = Statements {
            read_level: prepare(
                "SELECT stock, remaining, hold_seconds, version FROM stock_ledger WHERE voucher_id = ? LIMIT 1",
            )
            .await?,
            read_row: prepare("SELECT outcome FROM stock_ledger WHERE voucher_id = ? AND kind = ? AND id = ?").await?,
            init_version: prepare("INSERT INTO stock_ledger (voucher_id, version) VALUES (?, 0) IF NOT EXISTS").await?,
            write_level: prepare(
                "UPDATE stock_ledger SET stock = ?, remaining = ?, hold_seconds = ?, version = ? \
                 WHERE voucher_id = ? IF version = ?",
            )
            .await?,
            write_row: prepare("INSERT INTO stock_ledger (voucher_id, kind, id, outcome) VALUES (?, ?, ?, ?)").await?,
            put_hold: prepare("INSERT INTO holds (shard, deadline, order_id, voucher_id) VALUES (?, ?, ?, ?)").await?,
            delete_hold: prepare("DELETE FROM holds WHERE shard = ? AND deadline = ? AND order_id = ?").await?,
            due_holds: prepare(
                "SELECT deadline, order_id, voucher_id FROM holds WHERE shard = ? AND deadline <= ? LIMIT ?",
            )
            .await?,
            put_pending_refund: prepare(
                "INSERT INTO pending_refunds (shard, next_check, refund_id, body) VALUES (?, ?, ?, ?)",
            )
            .await?,
            due_pending_refunds: prepare(
                "SELECT body FROM pending_refunds WHERE shard = ? AND next_check <= ? LIMIT ?",
            )
            .await?,
            delete_pending_refund: prepare(
                "DELETE FROM pending_refunds WHERE shard = ? AND next_check = ? AND refund_id = ?",
            )
            .await?,
            due_holds_at: prepare(
                "SELECT deadline, order_id, voucher_id FROM holds WHERE shard = ? AND deadline = ? AND order_id > ? \
                 LIMIT ?",
            )
            .await?,
            due_holds_after: prepare(
                "SELECT deadline, order_id, voucher_id FROM holds WHERE shard = ? AND deadline > ? AND deadline <= ? \
                 LIMIT ?",
            )
            .await?,
            read_epoch: prepare("SELECT epoch FROM processor_epochs WHERE name = ?").await?,
            init_epoch: prepare("INSERT INTO processor_epochs (name, epoch) VALUES (?, 1) IF NOT EXISTS").await?,
            bump_epoch: prepare("UPDATE processor_epochs SET epoch = ? WHERE name = ? IF epoch = ?").await?,
        };
        Ok(Self {
            session,
            statements: Arc::new(statements),
            limits: BatchLimits::default(),
            epoch: Arc::new(AtomicI64::new(0)),
        })
    }

    /// Bounds each conditional batch by `limits` instead of the defaults.
    pub fn with_batch_limits(self, limits: BatchLimits) -> Self {
        Self { limits, ..self }
    }

    /// Reads a voucher's level and version (None, None: no partition).
    async fn read_level(&self, voucher: VoucherId) -> Result<(Option<StockLevel>, Option<i64>), StoreError> {
        type Level = (Option<i64>, Option<i64>, Option<i32>, Option<i64>);
        let rows = self
            .session
            .execute_unpaged(&self.statements.read_level, (voucher.as_uuid(),))
            .await?
            .into_rows_result()
            .map_err(unreadable)?;
        let Some((stock, remaining, hold_seconds, version)) = rows.maybe_first_row::<Level>().map_err(unreadable)?
        else {
            return Ok((None, None));
        };
        let level = match (stock, remaining) {
            (Some(stock), Some(remaining)) => Some(StockLevel {
                stock: u64::try_from(stock).map_err(unreadable)?,
                remaining: u64::try_from(remaining).map_err(unreadable)?,
                hold_seconds: u32::try_from(hold_seconds.unwrap_or_default()).map_err(unreadable)?,
                per_user_limit: None,
            }),
            _ => None,
        };
        Ok((level, version))
    }

    /// The holds `statement` selects with `values`: (deadline, order,
    /// voucher).
    async fn holds(
        &self,
        statement: &PreparedStatement,
        values: impl scylla::serialize::row::SerializeRow,
    ) -> Result<Vec<(DateTime<Utc>, Uuid, Uuid)>, StoreError> {
        let rows = self.session.execute_unpaged(statement, values).await?.into_rows_result().map_err(unreadable)?;
        rows.rows::<(DateTime<Utc>, Uuid, Uuid)>().map_err(unreadable)?.collect::<Result<_, _>>().map_err(unreadable)
    }

    /// Reads one row: Some(its blob, if any) when it exists.
    async fn read_row(&self, voucher: VoucherId, kind: &str, id: Uuid) -> Result<Option<Option<Vec<u8>>>, StoreError> {
        let rows = self
            .session
            .execute_unpaged(&self.statements.read_row, (voucher.as_uuid(), kind, id))
            .await?
            .into_rows_result()
            .map_err(unreadable)?;
        let Some((outcome,)) = rows.maybe_first_row::<(Option<Vec<u8>>,)>().map_err(unreadable)? else {
            return Ok(None);
        };
        Ok(Some(outcome))
    }

    /// Reads the rows with these keys; returns those that exist.
    async fn read_rows(
        &self,
        voucher: VoucherId,
        keys: impl IntoIterator<Item = (&'static str, Uuid)>,
    ) -> Result<HashMap<(&'static str, Uuid), Option<Vec<u8>>>, StoreError> {
        let keys: Vec<(&'static str, Uuid)> = keys.into_iter().collect::<HashSet<_>>().into_iter().collect();
        let found = try_join_all(keys.iter().map(|(kind, id)| self.read_row(voucher, kind, *id))).await?;
        Ok(keys.into_iter().zip(found).filter_map(|(key, row)| row.map(|blob| (key, blob))).collect())
    }

    /// Reads what `inputs` (all of `voucher`) need: the level and settings,
    /// the rows of the orders and updates they mention, then the units held
    /// by every user those orders belong to.
    async fn snapshot(&self, voucher: VoucherId, inputs: &[StockInput]) -> Result<Staged, StoreError> {
        let (mut level, version) = self.read_level(voucher).await?;
        let wanted = inputs.iter().filter_map(|input| match input {
            StockInput::Voucher(_) => None,
            StockInput::Update { update_id, .. } => Some((UPDATE, *update_id)),
            StockInput::Order(order) | StockInput::OrderAsDecided { order, .. } => {
                Some((ORDER, order.order_id.as_uuid()))
            }
            StockInput::Cancel(request) | StockInput::Confirm(request) => Some((ORDER, request.order_id.as_uuid())),
            StockInput::Pay(payment) => Some((ORDER, payment.order_id.as_uuid())),
            StockInput::Checkout(opened) => Some((ORDER, opened.order_id.as_uuid())),
        });
        let keyed = inputs
            .iter()
            .filter_map(StockInput::order)
            .filter_map(|order| order.idempotency_key.as_ref().map(|key| (KEYED, keyed_row_id(&order.user_id, key))));
        let own = [(VOUCHER, voucher.as_uuid()), (FENCE, voucher.as_uuid()), (WINDOW, voucher.as_uuid())];
        let mut rows = self.read_rows(voucher, wanted.chain(keyed).chain(own)).await?;
        let fence = fence_epoch(rows.remove(&(FENCE, voucher.as_uuid())).flatten())?;
        let settings = match rows.remove(&(VOUCHER, voucher.as_uuid())).flatten() {
            Some(blob) => Some(serde_json::from_slice::<Settings>(&blob).map_err(unreadable)?),
            None => None,
        };
        let window = match rows.remove(&(WINDOW, voucher.as_uuid())).flatten() {
            Some(blob) => Some(serde_json::from_slice::<SaleWindow>(&blob).map_err(unreadable)?),
            None => None,
        };
        if let (Some(level), Some(settings)) = (level.as_mut(), &settings) {
            level.per_user_limit = Some(settings.per_user_limit);
        }

        let mut users: HashMap<Uuid, UserId> = HashMap::new();
        for order in inputs.iter().filter_map(StockInput::order) {
            users.insert(user_row_id(&order.user_id), order.user_id.clone());
        }
        for ((kind, _), blob) in &rows {
            let (ORDER, Some(blob)) = (*kind, blob) else { continue };
            let record = OrderRecord::decode(blob).map_err(StoreError::Corrupt)?;
            if let Some(order) = record.latest().and_then(|outcome| outcome.event.order()) {
                users.insert(user_row_id(&order.user_id), order.user_id.clone());
            }
        }
        let held_rows = self.read_rows(voucher, users.keys().map(|id| (USER, *id))).await?;
        let mut held = HashMap::with_capacity(users.len());
        for (id, user) in users {
            let units = match held_rows.get(&(USER, id)).cloned().flatten() {
                Some(blob) => {
                    let row: HeldRow = serde_json::from_slice(&blob).map_err(unreadable)?;
                    if row.user_id != user {
                        return Err(StoreError::Corrupt(format!("held-units row {id} is {}, not {user}", row.user_id)));
                    }
                    row.units
                }
                None => 0,
            };
            held.insert(user, units);
        }
        Ok(Staged {
            voucher,
            level,
            settings: settings.map(|s| s.per_user_limit),
            window,
            version,
            fence,
            rows,
            held,
            steps: Vec::new(),
            step_rows: Vec::new(),
            level_written: false,
            holds: Vec::new(),
        })
    }

    /// Decides `inputs` (all of `voucher`, in order) and writes the result
    /// with bounded conditional batches, retrying on a concurrent writer.
    async fn apply_voucher(&self, voucher: VoucherId, inputs: Vec<StockInput>) -> Result<Vec<Decided>, StoreError> {
        let mut first = FirstDecisions::new(inputs.len());
        for _ in 0..MAX_ATTEMPTS {
            let mut staged = self.snapshot(voucher, &inputs).await?;
            let mine = self.epoch.load(Ordering::Acquire);
            if mine > 0 && staged.fence > mine {
                return Err(StoreError::Fenced { voucher, mine, theirs: staged.fence });
            }
            let mut outcomes = Outcomes::default();
            // Where each input's outcomes end in `decided`.
            let mut ends = Vec::with_capacity(inputs.len());
            for input in inputs.iter().cloned() {
                apply_input(&mut staged, input, &mut outcomes)?;
                staged.end_step();
                ends.push(outcomes.len());
            }
            // The first write under a new epoch claims the voucher, a
            // replay's too (then it is the only row written): from then on
            // the writer before is fenced.
            if mine > staged.fence {
                let claim = ((FENCE, voucher.as_uuid()), Some(mine.to_be_bytes().to_vec()));
                staged.steps.first_mut().expect("a voucher's group has an input").rows.push(claim);
            }
            let decided = outcomes.into_vec();
            let of_input = |index: usize| {
                let start = if index == 0 { 0 } else { ends[index - 1] };
                decided[start..ends[index]].to_vec()
            };
            if staged.steps.iter().all(|step| step.rows.is_empty()) && !staged.level_written {
                return Ok(once_each(first.merge(of_input).into_iter().flatten()));
            }
            // A hold recorded for a decision that then loses the race is
            // harmless: the sweeper skips (and deletes) holds of orders not
            // created, or created with another deadline.
            for (deadline, order, keep) in &staged.holds {
                if *keep {
                    self.session
                        .execute_unpaged(
                            &self.statements.put_hold,
                            (HOLD_SHARD, deadline, order.as_uuid(), voucher.as_uuid()),
                        )
                        .await?;
                }
            }
            let committed = self.write(voucher, staged.version, std::mem::take(&mut staged.steps)).await?;
            first.keep(committed, of_input);
            if committed < inputs.len() {
                tracing::debug!(%voucher, "Another writer changed the voucher; deciding again.");
                continue;
            }
            for (deadline, order, keep) in &staged.holds {
                if !*keep {
                    self.session
                        .execute_unpaged(&self.statements.delete_hold, (HOLD_SHARD, deadline, order.as_uuid()))
                        .await?;
                }
            }
            return Ok(once_each(first.merge(of_input).into_iter().flatten()));
        }
        Err(refused_too_often(voucher))
    }

    /// Writes `steps` as bounded conditional batches in sequence, each
    /// conditioned on the version the previous one wrote. Returns how many
    /// steps committed: fewer than all when another writer got there first
    /// (the batches before it stay: they hold whole decisions and the level
    /// after them, which the next attempt reads).
    async fn write(&self, voucher: VoucherId, read: Option<i64>, steps: Vec<Step<Level>>) -> Result<usize, StoreError> {
        let expected = expected_version(&self.session, &self.statements.init_version, voucher, read).await?;
        let chunks = into_chunks(steps, self.limits, |_| LEVEL_BYTES);
        write_in_sequence(voucher, expected, chunks, |expected, chunk| self.write_chunk(voucher, expected, chunk)).await
    }

    /// One conditional batch: the level after the chunk's decisions and
    /// their rows, `IF version = expected`; false when refused.
    async fn write_chunk(&self, voucher: VoucherId, expected: i64, chunk: Chunk<Level>) -> Result<bool, StoreError> {
        let level = chunk.statics.as_ref();
        let as_i64 = |n: u64| i64::try_from(n).map_err(unreadable);
        let statics = (
            level.map(|l| as_i64(l.stock)).transpose()?,
            level.map(|l| as_i64(l.remaining)).transpose()?,
            level.map(|l| i32::try_from(l.hold_seconds).map_err(unreadable)).transpose()?,
            expected + 1,
            voucher.as_uuid(),
            expected,
        );
        let statements = &self.statements;
        write_conditional_batch(
            &self.session,
            &statements.write_level,
            statics,
            &statements.write_row,
            voucher,
            chunk.rows,
        )
        .await
    }
}

/// A voucher's level as a batch writes it (None: the voucher is unknown).
type Level = Option<StockLevel>;

/// The voucher's settings row: what the static level columns do not hold.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Settings {
    per_user_limit: u32,
}

/// Row kind: the voucher's [`SaleWindow`] as JSON (id: the voucher id),
/// the end and pauses its orders are judged by.
const WINDOW: &str = "window";

/// Row kind: the order a user's `Idempotency-Key` first came with (id:
/// [`keyed_row_id`]); a later order under the key is a duplicate.
const KEYED: &str = "keyed";

/// Namespace of the ids of keyed rows.
const KEYED_ROWS: Uuid = Uuid::from_u128(0x6b1e_57a4_90d3_4c2e_8f15_2d7a_c3e9_04b8);

/// The row id of `user`'s `key`: name-based; the row stores both, so a
/// collision would be detected, not mixed.
fn keyed_row_id(user: &UserId, key: &str) -> Uuid {
    Uuid::new_v5(&KEYED_ROWS, format!("{user}|{key}").as_bytes())
}

/// A keyed row.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct KeyedRow {
    user_id: UserId,
    key: String,
    order_id: OrderId,
}

/// A user's held-units row.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct HeldRow {
    user_id: UserId,
    units: u64,
}

/// One voucher's partition as read, plus what the rules changed.
struct Staged {
    voucher: VoucherId,
    level: Level,
    /// The per-user limit in the settings row, as read or written.
    settings: Option<u32>,
    /// The window row as read or written.
    window: Option<SaleWindow>,
    version: Option<i64>,
    /// The epoch of the fence row as read (0: none).
    fence: i64,
    /// (kind, id) → the row's blob, for order and update rows that exist.
    rows: HashMap<(&'static str, Uuid), Option<Vec<u8>>>,
    /// Units held per user, for every user the snapshot read.
    held: HashMap<UserId, u64>,
    /// What each decided input wrote, in order, with the level after it.
    steps: Vec<Step<Level>>,
    /// The rows the input being decided has written so far.
    step_rows: Vec<RowWrite>,
    level_written: bool,
    /// (deadline, order, keep).
    holds: Vec<(DateTime<Utc>, OrderId, bool)>,
}

impl Staged {
    fn check(&self, voucher: VoucherId) -> Result<(), StoreError> {
        same_partition(voucher, self.voucher)
    }

    /// Closes the step of the input just decided.
    fn end_step(&mut self) {
        self.steps.push(Step { rows: std::mem::take(&mut self.step_rows), statics: self.level });
    }
}

impl StockState for Staged {
    fn level(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError> {
        self.check(voucher)?;
        Ok(self.level)
    }

    fn put_level(&mut self, voucher: VoucherId, level: &StockLevel) -> Result<(), StoreError> {
        self.check(voucher)?;
        if let Some(limit) = level.per_user_limit.filter(|limit| self.settings != Some(*limit)) {
            let row = serde_json::to_vec(&Settings { per_user_limit: limit })?;
            self.step_rows.push(((VOUCHER, voucher.as_uuid()), Some(row)));
            self.settings = Some(limit);
        }
        self.level = Some(*level);
        self.level_written = true;
        Ok(())
    }

    fn window(&self, voucher: VoucherId) -> Result<Option<SaleWindow>, StoreError> {
        self.check(voucher)?;
        Ok(self.window.clone())
    }

    fn put_window(&mut self, voucher: VoucherId, window: &SaleWindow) -> Result<(), StoreError> {
        self.check(voucher)?;
        self.step_rows.push(((WINDOW, voucher.as_uuid()), Some(serde_json::to_vec(window)?)));
        self.window = Some(window.clone());
        Ok(())
    }

    fn order(&self, voucher: VoucherId, order: OrderId) -> Result<Option<OrderRecord>, StoreError> {
        self.check(voucher)?;
        match self.rows.get(&(ORDER, order.as_uuid())).cloned().flatten() {
            Some(blob) => OrderRecord::decode(&blob).map(Some).map_err(StoreError::Corrupt),
            None => Ok(None),
        }
    }

    fn put_order(&mut self, voucher: VoucherId, order: OrderId, record: &OrderRecord) -> Result<(), StoreError> {
        self.check(voucher)?;
        let blob = record.encode();
        self.rows.insert((ORDER, order.as_uuid()), Some(blob.clone()));
        self.step_rows.push(((ORDER, order.as_uuid()), Some(blob)));
        Ok(())
    }

    fn held(&self, voucher: VoucherId, user: &UserId) -> Result<u64, StoreError> {
        self.check(voucher)?;
        self.held
            .get(user)
            .copied()
            .ok_or_else(|| StoreError::Backend(format!("the units of user {user} were not read for voucher {voucher}")))
    }

    fn put_held(&mut self, voucher: VoucherId, user: &UserId, units: u64) -> Result<(), StoreError> {
        self.check(voucher)?;
        let row = serde_json::to_vec(&HeldRow { user_id: user.clone(), units })?;
        self.step_rows.push(((USER, user_row_id(user)), Some(row)));
        self.held.insert(user.clone(), units);
        Ok(())
    }

    fn keyed_order(&self, voucher: VoucherId, user: &UserId, key: &str) -> Result<Option<OrderId>, StoreError> {
        self.check(voucher)?;
        let Some(blob) = self.rows.get(&(KEYED, keyed_row_id(user, key))).cloned().flatten() else { return Ok(None) };
        let row: KeyedRow = serde_json::from_slice(&blob).map_err(unreadable)?;
        if row.user_id != *user || row.key != key {
            return Err(StoreError::Corrupt(format!("keyed row of {user}'s key is {}'s {}", row.user_id, row.key)));
        }
        Ok(Some(row.order_id))
    }

    fn put_keyed_order(
        &mut self,
        voucher: VoucherId,
        user: &UserId,
        key: &str,
        order: OrderId,
    ) -> Result<(), StoreError> {
        self.check(voucher)?;
        let blob = serde_json::to_vec(&KeyedRow { user_id: user.clone(), key: key.to_owned(), order_id: order })?;
        let id = (KEYED, keyed_row_id(user, key));
        self.rows.insert(id, Some(blob.clone()));
        self.step_rows.push((id, Some(blob)));
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

    fn hold(
        &mut self,
        deadline: DateTime<Utc>,
        order: OrderId,
        voucher: VoucherId,
        keep: bool,
    ) -> Result<(), StoreError> {
        self.check(voucher)?;
        self.holds.push((deadline, order, keep));
        Ok(())
    }
}

/// The epoch a fence row holds (0: no row).
fn fence_epoch(blob: Option<Vec<u8>>) -> Result<i64, StoreError> {
    match blob {
        None => Ok(0),
        Some(blob) => blob
            .try_into()
            .map(i64::from_be_bytes)
            .map_err(|blob: Vec<u8>| StoreError::Corrupt(format!("a fence row of {} bytes", blob.len()))),
    }
}

/// `decided` with each outcome once: inputs decided in different attempts
/// may both report an order's history.
fn once_each(decided: impl IntoIterator<Item = Decided>) -> Vec<Decided> {
    let mut seen = HashSet::new();
    decided.into_iter().filter(|decision| seen.insert(decision.outcome.event_id)).collect()
}

/// The voucher an input belongs to: its partition.
fn voucher_of(input: &StockInput) -> VoucherId {
    match input {
        StockInput::Voucher(voucher) => voucher.voucher_id,
        StockInput::Update { update, .. } => update.voucher_id,
        StockInput::Order(order) | StockInput::OrderAsDecided { order, .. } => order.voucher_id,
        StockInput::Cancel(request) | StockInput::Confirm(request) => request.voucher_id,
        StockInput::Pay(payment) => payment.voucher_id,
        StockInput::Checkout(opened) => opened.voucher_id,
    }
}

#[async_trait]
impl StockStore for CqlStockStore {
    async fn apply(&self, batch: Vec<StockInput>) -> Result<Vec<Decided>, StoreError> {
        // Per voucher, in batch order; vouchers are independent partitions.
        // Outcomes of different vouchers need no relative order: each
        // voucher's come together, in the order the vouchers first appeared.
        let groups = group_by_voucher(batch.iter().map(voucher_of));
        let mut inputs: Vec<Option<StockInput>> = batch.into_iter().map(Some).collect();
        let groups: Vec<(VoucherId, Vec<StockInput>)> = groups
            .into_iter()
            .map(|(voucher, indices)| (voucher, indices.into_iter().filter_map(|index| inputs[index].take()).collect()))
            .collect();
        let applied =
            try_join_all(groups.into_iter().map(|(voucher, inputs)| self.apply_voucher(voucher, inputs))).await?;
        Ok(applied.into_iter().flatten().collect())
    }

    async fn stock(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError> {
        let Some(mut level) = self.read_level(voucher).await?.0 else { return Ok(None) };
        if let Some(blob) = self.read_row(voucher, VOUCHER, voucher.as_uuid()).await?.flatten() {
            level.per_user_limit = Some(serde_json::from_slice::<Settings>(&blob).map_err(unreadable)?.per_user_limit);
        }
        Ok(Some(level))
    }

    async fn take_epoch(&self) -> Result<i64, StoreError> {
        let statements = &self.statements;
        for _ in 0..MAX_ATTEMPTS {
            let rows = self
                .session
                .execute_unpaged(&statements.read_epoch, (EPOCHS,))
                .await?
                .into_rows_result()
                .map_err(unreadable)?;
            let taken = match rows.maybe_first_row::<(Option<i64>,)>().map_err(unreadable)?.and_then(|(e,)| e) {
                None => {
                    was_applied(self.session.execute_unpaged(&statements.init_epoch, (EPOCHS,)).await?)?.then_some(1)
                }
                Some(last) => {
                    let bump = (last + 1, EPOCHS, last);
                    was_applied(self.session.execute_unpaged(&statements.bump_epoch, bump).await?)?.then_some(last + 1)
                }
            };
            // Refused: another processor took one meanwhile; take the next.
            if let Some(epoch) = taken {
                self.epoch.store(epoch, Ordering::Release);
                return Ok(epoch);
            }
        }
        Err(StoreError::Backend(format!("no fencing epoch after {MAX_ATTEMPTS} refused attempts")))
    }

    async fn fenced(&self, voucher: VoucherId) -> Result<bool, StoreError> {
        let mine = self.epoch.load(Ordering::Acquire);
        let fence = fence_epoch(self.read_row(voucher, FENCE, voucher.as_uuid()).await?.flatten())?;
        Ok(mine > 0 && fence > mine)
    }

    async fn order_record(&self, voucher: VoucherId, order: OrderId) -> Result<Option<OrderRecord>, StoreError> {
        match self.read_row(voucher, ORDER, order.as_uuid()).await?.flatten() {
            Some(blob) => OrderRecord::decode(&blob).map(Some).map_err(StoreError::Corrupt),
            None => Ok(None),
        }
    }

    async fn put_pending_refund(&self, refund: &PendingRefund) -> Result<(), StoreError> {
        let body = serde_json::to_vec(refund)?;
        let values = (HOLD_SHARD, refund.next_check, refund.refund_id.as_str(), body);
        self.session.execute_unpaged(&self.statements.put_pending_refund, values).await?;
        Ok(())
    }

    async fn due_pending_refunds(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<PendingRefund>, StoreError> {
        let limit = i32::try_from(limit.min(MAX_PENDING_REFUNDS_PAGE)).unwrap_or(i32::MAX);
        let rows = self
            .session
            .execute_unpaged(&self.statements.due_pending_refunds, (HOLD_SHARD, now, limit))
            .await?
            .into_rows_result()
            .map_err(unreadable)?;
        let mut due = Vec::new();
        for row in rows.rows::<(Vec<u8>,)>().map_err(unreadable)? {
            let (body,) = row.map_err(unreadable)?;
            due.push(serde_json::from_slice(&body)?);
        }
        Ok(due)
    }

    async fn delete_pending_refund(&self, refund: &PendingRefund) -> Result<(), StoreError> {
        let values = (HOLD_SHARD, refund.next_check, refund.refund_id.as_str());
        self.session.execute_unpaged(&self.statements.delete_pending_refund, values).await?;
        Ok(())
    }

    async fn expired(
        &self,
        now: DateTime<Utc>,
        after: Option<HoldCursor>,
        limit: usize,
    ) -> Result<Vec<DueHold>, StoreError> {
        let limit = i32::try_from(limit.min(MAX_EXPIRED_PAGE)).unwrap_or(i32::MAX);
        let mut holds = Vec::new();
        match after {
            None => holds.extend(self.holds(&self.statements.due_holds, (HOLD_SHARD, now, limit)).await?),
            Some(cursor) => {
                // The rest of the cursor's deadline, then the deadlines
                // after it: CQL compares clustering columns one at a time.
                let order = cursor.order_id.as_uuid();
                let same = (HOLD_SHARD, cursor.deadline, order, limit);
                holds.extend(self.holds(&self.statements.due_holds_at, same).await?);
                let left = limit - i32::try_from(holds.len()).unwrap_or(limit);
                if left > 0 {
                    let later = (HOLD_SHARD, cursor.deadline, now, left);
                    holds.extend(self.holds(&self.statements.due_holds_after, later).await?);
                }
            }
        }
        let mut due = Vec::new();
        for (deadline, order, voucher) in holds {
            let (order_id, voucher_id) = (OrderId::from(order), VoucherId::from(voucher));
            let record = match self.read_row(voucher_id, ORDER, order).await?.flatten() {
                Some(blob) => Some(OrderRecord::decode(&blob).map_err(StoreError::Corrupt)?),
                None => None,
            };
            let latest = record.as_ref().and_then(OrderRecord::latest);
            // A hold is due only at its order's own deadline. A decision
            // attempt that lost a race to another writer leaves its hold
            // row behind (written before the conditional write), with the
            // earlier deadline of a `decided_at` that never stood: that
            // row is stale, the order's real one is kept by the attempt
            // that won.
            let held = match latest.map(|e| &e.event) {
                Some(Event::OrderCreated(created)) => created.pay_by.is_none_or(|pay_by| pay_by == deadline),
                _ => false,
            };
            if held {
                let request = OrderRequest {
                    order_id,
                    voucher_id,
                    reason: Some(CancelReason::Expired),
                    requested_at: now,
                    settled_checkouts: None,
                };
                due.push(DueHold { request, cursor: HoldCursor { deadline, order_id } });
            } else {
                // Confirmed, cancelled, never created, or another deadline's:
                // the hold is stale.
                self.session.execute_unpaged(&self.statements.delete_hold, (HOLD_SHARD, deadline, order)).await?;
            }
        }
        Ok(due)
    }
}
