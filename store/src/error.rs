//! Store errors.

/// A store operation that did not complete; nothing of it was applied.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store backend failed: {0}")]
    Backend(String),
    #[error("stored data is unreadable: {0}")]
    Corrupt(String),
    /// A processor with a later fencing epoch has written the voucher: this
    /// one lost its partition (a rebalance it has not seen yet) and must
    /// write nothing more for it (see `StockStore::take_epoch`).
    #[error("voucher {voucher}: fenced by epoch {theirs} (this processor's is {mine})")]
    Fenced { voucher: seckill_core::VoucherId, mine: i64, theirs: i64 },
}

impl From<redb::Error> for StoreError {
    fn from(error: redb::Error) -> Self {
        Self::Backend(error.to_string())
    }
}

macro_rules! from_redb {
    ($($error:ty),*) => {$(
        impl From<$error> for StoreError {
            fn from(error: $error) -> Self {
                Self::from(redb::Error::from(error))
            }
        }
    )*};
}

from_redb!(redb::DatabaseError, redb::TransactionError, redb::TableError, redb::StorageError, redb::CommitError);

impl From<serde_json::Error> for StoreError {
    fn from(error: serde_json::Error) -> Self {
        Self::Corrupt(error.to_string())
    }
}

impl From<tokio::task::JoinError> for StoreError {
    fn from(error: tokio::task::JoinError) -> Self {
        Self::Backend(format!("store task failed: {error}"))
    }
}
