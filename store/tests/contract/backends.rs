//! The backends the suite runs against, each opened afresh per test.

use std::sync::Arc;

use seckill_core::config::{StoreBackend, StoreConfig};
use seckill_cqltest::{FaultProxy, TestCql};
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

/// A keyspace of its own on a real CQL server (the test run's Apache
/// Cassandra 5.0, see `seckill-cqltest`), with the store's default settings.
pub struct Cql {
    config: StoreConfig,
}

impl Cql {
    /// A fresh keyspace on `server`.
    pub fn on(server: &TestCql) -> Self {
        Self::at(server.nodes())
    }

    /// A fresh keyspace on the server behind `proxy`, every request going
    /// through it.
    pub fn through(proxy: &FaultProxy) -> Self {
        Self::at(proxy.nodes())
    }

    fn at(node: String) -> Self {
        Self {
            config: StoreConfig {
                backend: StoreBackend::Scylla,
                nodes: vec![node],
                keyspace: seckill_cqltest::unique_keyspace(),
                ..StoreConfig::default()
            },
        }
    }
}

impl Backend for Cql {
    async fn open(&self) -> Arc<dyn StockStore> {
        seckill_store::open_stock_store(&self.config).await.expect("the CQL stock store opens")
    }

    async fn open_view(&self) -> Arc<dyn ViewStore> {
        seckill_store::open_view_store(&self.config).await.expect("the CQL view store opens")
    }
}
