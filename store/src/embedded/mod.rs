//! The embedded backend: one redb file per store, owned by one process.
//!
//! redb commits are durable (fsync) when `commit` returns, and a write
//! transaction is atomic, which is all the processor's batch contract needs.
//! A redb file cannot be shared between processes, so the embedded backend
//! runs one processor and one projector; several instances need ScyllaDB.

mod stock;
mod view;

pub use stock::EmbeddedStockStore;
pub use view::EmbeddedViewStore;

use std::path::Path;
use std::sync::Arc;

use redb::{Database, ReadableTable};
use serde::de::DeserializeOwned;

use crate::StoreError;

/// Opens (creating when missing) the redb file at `path`.
fn open_database(path: &Path) -> Result<Arc<Database>, StoreError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| StoreError::Backend(format!("cannot create {}: {e}", parent.display())))?;
    }
    Database::create(path)
        .map(Arc::new)
        .map_err(|e| StoreError::Backend(format!("cannot open {}: {e}", path.display())))
}

/// The JSON value stored under `key`, if any.
fn read_json<T: DeserializeOwned>(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> Result<Option<T>, StoreError> {
    match table.get(key)? {
        Some(raw) => Ok(Some(serde_json::from_slice(raw.value())?)),
        None => Ok(None),
    }
}

/// Runs blocking redb work off the async runtime.
async fn blocking<T, F>(db: &Arc<Database>, work: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
{
    let db = Arc::clone(db);
    tokio::task::spawn_blocking(move || work(&db)).await?
}
