//! Building and running the processor.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus::Registry;
use seckill_core::config::HttpConfig;
use seckill_core::metrics::{
    clock_offset, dependency_up, register_start_time, ConsumerMetrics, HttpMetrics, PaymentMetrics, ProcessorMetrics,
};
use seckill_core::VoucherId;
use seckill_gate::Gate;
use seckill_kafka::{BatchConsumer, ConsumerSettings, DeadLetter};
use seckill_store::StockStore;
use seckill_web::{healthz, instrumented, metrics, recover, ApiError, ServerClock, Serving};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use warp::{Filter, Rejection};

use crate::closer::CheckoutCloser;
use crate::expiry::ExpirySweeper;
use crate::gate_follower::GateFollower;
use crate::pending_refunds::PendingRefunds;
use crate::pipeline::Pipeline;
use crate::reconcile::Reconciler;
use crate::refunds::RefundWorker;
use crate::stock_gauge::StockGauge;
use crate::watch::Watch;
use crate::{ProcessorConfig, ProcessorError};

const ROUTES: &[&str] = &["/api/v1/stock/{id}", "/healthz", "/metrics"];

/// How often the refunds kept pending are looked at for due checks.
const PENDING_REFUNDS_INTERVAL: Duration = Duration::from_secs(1);

/// Runs the processor as its own process until `shutdown`, on the store its
/// configuration names.
pub async fn run_standalone(config: ProcessorConfig, shutdown: CancellationToken) -> Result<(), ProcessorError> {
    let store = seckill_store::open_stock_store(&config.store).await?;
    App::build(config, store, Registry::new()).await?.run(shutdown).await
}

/// A built processor: subscribed and bound, not yet consuming.
#[derive(Debug)]
pub struct App {
    listener: TcpListener,
    consumer: BatchConsumer,
    pipeline: Pipeline,
    /// Gives Redis the units of failed and cancelled orders and the
    /// vouchers' definitions and updates, from the log, in a consumer group
    /// of its own (`<group>-gate`): off the decision path.
    gate_follower: (GateFollower, BatchConsumer),
    sweeper: ExpirySweeper,
    /// With a payment provider: the refund worker and its consumer.
    /// The refund worker, its consumer, and the follower of its kept
    /// pending refunds; None without a payment provider.
    refunds: Option<(RefundWorker, BatchConsumer, PendingRefunds)>,
    /// Dependencies and the gate's stock, for the alert rules.
    watch: Watch,
    registry: Registry,
    http_metrics: HttpMetrics,
    http: HttpConfig,
}

impl App {
    /// Creates the topics, joins the consumer group and binds the HTTP
    /// listener. `store` is the persistent stock.
    pub async fn build(
        config: ProcessorConfig,
        store: Arc<dyn StockStore>,
        registry: Registry,
    ) -> Result<Self, ProcessorError> {
        // The gate follower's releases wait for a replica as the ingress's
        // admissions do (`replica_acks`): its offsets are stored only once
        // what it gave back would survive the master's loss.
        let gate = Gate::connect(&config.redis).await?.with_replica_acks(&config.redis).await?;
        // Decisions are stamped by the platform's clock, Redis's: set it
        // before the first one (seckill_core::clock; the Redis probe keeps
        // it set).
        if let Err(error) = ServerClock.sync(&gate).await {
            tracing::warn!(%error, "Could not read the Redis clock yet; stamping by this host's until it answers.");
        }
        let metrics = ConsumerMetrics::register(&registry, "processor");
        let processor_metrics = ProcessorMetrics::register(&registry, "processor");
        register_start_time(&registry, "processor");
        let (topics, producer) = seckill_kafka::connect(&config.kafka).await?;
        let producer = producer.with_in_flight_gauge(metrics.produce_in_flight.clone());
        let consumer =
            BatchConsumer::subscribe(&ConsumerSettings::new(&config.kafka, &config.consumer), &[&topics.sales])?
                .with_lag_gauge(metrics.lag.clone());
        let payments = seckill_web::payments::provider(&config.payments)?;
        let payment_metrics = PaymentMetrics::register(&registry, "processor");
        let payment_metrics_for_pipeline = payment_metrics.clone();
        let refunds = match &payments {
            None => None,
            Some(provider) => {
                let mut group = config.consumer.clone();
                group.group = format!("{}-refunds", config.consumer.group);
                // Its batches are not rewound (see `RefundWorker`): librdkafka's
                // default poll interval, above a batch's refunds followed for
                // `FOLLOW_IN_BATCH` each, at once.
                let settings = ConsumerSettings {
                    max_poll_interval: std::time::Duration::from_secs(300),
                    ..ConsumerSettings::new(&config.kafka, &group)
                };
                let consumer = BatchConsumer::subscribe(&settings, &[&topics.orders])?;
                let pending = PendingRefunds {
                    store: Arc::clone(&store),
                    provider: provider.clone(),
                    producer: producer.clone(),
                    topics: topics.clone(),
                    metrics: payment_metrics.clone(),
                    interval: PENDING_REFUNDS_INTERVAL,
                };
                let worker = RefundWorker {
                    provider: provider.clone(),
                    store: Arc::clone(&store),
                    dead_letter: DeadLetter::new(producer.clone(), topics.dead_letters.clone(), "refunds"),
                    producer: producer.clone(),
                    topics: topics.clone(),
                    metrics: payment_metrics.clone(),
                    backoff: Duration::from_millis(config.payments.refund_retry_ms),
                    max_backoff: Duration::from_millis(config.payments.refund_retry_max_ms),
                    closer: CheckoutCloser {
                        store: Arc::clone(&store),
                        reconciler: Reconciler { provider: provider.clone(), metrics: payment_metrics.clone() },
                        backoff: Duration::from_millis(config.payments.refund_retry_ms),
                        max_backoff: Duration::from_millis(config.payments.refund_retry_max_ms),
                    },
                };
                Some((worker, consumer, pending))
            }
        };
        let listener = TcpListener::bind(config.http.listen)
            .await
            .map_err(|source| ProcessorError::Bind { addr: config.http.listen, source })?;
        let sweeper = ExpirySweeper {
            store: Arc::clone(&store),
            producer: producer.clone(),
            topics: topics.clone(),
            interval: Duration::from_millis(config.expiry_sweep_ms),
            metrics: processor_metrics.clone(),
            lag: metrics.lag.clone(),
            reconciler: payments.map(|provider| Reconciler { provider, metrics: payment_metrics }),
        };
        let stock = Arc::new(StockGauge::new(processor_metrics.stock_remaining.clone()));
        let watch = Watch {
            gate: gate.clone(),
            producer: producer.clone(),
            stock: Arc::clone(&stock),
            gate_stock: processor_metrics.gate_stock_remaining.clone(),
            dependency_up: dependency_up(&registry, "processor"),
            clock_offset: clock_offset(&registry, "processor"),
        };
        let mut follower_group = config.consumer.clone();
        follower_group.group = format!("{}-gate", config.consumer.group);
        // Its own gauge: its lag is Redis falling behind the log, not
        // decisions falling behind (`seckill_consumer_lag`).
        let follower_consumer = BatchConsumer::subscribe(
            &ConsumerSettings::new(&config.kafka, &follower_group),
            &[&topics.sales, &topics.orders],
        )?
        .with_lag_gauge(processor_metrics.gate_follower_lag.clone());
        let gate_follower = (GateFollower { gate, metrics: metrics.clone() }, follower_consumer);
        let pipeline = Pipeline {
            dead_letter: DeadLetter::new(producer.clone(), topics.dead_letters.clone(), "processor"),
            producer,
            store,
            topics,
            metrics,
            stock,
            payments: payment_metrics_for_pipeline,
        };
        Ok(Self {
            listener,
            consumer,
            pipeline,
            gate_follower,
            sweeper,
            refunds,
            watch,
            http_metrics: HttpMetrics::register(&registry, "processor"),
            http: config.http.clone(),
            registry,
        })
    }

    /// The address of the health, metrics and stock routes.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// Consumes until `shutdown`; the batch in progress completes (or is
    /// left for replay), offsets are committed, the producer flushed.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ProcessorError> {
        let addr = self.local_addr();
        let store = Arc::clone(&self.pipeline.store);
        let stock = warp::path!("api" / "v1" / "stock" / String)
            .and(warp::get())
            .and(warp::any().map(move || Arc::clone(&store)))
            .and_then(get_stock);
        let routes = stock
            .or(healthz())
            .or(metrics(self.registry))
            .recover(recover)
            .with(instrumented(self.http_metrics.clone(), ROUTES));
        tracing::info!(%addr, "Processor consuming.");
        // Aborted when `run` is dropped (a crash in tests), like a process.
        let http = AbortOnDropHandle::new(tokio::spawn(seckill_web::serve(
            self.listener,
            routes,
            shutdown.clone(),
            self.http,
            Serving { drain: Duration::from_secs(2), metrics: Some(self.http_metrics) },
        )));
        let sweeper = AbortOnDropHandle::new(tokio::spawn(self.sweeper.run(shutdown.clone())));
        let (follower, follower_consumer) = self.gate_follower;
        let follower = AbortOnDropHandle::new(tokio::spawn(follower.run(follower_consumer, shutdown.clone())));
        let watch = AbortOnDropHandle::new(tokio::spawn(self.watch.run(shutdown.clone())));
        let refunds = self.refunds.map(|(worker, consumer, pending)| {
            (
                AbortOnDropHandle::new(tokio::spawn(worker.run(consumer, shutdown.clone()))),
                AbortOnDropHandle::new(tokio::spawn(pending.run(shutdown.clone()))),
            )
        });
        self.pipeline.run(self.consumer, shutdown).await;
        if let Some((refunds, pending)) = refunds {
            let _ = refunds.await;
            let _ = pending.await;
        }
        let _ = sweeper.await;
        let _ = follower.await;
        let _ = watch.await;
        let _ = http.await;
        Ok(())
    }
}

/// `GET /api/v1/stock/{voucher_id}`: the persistent stock, for operators and
/// the invariant checks.
async fn get_stock(raw: String, store: Arc<dyn StockStore>) -> Result<warp::reply::Json, Rejection> {
    let voucher: VoucherId = raw.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    match store.stock(voucher).await.map_err(|e| ApiError::internal(&e))? {
        Some(level) => Ok(warp::reply::json(&serde_json::json!({
            "voucher_id": voucher,
            "stock": level.stock,
            "remaining": level.remaining,
        }))),
        None => Err(ApiError::unknown_voucher(voucher).into()),
    }
}
