//! A whole platform per test: its own Redis (or the test process's shared
//! Redis Cluster, under its own key prefix) and broker, the three services
//! in-process on their own ports, and typed request helpers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use prometheus::Registry;
use reqwest::StatusCode;
use seckill_core::config::Secret;
use seckill_core::config::{ConsumerConfig, HttpConfig, KafkaConfig, RedisConfig, StoreConfig};
use seckill_devstack::{free_port, user_token, TestInfra, TEST_ADMIN_TOKEN, TEST_JWT_SECRET};
use seckill_gate::{Gate, VoucherKeys};
use seckill_ingress::{AuthConfig, Dependencies, IngressConfig, RateLimitConfig, WatchConfig};
use seckill_processor::ProcessorConfig;
use seckill_projector::ProjectorConfig;
use seckill_web::RemoteView;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// How long a test waits for the pipeline to settle before failing: long,
/// because the suite runs beside the fault suite on two cores, where a
/// restarted consumer group can take tens of seconds to settle; a pipeline
/// that never settles still fails.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// A running service and the means to stop it.
pub struct Running {
    shutdown: CancellationToken,
    /// Aborted if the test ends without stopping it.
    task: AbortOnDropHandle<()>,
}

impl Running {
    /// Graceful stop: finish the batch, commit, leave the group.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("service task finished cleanly");
    }

    /// Crash-like stop: the task is dropped wherever it is; nothing is
    /// flushed or committed.
    pub async fn abort(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// The platform under test.
pub struct Platform {
    pub kafka: KafkaConfig,
    pub redis: RedisConfig,
    pub base: String,
    pub processor_addr: SocketAddr,
    pub projector_addr: SocketAddr,
    pub http: reqwest::Client,
    pub ingress: Option<Running>,
    pub processor: Option<Running>,
    pub projector: Option<Running>,
    /// More processors in the same consumer group (shared stores only).
    pub more_processors: Vec<Running>,
    /// The running projector's view, for an ingress in the same process;
    /// weak, so a stopped projector's store closes (its file can reopen).
    pub projector_view: Option<std::sync::Weak<dyn seckill_store::ViewReader>>,
    /// The stores' configuration when shared (CQL); None: embedded files.
    pub shared_store: Option<StoreConfig>,
    /// What `start_ingress` starts: the test credentials and no rate
    /// limits (every test client shares one address), unless a test
    /// changes it.
    pub ingress_config: IngressConfig,
    /// Buckets `create_voucher` splits vouchers into (1: not split).
    pub voucher_shards: u32,
    /// Last, so the servers outlive the services when a test ends.
    pub infra: TestInfra,
}

impl Platform {
    /// Starts Redis, the broker and the three services.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// Starts Redis, the broker and the three services, with the processor
    /// and projector on `shared_store` when given.
    pub async fn start_with(shared_store: Option<StoreConfig>) -> Self {
        Self::start_configured(shared_store, |_| {}).await
    }

    /// Starts Redis, the broker and the three services, the ingress
    /// configured by `configure` on top of the test defaults.
    pub async fn start_configured(
        shared_store: Option<StoreConfig>,
        configure: impl FnOnce(&mut IngressConfig),
    ) -> Self {
        Self::start_full(shared_store, Vec::new(), configure).await
    }

    /// Starts the broker and the three services on the Redis Cluster of
    /// `seed_nodes` (the test's namespace as key prefix), creating vouchers
    /// split into `shards` buckets.
    pub async fn start_on_cluster(seed_nodes: Vec<String>, shards: u32) -> Self {
        Self::start_on_cluster_configured(seed_nodes, shards, |_| {}).await
    }

    /// [`start_on_cluster`](Self::start_on_cluster), the ingress configured
    /// by `configure` on top of the test defaults.
    pub async fn start_on_cluster_configured(
        seed_nodes: Vec<String>,
        shards: u32,
        configure: impl FnOnce(&mut IngressConfig),
    ) -> Self {
        let mut platform = Self::start_full(None, seed_nodes, configure).await;
        platform.voucher_shards = shards;
        platform
    }

    async fn start_full(
        shared_store: Option<StoreConfig>,
        cluster_nodes: Vec<String>,
        configure: impl FnOnce(&mut IngressConfig),
    ) -> Self {
        let infra = TestInfra::start().expect("Redis and the broker start (run scripts/setup)");
        let kafka = KafkaConfig {
            brokers: infra.brokers.clone(),
            topic_prefix: infra.namespace.clone(),
            partitions: 3,
            ..KafkaConfig::default()
        };
        let redis = RedisConfig { cluster_nodes, ..RedisConfig::new(infra.redis.url(), infra.namespace.clone()) };
        let processor_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let projector_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut ingress_config = IngressConfig {
            http: HttpConfig::local(0),
            redis: redis.clone(),
            kafka: kafka.clone(),
            auth: AuthConfig {
                admin_token: Some(Secret::new(TEST_ADMIN_TOKEN)),
                jwt_secret: Some(Secret::new(TEST_JWT_SECRET)),
                ..AuthConfig::default()
            },
            rate_limit: RateLimitConfig::unlimited(),
            // The groups this platform's processor and projector join.
            watch: WatchConfig {
                processor_group: format!("{}-processor", infra.namespace),
                projector_group: format!("{}-projector", infra.namespace),
                ..WatchConfig::default()
            },
            ..IngressConfig::default()
        };
        configure(&mut ingress_config);
        let mut platform = Self {
            infra,
            kafka,
            redis,
            base: String::new(),
            processor_addr,
            projector_addr,
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(1024)
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
            ingress: None,
            processor: None,
            projector: None,
            more_processors: Vec::new(),
            projector_view: None,
            shared_store,
            ingress_config,
            voucher_shards: 1,
        };
        platform.start_processor().await;
        platform.start_projector().await;
        platform.start_ingress().await;
        platform
    }

    pub async fn start_ingress(&mut self) {
        let (base, running) = self.another_ingress().await;
        self.base = base;
        self.ingress = Some(running);
    }

    /// Starts one more ingress replica on the same Redis and topics, reading
    /// the view through the projector's API as a separate process would;
    /// returns its base URL.
    pub async fn another_ingress(&self) -> (String, Running) {
        let view = Arc::new(RemoteView::new(&format!("http://{}", self.projector_addr)).expect("view client"));
        self.ingress_on_view(view).await
    }

    /// Starts an ingress that reads the view in-process, as `seckill dev`
    /// does; returns its base URL.
    pub async fn ingress_sharing_the_view(&self) -> (String, Running) {
        let view = self.projector_view.as_ref().and_then(std::sync::Weak::upgrade).expect("the projector runs");
        self.ingress_on_view(view).await
    }

    /// Starts an ingress reading the view through `view`; returns its base URL.
    pub async fn ingress_on_view(&self, view: Arc<dyn seckill_store::ViewReader>) -> (String, Running) {
        let config = self.ingress_config.clone();
        let app = seckill_ingress::App::build(config, Dependencies { registry: Registry::new(), view })
            .await
            .expect("ingress builds");
        let base = format!("http://{}", app.local_addr());
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move { app.run(token).await.expect("ingress runs") });
        (base, Running { shutdown, task: AbortOnDropHandle::new(task) })
    }

    pub async fn start_processor(&mut self) {
        let running = self.processor_on(self.processor_addr).await;
        self.processor = Some(running);
    }

    /// Starts one more processor in the group, on its own port.
    pub async fn start_another_processor(&mut self) {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let running = self.processor_on(addr).await;
        self.more_processors.push(running);
    }

    async fn processor_on(&self, listen: SocketAddr) -> Running {
        self.processor_wrapping(listen, |store| store).await
    }

    /// Starts the processor on its store as `wrap` hands it over (a fault
    /// injector around the real store).
    pub async fn start_processor_wrapping(
        &mut self,
        wrap: impl FnOnce(Arc<dyn seckill_store::StockStore>) -> Arc<dyn seckill_store::StockStore>,
    ) {
        let running = self.processor_wrapping(self.processor_addr, wrap).await;
        self.processor = Some(running);
    }

    async fn processor_wrapping(
        &self,
        listen: SocketAddr,
        wrap: impl FnOnce(Arc<dyn seckill_store::StockStore>) -> Arc<dyn seckill_store::StockStore>,
    ) -> Running {
        let config = ProcessorConfig {
            http: HttpConfig::on(listen),
            kafka: self.kafka.clone(),
            consumer: ConsumerConfig::new(&format!("{}-processor", self.infra.namespace)),
            redis: self.redis.clone(),
            // Expiry tests wait for the sweeper; a short interval keeps them quick.
            expiry_sweep_ms: 100,
            // The ingress's provider, if it has one: the processor settles
            // with it before closing orders, closes their checkouts and
            // refunds (quickly asked again in tests).
            payments: seckill_core::config::PaymentsConfig {
                refund_retry_ms: 100,
                refund_retry_max_ms: 500,
                ..self.ingress_config.payments.clone()
            },
            ..ProcessorConfig::default()
        };
        let store_config = self.store("processor.redb");
        // After a simulated crash a blocking store call may still hold the
        // file for a moment.
        let store = eventually(|| async { seckill_store::open_stock_store(&store_config).await.ok() }).await;
        let app = seckill_processor::App::build(config, wrap(store), Registry::new()).await.expect("processor builds");
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move { app.run(token).await.expect("processor runs") });
        Running { shutdown, task: AbortOnDropHandle::new(task) }
    }

    pub async fn start_projector(&mut self) {
        let config = ProjectorConfig {
            http: HttpConfig::on(self.projector_addr),
            kafka: self.kafka.clone(),
            consumer: ConsumerConfig::new(&format!("{}-projector", self.infra.namespace)),
            ..ProjectorConfig::default()
        };
        let store_config = self.store("view.redb");
        let view = eventually(|| async { seckill_store::open_view_store(&store_config).await.ok() }).await;
        let app = seckill_projector::App::build(config, view, Registry::new()).await.expect("projector builds");
        self.projector_view = Some(Arc::downgrade(&app.view()));
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move { app.run(token).await.expect("projector runs") });
        self.projector = Some(Running { shutdown, task: AbortOnDropHandle::new(task) });
    }

    fn store(&self, file: &str) -> StoreConfig {
        match &self.shared_store {
            Some(shared) => shared.clone(),
            None => StoreConfig::embedded(self.infra.dir.path().join(file)),
        }
    }

    /// Creates a voucher open from now for an hour.
    pub async fn create_voucher(&self, stock: u64, per_user_limit: u32) -> String {
        let begins = Utc::now() - chrono::Duration::seconds(1);
        self.create_voucher_between(stock, per_user_limit, begins, begins + chrono::Duration::hours(1)).await
    }

    pub async fn create_voucher_between(
        &self,
        stock: u64,
        per_user_limit: u32,
        begins_at: DateTime<Utc>,
        ends_at: DateTime<Utc>,
    ) -> String {
        let mut request =
            json!({"stock": stock, "per_user_limit": per_user_limit, "begins_at": begins_at, "ends_at": ends_at});
        if self.voucher_shards != 1 {
            request["shards"] = self.voucher_shards.into();
        }
        self.create_voucher_from(request).await
    }

    /// Creates a voucher from a full request body.
    pub async fn create_voucher_from(&self, request: Value) -> String {
        let (status, body) = self.post("/api/v1/vouchers", None, Some(request)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["voucher_id"].as_str().expect("voucher_id").to_owned()
    }

    /// `Authorization` for `user`: a token signed with the test secret.
    pub fn as_user(user: &str) -> String {
        format!("Bearer {}", user_token(user))
    }

    /// `Authorization` for the admin.
    pub fn as_admin() -> String {
        format!("Bearer {TEST_ADMIN_TOKEN}")
    }

    /// Places an order as `user`.
    pub async fn order(&self, voucher: &str, user: &str) -> (StatusCode, Value) {
        self.post(&format!("/api/v1/vouchers/{voucher}/orders"), Some(user), None).await
    }

    /// Places an order for `quantity` units as `user`.
    pub async fn order_units(&self, voucher: &str, user: &str, quantity: u32) -> (StatusCode, Value) {
        self.post(&format!("/api/v1/vouchers/{voucher}/orders"), Some(user), Some(json!({ "quantity": quantity })))
            .await
    }

    /// Places an order as `user` through the ingress at `base` (several
    /// run in some tests) with a waiting room's `entry_token`.
    pub async fn order_with_entry(&self, base: &str, voucher: &str, user: &str, token: &str) -> (StatusCode, Value) {
        let response = self
            .http
            .post(format!("{base}/api/v1/vouchers/{voucher}/orders"))
            .header("authorization", Self::as_user(user))
            .json(&json!({ "entry_token": token }))
            .send()
            .await
            .expect("ingress answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `PATCH /api/v1/vouchers/{voucher}` (admin).
    pub async fn update_voucher(&self, voucher: &str, change: Value) -> (StatusCode, Value) {
        let response = self
            .http
            .patch(format!("{}/api/v1/vouchers/{voucher}", self.base))
            .header("authorization", Self::as_admin())
            .json(&change)
            .send()
            .await
            .expect("ingress answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `POST`s to the ingress as `user`, or as the admin when `None`.
    pub async fn post(&self, path: &str, user: Option<&str>, body: Option<Value>) -> (StatusCode, Value) {
        let authorization = user.map_or_else(Self::as_admin, Self::as_user);
        let mut request = self.http.post(format!("{}{path}", self.base)).header("authorization", authorization);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("ingress answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `GET`s `url` as the admin, who may read every order.
    pub async fn get(&self, url: &str) -> (StatusCode, Value) {
        let response = self.http.get(url).header("authorization", Self::as_admin()).send().await.expect("answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Polls the order until it has a final status.
    pub async fn wait_final(&self, order_id: &str) -> Value {
        self.wait_order(order_id, |order| order["status"] != "PENDING").await
    }

    /// Polls the order until `ready` accepts it.
    pub async fn wait_order(&self, order_id: &str, ready: impl Fn(&Value) -> bool) -> Value {
        let url = format!("{}/api/v1/orders/{order_id}", self.base);
        eventually_seen(&format!("order {order_id}"), || async {
            let (status, body) = self.get(&url).await;
            if status == StatusCode::OK && ready(&body) {
                Ok(body)
            } else {
                Err(format!("{status} {body}"))
            }
        })
        .await
    }

    /// The voucher as the view shows it, once `ready` accepts it.
    pub async fn wait_voucher(&self, voucher: &str, ready: impl Fn(&Value) -> bool) -> Value {
        let url = format!("{}/api/v1/vouchers/{voucher}", self.base);
        eventually_seen(&format!("voucher {voucher}"), || async {
            let (status, body) = self.get(&url).await;
            if status == StatusCode::OK && ready(&body) {
                Ok(body)
            } else {
                Err(format!("{status} {body}"))
            }
        })
        .await
    }

    /// The processor's persistent remaining stock, once the processor has
    /// read the voucher's definition.
    pub async fn persistent_remaining(&self, voucher: &str) -> u64 {
        let url = format!("http://{}/api/v1/stock/{voucher}", self.processor_addr);
        eventually(|| async {
            let (status, body) = self.get(&url).await;
            assert!(status == StatusCode::OK || status == StatusCode::NOT_FOUND, "{body}");
            body["remaining"].as_u64()
        })
        .await
    }

    /// The admission gate's remaining stock in Redis (every bucket of a
    /// split voucher together).
    pub async fn redis_remaining(&self, voucher: &str) -> u64 {
        self.redis_gate().await.remaining(voucher.parse().expect("voucher id")).await.expect("reads").expect("loaded")
    }

    /// A gate on the platform's Redis (or Redis Cluster), as a service has.
    pub async fn redis_gate(&self) -> Gate {
        Gate::connect(&self.redis).await.expect("Redis connects")
    }

    /// Puts `units` back into the gate behind the platform's back.
    pub async fn add_redis_units(&self, voucher: &str, units: u64) {
        let _: i64 = redis::cmd("HINCRBY")
            .arg(self.voucher_key(voucher))
            .arg("remaining")
            .arg(units)
            .query_async(&mut self.redis_connection().await)
            .await
            .expect("HINCRBY");
    }

    fn voucher_key(&self, voucher: &str) -> String {
        VoucherKeys::new(&self.redis.key_prefix, voucher.parse().expect("voucher id")).voucher
    }

    /// A producer to put records on the platform's topics directly, as a
    /// redelivery or a misbehaving client would.
    pub fn producer(&self) -> seckill_kafka::EventProducer {
        seckill_kafka::EventProducer::new(&seckill_kafka::ProducerSettings::from(&self.kafka)).expect("producer")
    }

    pub async fn redis_connection(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.redis.url.as_str()).expect("redis url");
        client.get_multiplexed_async_connection().await.expect("redis connects")
    }
}

/// Polls `probe` until it yields a value, failing the test after
/// [`DEADLINE`] with what `what` last looked like (the probe's `Err`).
pub async fn eventually_seen<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(seen) => assert!(
                tokio::time::Instant::now() < deadline,
                "{what} not as wanted within {DEADLINE:?}; last seen: {seen}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `probe` until it yields a value, failing the test after
/// [`DEADLINE`].
pub async fn eventually<T, F, Fut>(mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "condition not met within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Platform {
    /// Reads `topic` from the beginning with a fresh group until `enough`
    /// accepts what was read, failing the test after [`DEADLINE`].
    pub async fn read_topic(
        &self,
        topic: &str,
        enough: impl Fn(&[seckill_kafka::OwnedMessage]) -> bool,
    ) -> Vec<seckill_kafka::OwnedMessage> {
        let reader = seckill_kafka::BatchConsumer::subscribe(
            &seckill_kafka::ConsumerSettings {
                max_batch: 500,
                ..seckill_kafka::ConsumerSettings::reader(
                    &self.kafka.brokers,
                    format!("{}-reader-{}", self.infra.namespace, uuid::Uuid::now_v7().simple()),
                )
            },
            &[topic],
        )
        .expect("reader subscribes");
        let never = CancellationToken::new();
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let mut read = Vec::new();
        while !enough(&read) {
            assert!(tokio::time::Instant::now() < deadline, "{topic} did not have the records within {DEADLINE:?}");
            if let Ok(batch) = reader.next_batch_or_idle(Duration::from_secs(1), &never).await {
                read.extend(batch);
            }
        }
        read
    }
}
