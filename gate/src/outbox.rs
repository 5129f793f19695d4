//! The outbox: admitted orders on their way to the log.
//!
//! `admit.lua` appends each admitted order's `OrderAccepted` record to a
//! Redis stream in the same atomic call that takes its stock, so the
//! stream must be in the same slot as the bucket's keys:
//!
//! - **A single Redis** has one outbox, `<prefix>:outbox`, for every
//!   voucher. Relays block on it (XREADGROUP … BLOCK).
//! - **A Redis Cluster** has one outbox per voucher bucket,
//!   `<prefix>:{t}:outbox` under the bucket's hash tag, so it lives (and
//!   moves, when its slot migrates) with the bucket. A relay cannot block on
//!   streams spread over many masters, so it finds them two ways: its own
//!   ingress's gate tells it which outboxes admissions wrote to
//!   ([`OutboxHints`]; read at once), and every `discover` it walks every
//!   master's keyspace (SCAN … MATCH `<prefix>:{v:*}:outbox` TYPE stream),
//!   which finds the outboxes other ingresses wrote to and then died. Every
//!   stream it knows is also read every [`FULL_READ_EVERY`], claimed from and
//!   tidied, as below.
//!
//! On every outbox the relays (one per ingress process) read as one
//! consumer group, publish each record to Kafka, and acknowledge and delete
//! the entry only after the broker acknowledged it. An entry a relay read
//! but never acknowledged (its process died) stays pending in the group and
//! is claimed by a live relay once it has been idle for a while. Publishing
//! twice is harmless: every consumer of the sales topic is idempotent by
//! order id. A group starts at its stream's first entry, so entries written
//! before any relay knew the stream are published too.
//!
//! **Slots moving.** A stream migrates between masters as one key (MIGRATE
//! carries its entries, its consumer group and the group's pending entries),
//! and the cluster client follows the `MOVED`/`ASK` redirections, so reads,
//! acknowledgements and claims go on against wherever it is; nothing pending
//! is dropped on the way.
//!
//! **Only what a replica has.** Where Redis has replicas (`replica_acks`
//! not `off`), a relay publishes entries only once a replica has them: after
//! a read it asks the master for its replicas (`ROLE`) and, if it has any,
//! waits for one (`WAIT 1`) before publishing. A master cut off from its
//! replicas (and soon replaced by one of them) keeps taking admissions and
//! room joins alone; published, they would reach the log while the promoted
//! replica never had them: orders nobody was promised (their callers got
//! `503`s), and places whose numbers the new master gives to others. Entries
//! not acknowledged stay pending, and are claimed and checked again once
//! idle; a master that has no replica connected at all is published from
//! at once (nothing can be promoted without its writes).
//!
//! Claiming walks each stream's pending entries page by page (XAUTOCLAIM's
//! cursor), so a long list of entries that are not idle yet is not rescanned
//! from its head every time. Consumers of relays that are gone are removed
//! once nothing is pending for them (`retire_consumers.lua`), and a
//! bucket's outbox is removed once it is empty and its bucket has expired
//! (`retire_outbox.lua`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::join_all;
use redis::aio::ConnectionLike;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use redis::{Script, Value};
use seckill_core::config::{RedisConfig, ReplicaAcks};
use tokio::sync::Notify;

use crate::keys::{bucket_outbox_pattern, outbox_key, voucher_of_outbox};
use crate::replica_acks::replicas_of_master_of;
use crate::GateConnection;

/// The consumer group every relay joins.
const GROUP: &str = "relay";
/// Where a scan of the pending entries starts, and what XAUTOCLAIM returns
/// once a scan reached the end of them.
const FIRST_ID: &str = "0-0";
/// How often a relay on a cluster reads every outbox it knows, not only
/// those its own ingress wrote to: what bounds the delay of an entry whose
/// ingress died before its relay read it (on top of discovering the stream).
pub const FULL_READ_EVERY: Duration = Duration::from_secs(1);
/// Most outboxes a relay follows, and most hints remembered between reads.
const MAX_STREAMS: usize = 100_000;
const RETIRE_CONSUMERS: &str = include_str!("../../lua/retire_consumers.lua");
const RETIRE_OUTBOX: &str = include_str!("../../lua/retire_outbox.lua");
const REMOVE_PUBLISHED: &str = include_str!("../../lua/remove_published.lua");

/// One admitted order waiting to be published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The outbox stream it is in.
    pub stream: String,
    /// The stream entry id.
    pub id: String,
    /// The Kafka key (the voucher id).
    pub key: String,
    /// The encoded record.
    pub record: Vec<u8>,
}

/// The outboxes admissions of this process wrote to since its relay last
/// looked: the relay reads them at once instead of at its next full read.
#[derive(Debug, Default)]
pub struct OutboxHints {
    touched: Mutex<HashSet<String>>,
    wake: Notify,
}

impl OutboxHints {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// An admission is writing to `stream`.
    pub fn touch(&self, stream: &str) {
        let mut touched = self.touched.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if touched.len() < MAX_STREAMS && !touched.contains(stream) {
            touched.insert(stream.to_owned());
        }
        drop(touched);
        self.wake.notify_one();
    }

    /// Outboxes hinted and not read yet.
    pub fn len(&self) -> usize {
        self.touched.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }

    /// Whether no outbox is hinted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.touched.lock().unwrap_or_else(|poisoned| poisoned.into_inner())).into_iter().collect()
    }
}

/// Which outboxes a relay drains.
#[derive(Debug)]
enum Streams {
    /// A single Redis's one outbox.
    One(String),
    /// A cluster's outboxes, one per voucher bucket.
    Discovered { prefix: String, known: Mutex<BTreeSet<String>>, last_full_read: Mutex<Instant> },
}

/// A relay's view of the outbox streams, on its own connection: a blocking
/// read must not hold up the gate's admission calls.
#[derive(Clone)]
pub struct Outbox {
    redis: GateConnection,
    streams: Arc<Streams>,
    /// Outboxes this process's admissions wrote to (a cluster's relay).
    hints: Option<Arc<OutboxHints>>,
    consumer: String,
    /// Where the next XAUTOCLAIM of each stream continues: the cursor the
    /// last one returned (shared by clones, which act as the same consumer).
    claim_cursors: Arc<Mutex<HashMap<String, String>>>,
    retire_consumers: Arc<Script>,
    retire_outbox: Arc<Script>,
    remove_published: Arc<Script>,
    /// How long to wait for a replica before publishing (None: the wait
    /// is off, `replica_acks = "off"`).
    replica_wait: Option<Duration>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("streams", &self.streams)
            .field("consumer", &self.consumer)
            .finish_non_exhaustive()
    }
}

impl Outbox {
    /// Connects as relay `consumer` (unique per process) and makes sure the
    /// outboxes it knows have the group. `longest_block` bounds the reads'
    /// BLOCK time on a single Redis, so the connection's response timeout
    /// allows for it.
    pub async fn connect(config: &RedisConfig, consumer: &str, longest_block: Duration) -> redis::RedisResult<Self> {
        let redis = GateConnection::open(config, longest_block + Duration::from_secs(2)).await?;
        let streams = if redis.is_cluster() {
            Streams::Discovered {
                prefix: config.key_prefix.clone(),
                known: Mutex::new(BTreeSet::new()),
                // The first read is a full one.
                last_full_read: Mutex::new(Instant::now().checked_sub(FULL_READ_EVERY).unwrap_or_else(Instant::now)),
            }
        } else {
            Streams::One(outbox_key(&config.key_prefix))
        };
        let outbox = Self {
            redis,
            streams: Arc::new(streams),
            hints: None,
            consumer: consumer.to_owned(),
            claim_cursors: Arc::new(Mutex::new(HashMap::new())),
            retire_consumers: Arc::new(Script::new(RETIRE_CONSUMERS)),
            retire_outbox: Arc::new(Script::new(RETIRE_OUTBOX)),
            remove_published: Arc::new(Script::new(REMOVE_PUBLISHED)),
            replica_wait: (config.replica_acks != ReplicaAcks::Off)
                .then(|| Duration::from_millis(config.replica_ack_timeout_ms)),
        };
        outbox.discover().await?;
        outbox.ensure_group().await?;
        Ok(outbox)
    }

    /// Reads at once the outboxes `hints` names (its ingress's gate
    /// writes them). Only a cluster's relay needs them.
    pub fn with_hints(mut self, hints: Arc<OutboxHints>) -> Self {
        self.hints = Some(hints);
        self
    }

    /// Whether the outboxes are a cluster's, one per voucher bucket.
    pub fn is_cluster(&self) -> bool {
        matches!(*self.streams, Streams::Discovered { .. })
    }

    /// The outbox streams this relay drains now.
    pub fn streams(&self) -> Vec<String> {
        match &*self.streams {
            Streams::One(stream) => vec![stream.clone()],
            Streams::Discovered { known, .. } => lock(known).iter().cloned().collect(),
        }
    }

    /// Creates the group on every outbox known (and, on a single Redis, the
    /// stream) if missing. The group starts at the stream's beginning, so
    /// entries written before any relay ran are published too. Called again
    /// after errors: a Redis that lost its data lost the group with it.
    pub async fn ensure_group(&self) -> redis::RedisResult<()> {
        match &*self.streams {
            Streams::One(stream) => self.create_group(stream, true).await.map(|_| ()),
            Streams::Discovered { .. } => {
                for stream in self.streams() {
                    if !self.create_group(&stream, false).await? {
                        self.forget(&stream);
                    }
                }
                Ok(())
            }
        }
    }

    /// Creates the group of `stream`; false when the stream does not exist
    /// (and `create_stream` is off).
    async fn create_group(&self, stream: &str, create_stream: bool) -> redis::RedisResult<bool> {
        let mut command = redis::cmd("XGROUP");
        command.arg("CREATE").arg(stream).arg(GROUP).arg("0");
        if create_stream {
            command.arg("MKSTREAM");
        }
        let created: redis::RedisResult<()> = command.query_async(&mut self.redis.clone()).await;
        match created {
            Err(error) if error.code() == Some("BUSYGROUP") => Ok(true),
            Err(error) if error.to_string().contains("requires the key to exist") => Ok(false),
            other => other.map(|()| true),
        }
    }

    /// On a cluster, walks every master for outboxes: new ones are followed
    /// (with the group created), ones gone are forgotten, and empty ones
    /// whose bucket expired are removed. Returns how many it follows.
    pub async fn discover(&self) -> redis::RedisResult<usize> {
        let Streams::Discovered { prefix, known, .. } = &*self.streams else { return Ok(1) };
        let found: BTreeSet<String> =
            self.redis.scan(&bucket_outbox_pattern(prefix), "stream").await?.into_iter().collect();
        let before = lock(known).clone();
        for stream in found.difference(&before) {
            self.follow(stream).await?;
        }
        for stream in before.difference(&found) {
            // A walk can miss a stream whose slot was moving between two
            // masters while it ran: forget only one that is really gone
            // (keeping the claim cursor of one that is not).
            let exists: bool = redis::cmd("EXISTS").arg(stream).query_async(&mut self.redis.clone()).await?;
            if !exists {
                self.forget(stream);
            }
        }
        for stream in &found {
            let Some(voucher) = voucher_of_outbox(stream) else { continue };
            let removed: i64 =
                self.retire_outbox.key(stream).key(&voucher).invoke_async(&mut self.redis.clone()).await?;
            if removed == 1 {
                self.forget(stream);
            }
        }
        Ok(lock(known).len())
    }

    /// Starts following `stream` (creating its group); false if it does not
    /// exist (yet).
    async fn follow(&self, stream: &str) -> redis::RedisResult<bool> {
        let Streams::Discovered { known, .. } = &*self.streams else { return Ok(true) };
        if lock(known).contains(stream) {
            return Ok(true);
        }
        if !self.create_group(stream, false).await? {
            return Ok(false);
        }
        let mut known = lock(known);
        if known.len() < MAX_STREAMS {
            known.insert(stream.to_owned());
        }
        Ok(true)
    }

    fn forget(&self, stream: &str) {
        if let Streams::Discovered { known, .. } = &*self.streams {
            lock(known).remove(stream);
        }
        lock(&self.claim_cursors).remove(stream);
    }

    /// Up to `count` entries no relay has read yet, waiting up to `block`
    /// for some: on a single Redis by blocking on its outbox; on a cluster
    /// by waiting for a hint, then reading the outboxes hinted (and, every
    /// [`FULL_READ_EVERY`], every outbox followed).
    pub async fn read_new(&self, count: usize, block: Duration) -> redis::RedisResult<Vec<OutboxEntry>> {
        let last_full_read = match &*self.streams {
            Streams::One(stream) => return self.read_stream(stream, count, Some(block)).await,
            Streams::Discovered { last_full_read, .. } => last_full_read,
        };
        let hints = &self.hints;
        let mut streams = hints.as_ref().map(|hints| hints.take()).unwrap_or_default();
        let due = || lock(last_full_read).elapsed() >= FULL_READ_EVERY;
        if streams.is_empty() && !due() {
            if let Some(hints) = hints {
                let wait = block.min(FULL_READ_EVERY.saturating_sub(lock(last_full_read).elapsed()));
                let _ = tokio::time::timeout(wait, hints.wake.notified()).await;
                streams = hints.take();
            } else {
                tokio::time::sleep(block.min(FULL_READ_EVERY)).await;
            }
        }
        // A hinted outbox that does not exist (the admission that hinted it
        // wrote nothing, or has not run yet) is dropped: the walk finds it
        // if it ever appears.
        let mut followed = Vec::with_capacity(streams.len());
        for stream in streams {
            if self.follow(&stream).await? {
                followed.push(stream);
            }
        }
        let mut streams = followed;
        if due() {
            *lock(last_full_read) = Instant::now();
            streams.extend(self.streams());
        }
        streams.sort();
        streams.dedup();
        // One after the other, each asked for what the batch still lacks:
        // nothing is read (and left pending) beyond `count`.
        let mut entries = Vec::new();
        for stream in &streams {
            if entries.len() >= count {
                // Not read this time: read it at the next call.
                self.hint(stream);
                continue;
            }
            let wanted = count - entries.len();
            let read = match self.read_stream(stream, wanted, None).await {
                Ok(read) => read,
                Err(error) if error.code() == Some("NOGROUP") => {
                    // Lost with its data, or deleted and written again: start
                    // over if it is there (read at the next call); a stream
                    // that is gone is forgotten.
                    self.forget(stream);
                    if self.follow(stream).await? {
                        self.hint(stream);
                    }
                    continue;
                }
                Err(error) => return Err(error),
            };
            if read.len() >= wanted {
                // More where these came from: read it again at once.
                self.hint(stream);
            }
            entries.extend(read);
        }
        Ok(entries)
    }

    /// Up to `count` entries of `stream` no relay has read yet, waiting up
    /// to `block` for some (None: answers at once).
    async fn read_stream(
        &self,
        stream: &str,
        count: usize,
        block: Option<Duration>,
    ) -> redis::RedisResult<Vec<OutboxEntry>> {
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP").arg(GROUP).arg(&self.consumer).arg("COUNT").arg(count);
        if let Some(block) = block {
            read.arg("BLOCK").arg(block.as_millis() as u64);
        }
        let reply: Option<StreamReadReply> =
            read.arg("STREAMS").arg(stream).arg(">").query_async(&mut self.redis.clone()).await?;
        self.replicated(stream, entries_of(reply)).await
    }

    /// `entries`, read from `stream`, if its master's replicas have them
    /// (or it has none); else nothing, the entries left pending to be
    /// claimed and checked again once idle.
    async fn replicated(&self, stream: &str, entries: Vec<OutboxEntry>) -> redis::RedisResult<Vec<OutboxEntry>> {
        let Some(wait) = self.replica_wait.filter(|_| !entries.is_empty()) else {
            return Ok(entries);
        };
        // Each pipeline starts with a read of the stream: it goes to the
        // stream's master, on the connection that read the entries, and on
        // Redis 7.0 it is the command the WAIT covers up to.
        if replicas_of_master_of(&self.redis, stream).await? == 0 {
            return Ok(entries);
        }
        let mut acknowledged = redis::pipe();
        acknowledged.cmd("EXISTS").arg(stream).cmd("WAIT").arg(1).arg(wait.as_millis() as u64);
        let replies = self.redis.clone().req_packed_commands(&acknowledged, 0, 2).await?;
        if matches!(replies.last(), Some(&Value::Int(acks)) if acks >= 1) {
            return Ok(entries);
        }
        tracing::warn!(
            stream,
            entries = entries.len(),
            "No replica acknowledged outbox entries: not published, claimed again once idle."
        );
        Ok(Vec::new())
    }

    fn hint(&self, stream: &str) {
        if let (Some(hints), true) = (&self.hints, self.is_cluster()) {
            hints.touch(stream);
        }
    }

    /// Up to `count` entries read by some relay but not acknowledged for
    /// `min_idle`: their relay died, or failed between publishing and
    /// acknowledging. Claimed for this relay.
    ///
    /// Each call scans the next page of each outbox's pending entries (at
    /// most ten times `count`, Redis's bound), continuing where the previous
    /// call stopped and starting over once a scan reached the end: entries
    /// beyond the first page are claimed too, however many ahead of them
    /// are not idle yet.
    pub async fn claim_idle(&self, min_idle: Duration, count: usize) -> redis::RedisResult<Vec<OutboxEntry>> {
        let mut claimed = Vec::new();
        for stream in self.streams() {
            if claimed.len() >= count {
                break;
            }
            let start = lock(&self.claim_cursors).get(&stream).cloned().unwrap_or_else(|| FIRST_ID.to_owned());
            let reply: redis::RedisResult<StreamAutoClaimReply> = redis::cmd("XAUTOCLAIM")
                .arg(&stream)
                .arg(GROUP)
                .arg(&self.consumer)
                .arg(min_idle.as_millis() as u64)
                .arg(&start)
                .arg("COUNT")
                .arg(count - claimed.len())
                .query_async(&mut self.redis.clone())
                .await;
            let reply = match reply {
                Ok(reply) => reply,
                // A cluster's outbox that went (retired, or lost): forget it.
                Err(error) if self.is_cluster() && error.code() == Some("NOGROUP") => {
                    self.forget(&stream);
                    continue;
                }
                Err(error) => return Err(error),
            };
            lock(&self.claim_cursors).insert(stream.clone(), reply.next_stream_id);
            let entries = reply.claimed.into_iter().filter_map(|id| entry(&stream, id)).collect();
            claimed.extend(self.replicated(&stream, entries).await?);
        }
        Ok(claimed)
    }

    /// Removes, on every outbox, the group's consumers other than this
    /// relay that have no pending entry and have been idle for more than
    /// `min_idle`: what the relays of stopped or dead processes leave
    /// behind. A consumer with pending entries stays until they are claimed.
    /// Returns the names removed.
    pub async fn retire_idle_consumers(&self, min_idle: Duration) -> redis::RedisResult<Vec<String>> {
        let mut removed = Vec::new();
        for stream in self.streams() {
            let gone: redis::RedisResult<Vec<String>> = self
                .retire_consumers
                .key(&stream)
                .arg(GROUP)
                .arg(&self.consumer)
                .arg(min_idle.as_millis() as u64)
                .invoke_async(&mut self.redis.clone())
                .await;
            match gone {
                Ok(gone) => removed.extend(gone),
                Err(error) if self.is_cluster() && error.code() == Some("NOGROUP") => self.forget(&stream),
                Err(error) => return Err(error),
            }
        }
        removed.sort();
        removed.dedup();
        Ok(removed)
    }

    /// Acknowledges and deletes published entries, atomically per outbox.
    pub async fn remove(&self, entries: &[OutboxEntry]) -> redis::RedisResult<()> {
        let mut by_stream: HashMap<&str, Vec<&str>> = HashMap::new();
        for entry in entries {
            by_stream.entry(&entry.stream).or_default().push(&entry.id);
        }
        let removals = by_stream.into_iter().map(|(stream, ids)| async move {
            self.remove_published.key(stream).arg(GROUP).arg(&ids).invoke_async::<i64>(&mut self.redis.clone()).await
        });
        join_all(removals).await.into_iter().try_for_each(|removed| removed.map(|_| ()))
    }

    /// Entries not yet published (and deleted), in every outbox followed.
    pub async fn len(&self) -> redis::RedisResult<u64> {
        let commands = self
            .streams()
            .iter()
            .map(|stream| {
                let mut command = redis::cmd("XLEN");
                command.arg(stream);
                command
            })
            .collect();
        let lengths: Vec<u64> = self.redis.query_each(commands).await?;
        Ok(lengths.into_iter().sum())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn entries_of(reply: Option<StreamReadReply>) -> Vec<OutboxEntry> {
    reply
        .into_iter()
        .flat_map(|reply| reply.keys)
        .flat_map(|key| {
            let stream = key.key;
            key.ids.into_iter().filter_map(move |id| entry(&stream, id))
        })
        .collect()
}

/// An entry with both fields; anything else was not written by `admit.lua`
/// and is skipped (it stays pending, visible to operators, and harms nothing).
fn entry(stream: &str, id: StreamId) -> Option<OutboxEntry> {
    let bytes = |field: &str| match id.map.get(field) {
        Some(Value::BulkString(bytes)) => Some(bytes.clone()),
        _ => None,
    };
    let key = String::from_utf8(bytes("key")?).ok()?;
    let record = bytes("record")?;
    Some(OutboxEntry { stream: stream.to_owned(), id: id.id, key, record })
}
