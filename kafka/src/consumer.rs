//! At-least-once batch consumption.
//!
//! The loop every consumer runs: [`BatchConsumer::next_batch`], make the
//! batch's effects durable (store writes, produced outcomes acknowledged),
//! then [`BatchConsumer::store`] its offsets. Stored offsets are committed in
//! the background and on shutdown, so a crash replays at most the batches
//! whose effects were not yet acknowledged.

use std::collections::HashMap;
use std::time::Duration;

use prometheus::IntGaugeVec;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError as RdKafkaError, RDKafkaErrorCode};
use rdkafka::message::{Message, OwnedMessage};
use seckill_core::config::{ConsumerConfig, KafkaConfig};
use seckill_core::Envelope;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lag::{LagContext, STATISTICS_INTERVAL_MS};
use crate::KafkaError;

/// How a consumer joins its group and sizes its batches.
#[derive(Clone, Debug)]
pub struct ConsumerSettings {
    /// Bootstrap servers.
    pub brokers: String,
    /// Consumer group; one instance owns each partition.
    pub group: String,
    /// Most records per batch: bounds memory and the work redone after a crash.
    pub max_batch: usize,
    /// How long to wait for more records once a batch has one.
    pub max_wait: Duration,
    /// How long the broker may hold a fetch that found nothing new.
    pub fetch_wait: Duration,
    /// How long the coordinator waits for a silent member (a crashed
    /// instance) before reassigning its partitions.
    pub session_timeout: Duration,
}

/// Fetch wait for short-lived readers (tools, tests), which want records as
/// soon as they exist and do not poll for long.
pub const READER_FETCH_WAIT: Duration = Duration::from_millis(20);

impl ConsumerSettings {
    /// Settings for a short-lived reader (a tool, a test) of `group`: records
    /// as soon as they exist, batches of up to 1,000 within 50 ms.
    pub fn reader(brokers: &str, group: String) -> Self {
        Self {
            brokers: brokers.to_owned(),
            group,
            max_batch: 1_000,
            max_wait: Duration::from_millis(50),
            fetch_wait: READER_FETCH_WAIT,
            session_timeout: Duration::from_millis(seckill_core::config::DEFAULT_SESSION_TIMEOUT_MS),
        }
    }

    /// Settings from the service's config sections.
    pub fn new(kafka: &KafkaConfig, consumer: &ConsumerConfig) -> Self {
        Self {
            brokers: kafka.brokers.clone(),
            group: consumer.group.clone(),
            max_batch: consumer.max_batch,
            max_wait: Duration::from_millis(consumer.max_wait_ms),
            fetch_wait: Duration::from_millis(consumer.fetch_wait_ms),
            session_timeout: Duration::from_millis(consumer.session_timeout_ms),
        }
    }
}

/// A group member that hands out batches and stores offsets on request.
pub struct BatchConsumer {
    /// Always `Some` until dropped; see the `Drop` impl.
    consumer: Option<StreamConsumer<LagContext>>,
    max_batch: usize,
    max_wait: Duration,
}

impl std::fmt::Debug for BatchConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchConsumer")
            .field("max_batch", &self.max_batch)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl BatchConsumer {
    /// Joins `settings.group` and subscribes to `topics`.
    pub fn subscribe(settings: &ConsumerSettings, topics: &[&str]) -> Result<Self, KafkaError> {
        let consumer: StreamConsumer<LagContext> = ClientConfig::new()
            .set("bootstrap.servers", &settings.brokers)
            .set("group.id", &settings.group)
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", "500")
            // Offsets are stored by `store` only once a batch's effects are
            // durable; the background commit then only sends those.
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false")
            // The broker answers a fetch at once when records are there; this
            // bounds how long it holds one that found none.
            .set("fetch.wait.max.ms", settings.fetch_wait.as_millis().max(1).to_string())
            .set("session.timeout.ms", settings.session_timeout.as_millis().to_string())
            // A third of the session at most, so two lost heartbeats do not
            // end it; more often costs the coordinator little.
            .set("heartbeat.interval.ms", (settings.session_timeout.as_millis() / 3).clamp(100, 1_000).to_string())
            .set("statistics.interval.ms", STATISTICS_INTERVAL_MS)
            .create_with_context(LagContext::default())
            .map_err(KafkaError::Client)?;
        consumer.subscribe(topics).map_err(KafkaError::Consume)?;
        Ok(Self { consumer: Some(consumer), max_batch: settings.max_batch.max(1), max_wait: settings.max_wait })
    }

    /// Reports the lag of each assigned partition in `gauge` (labels
    /// `topic`, `partition`): records behind the high watermark, counted
    /// from the offset last stored, refreshed every second from librdkafka's
    /// statistics.
    pub fn with_lag_gauge(self, gauge: IntGaugeVec) -> Self {
        self.consumer().context().report_to(gauge);
        self
    }

    fn consumer(&self) -> &StreamConsumer<LagContext> {
        self.consumer.as_ref().expect("the consumer exists until drop")
    }

    /// Waits for the next batch; empty when `shutdown` fires first.
    pub async fn next_batch(&self, shutdown: &CancellationToken) -> Result<Vec<OwnedMessage>, KafkaError> {
        self.fill_batch(None, shutdown).await
    }

    /// Like [`next_batch`](Self::next_batch), but empty when no record
    /// arrives within `idle`. Readers that must notice a quiet topic use
    /// this rather than wrapping `next_batch` in a timeout: a timeout that
    /// fires while a batch is being filled drops the records already
    /// received, and the reader never sees them (the stream has moved past).
    pub async fn next_batch_or_idle(
        &self,
        idle: Duration,
        shutdown: &CancellationToken,
    ) -> Result<Vec<OwnedMessage>, KafkaError> {
        self.fill_batch(Some(idle), shutdown).await
    }

    /// Not cancel-safe once the first record is in: only `shutdown` and
    /// `idle`, both before that record, end it early.
    async fn fill_batch(
        &self,
        idle: Option<Duration>,
        shutdown: &CancellationToken,
    ) -> Result<Vec<OwnedMessage>, KafkaError> {
        let quiet = async {
            match idle {
                Some(idle) => tokio::time::sleep(idle).await,
                None => std::future::pending().await,
            }
        };
        let first = tokio::select! {
            biased;
            _ = shutdown.cancelled() => return Ok(Vec::new()),
            () = quiet => return Ok(Vec::new()),
            received = self.consumer().recv() => received.map_err(KafkaError::Consume)?.detach(),
        };
        let mut batch = Vec::with_capacity(self.max_batch.min(64));
        batch.push(first);
        let deadline = Instant::now() + self.max_wait;
        while batch.len() < self.max_batch {
            match tokio::time::timeout_at(deadline, self.consumer().recv()).await {
                Ok(Ok(message)) => batch.push(message.detach()),
                Ok(Err(error)) => {
                    tracing::warn!(%error, "Consumer error while filling a batch.");
                    break;
                }
                Err(_) => break,
            }
        }
        Ok(batch)
    }

    /// Marks every record of `batch` as done: its offsets go out with the
    /// next commit.
    pub fn store(&self, batch: &[OwnedMessage]) {
        let mut next: HashMap<(&str, i32), i64> = HashMap::new();
        for message in batch {
            let entry = next.entry((message.topic(), message.partition())).or_insert(message.offset());
            *entry = (*entry).max(message.offset());
        }
        for ((topic, partition), offset) in next {
            // After a rebalance the partition may belong to another member;
            // it will replay these records, which consumers tolerate.
            if let Err(error) = self.consumer().store_offset(topic, partition, offset) {
                tracing::debug!(%error, topic, partition, offset, "Offset not stored (partition revoked).");
            }
        }
    }

    /// Commits the stored offsets now (shutdown).
    pub fn commit(&self) -> Result<(), KafkaError> {
        match self.consumer().commit_consumer_state(CommitMode::Sync) {
            Ok(()) => Ok(()),
            Err(RdKafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => Ok(()),
            Err(error) => Err(KafkaError::Commit(error)),
        }
    }
}

/// Returned by a [`BatchHandler`] that gave up on a batch because shutdown
/// began: the batch's offsets stay unstored and it will be replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted;

/// Pause between attempts when a dependency fails.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Runs `attempt` until it succeeds, pausing between failures (each logged
/// with `what`); gives up only when shutdown begins.
pub async fn retry<T, E, F, Fut>(shutdown: &CancellationToken, what: &str, mut attempt: F) -> Result<T, Interrupted>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) => {
                tracing::error!(%error, what, "Failed; retrying.");
                retry_pause(shutdown).await?;
            }
        }
    }
}

/// The event a record carries, or why it cannot be used (the dead-letter
/// reason).
pub fn decode(message: &OwnedMessage) -> Result<Envelope, String> {
    let payload = message.payload().ok_or_else(|| "record has no payload".to_owned())?;
    Envelope::decode(payload).map_err(|e| e.to_string())
}

/// Waits before a retry; fails when shutdown begins meanwhile.
pub async fn retry_pause(shutdown: &CancellationToken) -> Result<(), Interrupted> {
    tokio::select! {
        () = shutdown.cancelled() => Err(Interrupted),
        () = tokio::time::sleep(RETRY_PAUSE) => Ok(()),
    }
}

/// What a consuming service does with a batch.
pub trait BatchHandler {
    /// Makes every effect of `batch` durable, retrying failures until they
    /// succeed or `shutdown` begins. Must be idempotent: a batch is handled
    /// again after a crash or rebalance.
    fn handle(
        &self,
        batch: &[OwnedMessage],
        shutdown: &CancellationToken,
    ) -> impl std::future::Future<Output = Result<(), Interrupted>> + Send;
}

impl BatchConsumer {
    /// The at-least-once loop: batch, handle, store offsets; on shutdown,
    /// commit what was stored and leave the group.
    pub async fn run<H: BatchHandler>(self, handler: &H, shutdown: &CancellationToken) {
        loop {
            let batch = match self.next_batch(shutdown).await {
                Ok(batch) if batch.is_empty() => break,
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(%error, "Consuming failed; retrying.");
                    if retry_pause(shutdown).await.is_err() {
                        break;
                    }
                    continue;
                }
            };
            if handler.handle(&batch, shutdown).await.is_err() {
                break;
            }
            self.store(&batch);
        }
        if let Err(error) = self.commit() {
            tracing::warn!(%error, "Final offset commit failed; the last batches will be replayed.");
        }
        self.close(CLOSE_TIMEOUT).await;
    }

    /// Leaves the group. librdkafka's close blocks until the broker answers,
    /// so it runs on its own thread and is abandoned after `timeout` (the
    /// group then expires the member by its session timeout).
    pub async fn close(mut self, timeout: Duration) {
        let closed = close_in_background(self.consumer.take());
        if tokio::time::timeout(timeout, closed).await.is_err() {
            tracing::warn!(?timeout, "The consumer did not leave its group in time; abandoning it.");
        }
    }
}

impl Drop for BatchConsumer {
    /// Dropping a librdkafka consumer blocks until it has left its group,
    /// indefinitely if the broker is gone; never do that on a runtime thread.
    fn drop(&mut self) {
        drop(close_in_background(self.consumer.take()));
    }
}

/// Drops `consumer` on its own thread; the receiver fires when it is closed.
fn close_in_background(consumer: Option<StreamConsumer<LagContext>>) -> tokio::sync::oneshot::Receiver<()> {
    let (done, closed) = tokio::sync::oneshot::channel();
    if let Some(consumer) = consumer {
        std::thread::spawn(move || {
            drop(consumer);
            let _ = done.send(());
        });
    }
    closed
}

/// Longest wait for a consumer to leave its group at shutdown.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
