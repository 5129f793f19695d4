//! The ScyllaDB backend (CQL), for deployments with several processor
//! instances: state lives in the cluster, not in a process.
//!
//! Only CQL features that Cassandra 2.1 also has are used (the tests run
//! against it): static columns, lightweight transactions in single-partition
//! batches, clustering ranges, paging; types uuid, bigint, int, timestamp,
//! blob, text.

mod chunks;
mod migrate;
mod stock;
mod view;

pub use chunks::BatchLimits;
pub use migrate::{connect, MIGRATIONS};
pub use stock::CqlStockStore;
pub use view::CqlViewStore;

use scylla::client::session::Session;
use scylla::errors::{ExecutionError, NewSessionError, PrepareError};
use scylla::response::query_result::QueryResult;
use scylla::serialize::row::{RowSerializationContext, SerializeRow};
use scylla::serialize::writers::RowWriter;
use scylla::serialize::SerializationError;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};
use seckill_core::VoucherId;

use crate::StoreError;

/// Row kinds in a voucher's partition (stock and view alike).
const ORDER: &str = "order";
const UPDATE: &str = "update";
/// Stock only: units held per user (id: [`user_row_id`]) and the voucher's
/// own settings row (id: the voucher id).
const USER: &str = "user";
const VOUCHER: &str = "voucher";
/// Stock only: the fencing epoch of the last processor that wrote the
/// voucher (id: the voucher id; the blob: the epoch, 8 bytes big-endian).
const FENCE: &str = "fence";

/// Namespace of the ids of per-user rows: user ids are text, row ids uuids.
const USER_ROWS: uuid::Uuid = uuid::Uuid::from_u128(0x5eb1_1f0e_8c2d_4a47_9b43_7a1c_0d3e_5f61);

/// The row id of `user`'s row in a voucher partition. A name-based UUID; the
/// row also stores the user id, so a collision would be detected, not mixed.
fn user_row_id(user: &seckill_core::UserId) -> uuid::Uuid {
    uuid::Uuid::new_v5(&USER_ROWS, user.as_str().as_bytes())
}
/// Attempts at one voucher's conditional write before the batch fails (and
/// the consumer retries it whole).
const MAX_ATTEMPTS: usize = 20;

/// The error when a voucher's conditional write lost `MAX_ATTEMPTS` races.
fn refused_too_often(voucher: VoucherId) -> StoreError {
    StoreError::Backend(format!("voucher {voucher}: {MAX_ATTEMPTS} conditional writes refused in a row"))
}

/// A snapshot of `snapshot_of`'s partition answers only for that voucher.
fn same_partition(voucher: VoucherId, snapshot_of: VoucherId) -> Result<(), StoreError> {
    if voucher == snapshot_of {
        Ok(())
    } else {
        Err(StoreError::Backend(format!("voucher {voucher} read from the snapshot of {snapshot_of}")))
    }
}

/// The version a conditional batch on `voucher`'s partition must expect,
/// given the one read (None: the partition has none yet). A condition on a
/// partition that does not exist is false on some servers (Cassandra 2.1),
/// so a missing version is first created as 0 with `init` (an
/// `INSERT … (voucher_id, version) VALUES (?, 0) IF NOT EXISTS`); if another
/// writer got there first, the batch that expects 0 is refused.
async fn expected_version(
    session: &Session,
    init: &PreparedStatement,
    voucher: VoucherId,
    read: Option<i64>,
) -> Result<i64, StoreError> {
    if let Some(version) = read {
        return Ok(version);
    }
    was_applied(session.execute_unpaged(init, (voucher.as_uuid(),)).await?)?;
    Ok(0)
}

/// The positions of `vouchers`, grouped by voucher in the order each
/// voucher first appears: one group per partition, each in batch order.
fn group_by_voucher(vouchers: impl IntoIterator<Item = VoucherId>) -> Vec<(VoucherId, Vec<usize>)> {
    let mut groups: Vec<(VoucherId, Vec<usize>)> = Vec::new();
    for (index, voucher) in vouchers.into_iter().enumerate() {
        match groups.iter_mut().find(|(v, _)| *v == voucher) {
            Some((_, indices)) => indices.push(index),
            None => groups.push((voucher, vec![index])),
        }
    }
    groups
}

impl From<ExecutionError> for StoreError {
    fn from(error: ExecutionError) -> Self {
        Self::Backend(format!("CQL request failed: {error}"))
    }
}

impl From<PrepareError> for StoreError {
    fn from(error: PrepareError) -> Self {
        Self::Backend(format!("CQL prepare failed: {error}"))
    }
}

impl From<NewSessionError> for StoreError {
    fn from(error: NewSessionError) -> Self {
        Self::Backend(format!("cannot connect to the CQL cluster: {error}"))
    }
}

/// Reading a result as rows of the expected types failed.
fn unreadable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("unexpected CQL result: {error}"))
}

/// Whether a conditional statement or batch was applied (its `[applied]`
/// column; a refused one also returns the current values).
fn was_applied(result: QueryResult) -> Result<bool, StoreError> {
    let rows = result.into_rows_result().map_err(unreadable)?;
    let first = rows.maybe_first_row::<Row>().map_err(unreadable)?;
    match first.and_then(|row| row.columns.into_iter().next().flatten()) {
        Some(CqlValue::Boolean(applied)) => Ok(applied),
        other => Err(unreadable(format!("a conditional write answered {other:?}"))),
    }
}

/// Writes one conditional batch on `voucher`'s partition: `write_statics`
/// with `statics` (its values end `IF version = ?`), then `write_row` once
/// per row; false when the condition refused it.
async fn write_conditional_batch<S: SerializeRow>(
    session: &Session,
    write_statics: &PreparedStatement,
    statics: S,
    write_row: &PreparedStatement,
    voucher: VoucherId,
    rows: Vec<chunks::RowWrite>,
) -> Result<bool, StoreError> {
    let mut batch = Batch::new(BatchType::Logged);
    let mut values: Vec<BatchValues<S>> = Vec::with_capacity(rows.len() + 1);
    batch.append_statement(write_statics.clone());
    values.push(BatchValues::Statics(statics));
    for ((kind, id), value) in rows {
        batch.append_statement(write_row.clone());
        values.push(BatchValues::Row(voucher.as_uuid(), kind, id, value));
    }
    was_applied(session.batch(&batch, values).await?)
}

/// One statement's values in a conditional batch: the partition's statics,
/// or a row (voucher, kind, id, value).
enum BatchValues<S> {
    Statics(S),
    Row(uuid::Uuid, &'static str, uuid::Uuid, Option<Vec<u8>>),
}

impl<S: SerializeRow> SerializeRow for BatchValues<S> {
    fn serialize(&self, ctx: &RowSerializationContext<'_>, writer: &mut RowWriter) -> Result<(), SerializationError> {
        match self {
            Self::Statics(statics) => statics.serialize(ctx, writer),
            Self::Row(voucher, kind, id, value) => (voucher, kind, id, value).serialize(ctx, writer),
        }
    }

    fn is_empty(&self) -> bool {
        false
    }
}
