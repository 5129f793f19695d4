//! Building and running the projector.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus::IntGaugeVec;
use prometheus::Registry;
use seckill_core::config::HttpConfig;
use seckill_core::metrics::{dependency_up, register_start_time, ConsumerMetrics, HttpMetrics};
use seckill_kafka::{BatchConsumer, ConsumerSettings, DeadLetter, EventProducer};
use seckill_store::{ViewReader, ViewStore};
use seckill_web::probes::{probe_dependencies, Probe, PROBE_EVERY};
use seckill_web::{healthz, instrumented, metrics, query_routes, recover, Serving};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use warp::Filter;

use crate::pipeline::Projection;
use crate::{ProjectorConfig, ProjectorError};

const ROUTES: &[&str] =
    &["/api/v1/orders/{id}", "/api/v1/users/{id}/orders", "/api/v1/vouchers/{id}", "/healthz", "/metrics"];

/// Runs the projector as its own process until `shutdown`, on the store its
/// configuration names.
pub async fn run_standalone(config: ProjectorConfig, shutdown: CancellationToken) -> Result<(), ProjectorError> {
    let store = seckill_store::open_view_store(&config.store).await?;
    App::build(config, store, Registry::new()).await?.run(shutdown).await
}

/// A built projector: subscribed and bound, not yet consuming.
#[derive(Debug)]
pub struct App {
    listener: TcpListener,
    consumer: BatchConsumer,
    projection: Projection,
    producer: EventProducer,
    /// `seckill_dependency_up{dependency="kafka"}`, for the alert rules.
    dependency_up: IntGaugeVec,
    registry: Registry,
    http_metrics: HttpMetrics,
    http: HttpConfig,
}

impl App {
    /// Creates the topics, joins the consumer group and binds the query API.
    pub async fn build(
        config: ProjectorConfig,
        view: Arc<dyn ViewStore>,
        registry: Registry,
    ) -> Result<Self, ProjectorError> {
        let metrics = ConsumerMetrics::register(&registry, "projector");
        register_start_time(&registry, "projector");
        let (topics, producer) = seckill_kafka::connect(&config.kafka).await?;
        let producer = producer.with_in_flight_gauge(metrics.produce_in_flight.clone());
        let consumer = BatchConsumer::subscribe(
            &ConsumerSettings::new(&config.kafka, &config.consumer),
            &[&topics.sales, &topics.orders],
        )?
        .with_lag_gauge(metrics.lag.clone());
        let listener = TcpListener::bind(config.http.listen)
            .await
            .map_err(|source| ProjectorError::Bind { addr: config.http.listen, source })?;
        let projection = Projection {
            view,
            dead_letter: DeadLetter::new(producer.clone(), topics.dead_letters.clone(), "projector"),
            metrics,
        };
        Ok(Self {
            listener,
            consumer,
            projection,
            producer,
            dependency_up: dependency_up(&registry, "projector"),
            http_metrics: HttpMetrics::register(&registry, "projector"),
            http: config.http.clone(),
            registry,
        })
    }

    /// The address of the query API.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// The view this projector maintains, for serving queries in-process.
    pub fn view(&self) -> Arc<dyn ViewReader> {
        let view: Arc<dyn ViewStore> = Arc::clone(&self.projection.view);
        view
    }

    /// Consumes and serves until `shutdown`; commits offsets on the way out.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ProjectorError> {
        let addr = self.local_addr();
        let routes = query_routes(self.view())
            .or(healthz())
            .or(metrics(self.registry))
            .recover(recover)
            .with(instrumented(self.http_metrics.clone(), ROUTES));
        tracing::info!(%addr, "Projector consuming and serving queries.");
        // Aborted when `run` is dropped (a crash in tests), like a process.
        let http = AbortOnDropHandle::new(tokio::spawn(seckill_web::serve(
            self.listener,
            routes,
            shutdown.clone(),
            self.http,
            Serving { drain: Duration::from_secs(5), metrics: Some(self.http_metrics) },
        )));
        let probes = vec![Probe::kafka(self.producer.clone())];
        let probing = AbortOnDropHandle::new(tokio::spawn(probe_dependencies(
            probes,
            self.dependency_up,
            PROBE_EVERY,
            shutdown.clone(),
        )));
        self.consumer.run(&self.projection, &shutdown).await;
        self.producer.flush(Duration::from_secs(5));
        let _ = http.await;
        let _ = probing.await;
        tracing::info!("Projector stopped.");
        Ok(())
    }
}
