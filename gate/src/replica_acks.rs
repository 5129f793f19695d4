//! Waiting for a replica before a promise: when it is on, an admission
//! (`admit.lua`) or a settlement (`settle.lua`) is answered only once a
//! replica has acknowledged it (`WAIT 1 <timeout>`), so a `202` survives the
//! loss of the master.
//!
//! Redis replicates asynchronously: the master answers before any replica
//! has the write, and a replica promoted after the master died never heard
//! of what the master had not yet sent. `WAIT n timeout` blocks the
//! connection it is sent on until `n` replicas have acknowledged every write
//! that connection made before it (or the timeout passed), and answers how
//! many did.
//!
//! **One pipeline, one connection.** WAIT counts the writes of its own
//! connection, so each call goes out in one pipeline with the WAIT behind
//! it: a pipeline travels whole over one connection, on a cluster to the
//! master of its slot (a pipeline is routed by its first keyed command;
//! WAIT has no key). A WAIT sent on its own could meet a connection rebuilt
//! since the call, which made no writes, and be answered at once.
//!
//! **Group commit.** WAIT holds its connection: nothing sent behind it runs
//! before the acknowledgement. One WAIT per call would have the burst go at
//! one replication round trip per order. So the calls that arrive while a
//! pipeline is out queue (per slot on a cluster: a pipeline's commands must
//! share one) and go out together in the next one, behind one WAIT that
//! covers them all. A call waits for at most the pipeline before it and its
//! own, and the rate holds.
//!
//! **A connection of its own.** A WAIT that times out holds its connection
//! for the whole timeout. The gate's other calls (reads, the rooms, the
//! processor's releases) go over the main connection meanwhile, and so do
//! the promising calls while the wait is off.
//!
//! **What a call saw is covered, not only what it wrote.** A repeated
//! `admit.lua` (its first answer was lost), a replayed Idempotency-Key or a
//! settlement finds a record written earlier, perhaps over another
//! connection. Redis 7.0 has WAIT cover the replication stream up to the
//! connection's last command, reads included; later versions only up to
//! its last write. So those paths of the scripts write their record again (the
//! same value): the WAIT behind them covers the first write on either.
//!
//! **When it is on.** `replica_acks = "on"` always, `"off"` never, `"auto"`
//! once a master reports a connected replica (`INFO replication`, at start
//! and every [`LOOK_EVERY`]); from then on for the process's life, since a
//! replica that disappears is what the wait is for. Each look also says
//! (once per change) when a master has no replica: while the wait is on,
//! that master's admissions are answered `503`.
//!
//! On a cluster, a pipeline that meets a slot on the move is sent again
//! whole by the cluster client; the calls that had run run again.
//! `admit.lua` and `settle.lua` answer a repeated order id as they did the
//! first time, so only a refusal can change (a proof of work spent by the
//! first run is then `challenge_used`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisResult, ScriptInvocation, ServerErrorKind, Value};
use seckill_core::config::{RedisConfig, ReplicaAcks as Setting};
use seckill_core::metrics::AdmissionMetrics;
use tokio::sync::oneshot;

use crate::connection::through_moving_slots;
use crate::connection::unexpected;
use crate::GateConnection;

/// How often the masters are asked whether a replica is connected.
pub(crate) const LOOK_EVERY: Duration = Duration::from_secs(5);
/// Most calls in one pipeline: bounds what one answer carries back; a
/// longer queue goes out in the next pipelines.
const MOST_PER_PIPELINE: usize = 512;
/// Least time between two log lines about waits that timed out (the metric
/// counts every one).
const SAY_TIMEOUTS_EVERY: Duration = Duration::from_secs(10);

/// What a call sent through the lane answered.
#[derive(Debug)]
pub(crate) struct Acknowledged {
    pub(crate) value: Value,
    /// Whether a replica acknowledged the call (and what it saw).
    pub(crate) by_replica: bool,
}

/// The wait for replicas: its setting, its connection and the calls queued
/// for the next pipeline.
pub(crate) struct ReplicaAcks {
    setting: Setting,
    /// Whether a look found a replica connected (what `auto` follows).
    seen: AtomicBool,
    /// Whether the last look found a master without a replica.
    short: AtomicBool,
    lane: GateConnection,
    timeout_ms: u64,
    /// The calls waiting for a pipeline, by slot (None on a single Redis).
    queues: Mutex<HashMap<Option<u16>, Arc<Mutex<Queue>>>>,
    metrics: OnceLock<AdmissionMetrics>,
    /// When a timed-out wait was last logged.
    said_timeout: Mutex<Option<Instant>>,
    /// Slots (None on a single Redis) whose master was found with no
    /// replica connected, and when: a durable call there does not wait
    /// (`invoke_durable`) until [`LOOK_EVERY`] has passed.
    alone: Mutex<HashMap<Option<u16>, Instant>>,
}

impl std::fmt::Debug for ReplicaAcks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaAcks")
            .field("setting", &self.setting)
            .field("on", &self.is_on())
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

/// The calls of one slot waiting to go out, and whether a task is sending.
#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiter>,
    sending: bool,
}

struct Waiter {
    command: Cmd,
    answer: oneshot::Sender<RedisResult<Acknowledged>>,
}

impl ReplicaAcks {
    /// Opens the lane `config` asks for (None when `replica_acks` is off),
    /// looks at the masters once, and goes on looking every `every` while
    /// the lane lives.
    pub(crate) async fn start(
        config: &RedisConfig,
        metrics: Option<AdmissionMetrics>,
        every: Duration,
    ) -> RedisResult<Option<Arc<Self>>> {
        if config.replica_acks == Setting::Off {
            if let Some(metrics) = &metrics {
                metrics.replica_acks_on.set(0);
            }
            return Ok(None);
        }
        // The pipeline's answer waits for the calls and then for the WAIT.
        let timeout = Duration::from_millis(config.response_timeout_ms + config.replica_ack_timeout_ms);
        let lane = GateConnection::open(config, timeout).await?;
        let acks = Arc::new(Self {
            setting: config.replica_acks,
            seen: AtomicBool::new(false),
            short: AtomicBool::new(false),
            lane,
            timeout_ms: config.replica_ack_timeout_ms,
            queues: Mutex::new(HashMap::new()),
            metrics: OnceLock::new(),
            said_timeout: Mutex::new(None),
            alone: Mutex::default(),
        });
        if let Some(metrics) = metrics {
            acks.report_to(metrics);
        }
        acks.look().await;
        tokio::spawn(Self::keep_looking(Arc::downgrade(&acks), every));
        Ok(Some(acks))
    }

    /// Has the gauge and the timeouts counted in `metrics`.
    pub(crate) fn report_to(&self, metrics: AdmissionMetrics) {
        metrics.replica_acks_on.set(i64::from(self.is_on()));
        let _ = self.metrics.set(metrics);
    }

    /// Whether the promising calls wait for a replica now.
    pub(crate) fn is_on(&self) -> bool {
        match self.setting {
            Setting::On => true,
            Setting::Off => false,
            Setting::Auto => self.seen.load(Ordering::Relaxed),
        }
    }

    async fn keep_looking(acks: Weak<Self>, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            let Some(acks) = acks.upgrade() else { return };
            acks.look().await;
        }
    }

    /// Asks every master how many replicas are connected; turns `auto` on
    /// at the first, and says when a master has none while the wait is on.
    async fn look(&self) {
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let replicas: Vec<u64> = match self.lane.on_each_master::<String>(&info).await {
            Ok(answers) => answers.iter().map(|answer| connected_replicas(answer)).collect(),
            Err(error) => {
                tracing::warn!(%error, "Could not ask Redis whether replicas are connected; asking again later.");
                return;
            }
        };
        let most = replicas.iter().copied().max().unwrap_or(0);
        if most > 0 && !self.seen.swap(true, Ordering::Relaxed) && self.setting == Setting::Auto {
            tracing::info!(
                timeout_ms = self.timeout_ms,
                "Redis has replicas: admissions now wait for one to acknowledge them (redis.replica_acks = auto)."
            );
        }
        let short = replicas.contains(&0);
        if self.is_on() && short != self.short.swap(short, Ordering::Relaxed) {
            if short {
                tracing::warn!(
                    ?replicas,
                    "A Redis master has no replica connected: its admissions are answered 503 until one is."
                );
            } else {
                tracing::info!("Every Redis master has a replica connected again.");
            }
        }
        if let Some(metrics) = self.metrics.get() {
            metrics.replica_acks_on.set(i64::from(self.is_on()));
        }
    }

    /// Sends `command` (one slot's, `slot` on a cluster) in the next
    /// pipeline, behind that pipeline's WAIT; answers its reply and whether
    /// a replica acknowledged it.
    async fn call(self: &Arc<Self>, slot: Option<u16>, command: Cmd) -> RedisResult<Acknowledged> {
        let (answer, answered) = oneshot::channel();
        let queue = Arc::clone(lock(&self.queues).entry(slot).or_default());
        let first = {
            let mut queue = lock(&queue);
            queue.waiting.push_back(Waiter { command, answer });
            !std::mem::replace(&mut queue.sending, true)
        };
        if first {
            tokio::spawn(Arc::clone(self).send_all(queue));
        }
        answered.await.unwrap_or_else(|_| Err(unexpected("the replica wait's sender stopped", String::new())))
    }

    /// Sends the queue's calls, a pipeline at a time, until it is empty.
    async fn send_all(self: Arc<Self>, queue: Arc<Mutex<Queue>>) {
        loop {
            let batch: Vec<Waiter> = {
                let mut queue = lock(&queue);
                if queue.waiting.is_empty() {
                    queue.sending = false;
                    return;
                }
                let take = queue.waiting.len().min(MOST_PER_PIPELINE);
                queue.waiting.drain(..take).collect()
            };
            self.send(batch).await;
        }
    }

    /// One pipeline: the calls, then `WAIT 1 <timeout>`.
    async fn send(&self, batch: Vec<Waiter>) {
        let mut pipeline = redis::pipe();
        let mut answers = Vec::with_capacity(batch.len());
        for waiter in batch {
            pipeline.add_command(waiter.command);
            answers.push(waiter.answer);
        }
        pipeline.cmd("WAIT").arg(1).arg(self.timeout_ms);
        let count = answers.len() + 1;
        let replies = match self.lane.clone().req_packed_commands(&pipeline, 0, count).await {
            Ok(replies) if replies.len() == count => replies,
            Ok(replies) => {
                let error = unexpected("a pipeline answered another number of replies", replies.len().to_string());
                return answers.into_iter().for_each(|answer| drop(answer.send(Err(error.clone()))));
            }
            Err(error) => return answers.into_iter().for_each(|answer| drop(answer.send(Err(error.clone())))),
        };
        let mut replies = replies.into_iter();
        let wait = replies.next_back();
        let by_replica = matches!(wait, Some(Value::Int(acks)) if acks >= 1);
        if !by_replica {
            self.timed_out(wait.as_ref(), answers.len());
        }
        for (answer, reply) in answers.into_iter().zip(replies) {
            let _ = answer.send(reply.extract_error().map(|value| Acknowledged { value, by_replica }));
        }
    }

    fn timed_out(&self, wait: Option<&Value>, calls: usize) {
        if let Some(metrics) = self.metrics.get() {
            metrics.replica_ack_timeouts.inc();
        }
        let mut said = lock(&self.said_timeout);
        if said.is_none_or(|said| said.elapsed() >= SAY_TIMEOUTS_EVERY) {
            *said = Some(Instant::now());
            tracing::warn!(
                ?wait,
                calls,
                timeout_ms = self.timeout_ms,
                "No Redis replica acknowledged admissions in time: answered 503 naming their orders."
            );
        }
    }
}

impl ReplicaAcks {
    /// Runs `invocation` (a call whose answer is a promise: `admit.lua`,
    /// `settle.lua`) in the bucket on `slot` (None on a single Redis) behind
    /// the next pipeline's WAIT, loading the script first on a master that
    /// does not have it (restarted or promoted).
    pub(crate) async fn invoke(
        self: &Arc<Self>,
        slot: Option<u16>,
        invocation: &ScriptInvocation<'_>,
    ) -> RedisResult<Acknowledged> {
        let command = evalsha(invocation);
        through_moving_slots(|| {
            let (acks, command) = (Arc::clone(self), command.clone());
            async move {
                match acks.call(slot, command.clone()).await {
                    // A restarted or promoted master: load, then once more.
                    Err(error) if error.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript) => {
                        invocation.load_async(&mut acks.lane.clone()).await?;
                        acks.call(slot, command).await
                    }
                    answer => answer,
                }
            }
        })
        .await
    }
}

/// What a durable call's wait came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durable {
    /// A replica has it.
    Replicated,
    /// The master had no replica connected: nothing could have
    /// acknowledged it, and no replica can be promoted without it.
    Alone,
    /// Replicas are connected, but none acknowledged it in time: it may be
    /// lost if one of them is promoted (the master is cut off from them).
    Unacknowledged,
}

impl ReplicaAcks {
    /// Runs `invocation` (a call the log's follower counts on: a release, an
    /// update, a definition) in the bucket on `slot`, routed by `key` (one
    /// of the call's keys), and says whether it would survive the master's
    /// loss.
    ///
    /// Unlike an admission, such a call is not refused on a master without
    /// a replica: there it is as safe as it can be (no replica can be
    /// promoted without it), and refusing it would stop the follower, for
    /// every voucher behind it, until a replica joins (a master killed, its
    /// only replica promoted). A master whose replicas are connected but
    /// silent (it is cut off from them) is what the wait is for. A master
    /// found alone is not waited on again for [`LOOK_EVERY`], so the
    /// follower does not pay the wait's timeout for each call.
    pub(crate) async fn invoke_durable(
        self: &Arc<Self>,
        slot: Option<u16>,
        key: &str,
        invocation: &ScriptInvocation<'_>,
    ) -> RedisResult<(Value, Durable)> {
        let recently_alone = lock(&self.alone).get(&slot).is_some_and(|at| at.elapsed() < LOOK_EVERY);
        if recently_alone {
            let value = through_moving_slots(|| {
                let mut lane = self.lane.clone();
                async move { invocation.invoke_async(&mut lane).await }
            })
            .await?;
            return Ok((value, Durable::Alone));
        }
        let acknowledged = self.invoke(slot, invocation).await?;
        if acknowledged.by_replica {
            lock(&self.alone).remove(&slot);
            return Ok((acknowledged.value, Durable::Replicated));
        }
        if replicas_of_master_of(&self.lane, key).await? > 0 {
            return Ok((acknowledged.value, Durable::Unacknowledged));
        }
        if lock(&self.alone).insert(slot, Instant::now()).is_none() {
            tracing::warn!(
                ?slot,
                "A Redis master has no replica connected: the log's follower writes to it without waiting."
            );
        }
        Ok((acknowledged.value, Durable::Alone))
    }
}

/// Replicas connected to the master that holds `key`, asked over
/// `connection` (`ROLE`, sent in one pipeline behind a read of `key`, which
/// routes it there on a cluster).
pub(crate) async fn replicas_of_master_of(connection: &GateConnection, key: &str) -> RedisResult<usize> {
    let mut pipeline = redis::pipe();
    pipeline.cmd("EXISTS").arg(key).cmd("ROLE");
    let replies = connection.clone().req_packed_commands(&pipeline, 0, 2).await?;
    Ok(replicas_in_role(replies.last()))
}

/// The replicas a `ROLE` answer lists (a master's third element); a
/// replica's or an unreadable answer counts as one, so that nothing is
/// taken for alone that is not known to be.
fn replicas_in_role(role: Option<&Value>) -> usize {
    match role {
        Some(Value::Array(items)) => match (items.first(), items.get(2)) {
            (Some(Value::BulkString(kind)), Some(Value::Array(replicas))) if kind.as_slice() == b"master" => {
                replicas.len()
            }
            _ => 1,
        },
        _ => 1,
    }
}

/// The `EVALSHA` command of `invocation` (the crate builds it only into a
/// pipeline, as its one command).
fn evalsha(invocation: &ScriptInvocation<'_>) -> Cmd {
    let mut pipeline = redis::pipe();
    pipeline.invoke_script(invocation);
    let command = pipeline.cmd_iter().next().cloned();
    command.unwrap_or_else(|| redis::cmd("EVALSHA"))
}

/// `connected_slaves` of an `INFO replication` answer (0 if absent).
fn connected_replicas(info: &str) -> u64 {
    info.lines().find_map(|line| line.trim().strip_prefix("connected_slaves:")?.parse().ok()).unwrap_or(0)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_read_from_info_replication() {
        let master = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=7001\r\n";
        assert_eq!(connected_replicas(master), 2);
        assert_eq!(connected_replicas("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"), 0);
        assert_eq!(connected_replicas("# Replication\r\nrole:slave\r\n"), 0);
    }

    #[test]
    fn replicas_are_counted_in_a_role_answer() {
        let master = |replicas: Vec<Value>| {
            Value::Array(vec![Value::BulkString(b"master".to_vec()), Value::Int(10), Value::Array(replicas)])
        };
        let replica = Value::Array(vec![
            Value::BulkString(b"10.0.0.2".to_vec()),
            Value::BulkString(b"7001".to_vec()),
            Value::BulkString(b"10".to_vec()),
        ]);
        assert_eq!(replicas_in_role(Some(&master(vec![replica.clone(), replica]))), 2);
        assert_eq!(replicas_in_role(Some(&master(Vec::new()))), 0);
        let slave = Value::Array(vec![Value::BulkString(b"slave".to_vec()), Value::BulkString(b"10.0.0.1".to_vec())]);
        assert_eq!(replicas_in_role(Some(&slave)), 1, "not a master: not known to be alone");
        assert_eq!(replicas_in_role(None), 1);
    }

    #[test]
    fn the_command_sent_is_the_invocations_evalsha() {
        let script = redis::Script::new("return 1");
        let mut invocation = script.prepare_invoke();
        invocation.key("k").arg("a");
        let packed = String::from_utf8_lossy(&evalsha(&invocation).get_packed_command()).into_owned();
        assert!(packed.contains("EVALSHA") && packed.contains(script.get_hash()), "{packed}");
    }
}
