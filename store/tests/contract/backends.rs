//! The backends the suite runs against, each opened afresh per test.

use std::sync::Arc;

use seckill_store::embedded::{EmbeddedStockStore, EmbeddedViewStore};
use seckill_store::{StockStore, ViewStore};

/// A store's storage; `open` may be called again to reopen it (as after a
/// restart) once the previous handle is dropped.
pub trait Backend {
    fn open(&self) -> impl std::future::Future<Output = Arc<dyn StockStore>>;
    fn open_view(&self) -> impl std::future::Future<Output = Arc<dyn ViewStore>>;
}

/// A redb file in a temporary directory.
pub struct Embedded(tempfile::TempDir);

impl Embedded {
    pub async fn new() -> Self {
        Self(tempfile::tempdir().expect("tempdir"))
    }
}

impl Backend for Embedded {
    async fn open(&self) -> Arc<dyn StockStore> {
        Arc::new(EmbeddedStockStore::open(&self.0.path().join("stock.redb")).expect("opens"))
    }

    async fn open_view(&self) -> Arc<dyn ViewStore> {
        Arc::new(EmbeddedViewStore::open(&self.0.path().join("view.redb")).expect("opens"))
    }
}
