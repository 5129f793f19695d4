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
use rdkafka::message::{Headers, Message, OwnedMessage};
use rdkafka::Offset;
use seckill_core::config::{ConsumerConfig, KafkaConfig};
use seckill_core::Envelope;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lag::{LagContext, SOCKET_TIMEOUT_MS, STATISTICS_INTERVAL_MS};
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
    /// How long the application may go without polling before librdkafka
    /// leaves the group on its own (`max.poll.interval.ms`). A handler gets
    /// half of it per batch ([`BatchConsumer::run`]), then the batch is
    /// rewound and the consumer polls, so a batch stuck on a dependency
    /// never outlives the member's place in the group.
    pub max_poll_interval: Duration,
}

/// Default of [`ConsumerSettings::max_poll_interval`]: a minute. The
/// budget it gives a batch (30 s) is far above a healthy batch (milliseconds
/// to a second) and above a dependency's own timeouts (2 s for Redis, 5 s
/// for a produce), so a batch is rewound only when a dependency is down,
/// and a processor whose Redis is down still holds its partitions rather
/// than passing them round the group every five minutes (librdkafka's
/// default) to members that would wait on the same Redis.
pub const DEFAULT_MAX_POLL_INTERVAL: Duration = Duration::from_secs(60);

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
            max_poll_interval: DEFAULT_MAX_POLL_INTERVAL,
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
            max_poll_interval: DEFAULT_MAX_POLL_INTERVAL,
        }
    }
}

/// A group member that hands out batches and stores offsets on request.
pub struct BatchConsumer {
    /// Always `Some` until dropped; see the `Drop` impl.
    consumer: Option<StreamConsumer<LagContext>>,
    max_batch: usize,
    max_wait: Duration,
    /// How long a handler may work on one batch before it is rewound (see
    /// [`ConsumerSettings::max_poll_interval`]).
    budget: Duration,
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
            // Set, not left at librdkafka's five minutes: `run` gives each
            // batch half of it, so the member polls (and stays in the
            // group) well before librdkafka would leave it.
            .set("max.poll.interval.ms", max_poll_interval_ms(settings).to_string())
            .set("statistics.interval.ms", STATISTICS_INTERVAL_MS)
            .set("socket.timeout.ms", SOCKET_TIMEOUT_MS)
            .create_with_context(LagContext::default())
            .map_err(KafkaError::Client)?;
        consumer.subscribe(topics).map_err(KafkaError::Consume)?;
        let budget = Duration::from_millis(max_poll_interval_ms(settings) / 2);
        Ok(Self { consumer: Some(consumer), max_batch: settings.max_batch.max(1), max_wait: settings.max_wait, budget })
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
        tokio::pin!(quiet);
        loop {
            let first = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Ok(Vec::new()),
                () = &mut quiet => return Ok(Vec::new()),
                received = self.consumer().recv() => received.map_err(KafkaError::Consume)?.detach(),
            };
            // A rebalance served while the batch fills (inside `recv`) may
            // take partitions whose records are already in it.
            let revocations = self.consumer().context().revocations();
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
            if self.consumer().context().revocations() != revocations {
                self.keep_assigned(&mut batch);
            }
            // Emptied by a rebalance: not the end (an empty batch is
            // shutdown or a quiet topic to the caller); fill another.
            if !batch.is_empty() {
                return Ok(batch);
            }
        }
    }

    /// Drops from `batch` the records of partitions no longer assigned: a
    /// rebalance gave them to another member, which reads them from the
    /// last committed offset and decides them itself. Handled here too,
    /// their effects would race that member's, and their offsets could
    /// not be stored.
    fn keep_assigned(&self, batch: &mut Vec<OwnedMessage>) {
        let assigned = match self.consumer().assignment() {
            Ok(assigned) => assigned,
            Err(error) => {
                tracing::warn!(%error, "The assignment is unknown; dropping the batch to read it again.");
                batch.clear();
                return;
            }
        };
        let before = batch.len();
        batch.retain(|message| assigned.find_partition(message.topic(), message.partition()).is_some());
        if batch.len() < before {
            tracing::info!(dropped = before - batch.len(), "Records of revoked partitions left to their new owner.");
        }
    }

    /// Marks every record of `batch` as done: its offsets go out with the
    /// next commit. Returns how many of its partitions refused the offset:
    /// they were revoked since the batch was read (not by a rebalance
    /// served while it filled: those records are dropped from the batch).
    pub fn store(&self, batch: &[OwnedMessage]) -> usize {
        let mut refused = 0;
        for ((topic, partition), offset) in offset_range(batch, i64::max) {
            // The partition belongs to another member now, which replays
            // these records (consumers are idempotent); nothing to undo.
            if let Err(error) = self.consumer().store_offset(topic, partition, offset) {
                tracing::warn!(%error, topic, partition, offset, "Offset not stored: the partition was revoked.");
                refused += 1;
            }
        }
        refused
    }

    /// Sets the position of every partition of `batch` back to its first
    /// record in it, so the next batches read it again. Dropped records
    /// already fetched are fetched again.
    fn rewind(&self, batch: &[OwnedMessage]) {
        for ((topic, partition), offset) in offset_range(batch, i64::min) {
            // Zero timeout: librdkafka seeks in the background. A partition
            // revoked meanwhile refuses; its new owner starts from the
            // committed offset anyway.
            if let Err(error) = self.consumer().seek(topic, partition, Offset::Offset(offset), Duration::ZERO) {
                tracing::info!(%error, topic, partition, offset, "Not rewound (the partition was revoked).");
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

/// Per partition of `batch`, the largest (`i64::max`) or smallest
/// (`i64::min`) offset it holds.
fn offset_range(batch: &[OwnedMessage], pick: fn(i64, i64) -> i64) -> HashMap<(&str, i32), i64> {
    let mut range: HashMap<(&str, i32), i64> = HashMap::new();
    for message in batch {
        let entry = range.entry((message.topic(), message.partition())).or_insert(message.offset());
        *entry = pick(*entry, message.offset());
    }
    range
}

/// The `max.poll.interval.ms` `settings` ask for: at least the session
/// timeout, as librdkafka requires.
fn max_poll_interval_ms(settings: &ConsumerSettings) -> u64 {
    let ms = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    ms(settings.max_poll_interval).max(ms(settings.session_timeout))
}

/// Returned by a [`BatchHandler`] that gave up on a batch because its
/// token was cancelled (shutdown, or the batch's budget spent) or because
/// its writes were fenced: the batch's offsets stay unstored and it will be
/// handled again.
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

/// The event type a record's `type` header names (every producer of the
/// platform sets it), without decoding the payload: readers that act on a
/// few kinds pass the others by for the cost of a header lookup. `None`
/// when the header is missing or not UTF-8: such a record must be decoded.
pub fn record_kind(message: &OwnedMessage) -> Option<&str> {
    let headers = message.headers()?;
    headers
        .iter()
        .find(|header| header.key == "type")
        .and_then(|header| header.value)
        .and_then(|value| std::str::from_utf8(value).ok())
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
    /// Whether a batch not handled within its budget is given up and read
    /// again ([`BatchConsumer::run`]). A handler whose retries must not
    /// start over (their attempt numbers are idempotency keys) says no,
    /// and its consumer gets a `max.poll.interval.ms` above its longest
    /// batch instead.
    const REWIND_WHEN_STUCK: bool = true;

    /// Makes every effect of `batch` durable, retrying failures until they
    /// succeed or `shutdown` is cancelled (shutdown, or the batch's budget
    /// spent: [`BatchConsumer::run`]). Must be idempotent: a batch is
    /// handled again after a crash, a rebalance or a rewind.
    fn handle(
        &self,
        batch: &[OwnedMessage],
        shutdown: &CancellationToken,
    ) -> impl std::future::Future<Output = Result<(), Interrupted>> + Send;

    /// Called before the first batch after each assignment this member
    /// received: from now on it may handle records another member handled
    /// before (the processor takes a fencing epoch here). Nothing by
    /// default.
    fn assigned(
        &self,
        shutdown: &CancellationToken,
    ) -> impl std::future::Future<Output = Result<(), Interrupted>> + Send {
        let _ = shutdown;
        async { Ok(()) }
    }
}

impl BatchConsumer {
    /// The at-least-once loop: batch, handle, store offsets; on shutdown,
    /// commit what was stored and leave the group.
    ///
    /// A batch not handled within its budget (half of
    /// `max.poll.interval.ms`) is given up and rewound, and the consumer
    /// polls before handling it again: a member whose batch is stuck on a
    /// dependency stays in the group, rather than being dropped by
    /// librdkafka while it goes on working, a zombie, beside the member
    /// that took its partitions.
    pub async fn run<H: BatchHandler>(self, handler: &H, shutdown: &CancellationToken) {
        let mut assignments = 0;
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
            let seen = self.consumer().context().assignments();
            if seen != assignments {
                if handler.assigned(shutdown).await.is_err() {
                    break;
                }
                assignments = seen;
            }
            match self.handle_within_budget(handler, &batch, shutdown).await {
                Ok(()) => {
                    self.store(&batch);
                }
                Err(Interrupted) if shutdown.is_cancelled() => break,
                Err(Interrupted) => {
                    tracing::warn!(
                        records = batch.len(),
                        budget = ?self.budget,
                        "A batch was given up (its budget spent, or its writes fenced); polling, then reading it again."
                    );
                    self.rewind(&batch);
                    if retry_pause(shutdown).await.is_err() {
                        break;
                    }
                }
            }
        }
        if let Err(error) = self.commit() {
            tracing::warn!(%error, "Final offset commit failed; the last batches will be replayed.");
        }
        self.close(CLOSE_TIMEOUT).await;
    }

    /// `handler` on `batch`, its token cancelled when the budget is spent
    /// (the handler then stops at its next retry) or at shutdown.
    async fn handle_within_budget<H: BatchHandler>(
        &self,
        handler: &H,
        batch: &[OwnedMessage],
        shutdown: &CancellationToken,
    ) -> Result<(), Interrupted> {
        if !H::REWIND_WHEN_STUCK {
            return handler.handle(batch, shutdown).await;
        }
        let budget = shutdown.child_token();
        let handling = handler.handle(batch, &budget);
        tokio::pin!(handling);
        tokio::select! {
            result = &mut handling => result,
            () = tokio::time::sleep(self.budget) => {
                budget.cancel();
                handling.await
            }
        }
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
