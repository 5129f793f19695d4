//! The platform as separate processes: Redis with an append-only file (or
//! a Redis Cluster, for the partitions lane's failover), Apache Kafka (the
//! test run's broker, or brokers of the cluster's own for tests that stop,
//! kill or freeze them), and `seckill serve <service>` for each service and
//! for the payment provider's sandbox, all on 127.0.0.1 with names of their
//! own; the ingress or the processor may run with its wall clock off
//! ([`Cluster::restart_with_clock_off`]).

use std::process::Command;
use std::time::Duration;

use seckill_devstack::{
    free_port, test_kafka, unique_namespace, ClockShim, Kafka, KafkaSettings, Redis, RedisCluster, RedisPersistence,
    Server, TempDir, TEST_ADMIN_TOKEN, TEST_JWT_SECRET,
};

/// One of the platform's services.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    Ingress,
    Processor,
    Projector,
    /// The Stripe-shaped payment provider's sandbox (`seckill serve
    /// payments`), a process of its own as a real provider is.
    Payments,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Processor => "processor",
            Self::Projector => "projector",
            Self::Payments => "payments",
        }
    }
}

/// The sandbox's API key and webhook secret, as the services are told them.
pub const SANDBOX_KEY: &str = "sk_test_faults";
pub const SANDBOX_SECRET: &str = "whsec_faults";

/// The Redis the platform's gate runs on.
pub enum Gate {
    /// One Redis (`redis.url`), as every fault test has it.
    Single(Redis),
    /// A Redis Cluster (`redis.cluster_nodes`), its nodes with replicas:
    /// the ingress answers `202` only once a replica has the admission
    /// (`redis.replica_acks = "on"`).
    Cluster(RedisCluster),
}

impl Gate {
    /// The one Redis. The faults that stop, kill or flush it are faults
    /// of a single Redis: asked of a cluster, the test itself is wrong.
    pub fn single(&mut self) -> &mut Redis {
        match self {
            Self::Single(redis) => redis,
            Self::Cluster(_) => panic!("this fault is on a single Redis; the platform runs on a Redis Cluster"),
        }
    }

    /// The Redis Cluster, when the platform runs on one.
    #[allow(dead_code)] // By the partitions lane, which shares this file.
    pub fn cluster(&self) -> Option<&RedisCluster> {
        match self {
            Self::Single(_) => None,
            Self::Cluster(cluster) => Some(cluster),
        }
    }

    /// Stops the one Redis gracefully.
    pub fn stop(&mut self) {
        self.single().stop();
    }

    /// Kills the one Redis at once (SIGKILL).
    pub fn kill(&mut self) {
        self.single().kill();
    }

    /// Starts the stopped one Redis again on its port and data.
    pub fn start_again(&mut self) -> Result<(), seckill_devstack::DevstackError> {
        self.single().start_again()
    }

    /// The services' settings that say where Redis is.
    fn env(&self) -> Vec<(String, String)> {
        match self {
            Self::Single(redis) => vec![("SECKILL_REDIS__URL".to_owned(), redis.url())],
            Self::Cluster(cluster) => {
                let seeds: Vec<String> = cluster.seed_urls().iter().map(|url| format!("{url:?}")).collect();
                vec![
                    ("SECKILL_REDIS__CLUSTER_NODES".to_owned(), format!("[{}]", seeds.join(","))),
                    ("SECKILL_REDIS__REPLICA_ACKS".to_owned(), "on".to_owned()),
                ]
            }
        }
    }
}

/// The cluster's own Kafka: to start as settings say, or started.
enum OwnKafka {
    Start(KafkaSettings),
    Started(Kafka),
}

/// A whole platform of real processes.
pub struct Cluster {
    ingress: Option<Server>,
    processor: Option<Server>,
    projector: Option<Server>,
    payments: Option<Server>,
    pub redis: Gate,
    /// The cluster's own Kafka, for tests that stop, kill or freeze it;
    /// None: the test run's broker, shared by name.
    pub kafka: Option<Kafka>,
    /// The bootstrap servers the services use.
    pub brokers: String,
    /// Topic prefix, key prefix and group prefix.
    pub namespace: String,
    /// The topics' partitions.
    partitions: u32,
    /// The topics' replicas: one a broker, up to three.
    replication: usize,
    ports: [u16; 4],
    /// The ingress's and the sandbox's URLs.
    entry: (String, String),
    /// Settings the ingress gets on top of the suite's (`SECKILL_…`
    /// variables), from its next start.
    pub ingress_env: Vec<(String, String)>,
    /// The same for the processor (its store, say).
    pub processor_env: Vec<(String, String)>,
    pub http: reqwest::Client,
    /// Last: the processes' data outlive them.
    pub dir: TempDir,
}

impl Cluster {
    /// Starts Redis and the three services on the test run's broker.
    pub fn start() -> Self {
        Self::start_with(None, None, Vec::new())
    }

    /// As [`start`](Self::start), on `redis` (one on a test host, say).
    #[allow(dead_code)] // By the partitions lane, which shares this file.
    pub fn start_on_redis(redis: Redis) -> Self {
        Self::start_with(None, Some(Gate::Single(redis)), Vec::new())
    }

    /// As [`start`](Self::start), on the Redis Cluster `redis` (its nodes
    /// on test hosts, say), the ingress waiting for a replica's
    /// acknowledgement before each `202`.
    #[allow(dead_code)] // By the partitions lane, which shares this file.
    pub fn start_on_redis_cluster(redis: RedisCluster) -> Self {
        Self::start_with(None, Some(Gate::Cluster(redis)), Vec::new())
    }

    /// The platform on `kafka` and `redis` (on test hosts, say), its
    /// processor configured with `processor_env` on top of the suite's
    /// from its first start (a store it must not change later).
    #[allow(dead_code)] // By the partitions lane, which shares this file.
    pub fn start_on_hosts(kafka: Kafka, redis: Redis, processor_env: Vec<(String, String)>) -> Self {
        Self::start_with(Some(OwnKafka::Started(kafka)), Some(Gate::Single(redis)), processor_env)
    }

    /// As [`start_on_own_kafka`](Self::start_on_own_kafka), on `kafka`
    /// (brokers on test hosts, say).
    #[allow(dead_code)] // By the partitions lane, which shares this file.
    pub fn start_on_kafka(kafka: Kafka) -> Self {
        Self::start_with(Some(OwnKafka::Started(kafka)), None, Vec::new())
    }

    /// As [`start`](Self::start), on a Kafka of the cluster's own laid out
    /// as `settings` says, which a test may stop, kill or freeze.
    pub fn start_on_own_kafka(settings: KafkaSettings) -> Self {
        Self::start_with(Some(OwnKafka::Start(settings)), None, Vec::new())
    }

    /// The cluster's own Kafka.
    pub fn own_kafka(&mut self) -> &mut Kafka {
        self.kafka.as_mut().expect("a cluster started on a Kafka of its own")
    }

    fn start_with(own_kafka: Option<OwnKafka>, redis: Option<Gate>, processor_env: Vec<(String, String)>) -> Self {
        let dir = TempDir::new().expect("test dir");
        let namespace = unique_namespace("f");
        let redis = redis.unwrap_or_else(|| {
            Gate::Single(
                Redis::start(&dir.path().join("redis"), 0, RedisPersistence::AppendOnly)
                    .expect("redis starts (run scripts/setup)"),
            )
        });
        let kafka = own_kafka.map(|own| match own {
            OwnKafka::Start(settings) => {
                Kafka::start(&dir.path().join("kafka"), settings).expect("kafka starts (run scripts/setup)")
            }
            OwnKafka::Started(kafka) => kafka,
        });
        let brokers = match &kafka {
            Some(kafka) => kafka.brokers(),
            None => test_kafka().expect("the run's kafka (run scripts/setup)").to_owned(),
        };
        // One replica a broker, up to three.
        let replication = kafka.as_ref().map_or(1, |kafka| kafka.pids().len().min(3));
        let mut cluster = Self {
            ingress: None,
            processor: None,
            projector: None,
            payments: None,
            redis,
            kafka,
            brokers,
            namespace,
            partitions: 3,
            replication,
            entry: Default::default(),
            ports: [free_port(), free_port(), free_port(), free_port()],
            ingress_env: Vec::new(),
            processor_env,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .pool_max_idle_per_host(64)
                .build()
                .expect("client"),
            dir,
        };
        cluster.entry = (cluster.url(Service::Ingress), cluster.url(Service::Payments));
        for service in [Service::Payments, Service::Processor, Service::Projector, Service::Ingress] {
            cluster.start_service(service);
        }
        cluster
    }

    /// The name of the platform's `topic` (`orders`, `sales`, …) here.
    pub fn topic(&self, topic: &str) -> String {
        format!("{}.{topic}", self.namespace)
    }

    fn port(&self, service: Service) -> u16 {
        self.ports[service as usize]
    }

    /// Where clients go: the ingress, and the payment provider's sandbox.
    pub fn entry(&self) -> (&str, &str) {
        (&self.entry.0, &self.entry.1)
    }

    /// `http://127.0.0.1:PORT` of `service`.
    pub fn url(&self, service: Service) -> String {
        format!("http://127.0.0.1:{}", self.port(service))
    }

    /// The last `lines` warnings and errors in `service`'s log, for a
    /// failure's message: what the service was retrying when it stuck.
    pub fn log_warnings(&self, service: Service, lines: usize) -> String {
        let server = match service {
            Service::Ingress => &self.ingress,
            Service::Processor => &self.processor,
            Service::Projector => &self.projector,
            Service::Payments => &self.payments,
        };
        let Some(server) = server else { return format!("({service:?} is not running)") };
        let text = std::fs::read_to_string(server.log()).unwrap_or_default();
        let kept: Vec<&str> = text.lines().filter(|line| line.contains("WARN") || line.contains("ERROR")).collect();
        format!(
            "{}, its last warnings:\n{}",
            server.log().display(),
            kept[kept.len().saturating_sub(lines)..].join("\n")
        )
    }

    fn slot(&mut self, service: Service) -> &mut Option<Server> {
        match service {
            Service::Ingress => &mut self.ingress,
            Service::Processor => &mut self.processor,
            Service::Projector => &mut self.projector,
            Service::Payments => &mut self.payments,
        }
    }

    /// Starts `service` and waits until it listens.
    pub fn start_service(&mut self, service: Service) {
        let name = service.name();
        let mut command = self.command(service, &["serve", name]);
        // SECKILL_FAULTS_LOG raises the services' log level when a failure
        // needs looking into (their logs are in the test's directory).
        command.env("RUST_LOG", std::env::var("SECKILL_FAULTS_LOG").unwrap_or_else(|_| "info".to_owned()));
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port(service)));
        // A service waits up to 120 s for a Redis that is loading; these
        // start against servers already up, so 30 s is a failure.
        let server = Server::start(name, command, self.dir.path(), name, addr, Duration::from_secs(30))
            .unwrap_or_else(|error| panic!("{error}"));
        *self.slot(service) = Some(server);
    }

    /// Stops `service` (SIGTERM, which it must obey) and starts it again
    /// with its wall clock `offset_ms` milliseconds off, ahead when
    /// positive, for the rest of the run (`ClockShim`: its monotonic clocks
    /// and timed waits stay true). Only the ingress and the processor
    /// read deadlines.
    #[allow(dead_code)] // By the clock tests; the partitions lane shares this file.
    pub fn restart_with_clock_off(&mut self, service: Service, offset_ms: i64) {
        let shim = ClockShim::get().unwrap_or_else(|error| panic!("the clock shim: {error}"));
        let env = match service {
            Service::Ingress => &mut self.ingress_env,
            Service::Processor => &mut self.processor_env,
            other => panic!("{other:?} judges no deadline; skew the ingress or the processor"),
        };
        env.extend(shim.env(offset_ms));
        assert!(self.stop(service), "{service:?} exits 0 on SIGTERM before its restart");
        self.start_service(service);
    }

    /// SIGKILL: no drain, no flush, no commit.
    pub fn kill(&mut self, service: Service) {
        if let Some(mut server) = self.slot(service).take() {
            server.kill();
        }
    }

    /// SIGTERM; true if it exited 0 within the grace period.
    pub fn stop(&mut self, service: Service) -> bool {
        self.slot(service).take().is_some_and(|mut server| server.stop(Duration::from_secs(20)))
    }

    /// Stops every service with SIGTERM at once (each drains on its own);
    /// which of them exited 0 within 20 s.
    pub fn stop_all(&mut self) -> Vec<(Service, bool)> {
        let services = [Service::Ingress, Service::Processor, Service::Projector, Service::Payments];
        let servers: Vec<(Service, Option<Server>)> =
            services.into_iter().map(|service| (service, self.slot(service).take())).collect();
        std::thread::scope(|scope| {
            let stopping: Vec<_> = servers
                .into_iter()
                .map(|(service, server)| {
                    scope
                        .spawn(move || (service, server.is_some_and(|mut server| server.stop(Duration::from_secs(20)))))
                })
                .collect();
            stopping.into_iter().map(|stopping| stopping.join().expect("a stopping thread")).collect()
        })
    }

    /// A `seckill` command configured as `service` is.
    pub fn command(&self, service: Service, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_seckill"));
        command.args(args).env_clear().envs(self.env(service));
        command
    }

    /// Loses every key Redis holds, as a disk failure without a replica would.
    pub async fn flush_redis(&self) {
        let Gate::Single(redis) = &self.redis else { panic!("a flush is a fault of a single Redis") };
        let client = redis::Client::open(redis.url()).expect("url");
        let mut connection = client.get_multiplexed_async_connection().await.expect("redis connects");
        redis::cmd("FLUSHALL").query_async::<()>(&mut connection).await.expect("FLUSHALL");
    }

    /// The configuration of `service`, as environment variables.
    fn env(&self, service: Service) -> Vec<(String, String)> {
        let ns = &self.namespace;
        if service == Service::Payments {
            // Its own flat configuration; callbacks go to the ingress.
            let webhook = format!("{}/api/v1/payments/webhook", self.url(Service::Ingress));
            return vec![
                ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
                ("SECKILL_SANDBOX_LISTEN".to_owned(), format!("127.0.0.1:{}", self.port(service))),
                ("SECKILL_SANDBOX_API_KEY".to_owned(), SANDBOX_KEY.to_owned()),
                ("SECKILL_SANDBOX_WEBHOOK_SECRET".to_owned(), SANDBOX_SECRET.to_owned()),
                ("SECKILL_SANDBOX_WEBHOOK_URL".to_owned(), webhook),
                // Stripe's ways that decide money: search lags (2 s, the
                // sandbox's default), a failed answer is replayed to its
                // idempotency key (default), and refunds go pending first.
                ("SECKILL_SANDBOX_PENDING_REFUNDS_MS".to_owned(), "300".to_owned()),
            ];
        }
        let mut env = vec![
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("SECKILL_HTTP__LISTEN".to_owned(), format!("127.0.0.1:{}", self.port(service))),
            ("SECKILL_KAFKA__BROKERS".to_owned(), self.brokers.clone()),
            ("SECKILL_KAFKA__TOPIC_PREFIX".to_owned(), ns.clone()),
            ("SECKILL_KAFKA__PARTITIONS".to_owned(), self.partitions.to_string()),
            ("SECKILL_KAFKA__REPLICATION".to_owned(), self.replication.to_string()),
        ];
        if service != Service::Projector {
            env.extend(self.redis.env());
            env.push(("SECKILL_REDIS__KEY_PREFIX".to_owned(), ns.clone()));
            env.push(("SECKILL_PAYMENTS__BASE_URL".to_owned(), self.url(Service::Payments)));
            env.push(("SECKILL_PAYMENTS__API_KEY".to_owned(), SANDBOX_KEY.to_owned()));
            env.push(("SECKILL_PAYMENTS__WEBHOOK_SECRETS".to_owned(), format!("[{SANDBOX_SECRET}]")));
            let sale_page = format!("{}/sale/{{voucher_id}}", self.url(Service::Ingress));
            env.push(("SECKILL_PAYMENTS__RETURN_URL".to_owned(), sale_page));
        }
        let store = |file: &str| self.dir.path().join(file).to_string_lossy().into_owned();
        match service {
            Service::Ingress => {
                env.push(("SECKILL_VIEW_URL".to_owned(), self.url(Service::Projector)));
                env.push(("SECKILL_WATCH__PROCESSOR_GROUP".to_owned(), format!("{ns}-processor")));
                env.push(("SECKILL_WATCH__PROJECTOR_GROUP".to_owned(), format!("{ns}-projector")));
                env.push(("SECKILL_AUTH__ADMIN_TOKEN".to_owned(), TEST_ADMIN_TOKEN.to_owned()));
                env.push(("SECKILL_AUTH__JWT_SECRET".to_owned(), TEST_JWT_SECRET.to_owned()));
                // Every client of the test is on one address.
                env.push(("SECKILL_RATE_LIMIT__PER_IP_PER_SECOND".to_owned(), "0".to_owned()));
                // A killed relay's entries are taken over quickly.
                env.push(("SECKILL_OUTBOX_CLAIM_IDLE_MS".to_owned(), "1000".to_owned()));
                env.push(("SECKILL_DRAIN_MS".to_owned(), "2000".to_owned()));
                env.extend(self.ingress_env.iter().cloned());
            }
            Service::Processor => {
                env.push(("SECKILL_STORE__PATH".to_owned(), store("processor.redb")));
                env.push(("SECKILL_CONSUMER__GROUP".to_owned(), format!("{ns}-processor")));
                // A refused refund is asked for again soon (tests wait on it).
                env.push(("SECKILL_PAYMENTS__REFUND_RETRY_MS".to_owned(), "200".to_owned()));
                env.push(("SECKILL_PAYMENTS__REFUND_RETRY_MAX_MS".to_owned(), "2000".to_owned()));
                env.extend(self.processor_env.iter().cloned());
            }
            Service::Projector => {
                env.push(("SECKILL_STORE__PATH".to_owned(), store("view.redb")));
                env.push(("SECKILL_CONSUMER__GROUP".to_owned(), format!("{ns}-projector")));
            }
            Service::Payments => {}
        }
        env
    }
}
