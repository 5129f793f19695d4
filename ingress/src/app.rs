//! Building and running the ingress.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus::Registry;
use seckill_core::metrics::{AdmissionMetrics, HttpMetrics};
use seckill_store::ViewReader;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::sold_out::SoldOutMemo;
use seckill_gate::Gate;

/// Most vouchers the sold-out memo remembers at once.
const SOLD_OUT_MEMO_CAPACITY: usize = 10_000;
use crate::routes::{routes, Ingress};
use crate::{IngressConfig, IngressError};

/// What the ingress is given rather than builds: shared with other services
/// in the all-in-one run.
#[derive(Debug)]
pub struct Dependencies {
    /// Where metrics are registered (and served from `/metrics`).
    pub registry: Registry,
    /// Where status queries are answered from.
    pub view: Arc<dyn ViewReader>,
}

/// A built ingress, bound to its address, not yet serving.
#[derive(Debug)]
pub struct App {
    listener: TcpListener,
    ingress: Arc<Ingress>,
    deps: Dependencies,
    http_metrics: HttpMetrics,
    config: IngressConfig,
}

impl App {
    /// Connects to Redis (loading the scripts) and the broker (creating the
    /// topics), and binds the HTTP listener.
    pub async fn build(config: IngressConfig, deps: Dependencies) -> Result<Self, IngressError> {
        let metrics = AdmissionMetrics::register(&deps.registry);
        let gate = Gate::connect(&config.redis).await?.with_metrics(metrics.clone());

        let (topics, producer) = seckill_kafka::connect(&config.kafka).await?;

        if config.admin_token.is_none() {
            tracing::warn!("No admin_token is set: anyone can create vouchers. Set one outside development.");
        }
        let listener = TcpListener::bind(config.http.listen)
            .await
            .map_err(|source| IngressError::Bind { addr: config.http.listen, source })?;
        let http_metrics = HttpMetrics::register(&deps.registry, "ingress");
        let ingress = Arc::new(Ingress {
            gate,
            sold_out: SoldOutMemo::new(Duration::from_millis(config.sold_out_memo_ms), SOLD_OUT_MEMO_CAPACITY),
            producer,
            topics,
            metrics,
            admin_token: config.admin_token.clone(),
            view: Arc::clone(&deps.view),
        });
        Ok(Self { listener, ingress, deps, http_metrics, config })
    }

    /// The address the ingress answers on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// Serves until `shutdown`, lets in-flight requests finish, then flushes
    /// the producer.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), IngressError> {
        let addr = self.local_addr();
        let filter =
            routes(Arc::clone(&self.ingress), self.deps.registry, self.http_metrics, self.config.max_body_bytes);
        tracing::info!(%addr, "Ingress listening.");
        seckill_web::serve(self.listener, filter, shutdown, Duration::from_millis(self.config.drain_ms)).await;
        self.ingress.producer.flush(Duration::from_secs(5));
        tracing::info!("Ingress stopped.");
        Ok(())
    }
}
