//! One connection type for a single Redis and a Redis Cluster, so the rest
//! of the gate does not care which it speaks to.
//!
//! A single Redis is reached through a `ConnectionManager` (it reconnects
//! by itself), a cluster through the `redis` crate's cluster client, which
//! learns the slot map from the seed nodes, follows `MOVED` and `ASK`
//! redirections while slots migrate, waits and retries on `TRYAGAIN` (a
//! multi-key call whose keys are half moved) and `CLUSTERDOWN`, and reloads
//! the slot map after a failover. `redis::Script` works through either,
//! NOSCRIPT fallback included (SCRIPT LOAD goes to every master).
//!
//! The client keeps its slot map until a redirection or a lost connection
//! tells it to look again. When a master dies, the look it takes at once
//! can still show the dead master serving its slots (the replica has not
//! taken over yet), and the calls it then routes to the dead address time
//! out without ever telling it to look again. So a cluster call that times
//! out or loses its connection has the connection rebuilt in the background
//! (at most once per [`REBUILD_EVERY`]): a fresh client asks the live seeds
//! for the slot map, and later calls go where the slots are now.
//!
//! The one difference callers see: a cluster refuses a pipeline whose
//! commands are on different slots, so [`GateConnection::query_each`]
//! pipelines on a single Redis and sends the commands side by side (one
//! round trip of latency, each to its slot's master) on a cluster.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value};
use seckill_core::config::RedisConfig;

/// How many times the cluster client retries a call that met a moving slot,
/// a failover or a dropped connection, and the wait between tries. Every
/// try stays within the response timeout, which bounds the whole call.
const CLUSTER_RETRIES: u32 = 12;
const CLUSTER_MIN_RETRY_WAIT_MS: u64 = 10;
const CLUSTER_MAX_RETRY_WAIT_MS: u64 = 250;
/// Least time between two rebuilds of a cluster connection.
const REBUILD_EVERY: Duration = Duration::from_secs(1);
/// Keys asked per SCAN call.
const SCAN_COUNT: u64 = 1_000;
/// How long a call refused because its slot is moving (`ASK`, `TRYAGAIN`
/// past the client's own retries: a multi-key script meets its keys half
/// moved for as long as the slot migrates) is tried again, and the pause
/// between tries. Such a refusal means the call did not run, so trying again
/// is safe, and it turns a resharding into latency instead of errors.
const MOVING_SLOT_PATIENCE: Duration = Duration::from_secs(5);
const MOVING_SLOT_PAUSE: Duration = Duration::from_millis(25);

/// Runs `call` until it is not refused for a moving slot (or
/// `MOVING_SLOT_PATIENCE` has passed); returns what it last answered.
pub(crate) async fn through_moving_slots<T, F, Fut>(mut call: F) -> RedisResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = RedisResult<T>>,
{
    let started = std::time::Instant::now();
    loop {
        match call().await {
            Err(error) if error.is_cluster_error() && started.elapsed() < MOVING_SLOT_PATIENCE => {
                tokio::time::sleep(MOVING_SLOT_PAUSE).await;
            }
            answer => return answer,
        }
    }
}

/// How long a service start waits for a Redis that answers "not ready yet".
const STARTUP_PATIENCE: Duration = Duration::from_secs(120);
/// The pause between two looks at a Redis that is not ready.
const NOT_READY_PAUSE: Duration = Duration::from_millis(200);

/// Whether `error` is a server saying it cannot serve yet, as opposed to
/// one that is wrong or unreachable.
fn not_ready_yet(error: &redis::RedisError) -> bool {
    matches!(error.code(), Some("LOADING" | "CLUSTERDOWN" | "TRYAGAIN" | "MASTERDOWN"))
}

/// A connection to a single Redis or to a Redis Cluster.
#[derive(Clone)]
pub enum GateConnection {
    Single(ConnectionManager),
    Cluster(ClusterHandle),
}

/// A cluster connection that is rebuilt when its calls time out or lose
/// their connection (see the module header). Clones share it.
#[derive(Clone)]
pub struct ClusterHandle {
    client: Arc<ClusterClient>,
    current: Arc<RwLock<ClusterConnection>>,
    /// When the last rebuild started.
    last_rebuild: Arc<Mutex<Instant>>,
}

impl std::fmt::Debug for ClusterHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterHandle")
    }
}

impl ClusterHandle {
    fn new(client: ClusterClient, connection: ClusterConnection) -> Self {
        let long_ago = Instant::now().checked_sub(REBUILD_EVERY).unwrap_or_else(Instant::now);
        Self {
            client: Arc::new(client),
            current: Arc::new(RwLock::new(connection)),
            last_rebuild: Arc::new(Mutex::new(long_ago)),
        }
    }

    /// The connection calls go through now.
    fn connection(&self) -> ClusterConnection {
        self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Rebuilds the connection in the background after `error`, if it says
    /// a node did not answer and no rebuild started in the last
    /// [`REBUILD_EVERY`].
    fn after_error(&self, error: &redis::RedisError) {
        let unanswered = error.is_timeout() || error.is_io_error() || error.is_connection_dropped();
        if !unanswered || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        {
            let mut last = self.last_rebuild.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if last.elapsed() < REBUILD_EVERY {
                return;
            }
            *last = Instant::now();
        }
        let handle = self.clone();
        tokio::spawn(async move {
            match handle.client.get_async_connection().await {
                Ok(fresh) => {
                    *handle.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = fresh;
                    tracing::info!("Rebuilt the Redis Cluster connection after a node stopped answering.");
                }
                Err(error) => {
                    tracing::warn!(%error, "Could not rebuild the Redis Cluster connection; retrying on the next failure.")
                }
            }
        });
    }
}

impl std::fmt::Debug for GateConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_cluster() { "GateConnection::Cluster" } else { "GateConnection::Single" })
    }
}

impl From<ConnectionManager> for GateConnection {
    fn from(connection: ConnectionManager) -> Self {
        Self::Single(connection)
    }
}

impl GateConnection {
    /// Connects to what `config` names: the cluster of `cluster_nodes` when
    /// set, else the Redis at `url`. Every call (and connecting) is bounded
    /// by `response_timeout`.
    pub async fn open(config: &RedisConfig, response_timeout: Duration) -> RedisResult<Self> {
        Self::open_when_ready(config, response_timeout, STARTUP_PATIENCE).await
    }

    /// As [`open`](Self::open), waiting up to `patience` while the server
    /// answers that it is not ready yet: a Redis loading its dataset after a
    /// restart (`LOADING`; seconds for a big append-only file), a cluster
    /// still agreeing on its slots (`CLUSTERDOWN`). Says so once in the log
    /// rather than failing the service's start.
    pub async fn open_when_ready(
        config: &RedisConfig,
        response_timeout: Duration,
        patience: Duration,
    ) -> RedisResult<Self> {
        let started = Instant::now();
        let mut said = false;
        loop {
            let attempt = match Self::open_once(config, response_timeout).await {
                Ok(connection) => connection.ping().await.map(|()| connection),
                Err(error) => Err(error),
            };
            match attempt {
                Err(error) if not_ready_yet(&error) && started.elapsed() < patience => {
                    if !said {
                        tracing::warn!(%error, ?patience, "Redis is not ready yet (loading its data?); waiting for it.");
                        said = true;
                    }
                    tokio::time::sleep(NOT_READY_PAUSE).await;
                }
                Ok(connection) => {
                    if said {
                        tracing::info!(waited = ?started.elapsed(), "Redis is ready.");
                    }
                    return Ok(connection);
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn ping(&self) -> RedisResult<()> {
        match self {
            Self::Single(manager) => redis::cmd("PING").query_async(&mut manager.clone()).await,
            Self::Cluster(handle) => redis::cmd("PING").query_async(&mut handle.connection()).await,
        }
    }

    async fn open_once(config: &RedisConfig, response_timeout: Duration) -> RedisResult<Self> {
        if config.is_cluster() {
            let client = ClusterClientBuilder::new(config.cluster_nodes.iter().map(String::as_str))
                .connection_timeout(response_timeout)
                .response_timeout(response_timeout)
                .retries(CLUSTER_RETRIES)
                .min_retry_wait(CLUSTER_MIN_RETRY_WAIT_MS)
                .max_retry_wait(CLUSTER_MAX_RETRY_WAIT_MS)
                .build()?;
            let connection = client.get_async_connection().await?;
            return Ok(Self::Cluster(ClusterHandle::new(client, connection)));
        }
        let manager = redis::Client::open(config.url.as_str())?
            .get_connection_manager_with_config(
                ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(response_timeout))
                    .set_response_timeout(Some(response_timeout)),
            )
            .await?;
        Ok(Self::Single(manager))
    }

    /// Whether this speaks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// Runs `commands`, each touching one slot, and returns their replies in
    /// order: one pipeline on a single Redis, side by side on a cluster.
    pub async fn query_each<T: FromRedisValue>(&self, commands: Vec<Cmd>) -> RedisResult<Vec<T>> {
        match self {
            Self::Single(manager) => {
                if commands.is_empty() {
                    return Ok(Vec::new());
                }
                let mut pipe = redis::pipe();
                for command in commands {
                    pipe.add_command(command);
                }
                pipe.query_async(&mut manager.clone()).await
            }
            Self::Cluster(_) => {
                try_join_all(commands.into_iter().map(|command| {
                    let mut cluster = self.clone();
                    async move { command.query_async::<T>(&mut cluster).await }
                }))
                .await
            }
        }
    }

    /// The keys matching `pattern` of Redis `kind` (e.g. `stream`), on every
    /// master of a cluster. SCAN walks the whole keyspace in steps of a
    /// thousand keys: for housekeeping, not for a request's path.
    pub async fn scan(&self, pattern: &str, kind: &str) -> RedisResult<Vec<String>> {
        let nodes: Vec<Option<(String, u16)>> = match self {
            Self::Single(_) => vec![None],
            Self::Cluster(_) => self.masters().await?.into_iter().map(Some).collect(),
        };
        let mut found = Vec::new();
        for node in nodes {
            let mut cursor = "0".to_owned();
            loop {
                let mut command = redis::cmd("SCAN");
                command.arg(&cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(SCAN_COUNT).arg("TYPE").arg(kind);
                let (next, keys): (String, Vec<String>) = self.query_on(command, node.clone()).await?;
                found.extend(keys);
                if next == "0" {
                    break;
                }
                cursor = next;
            }
        }
        found.sort();
        found.dedup();
        Ok(found)
    }

    /// Runs `command` on every master of a cluster, or on the one Redis.
    pub(crate) async fn on_each_master<T: FromRedisValue>(&self, command: &Cmd) -> RedisResult<Vec<T>> {
        let nodes: Vec<Option<(String, u16)>> = match self {
            Self::Single(_) => vec![None],
            Self::Cluster(_) => self.masters().await?.into_iter().map(Some).collect(),
        };
        let mut answers = Vec::with_capacity(nodes.len());
        for node in nodes {
            answers.push(self.query_on(command.clone(), node).await?);
        }
        Ok(answers)
    }

    /// Runs `command` on the master at `node` of a cluster (None: wherever
    /// it routes itself, the one Redis).
    async fn query_on<T: FromRedisValue>(&self, command: Cmd, node: Option<(String, u16)>) -> RedisResult<T> {
        match (self, node) {
            (Self::Cluster(cluster), Some((host, port))) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
                let value = cluster.connection().route_command(command, routing).await.inspect_err(|error| {
                    cluster.after_error(error);
                })?;
                redis::from_redis_value(value).map_err(redis::RedisError::from)
            }
            _ => command.query_async(&mut self.clone()).await,
        }
    }

    /// The masters of a cluster as `(host, port)`, from `CLUSTER SLOTS`
    /// (empty on a single Redis).
    pub async fn masters(&self) -> RedisResult<Vec<(String, u16)>> {
        let Self::Cluster(cluster) = self else { return Ok(Vec::new()) };
        let ranges: Vec<Value> =
            redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut Self::Cluster(cluster.clone())).await?;
        let mut masters: Vec<(String, u16)> = ranges
            .into_iter()
            .filter_map(|range| match range {
                Value::Array(fields) => fields.into_iter().nth(2),
                _ => None,
            })
            .filter_map(|node| match node {
                Value::Array(node) => {
                    let host: String = redis::from_redis_value_ref(node.first()?).ok()?;
                    let port: u16 = redis::from_redis_value_ref(node.get(1)?).ok()?;
                    Some((host, port))
                }
                _ => None,
            })
            .collect();
        masters.sort();
        masters.dedup();
        Ok(masters)
    }
}

impl ConnectionLike for GateConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(manager) => manager.req_packed_command(cmd),
            Self::Cluster(cluster) => {
                let (handle, mut connection) = (cluster.clone(), cluster.connection());
                Box::pin(async move {
                    connection.req_packed_command(cmd).await.inspect_err(|error| handle.after_error(error))
                })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(manager) => manager.req_packed_commands(pipeline, offset, count),
            Self::Cluster(cluster) => {
                let (handle, mut connection) = (cluster.clone(), cluster.connection());
                Box::pin(async move {
                    connection
                        .req_packed_commands(pipeline, offset, count)
                        .await
                        .inspect_err(|error| handle.after_error(error))
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(manager) => manager.get_db(),
            Self::Cluster(cluster) => cluster.connection().get_db(),
        }
    }
}

/// An answer from Redis that is not what the script or command promises.
pub(crate) fn unexpected(what: &'static str, detail: String) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, what, detail))
}
