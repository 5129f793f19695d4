//! The ScyllaDB backend (CQL), for deployments with several processor
//! instances: state lives in the cluster, not in a process.
//!
//! Only CQL features that Cassandra 2.1 also has are used (the tests run
//! against it): static columns, lightweight transactions in single-partition
//! batches, clustering ranges, paging; types uuid, bigint, int, timestamp,
//! blob, text.

mod migrate;
mod stock;
mod view;

pub use migrate::{connect, MIGRATIONS};
pub use stock::CqlStockStore;
pub use view::CqlViewStore;

use scylla::errors::{ExecutionError, NewSessionError, PrepareError};
use scylla::response::query_result::QueryResult;
use scylla::value::{CqlValue, Row};

use crate::StoreError;

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
