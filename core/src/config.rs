//! Typed, layered configuration: built-in defaults, then an optional TOML
//! file, then `SECKILL_`-prefixed environment variables (`__` separates
//! nesting: `SECKILL_KAFKA__BROKERS=host:9092`). Command-line flags are
//! applied by each binary on top. Unknown keys are errors that name the key.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::topics::Topics;

/// Prefix of every environment variable the services read.
pub const ENV_PREFIX: &str = "SECKILL_";
/// Prefix of the payment provider sandbox's variables
/// (`SECKILL_SANDBOX_WEBHOOK_URL`): a process of its own whose settings
/// share no key with the services', so one environment can hold both.
pub const SANDBOX_ENV_PREFIX: &str = "SECKILL_SANDBOX_";

/// `SECKILL_` variables that are not config keys: the config file path
/// (`SECKILL_CONFIG`) and the test and setup tooling's own settings (the test
/// run's directory and shared servers, where the JVM servers' jars are).
const NOT_CONFIG_KEYS: &[&str] =
    &["config", "test_dir", "test_kafka", "test_cassandra", "kafka_home", "cassandra_home", "schemathesis_home"];

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    #[error("invalid configuration: {0}")]
    Parse(#[from] Box<figment::Error>),
    #[error("invalid configuration: `{key}` {problem}")]
    Invalid { key: &'static str, problem: String },
}

/// Implemented by every service config: checks what types alone cannot.
pub trait Validate {
    /// Returns the first problem found, naming its key.
    fn validate(&self) -> Result<(), ConfigError>;
}

/// Loads `T` from its defaults, `file` (if any) and the environment.
pub fn load<T>(file: Option<&Path>) -> Result<T, ConfigError>
where
    T: Default + Serialize + DeserializeOwned + Validate,
{
    load_with(file, &[])
}

/// Loads `T` as [`load`] does, then sets each `("section.key", value)` of
/// `overrides` on top (command-line flags, tests).
pub fn load_with<T>(file: Option<&Path>, overrides: &[(&str, &str)]) -> Result<T, ConfigError>
where
    T: Default + Serialize + DeserializeOwned + Validate,
{
    let mut figment = defaults_and_file::<T>(file)?.merge(
        Env::prefixed(ENV_PREFIX)
            .ignore(NOT_CONFIG_KEYS)
            .filter(|key| !key.as_str().starts_with("sandbox_"))
            .split("__"),
    );
    for (key, value) in overrides {
        // Parsed as environment values are: `true`, `12` and `[a, b]` are
        // typed values, anything else a string.
        let value: figment::value::Value = value.parse().unwrap_or_else(|never| match never {});
        figment = figment.merge(Serialized::default(key, value));
    }
    let config: T = figment.extract().map_err(Box::new)?;
    config.validate()?;
    Ok(config)
}

/// Loads the payment provider sandbox's `T`: defaults, then the optional
/// TOML file, then `SECKILL_SANDBOX_`-prefixed variables (see
/// [`SANDBOX_ENV_PREFIX`]).
pub fn load_sandbox<T>(file: Option<&Path>) -> Result<T, ConfigError>
where
    T: Default + Serialize + DeserializeOwned + Validate,
{
    let figment = defaults_and_file::<T>(file)?.merge(Env::prefixed(SANDBOX_ENV_PREFIX).split("__"));
    let config: T = figment.extract().map_err(Box::new)?;
    config.validate()?;
    Ok(config)
}

/// `T`'s defaults with the TOML `file` (when given) on top: where every
/// loader starts before its environment variables.
fn defaults_and_file<T: Default + Serialize>(file: Option<&Path>) -> Result<Figment, ConfigError> {
    let figment = Figment::from(Serialized::defaults(T::default()));
    match file {
        Some(file) if !file.exists() => Err(ConfigError::MissingFile(file.to_owned())),
        Some(file) => Ok(figment.merge(Toml::file(file))),
        None => Ok(figment),
    }
}

/// Fails with a message naming `key` when `ok` is false.
pub fn ensure(ok: bool, key: &'static str, problem: impl Into<String>) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Invalid { key, problem: problem.into() })
    }
}

/// A string that never appears in logs or `Debug` output.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that must compare or send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// Draws and waiting rooms: the operator's key that seals each draw's and
/// each waiting room's secret seed into its logged commitment
/// (`crate::sealed_seed`), so that `seckill reconcile` rebuilds a draw or a
/// room without a beacon that Redis lost before its reveal with the seed it
/// committed to (the name predates rooms' use of it). Every ingress and the
/// reconciling tool need the same key; set it through
/// `SECKILL_DRAW__SEAL_KEY`. Empty: seeds are not sealed, and such a draw
/// comes back under a new seed (its log then shows two commitments), such a
/// room new and empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DrawConfig {
    pub seal_key: Secret,
}

impl DrawConfig {
    /// The key, when one is set.
    pub fn seal_key(&self) -> Option<&[u8]> {
        Some(self.seal_key.expose().as_bytes()).filter(|key| !key.is_empty())
    }
}

impl Validate for DrawConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let length = self.seal_key.expose().len();
        ensure(
            length == 0 || (32..=256).contains(&length),
            "draw.seal_key",
            "must be 32 to 256 characters (or empty: seeds not sealed)",
        )
    }
}

/// The payment provider: any service speaking Stripe's API shape (Stripe
/// itself, or the sandbox `seckill serve payments` runs locally and in the
/// tests). With `base_url` empty, payments are off: priced vouchers cannot
/// be created, and nothing asks a provider before closing an order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PaymentsConfig {
    /// The provider's API, e.g. `https://api.stripe.com`; empty: off.
    pub base_url: String,
    /// The secret API key (`sk_…`); set it through
    /// `SECKILL_PAYMENTS__API_KEY` rather than a file.
    pub api_key: Secret,
    /// Webhook signing secrets (`whsec_…`), needed where callbacks arrive
    /// (the ingress): a callback signed with any of them is accepted, so a
    /// rotation lists the new secret beside the old one until the provider
    /// signs with the new one only.
    pub webhook_secrets: Vec<Secret>,
    /// Oldest signature timestamp accepted, in seconds (Stripe's default
    /// tolerance: 300); also the furthest into the future.
    pub webhook_tolerance_seconds: i64,
    /// Where the provider's checkout sends the buyer back; `{order_id}` and
    /// `{voucher_id}` are replaced by the order's (e.g.
    /// `http://127.0.0.1:8080/sale/{voucher_id}`: the sale page). Required
    /// where checkouts are opened (the ingress).
    pub return_url: String,
    /// Longest wait for one provider call, in milliseconds.
    pub timeout_ms: u64,
    /// Longest a provider callback waits for its answer, in milliseconds:
    /// reading the payment back and logging it. Past it the callback is
    /// answered `503` and the provider delivers it again. Keep it under
    /// the provider's own wait for an answer: a provider that gives up
    /// first counts a failed delivery the ingress never answered.
    pub webhook_answer_ms: u64,
    /// First pause before a refund is asked for again, in milliseconds;
    /// doubles up to `refund_retry_max_ms` while the provider refuses.
    pub refund_retry_ms: u64,
    pub refund_retry_max_ms: u64,
}

impl Default for PaymentsConfig {
    fn default() -> Self {
        Self {
            base_url: String::new(),
            api_key: Secret::default(),
            webhook_secrets: Vec::new(),
            webhook_tolerance_seconds: 300,
            return_url: String::new(),
            timeout_ms: 5_000,
            webhook_answer_ms: 8_000,
            refund_retry_ms: 500,
            refund_retry_max_ms: 30_000,
        }
    }
}

/// The payment sandbox's API key: published, so only ever for the sandbox.
pub const SANDBOX_API_KEY: &str = "sk_test_sandbox";
/// The payment sandbox's webhook signing secret: published, so a callback
/// signed with it proves nothing; refused beside any other provider.
pub const SANDBOX_WEBHOOK_SECRET: &str = "whsec_sandbox";

impl PaymentsConfig {
    /// Whether a provider is configured.
    pub fn enabled(&self) -> bool {
        !self.base_url.is_empty()
    }

    /// Checks what a service taking the provider's callbacks and opening
    /// its checkouts needs on top: a secret to verify callbacks with, and
    /// where the checkout page sends the buyer back.
    pub fn validate_receiving(&self) -> Result<(), ConfigError> {
        self.validate()?;
        let return_ok = self.return_url.starts_with("http://") || self.return_url.starts_with("https://");
        ensure(
            !self.enabled() || return_ok,
            "payments.return_url",
            "must be an http(s) URL when payments.base_url is set: the checkout page sends the buyer back there \
             (e.g. https://shop.example/sale/{voucher_id})",
        )?;
        ensure(
            !self.enabled() || !self.webhook_secrets.is_empty(),
            "payments.webhook_secrets",
            "needs 1 to 8 secrets when payments.base_url is set (the callbacks' signing secrets)",
        )?;
        // Anyone can sign a callback with the sandbox's published secret:
        // beside a real provider it would let forged callbacks in.
        ensure(
            !self.enabled()
                || self.is_sandbox()
                || self.webhook_secrets.iter().all(|secret| secret.expose() != SANDBOX_WEBHOOK_SECRET),
            "payments.webhook_secrets",
            "holds the sandbox's published secret (whsec_sandbox) while payments.api_key is not the sandbox's: \
             set the provider's own webhook signing secret",
        )
    }

    /// The sandbox's settings as `seckill serve payments` runs it on
    /// `base_url` (the local run and the tests).
    pub fn sandbox(base_url: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            api_key: Secret::new(SANDBOX_API_KEY),
            webhook_secrets: vec![Secret::new(SANDBOX_WEBHOOK_SECRET)],
            ..Self::default()
        }
    }

    /// Whether the configured key is the sandbox's published one.
    fn is_sandbox(&self) -> bool {
        self.api_key.expose() == SANDBOX_API_KEY && !self.base_url.contains("stripe.com")
    }
}

impl Validate for PaymentsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if !self.enabled() {
            return Ok(());
        }
        let url_ok = self.base_url.starts_with("http://") || self.base_url.starts_with("https://");
        ensure(url_ok, "payments.base_url", "must be an http:// or https:// URL, or empty to turn payments off")?;
        ensure(!self.api_key.expose().is_empty(), "payments.api_key", "is required when payments.base_url is set")?;
        ensure(self.webhook_secrets.len() <= 8, "payments.webhook_secrets", "holds at most 8 secrets")?;
        ensure(
            self.webhook_secrets.iter().all(|secret| !secret.expose().is_empty()),
            "payments.webhook_secrets",
            "must not hold an empty secret",
        )?;
        ensure(
            (1..=3_600).contains(&self.webhook_tolerance_seconds),
            "payments.webhook_tolerance_seconds",
            "must be 1 to 3600",
        )?;
        ensure((100..=60_000).contains(&self.timeout_ms), "payments.timeout_ms", "must be 100 to 60000")?;
        ensure((500..=60_000).contains(&self.webhook_answer_ms), "payments.webhook_answer_ms", "must be 500 to 60000")?;
        ensure((10..=60_000).contains(&self.refund_retry_ms), "payments.refund_retry_ms", "must be 10 to 60000")?;
        ensure(
            (self.refund_retry_ms..=600_000).contains(&self.refund_retry_max_ms),
            "payments.refund_retry_max_ms",
            "must be refund_retry_ms to 600000",
        )
    }
}

/// Where a service answers HTTP, and how many connections it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Address to bind; port 0 picks a free port (tests).
    pub listen: SocketAddr,
    /// Most connections open at once; past it a new one is answered `503`
    /// and closed at once. Keep it below the process's file limit minus
    /// what Redis, Kafka and the store use.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Most connections open at once from one client address (an IPv6
    /// /64); past it, `503` and closed at once. Above the streams and
    /// long-polls one address may hold, plus its ordinary requests.
    #[serde(default = "default_max_connections_per_address")]
    pub max_connections_per_address: usize,
    /// How long a client has to send a request's headers, on a new
    /// connection and between requests on a kept-alive one (so also how
    /// long an idle connection is kept); then it is closed.
    #[serde(default = "default_header_read_timeout_ms")]
    pub header_read_timeout_ms: u64,
    /// Most requests one HTTP/2 connection carries at once (HTTP/2 in
    /// cleartext with prior knowledge, as a TLS-terminating load balancer
    /// sends it); the per-address bound then holds this many per connection.
    #[serde(default = "default_max_streams_per_connection")]
    pub max_streams_per_connection: u32,
}

fn default_max_streams_per_connection() -> u32 {
    200
}

fn default_max_connections() -> usize {
    16_384
}

fn default_max_connections_per_address() -> usize {
    2_048
}

fn default_header_read_timeout_ms() -> u64 {
    10_000
}

impl HttpConfig {
    /// Binds `127.0.0.1:port`.
    pub fn local(port: u16) -> Self {
        Self::on(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// Binds `listen`, with the default connection bounds.
    pub fn on(listen: SocketAddr) -> Self {
        Self {
            listen,
            max_connections: default_max_connections(),
            max_connections_per_address: default_max_connections_per_address(),
            header_read_timeout_ms: default_header_read_timeout_ms(),
            max_streams_per_connection: default_max_streams_per_connection(),
        }
    }
}

impl Validate for HttpConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        ensure((1..=1_000_000).contains(&self.max_connections), "http.max_connections", "must be 1 to 1000000")?;
        ensure(
            (1..=self.max_connections).contains(&self.max_connections_per_address),
            "http.max_connections_per_address",
            "must be 1 to http.max_connections",
        )?;
        ensure(
            (100..=600_000).contains(&self.header_read_timeout_ms),
            "http.header_read_timeout_ms",
            "must be 100 to 600000",
        )?;
        ensure(
            (1..=10_000).contains(&self.max_streams_per_connection),
            "http.max_streams_per_connection",
            "must be 1 to 10000",
        )
    }
}

/// How a service reaches the Kafka-protocol broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// Bootstrap servers, comma separated.
    pub brokers: String,
    /// Topic names are `{prefix}.sales` and so on.
    pub topic_prefix: String,
    /// Partitions of each topic, fixed at creation: a topic's partition count
    /// decides which partition a voucher's events land on, so it never grows.
    pub partitions: i32,
    /// Replication factor of each topic.
    pub replication: i32,
    /// How long a produce may wait for the broker's acknowledgement.
    pub produce_timeout_ms: u64,
    /// How long the producer waits to fill a batch.
    pub linger_ms: u32,
    /// How long the dead-letter topic keeps a record, set when the topic is
    /// created (-1: for good). The sales and orders topics always keep every
    /// record: they are the source of truth.
    pub dead_letter_retention_ms: i64,
}

/// Thirty days: the default retention of dead letters.
pub const DEFAULT_DEAD_LETTER_RETENTION_MS: i64 = 30 * 24 * 3600 * 1000;

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            brokers: "127.0.0.1:19092".to_owned(),
            topic_prefix: "seckill".to_owned(),
            partitions: 6,
            replication: 1,
            produce_timeout_ms: 5_000,
            linger_ms: 1,
            dead_letter_retention_ms: DEFAULT_DEAD_LETTER_RETENTION_MS,
        }
    }
}

impl KafkaConfig {
    /// The topic names under the configured prefix.
    pub fn topics(&self) -> Topics {
        Topics::with_prefix(&self.topic_prefix)
    }
}

impl Validate for KafkaConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        ensure(!self.brokers.trim().is_empty(), "kafka.brokers", "must name at least one broker")?;
        ensure(
            !self.topic_prefix.is_empty()
                && self.topic_prefix.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
            "kafka.topic_prefix",
            "must be non-empty and use only A-Z a-z 0-9 . _ -",
        )?;
        ensure((1..=1024).contains(&self.partitions), "kafka.partitions", "must be 1 to 1024")?;
        ensure((1..=16).contains(&self.replication), "kafka.replication", "must be 1 to 16")?;
        ensure(
            (100..=120_000).contains(&self.produce_timeout_ms),
            "kafka.produce_timeout_ms",
            "must be 100 to 120000",
        )?;
        ensure(self.linger_ms <= 1_000, "kafka.linger_ms", "must be at most 1000")?;
        ensure(
            self.dead_letter_retention_ms == -1 || self.dead_letter_retention_ms >= 3_600_000,
            "kafka.dead_letter_retention_ms",
            "must be -1 (keep for good) or at least 3600000 (an hour)",
        )
    }
}

/// How a service reaches Redis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisConfig {
    /// `redis://host:port/db`: the one Redis, unless `cluster_nodes` is set.
    pub url: String,
    /// Seed nodes of a Redis Cluster (`redis://host:port` each); when set,
    /// the services speak to the cluster (`url` is then not used) and find
    /// the other nodes from these. Empty: one Redis at `url`.
    pub cluster_nodes: Vec<String>,
    /// Prepended to every key, so several platforms (or tests) share a server.
    pub key_prefix: String,
    /// How long a call may wait for Redis's answer (and a connection for
    /// Redis to accept it): a slow Redis is answered `503`, never a hang.
    pub response_timeout_ms: u64,
    /// How long a voucher's keys stay in Redis after its sale ends (its end
    /// moves with `PATCH ends_at`); then they expire. The log keeps
    /// everything, and `reconcile` restores a voucher still within it.
    /// Set it the same in every service: each sets the expiry it computes.
    pub ended_sale_ttl_seconds: u64,
    /// Whether the ingress waits, before answering an order `202`, until a
    /// replica has acknowledged the admission (`WAIT 1`), so that the
    /// promise survives the loss of the master: `auto` (on once a master
    /// reports a connected replica; off on a Redis without replicas), `on`,
    /// `off`. The ingress's alone; other services ignore it.
    pub replica_acks: ReplicaAcks,
    /// How long an admission waits for a replica's acknowledgement before
    /// it is answered `503` naming the order (it may still exist).
    pub replica_ack_timeout_ms: u64,
}

/// Whether admissions wait for a replica's acknowledgement
/// ([`RedisConfig::replica_acks`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaAcks {
    /// On once a master reports a connected replica (checked at start and
    /// every few seconds), and from then on for the process's life: a
    /// replica lost later is the failure the wait is there for, not a
    /// reason to stop waiting. Off on a Redis that never had one (the
    /// single-node local run).
    #[default]
    Auto,
    /// Always: with no replica connected every admission is answered `503`.
    On,
    /// Never: a `202` can be lost with an unreplicated master.
    Off,
}

/// Default of [`RedisConfig::replica_ack_timeout_ms`]: a replica on the
/// same network acknowledges within a millisecond or two; this leaves room
/// for a pause (a fork, a slow disk) before a buyer is turned away.
pub const DEFAULT_REPLICA_ACK_TIMEOUT_MS: u64 = 500;

/// Default of [`RedisConfig::ended_sale_ttl_seconds`]: a week, past the
/// longest hold (`hold_seconds` is at most a week) of an order created as
/// the sale ended.
pub const DEFAULT_ENDED_SALE_TTL_SECONDS: u64 = 7 * 24 * 3600;

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:16379/".to_owned(),
            cluster_nodes: Vec::new(),
            key_prefix: "seckill".to_owned(),
            response_timeout_ms: 2_000,
            ended_sale_ttl_seconds: DEFAULT_ENDED_SALE_TTL_SECONDS,
            replica_acks: ReplicaAcks::Auto,
            replica_ack_timeout_ms: DEFAULT_REPLICA_ACK_TIMEOUT_MS,
        }
    }
}

impl RedisConfig {
    /// `url` under `key_prefix`, with the default timeouts.
    pub fn new(url: impl Into<String>, key_prefix: impl Into<String>) -> Self {
        Self { url: url.into(), key_prefix: key_prefix.into(), ..Self::default() }
    }

    /// A Redis Cluster reached through `seed_nodes`, under `key_prefix`,
    /// with the default timeouts.
    pub fn cluster(seed_nodes: Vec<String>, key_prefix: impl Into<String>) -> Self {
        Self { cluster_nodes: seed_nodes, key_prefix: key_prefix.into(), ..Self::default() }
    }

    /// Whether the services speak to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        !self.cluster_nodes.is_empty()
    }
}

impl Validate for RedisConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        ensure(
            self.url.starts_with("redis://") || self.url.starts_with("rediss://"),
            "redis.url",
            "must start with redis:// or rediss://",
        )?;
        ensure(self.cluster_nodes.len() <= 100, "redis.cluster_nodes", "must name at most 100 seed nodes")?;
        ensure(
            self.cluster_nodes.iter().all(|node| node.starts_with("redis://") || node.starts_with("rediss://")),
            "redis.cluster_nodes",
            "each must start with redis:// or rediss://",
        )?;
        ensure(
            !self.key_prefix.is_empty() && !self.key_prefix.contains(['{', '}', ' ']),
            "redis.key_prefix",
            "must be non-empty without braces or spaces (braces are hash tags)",
        )?;
        ensure((10..=60_000).contains(&self.response_timeout_ms), "redis.response_timeout_ms", "must be 10 to 60000")?;
        ensure(
            (10..=10_000).contains(&self.replica_ack_timeout_ms),
            "redis.replica_ack_timeout_ms",
            "must be 10 to 10000",
        )
    }
}

/// Default of [`ConsumerConfig::fetch_wait_ms`]; see `BENCHMARKS.md` for
/// what it costs the broker.
pub const DEFAULT_FETCH_WAIT_MS: u64 = 100;

/// How a consuming service (processor, projector) joins its group and sizes
/// its batches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerConfig {
    /// Consumer group of the service's instances.
    pub group: String,
    /// Most records per batch (one store transaction each): bounds memory
    /// and the work redone after a crash.
    pub max_batch: usize,
    /// How long a batch waits to fill once it has a record.
    pub max_wait_ms: u64,
    /// How long the broker may hold a fetch while nothing new has arrived.
    /// Shorter: an idle consumer notices new records sooner. Longer: fewer
    /// fetch requests, which a broker pays for even when they return nothing.
    pub fetch_wait_ms: u64,
    /// How long the group coordinator waits for a silent member before it
    /// hands the member's partitions to the others: after a crash, the
    /// partitions a restarted instance owned stay undecided this long. The
    /// broker refuses values outside its `group.min.session.timeout.ms`
    /// (default 6000) and `group.max.session.timeout.ms`.
    #[serde(default = "default_session_timeout_ms")]
    pub session_timeout_ms: u64,
}

/// Default of [`ConsumerConfig::session_timeout_ms`]: the least a broker
/// accepts by default. Static membership (`group.instance.id`), which would
/// let a restarted instance take its partitions back at once, is not used:
/// with librdkafka a static member whose session expired while its
/// coordinator restarted rejoins without a rebalance and is never given its
/// partitions again (docs/OPERATIONS.md).
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 6_000;

fn default_session_timeout_ms() -> u64 {
    DEFAULT_SESSION_TIMEOUT_MS
}

impl ConsumerConfig {
    /// A group named `group` with the default batch bounds.
    pub fn new(group: &str) -> Self {
        Self {
            group: group.to_owned(),
            max_batch: 500,
            max_wait_ms: 5,
            fetch_wait_ms: DEFAULT_FETCH_WAIT_MS,
            session_timeout_ms: DEFAULT_SESSION_TIMEOUT_MS,
        }
    }
}

impl Validate for ConsumerConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        ensure(!self.group.trim().is_empty(), "consumer.group", "must not be empty")?;
        ensure((1..=10_000).contains(&self.max_batch), "consumer.max_batch", "must be 1 to 10000")?;
        ensure(self.max_wait_ms <= 1_000, "consumer.max_wait_ms", "must be at most 1000")?;
        ensure((1..=1_000).contains(&self.fetch_wait_ms), "consumer.fetch_wait_ms", "must be 1 to 1000")?;
        ensure(
            (1_000..=1_800_000).contains(&self.session_timeout_ms),
            "consumer.session_timeout_ms",
            "must be 1000 to 1800000",
        )
    }
}

/// Which store backend a service uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreBackend {
    /// A redb file on local disk: one process owns it.
    Embedded,
    /// A ScyllaDB (or Cassandra) cluster, shared by every instance.
    Scylla,
}

/// Where a service keeps its derived state. One flat section, so switching
/// the backend is one key (`SECKILL_STORE__BACKEND=scylla`); the keys of the
/// other backend are ignored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    pub backend: StoreBackend,
    /// `embedded`: the database file; created when missing.
    pub path: PathBuf,
    /// `scylla`: contact points, `host:port`.
    pub nodes: Vec<String>,
    /// `scylla`: the keyspace, created (with the migrations) at start-up.
    pub keyspace: String,
    /// `scylla`: replication factor of the keyspace when it is created.
    pub replication_factor: u32,
    /// `scylla`: read the cluster's schema metadata, which token-aware
    /// routing needs. Off only for servers without `system_schema`
    /// (Cassandra 2.x).
    pub schema_metadata: bool,
    /// `scylla`: most rows in one conditional batch; a voucher's writes of a
    /// consumer batch are split into batches of at most this many.
    pub batch_max_rows: usize,
    /// `scylla`: most (estimated) bytes in one conditional batch.
    pub batch_max_bytes: usize,
}

/// Default of [`StoreConfig::batch_max_rows`] and
/// [`StoreConfig::batch_max_bytes`]. Servers bound batches: Cassandra (2.2
/// on) warns past `batch_size_warn_threshold_in_kb` (5 KiB) and refuses past
/// `batch_size_fail_threshold_in_kb` (50 KiB); Cassandra 2.1 only warns (5
/// KiB); ScyllaDB warns past 128 KiB and refuses past 1 MiB. Their sources
/// check those thresholds on unconditional batches across partitions, not
/// on a single-partition conditional batch like ours, whose real bounds are
/// the mutation size limit (half a commit log segment, 16 MiB by default)
/// and one Paxos round finishing within the write and CAS timeouts. A
/// thousand-order batch can pass those; 100 rows or 48 KiB (estimated
/// high) stays below every one of them, the 50 KiB fail threshold included,
/// at the cost of one round trip per 100 decisions of one voucher.
pub const DEFAULT_BATCH_MAX_ROWS: usize = 100;
/// See [`DEFAULT_BATCH_MAX_ROWS`].
pub const DEFAULT_BATCH_MAX_BYTES: usize = 48 * 1024;

impl StoreConfig {
    /// An embedded store in `path`.
    pub fn embedded(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), ..Self::default() }
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: StoreBackend::Embedded,
            path: PathBuf::from(".seckill/store.redb"),
            nodes: vec!["127.0.0.1:9042".to_owned()],
            keyspace: "seckill".to_owned(),
            replication_factor: 1,
            schema_metadata: true,
            batch_max_rows: DEFAULT_BATCH_MAX_ROWS,
            batch_max_bytes: DEFAULT_BATCH_MAX_BYTES,
        }
    }
}

impl Validate for StoreConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        match self.backend {
            StoreBackend::Embedded => ensure(!self.path.as_os_str().is_empty(), "store.path", "must name a file"),
            StoreBackend::Scylla => {
                ensure(!self.nodes.is_empty(), "store.nodes", "must list at least one host:port")?;
                let valid_keyspace = !self.keyspace.is_empty()
                    && self.keyspace.len() <= 48
                    && self.keyspace.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && self.keyspace.starts_with(|c: char| c.is_ascii_alphabetic());
                ensure(valid_keyspace, "store.keyspace", "must be a letter then up to 47 letters, digits or _")?;
                ensure((1..=9).contains(&self.replication_factor), "store.replication_factor", "must be 1 to 9")?;
                ensure((1..=1_000).contains(&self.batch_max_rows), "store.batch_max_rows", "must be 1 to 1000")?;
                ensure(
                    (4_096..=1_048_576).contains(&self.batch_max_bytes),
                    "store.batch_max_bytes",
                    "must be 4096 to 1048576",
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Sample {
        kafka: KafkaConfig,
        redis: RedisConfig,
    }

    impl Validate for Sample {
        fn validate(&self) -> Result<(), ConfigError> {
            self.kafka.validate()?;
            self.redis.validate()
        }
    }

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct WithStore {
        store: StoreConfig,
    }

    impl Validate for WithStore {
        fn validate(&self) -> Result<(), ConfigError> {
            self.store.validate()
        }
    }

    #[test]
    fn the_sandbox_secret_is_refused_beside_a_real_provider() {
        let sandbox = PaymentsConfig {
            return_url: "http://127.0.0.1:8080/sale/{voucher_id}".to_owned(),
            ..PaymentsConfig::sandbox("http://127.0.0.1:8090")
        };
        let nowhere = PaymentsConfig { return_url: String::new(), ..sandbox.clone() };
        assert!(nowhere.validate_receiving().is_err(), "a checkout needs somewhere to send the buyer back");
        assert!(sandbox.validate_receiving().is_ok(), "the sandbox with its own secret");
        let stripe = PaymentsConfig {
            base_url: "https://api.stripe.com".to_owned(),
            api_key: Secret::new("sk_live_abc"),
            ..sandbox.clone()
        };
        let refused = stripe.validate_receiving().expect_err("a forgeable secret beside Stripe");
        assert!(refused.to_string().contains("whsec_sandbox"), "{refused}");
        let own = PaymentsConfig { webhook_secrets: vec![Secret::new("whsec_real")], ..stripe.clone() };
        assert!(own.validate_receiving().is_ok());
        let sandbox_key_at_stripe = PaymentsConfig { api_key: Secret::new(SANDBOX_API_KEY), ..stripe };
        assert!(
            sandbox_key_at_stripe.validate_receiving().is_err(),
            "the sandbox's key does not make Stripe a sandbox"
        );
    }

    #[test]
    fn one_key_switches_the_store_backend_and_bad_keyspaces_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[store]\nbackend = \"scylla\"\nnodes = [\"db1:9042\", \"db2:9042\"]\n").expect("write");
        let loaded: WithStore = load(Some(&file)).expect("loads");
        assert_eq!(loaded.store.backend, StoreBackend::Scylla);
        assert_eq!(loaded.store.nodes.len(), 2);

        std::fs::write(&file, "[store]\nbackend = \"scylla\"\nkeyspace = \"bad-name\"\n").expect("write");
        let error = load::<WithStore>(Some(&file)).expect_err("refused").to_string();
        assert!(error.contains("store.keyspace"), "{error}");
    }

    #[test]
    fn file_overrides_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[kafka]\npartitions = 3\n").expect("write");
        let sample: Sample = load(Some(&file)).expect("loads");
        assert_eq!(sample.kafka.partitions, 3);
        assert_eq!(sample.redis, RedisConfig::default());
    }

    #[test]
    fn unknown_and_out_of_range_keys_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[kafka]\npartitionz = 3\n").expect("write");
        let err = load::<Sample>(Some(&file)).expect_err("unknown key").to_string();
        assert!(err.contains("partitionz"), "{err}");

        std::fs::write(&file, "[kafka]\npartitions = 0\n").expect("write");
        let err = load::<Sample>(Some(&file)).expect_err("range").to_string();
        assert!(err.contains("kafka.partitions"), "{err}");

        let err = load::<Sample>(Some(&dir.path().join("absent.toml"))).expect_err("missing");
        assert!(matches!(err, ConfigError::MissingFile(_)));
    }

    #[test]
    fn a_redis_cluster_is_named_by_its_seed_nodes() {
        let overrides = [("redis.cluster_nodes", r#"["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]"#)];
        let sample: Sample = load_with(None, &overrides).expect("loads");
        assert!(sample.redis.is_cluster());
        assert_eq!(sample.redis.cluster_nodes, vec!["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]);
        assert!(!Sample::default().redis.is_cluster(), "one Redis unless seed nodes are given");
        let error =
            load_with::<Sample>(None, &[("redis.cluster_nodes", r#"["127.0.0.1:7000"]"#)]).expect_err("refused");
        assert!(error.to_string().contains("redis.cluster_nodes"), "{error}");
    }

    #[test]
    fn replica_acknowledgements_are_auto_unless_set() {
        assert_eq!(Sample::default().redis.replica_acks, ReplicaAcks::Auto);
        for (value, expected) in [("on", ReplicaAcks::On), ("off", ReplicaAcks::Off), ("auto", ReplicaAcks::Auto)] {
            let sample: Sample = load_with(None, &[("redis.replica_acks", value)]).expect("loads");
            assert_eq!(sample.redis.replica_acks, expected);
        }
        let error = load_with::<Sample>(None, &[("redis.replica_acks", "always")]).expect_err("refused");
        assert!(error.to_string().contains("replica_acks"), "{error}");
        let error = load_with::<Sample>(None, &[("redis.replica_ack_timeout_ms", "0")]).expect_err("refused");
        assert!(error.to_string().contains("redis.replica_ack_timeout_ms"), "{error}");
    }

    #[test]
    fn secrets_do_not_print() {
        assert_eq!(format!("{:?}", Secret::new("hunter2")), "Secret([redacted])");
    }
}
