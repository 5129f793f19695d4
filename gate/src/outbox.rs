//! The outbox: admitted orders on their way to the log.
//!
//! `admit.lua` appends each admitted order's `OrderAccepted` record to one
//! Redis stream in the same atomic call that takes its stock. Relays (one per
//! ingress process) read the stream as one consumer group, publish each
//! record to Kafka, and acknowledge and delete the entry only after the
//! broker acknowledged it. An entry a relay read but never acknowledged (its
//! process died) stays pending in the group and is claimed by a live relay
//! once it has been idle for a while. Publishing twice is harmless: every
//! consumer of the sales topic is idempotent by order id.
//!
//! Claiming walks the pending entries page by page (XAUTOCLAIM's cursor),
//! so a long list of entries that are not idle yet is not rescanned from
//! its head every time. Consumers of relays that are gone are removed once
//! nothing is pending for them (`retire_consumers.lua`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use redis::{Script, Value};
use seckill_core::config::RedisConfig;

use crate::keys::outbox_key;

/// The consumer group every relay joins.
const GROUP: &str = "relay";
/// Where a scan of the pending entries starts, and what XAUTOCLAIM returns
/// once a scan reached the end of them.
const FIRST_ID: &str = "0-0";
const RETIRE_CONSUMERS: &str = include_str!("../../lua/retire_consumers.lua");

/// One admitted order waiting to be published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The stream entry id.
    pub id: String,
    /// The Kafka key (the voucher id).
    pub key: String,
    /// The encoded record.
    pub record: Vec<u8>,
}

/// A relay's view of the outbox stream, on its own connection: a blocking
/// read must not hold up the gate's admission calls.
#[derive(Clone)]
pub struct Outbox {
    redis: ConnectionManager,
    stream: String,
    consumer: String,
    /// Where the next XAUTOCLAIM continues: the cursor the last one
    /// returned (shared by clones, which act as the same consumer).
    claim_cursor: Arc<Mutex<String>>,
    retire_consumers: Arc<Script>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").field("stream", &self.stream).field("consumer", &self.consumer).finish_non_exhaustive()
    }
}

impl Outbox {
    /// Connects as relay `consumer` (unique per process) and makes sure the
    /// stream and the group exist. `longest_block` bounds the reads' BLOCK
    /// time, so the connection's response timeout allows for it.
    pub async fn connect(config: &RedisConfig, consumer: &str, longest_block: Duration) -> redis::RedisResult<Self> {
        let redis = redis::Client::open(config.url.as_str())?
            .get_connection_manager_with_config(
                ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(Duration::from_secs(2)))
                    .set_response_timeout(Some(longest_block + Duration::from_secs(2))),
            )
            .await?;
        let outbox = Self {
            redis,
            stream: outbox_key(&config.key_prefix),
            consumer: consumer.to_owned(),
            claim_cursor: Arc::new(Mutex::new(FIRST_ID.to_owned())),
            retire_consumers: Arc::new(Script::new(RETIRE_CONSUMERS)),
        };
        outbox.ensure_group().await?;
        Ok(outbox)
    }

    /// Creates the stream and group if missing. The group starts at the
    /// stream's beginning, so entries written before any relay ran are
    /// published too. Called again after errors: a Redis that lost its data
    /// lost the group with it.
    pub async fn ensure_group(&self) -> redis::RedisResult<()> {
        let created: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&self.stream)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut self.redis.clone())
            .await;
        match created {
            Err(error) if error.code() == Some("BUSYGROUP") => Ok(()),
            other => other,
        }
    }

    /// Up to `count` entries no relay has read yet, waiting up to `block`.
    pub async fn read_new(&self, count: usize, block: Duration) -> redis::RedisResult<Vec<OutboxEntry>> {
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(block.as_millis() as u64)
            .arg("STREAMS")
            .arg(&self.stream)
            .arg(">")
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(reply.into_iter().flat_map(|reply| reply.keys).flat_map(|key| key.ids).filter_map(entry).collect())
    }

    /// Up to `count` entries read by some relay but not acknowledged for
    /// `min_idle`: their relay died, or failed between publishing and
    /// acknowledging. Claimed for this relay.
    ///
    /// Each call scans the next page of pending entries (at most ten times
    /// `count`, Redis's bound), continuing where the previous call stopped
    /// and starting over once a scan reached the end: entries beyond the
    /// first page are claimed too, however many ahead of them are not idle
    /// yet.
    pub async fn claim_idle(&self, min_idle: Duration, count: usize) -> redis::RedisResult<Vec<OutboxEntry>> {
        let start = self.claim_cursor.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
            .arg(&self.stream)
            .arg(GROUP)
            .arg(&self.consumer)
            .arg(min_idle.as_millis() as u64)
            .arg(&start)
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.redis.clone())
            .await?;
        *self.claim_cursor.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = reply.next_stream_id;
        Ok(reply.claimed.into_iter().filter_map(entry).collect())
    }

    /// Removes the group's consumers other than this relay that have no
    /// pending entry and have been idle for more than `min_idle`: what the
    /// relays of stopped or dead processes leave behind. A consumer with
    /// pending entries stays until they are claimed. Returns the names
    /// removed.
    pub async fn retire_idle_consumers(&self, min_idle: Duration) -> redis::RedisResult<Vec<String>> {
        self.retire_consumers
            .key(&self.stream)
            .arg(GROUP)
            .arg(&self.consumer)
            .arg(min_idle.as_millis() as u64)
            .invoke_async(&mut self.redis.clone())
            .await
    }

    /// Acknowledges and deletes published entries, atomically.
    pub async fn remove(&self, ids: &[String]) -> redis::RedisResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        redis::pipe()
            .atomic()
            .cmd("XACK")
            .arg(&self.stream)
            .arg(GROUP)
            .arg(ids)
            .ignore()
            .cmd("XDEL")
            .arg(&self.stream)
            .arg(ids)
            .ignore()
            .query_async::<()>(&mut self.redis.clone())
            .await
    }

    /// Entries not yet published (and deleted).
    pub async fn len(&self) -> redis::RedisResult<u64> {
        redis::cmd("XLEN").arg(&self.stream).query_async(&mut self.redis.clone()).await
    }
}

/// An entry with both fields; anything else was not written by `admit.lua`
/// and is skipped (it stays pending, visible to operators, and harms nothing).
fn entry(id: StreamId) -> Option<OutboxEntry> {
    let bytes = |field: &str| match id.map.get(field) {
        Some(Value::BulkString(bytes)) => Some(bytes.clone()),
        _ => None,
    };
    let key = String::from_utf8(bytes("key")?).ok()?;
    let record = bytes("record")?;
    Some(OutboxEntry { id: id.id, key, record })
}
