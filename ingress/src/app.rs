//! Building and running the ingress.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus::Registry;
use seckill_core::metrics::{
    clock_offset, dependency_up, register_start_time, AdmissionMetrics, HttpMetrics, LiveMetrics, PaymentMetrics,
    PipelineWatchMetrics, QueueMetrics,
};
use seckill_kafka::{Follower, GroupLag};
use seckill_store::ViewReader;
use seckill_web::Serving;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::challenge::Challenges;
use crate::live::{self, Live};
use crate::payments::Payments;
use crate::relay::Relay;
use crate::room::Rooms;
use crate::sold_out::SoldOutMemo;
use crate::watch::Watch;
use seckill_gate::{Gate, Outbox, OutboxHints};

/// Most vouchers the sold-out memo remembers at once.
const SOLD_OUT_MEMO_CAPACITY: usize = 10_000;
/// Longest blocking read of the outbox relay.
const RELAY_READ_BLOCK: Duration = Duration::from_millis(100);
use crate::access::{Access, Authenticator, Limits};
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

/// Runs the ingress as its own process until `shutdown`: status queries go
/// to the projector at `view_url`, metrics to a registry of its own.
pub async fn run_standalone(config: IngressConfig, shutdown: CancellationToken) -> Result<(), IngressError> {
    let view = Arc::new(seckill_web::RemoteView::new(&config.view_url)?);
    let app = App::build(config, Dependencies { registry: Registry::new(), view }).await?;
    app.run(shutdown).await
}

/// A built ingress, bound to its address, not yet serving.
#[derive(Debug)]
pub struct App {
    listener: TcpListener,
    ingress: Arc<Ingress>,
    deps: Dependencies,
    relay: Relay,
    /// The read side's own reader of the sales and orders topics.
    follower: Follower,
    /// The pipeline's health, for the alert rules.
    watch: Watch,
    http_metrics: HttpMetrics,
    config: IngressConfig,
}

impl App {
    /// Connects to Redis (loading the scripts) and the broker (creating the
    /// topics), and binds the HTTP listener.
    pub async fn build(config: IngressConfig, deps: Dependencies) -> Result<Self, IngressError> {
        let metrics = AdmissionMetrics::register(&deps.registry);
        // The gate tells the relay which outboxes admissions wrote to (on a
        // cluster, where the relay cannot block on them all).
        let hints = OutboxHints::new();
        // Admissions answered 202 only once a replica has them, where Redis
        // has replicas (redis.replica_acks).
        let gate = Gate::connect(&config.redis)
            .await?
            .with_metrics(metrics.clone())
            .with_outbox_limit(config.max_outbox_entries)
            .with_outbox_hints(hints.clone())
            // Each admitted order readable by id from any ingress at once.
            .with_pending_records(Duration::from_secs(config.live.pending_order_ttl_seconds))
            .with_replica_acks(&config.redis)
            .await?;

        register_start_time(&deps.registry, "ingress");
        let (topics, producer) = seckill_kafka::connect(&config.kafka).await?;
        let producer = producer.with_in_flight_gauge(metrics.produce_in_flight.clone());
        let relay_name = format!("ingress-{}", uuid::Uuid::now_v7().simple());
        let relay = Relay {
            outbox: Outbox::connect(&config.redis, &relay_name, RELAY_READ_BLOCK).await?.with_hints(hints),
            producer: producer.clone(),
            topics: topics.clone(),
            metrics: metrics.clone(),
            claim_idle: Duration::from_millis(config.outbox_claim_idle_ms),
            retire_consumer_after: Duration::from_millis(config.outbox_retire_consumer_ms),
            discover_every: Duration::from_millis(config.outbox_discovery_ms),
        };
        metrics.outbox_streams.set(i64::try_from(relay.outbox.streams().len()).unwrap_or(i64::MAX));

        if config.auth.insecure_dev_user_header {
            tracing::warn!(
                "auth.insecure_dev_user_header is on: X-User-Id is trusted unchecked, so anyone can act as anyone. \
                 Development only."
            );
        }
        let listener = TcpListener::bind(config.http.listen)
            .await
            .map_err(|source| IngressError::Bind { addr: config.http.listen, source })?;
        let http_metrics = HttpMetrics::register(&deps.registry, "ingress");
        let live = Arc::new(Live::new(
            config.live.clone(),
            gate.clone(),
            Arc::clone(&deps.view),
            LiveMetrics::register(&deps.registry),
        ));
        if let Err(error) = live.clock.sync(&gate).await {
            tracing::warn!(%error, "Could not read the Redis clock yet; using this host's until it can.");
        }
        let follower =
            Follower::start_at_end(&config.kafka.brokers, &[&topics.sales, &topics.orders], live::fetch_wait(&live))
                .await?;
        let watched_groups = Watch::groups(&config.watch, &topics);
        let watch = Watch {
            gate: gate.clone(),
            producer: producer.clone(),
            groups: if watched_groups.is_empty() {
                None
            } else {
                Some(Arc::new(GroupLag::new(&config.kafka.brokers, &watched_groups)?))
            },
            follower: follower.health(),
            metrics: PipelineWatchMetrics::register(&deps.registry, "ingress"),
            dependency_up: dependency_up(&deps.registry, "ingress"),
            clock_offset: clock_offset(&deps.registry, "ingress"),
            every: Duration::from_millis(config.watch.interval_ms),
        };
        let rooms = Arc::new(
            Rooms::new(
                gate.clone(),
                producer.clone(),
                topics.clone(),
                QueueMetrics::register(&deps.registry),
                config.draw.clone(),
            )
            .with_beacon(seckill_beacon::Relays::from_config(&config.beacon)),
        );
        let challenges = Arc::new(Challenges::new(&gate, config.challenge.clone()).await?);
        let ingress = Arc::new(Ingress {
            rooms,
            challenges,
            pace: config.rate_limit.clone(),
            gate,
            sold_out: SoldOutMemo::new(Duration::from_millis(config.sold_out_memo_ms), SOLD_OUT_MEMO_CAPACITY),
            producer,
            topics,
            access: Arc::new(Access {
                auth: Authenticator::new(&config.auth),
                limits: Limits::new(&config.rate_limit),
                metrics: metrics.clone(),
            }),
            metrics,
            live,
            admin_retry_ttl: Duration::from_secs(config.admin_idempotency_ttl_seconds),
            payments: Payments::new(
                &config.payments,
                PaymentMetrics::register(&deps.registry, "ingress"),
                Arc::clone(&deps.view),
            )?,
        });
        Ok(Self { listener, ingress, deps, relay, follower, watch, http_metrics, config })
    }

    /// The address the ingress answers on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// Serves until `shutdown`, lets in-flight requests finish, then flushes
    /// the producer.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), IngressError> {
        let addr = self.local_addr();
        let filter = routes(
            Arc::clone(&self.ingress),
            self.deps.registry,
            self.http_metrics.clone(),
            self.config.max_body_bytes,
        );
        tracing::info!(%addr, "Ingress listening.");
        // The relay stops after the last request drained, so every order
        // admitted before shutdown gets its chance to be published now.
        let relay_stop = CancellationToken::new();
        let relay = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(self.relay.run(relay_stop.clone())));
        let live = Arc::clone(&self.ingress.live);
        let follower = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(live::follow(
            self.follower,
            Arc::clone(&live),
            live.closing.clone(),
        )));
        let watch = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(self.watch.run(live.closing.clone())));
        let rooms = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(
            Arc::clone(&self.ingress.rooms).drive(live.closing.clone()),
        ));
        let challenge_key = {
            let (challenges, gate) = (Arc::clone(&self.ingress.challenges), self.ingress.gate.clone());
            let closing = live.closing.clone();
            tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
                challenges.follow_key(gate, closing).await;
            }))
        };
        // Waiters are answered and streams end as soon as shutdown begins,
        // so their connections drain with the others.
        let closing = {
            let (shutdown, live) = (shutdown.clone(), Arc::clone(&live));
            tokio::spawn(async move {
                shutdown.cancelled().await;
                live.closing.cancel();
            })
        };
        let serving = Serving { drain: Duration::from_millis(self.config.drain_ms), metrics: Some(self.http_metrics) };
        seckill_web::serve(self.listener, filter, shutdown, self.config.http.clone(), serving).await;
        live.closing.cancel();
        let _ = closing.await;
        let _ = follower.await;
        let _ = watch.await;
        let _ = rooms.await;
        let _ = challenge_key.await;
        relay_stop.cancel();
        let _ = relay.await;
        self.ingress.producer.flush(Duration::from_secs(5));
        tracing::info!("Ingress stopped.");
        Ok(())
    }
}
