//! The ScyllaDB backend (CQL), for deployments with several processor
//! instances: state lives in the cluster, not in a process.
//!
//! Only CQL features that Cassandra 2.1 also has are used (the tests run
//! against it): static columns, lightweight transactions in single-partition
//! batches, clustering ranges, paging; types uuid, bigint, int, timestamp,
//! blob, text.

mod migrate;
mod stock;

pub use migrate::{connect, MIGRATIONS};
pub use stock::CqlStockStore;

use scylla::errors::{ExecutionError, NewSessionError, PrepareError};

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
