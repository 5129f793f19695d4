//! The gate: the scripts, loaded once and called by EVALSHA, on a single
//! Redis or a Redis Cluster ([`GateConnection`]).
//!
//! `redis::Script` sends EVALSHA and, on NOSCRIPT (a restarted or failed-over
//! Redis), loads the script and retries once, so a Redis restart is
//! recovered without the caller noticing. The scripts are also loaded at
//! startup (on every master of a cluster), so the first order pays no load.
//!
//! The operations live next to their concern: admission, settlement and
//! release in `admission`, transfers between a voucher's buckets in
//! `transfers`, loading and updates in `vouchers`, restoring from the log
//! in `restore`, what the read side asks in `read_side`, the wait for a
//! replica's acknowledgement before an admission is promised in
//! `replica_acks`.

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use redis::Script;
use seckill_core::config::{RedisConfig, DEFAULT_ENDED_SALE_TTL_SECONDS};
use seckill_core::metrics::AdmissionMetrics;
use seckill_core::{OrderId, VoucherId};

use crate::borrowers::Borrowers;
pub(crate) use crate::connection::unexpected;
use crate::keys::{outbox_key, voucher_tag};
use crate::layout::{self, Layout, Layouts};
use crate::outbox::OutboxHints;
use crate::replica_acks::{ReplicaAcks, LOOK_EVERY};
use crate::{GateConnection, VoucherKeys};

/// Default bound of the outbox: past it, orders are refused (`Backlogged`)
/// rather than admitted into a backlog that grows while the log is down.
pub const DEFAULT_OUTBOX_LIMIT: u64 = 100_000;

/// The gate's verdict on one order request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Stock and the user's count were taken.
    Admitted { remaining: u64 },
    /// The request's Idempotency-Key admitted `order` before, for
    /// `quantity` units (None if the gate no longer knows); nothing changed.
    Replayed { order: OrderId, quantity: Option<u32> },
    /// The outbox holds `entries` orders not yet in the log (the broker is
    /// down or slow); nothing changed.
    Backlogged { entries: u64 },
    /// Refused; nothing changed.
    Rejected(Rejection),
    /// The order id was settled as not admitted before this call ran (its
    /// caller had given up on it); nothing changed.
    Fenced,
    /// Admitted (or, for a retry's key, admitted before: `order` is that
    /// order), but no replica acknowledged it within the replica wait's
    /// timeout: the order stands on the master, and is lost if the master
    /// fails before a replica has it (`crate::replica_acks`).
    Unacknowledged { order: OrderId },
}

/// What became of an admission call that failed without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// `admit.lua` admitted the order: it is in the outbox.
    Admitted,
    /// It was not admitted, and now never will be: the id is fenced.
    NotAdmitted,
    /// Settled either way, but no replica acknowledged the answer within
    /// the replica wait's timeout: after a failover the order may or may
    /// not stand.
    Unacknowledged,
}

/// Why the gate refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    UnknownVoucher,
    NotStarted,
    Ended,
    /// An admin paused the sale.
    Paused,
    /// The user holds the whole limit already; `existing` is their order.
    DuplicateOrder {
        existing: Option<OrderId>,
    },
    /// The requested quantity would take the user past the limit.
    LimitExceeded {
        limit: u32,
    },
    /// Fewer units left than asked for; `remaining` is what is left (in
    /// every bucket together, for a voucher split into buckets).
    SoldOut {
        remaining: u64,
    },
    /// A queue-mode sale and no entry token presented.
    EntryRequired,
    /// The entry presented is not the user's served entry.
    EntryInvalid,
    /// The entry's time is over.
    EntryExpired,
    /// The entry admitted `order` before.
    EntryUsed {
        order: Option<OrderId>,
    },
    /// A draw sale and the user holds no win (not drawn, not entered, or
    /// the draw not made yet).
    NotWon,
    /// The user's purchase window is over.
    WindowClosed,
    /// The user's win admitted `order` before.
    WinUsed {
        order: Option<OrderId>,
    },
    /// The user's (or, `by_address`, the address's) admission bucket is
    /// empty.
    RateLimited {
        retry_after_ms: u64,
        by_address: bool,
    },
    /// The voucher asks for a proof of work of `bits` and none came.
    ChallengeRequired {
        bits: u32,
    },
    /// The solution has fewer bits than the voucher asks.
    ChallengeTooEasy {
        bits: u32,
    },
    /// The challenge's time is over.
    ChallengeExpired,
    /// The challenge paid for a request before.
    ChallengeUsed,
}

impl Rejection {
    /// The API error code and metric label.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownVoucher => "unknown_voucher",
            Self::NotStarted => "not_started",
            Self::Ended => "ended",
            Self::Paused => "paused",
            Self::DuplicateOrder { .. } => "duplicate_order",
            Self::LimitExceeded { .. } => "limit_exceeded",
            Self::SoldOut { .. } => "sold_out",
            Self::EntryRequired => "entry_token_required",
            Self::EntryInvalid => "entry_token_invalid",
            Self::EntryExpired => "entry_token_expired",
            Self::EntryUsed { .. } => "entry_token_used",
            Self::NotWon => "not_a_winner",
            Self::WindowClosed => "purchase_window_closed",
            Self::WinUsed { .. } => "win_used",
            Self::RateLimited { .. } => "rate_limited",
            Self::ChallengeRequired { .. } => "challenge_required",
            Self::ChallengeTooEasy { .. } => "challenge_too_easy",
            Self::ChallengeExpired => "challenge_expired",
            Self::ChallengeUsed => "challenge_used",
        }
    }
}

/// A voucher as the gate holds it (all of its buckets together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateVoucher {
    /// Units for sale in all.
    pub stock: u64,
    /// Units the gate still admits (in every bucket, and in transit
    /// between two).
    pub remaining: u64,
    pub paused: bool,
    pub begins_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
}

/// Whether [`Gate::restore`] writes or only compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreMode {
    Check,
    Write,
}

/// How a voucher in Redis compared with the log (and, writing, what became
/// of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreAction {
    /// Every field a restore writes was already so.
    Unchanged,
    /// Something differed.
    Corrected,
    /// The voucher was not in Redis.
    Restored,
    /// The sale ended longer ago than its keys outlive it: not restored
    /// (writing removes what is left of it).
    Expired,
}

/// What [`Gate::restore`] found and did (for a voucher split into buckets:
/// every bucket together; the action is the strongest any bucket needed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreOutcome {
    pub action: RestoreAction,
    /// Units Redis admitted before (None: the voucher was missing).
    pub remaining_before: Option<u64>,
    /// Units it admits after (None: expired).
    pub remaining_after: Option<u64>,
    /// Users whose units differed.
    pub users_fixed: u64,
    /// What differed, for [`RestoreAction::Corrected`], each in words as
    /// `restore.lua` says it ("ends_ms 1700000000000 → 1700003600000", "the
    /// latest order of 2 users"; on a split voucher "bucket 2: …"); empty
    /// for the other actions.
    pub differences: Vec<String>,
    /// A draw-mode voucher's draw, when it was written.
    pub draw: Option<crate::DrawRestored>,
    /// A queue-mode voucher's waiting room, when it was written.
    pub room: Option<crate::RoomRestored>,
}

/// Whether an admin update took effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateResult {
    /// Applied now; the voucher as it stands after it.
    Applied(GateVoucher),
    /// Applied before (by the ingress or an earlier delivery); nothing changed.
    Repeated(GateVoucher),
    /// The gate has no such voucher.
    UnknownVoucher,
}

/// The text of a script of `lua/` with preludes of `lua/` put before its
/// own: files of local functions only, so what several scripts share is
/// written once (`window_time.lua`: reading the window clock, for the
/// scripts that judge or show a window; `window_clock.lua`: keeping it, for
/// the waiting room's and the draw's advance; `room_fields.lua`: the fields a room is opened with, for
/// opening and rebuilding it; `staged_restore.lua`: the staging of both
/// rebuilds).
macro_rules! preluded {
    ($($prelude:literal),+ => $script:literal) => {
        concat!($(include_str!(concat!("../../lua/", $prelude)),)+ include_str!(concat!("../../lua/", $script)))
    };
}

/// The scripts, each loaded once.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) admit: Script,
    pub(crate) load_voucher: Script,
    pub(crate) release: Script,
    pub(crate) restore: Script,
    pub(crate) settle: Script,
    pub(crate) update_voucher: Script,
    pub(crate) transfer_debit: Script,
    pub(crate) transfer_settle: Script,
    pub(crate) transfer_finish: Script,
    pub(crate) freeze_transfers: Script,
    pub(crate) queue_open: Script,
    pub(crate) queue_join: Script,
    pub(crate) queue_advance: Script,
    pub(crate) queue_status: Script,
    pub(crate) queue_seen: Script,
    pub(crate) draw_enter: Script,
    pub(crate) draw_advance: Script,
    pub(crate) draw_status: Script,
    pub(crate) challenge_rate: Script,
    pub(crate) draw_restore: Script,
    pub(crate) draw_beacon: Script,
    pub(crate) queue_restore: Script,
}

impl Scripts {
    fn new() -> Self {
        Self {
            admit: Script::new(preluded!("window_time.lua" => "admit.lua")),
            load_voucher: Script::new(include_str!("../../lua/load_voucher.lua")),
            release: Script::new(include_str!("../../lua/release.lua")),
            restore: Script::new(include_str!("../../lua/restore.lua")),
            settle: Script::new(include_str!("../../lua/settle.lua")),
            update_voucher: Script::new(include_str!("../../lua/update_voucher.lua")),
            transfer_debit: Script::new(include_str!("../../lua/transfer_debit.lua")),
            transfer_settle: Script::new(include_str!("../../lua/transfer_settle.lua")),
            transfer_finish: Script::new(include_str!("../../lua/transfer_finish.lua")),
            freeze_transfers: Script::new(include_str!("../../lua/freeze_transfers.lua")),
            queue_open: Script::new(preluded!("room_fields.lua" => "queue_open.lua")),
            queue_join: Script::new(preluded!("window_time.lua" => "queue_join.lua")),
            queue_advance: Script::new(preluded!("window_time.lua", "window_clock.lua" => "queue_advance.lua")),
            queue_status: Script::new(preluded!("window_time.lua" => "queue_status.lua")),
            queue_seen: Script::new(include_str!("../../lua/queue_seen.lua")),
            draw_enter: Script::new(include_str!("../../lua/draw_enter.lua")),
            draw_advance: Script::new(preluded!("window_time.lua", "window_clock.lua" => "draw_advance.lua")),
            draw_status: Script::new(preluded!("window_time.lua" => "draw_status.lua")),
            challenge_rate: Script::new(include_str!("../../lua/challenge_rate.lua")),
            draw_restore: Script::new(preluded!("staged_restore.lua" => "draw_restore.lua")),
            draw_beacon: Script::new(include_str!("../../lua/draw_beacon.lua")),
            queue_restore: Script::new(preluded!("room_fields.lua", "staged_restore.lua" => "queue_restore.lua")),
        }
    }

    fn all(&self) -> [&Script; 22] {
        [
            &self.admit,
            &self.load_voucher,
            &self.release,
            &self.restore,
            &self.settle,
            &self.update_voucher,
            &self.transfer_debit,
            &self.transfer_settle,
            &self.transfer_finish,
            &self.freeze_transfers,
            &self.queue_open,
            &self.queue_join,
            &self.queue_advance,
            &self.queue_status,
            &self.queue_seen,
            &self.draw_enter,
            &self.draw_advance,
            &self.draw_status,
            &self.challenge_rate,
            &self.draw_restore,
            &self.draw_beacon,
            &self.queue_restore,
        ]
    }
}

/// Redis (one, or a cluster) with the admission scripts loaded.
#[derive(Clone)]
pub struct Gate {
    pub(crate) redis: GateConnection,
    pub(crate) prefix: String,
    pub(crate) scripts: Arc<Scripts>,
    /// The one outbox of a single Redis; None on a cluster, where each
    /// bucket has its own.
    single_outbox: Option<String>,
    pub(crate) outbox_limit: u64,
    /// How long a voucher's keys outlive its sale: every script that writes
    /// one sets its expiry to `ends_ms` plus this.
    pub(crate) ended_sale_ttl_ms: u64,
    pub(crate) metrics: Option<AdmissionMetrics>,
    /// How many buckets each voucher seen so far has.
    pub(crate) layouts: Arc<Layouts>,
    /// Tells this process's relay which outboxes admissions wrote to.
    pub(crate) hints: Option<Arc<OutboxHints>>,
    /// Turns of the requests borrowing for a dry bucket.
    pub(crate) borrowers: Arc<Borrowers>,
    /// The wait for a replica's acknowledgement of admissions (None: the
    /// calls never wait).
    pub(crate) acks: Option<Arc<ReplicaAcks>>,
    /// How long an admitted order's pending record lives, when `admit.lua`
    /// writes it (see [`Gate::with_pending_records`]); None on a cluster.
    pub(crate) pending_ttl_ms: Option<u64>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("prefix", &self.prefix)
            .field("cluster", &self.redis.is_cluster())
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// Connects to the Redis (or Redis Cluster) `config` names,
    /// reconnecting by itself after failures, and loads the scripts.
    pub async fn connect(config: &RedisConfig) -> redis::RedisResult<Self> {
        // Bounds connecting and every call: a slow Redis answers 503, not a hang.
        let timeout = std::time::Duration::from_millis(config.response_timeout_ms);
        let redis = GateConnection::open(config, timeout).await?;
        Ok(Self::new(redis, &config.key_prefix)
            .await?
            .with_ended_sale_ttl(std::time::Duration::from_secs(config.ended_sale_ttl_seconds)))
    }

    /// Loads the scripts into `redis` (SCRIPT LOAD; on every master of a
    /// cluster) once.
    pub async fn new(redis: impl Into<GateConnection>, prefix: &str) -> redis::RedisResult<Self> {
        let mut redis = redis.into();
        let scripts = Scripts::new();
        for script in scripts.all() {
            script.load_async(&mut redis).await?;
        }
        Ok(Self {
            single_outbox: (!redis.is_cluster()).then(|| outbox_key(prefix)),
            redis,
            prefix: prefix.to_owned(),
            scripts: Arc::new(scripts),
            outbox_limit: DEFAULT_OUTBOX_LIMIT,
            ended_sale_ttl_ms: DEFAULT_ENDED_SALE_TTL_SECONDS * 1_000,
            metrics: None,
            layouts: Arc::new(Layouts::default()),
            hints: None,
            borrowers: Arc::new(Borrowers::default()),
            acks: None,
            pending_ttl_ms: None,
        })
    }

    /// Refuses admissions once an outbox holds `limit` orders: the one
    /// outbox of a single Redis, or the bucket's own on a cluster.
    pub fn with_outbox_limit(mut self, limit: u64) -> Self {
        self.outbox_limit = limit;
        self
    }

    /// Lets a voucher's keys expire `ttl` after its sale ends.
    pub fn with_ended_sale_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.ended_sale_ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Has `admit.lua` write each order it admits as a pending record
    /// living `ttl` (what [`Gate::pending`] reads by order id, from any
    /// process, before the log has the order), in the admission's own call,
    /// where the keys allow it: on a single Redis. On a cluster the record's
    /// key is in another slot than the voucher's, and the caller writes it
    /// after the call ([`Gate::remember_pending`]); see
    /// [`Gate::admission_writes_pending`].
    pub fn with_pending_records(mut self, ttl: std::time::Duration) -> Self {
        self.pending_ttl_ms =
            (!self.redis.is_cluster()).then(|| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1));
        self
    }

    /// Whether an admission writes its order's pending record itself (else
    /// the caller does, after it).
    pub fn admission_writes_pending(&self) -> bool {
        self.pending_ttl_ms.is_some()
    }

    /// Records script latencies and transfers in `metrics` (and the replica
    /// wait's timeouts, whichever is set first).
    pub fn with_metrics(mut self, metrics: AdmissionMetrics) -> Self {
        if let Some(acks) = &self.acks {
            acks.report_to(metrics.clone());
        }
        self.metrics = Some(metrics);
        self
    }

    /// Has admissions and settlements answered only once a replica has
    /// acknowledged them, as `config.replica_acks` says (`auto`: once a
    /// master reports a replica), waiting `config.replica_ack_timeout_ms`
    /// at most; they then go over a connection of their own, which this
    /// opens (see `crate::replica_acks`).
    pub async fn with_replica_acks(mut self, config: &RedisConfig) -> redis::RedisResult<Self> {
        self.acks = ReplicaAcks::start(config, self.metrics.clone(), LOOK_EVERY).await?;
        Ok(self)
    }

    /// Makes the borrowers of dry buckets in this process take turns in
    /// `stripes` stripes (default 256); fewer make buckets of different
    /// vouchers share turns more often (one forces every bucket into one).
    pub fn with_borrow_stripes(mut self, stripes: usize) -> Self {
        self.borrowers = Arc::new(Borrowers::with_stripes(stripes));
        self
    }

    /// Tells `hints` (this process's relay) of every outbox an admission
    /// writes to, so the relay reads it at once (on a cluster, where the
    /// relay cannot block on every outbox).
    pub fn with_outbox_hints(mut self, hints: Arc<OutboxHints>) -> Self {
        self.hints = Some(hints);
        self
    }

    /// The prefix of every key.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The connection (shared by clones).
    pub fn connection(&self) -> &GateConnection {
        &self.redis
    }

    /// The keys of `voucher` (of its bucket 0, the only one of a voucher
    /// not split into buckets).
    pub fn keys(&self, voucher: VoucherId) -> VoucherKeys {
        VoucherKeys::new(&self.prefix, voucher)
    }

    /// The Redis Cluster slot of `voucher`'s bucket 0, where its room or
    /// draw is.
    pub(crate) fn room_slot(voucher: VoucherId) -> u16 {
        layout::slot(voucher_tag(voucher).as_bytes())
    }

    /// The one outbox of a single Redis (None on a cluster).
    pub(crate) fn single_outbox(&self) -> Option<&str> {
        self.single_outbox.as_deref()
    }

    /// The outbox an admission into the bucket of `keys` appends to.
    pub(crate) fn outbox_of<'k>(&'k self, keys: &'k VoucherKeys) -> &'k str {
        self.single_outbox.as_deref().unwrap_or(&keys.outbox)
    }

    /// The buckets of `voucher` (None: it is not in Redis). Remembered once
    /// read: a voucher's buckets never change.
    pub async fn layout(&self, voucher: VoucherId) -> redis::RedisResult<Option<Arc<Layout>>> {
        if let Some(layout) = self.layouts.get(voucher) {
            return Ok(Some(layout));
        }
        let (stock, shards): (Option<u64>, Option<u32>) = redis::cmd("HMGET")
            .arg(self.keys(voucher).voucher)
            .arg(&["stock", "shards"])
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(stock.map(|_| self.layouts.learn(voucher, shards.unwrap_or(1))))
    }

    /// Whether admissions wait for a replica's acknowledgement now.
    pub fn replica_acks_on(&self) -> bool {
        self.acks.as_ref().is_some_and(|acks| acks.is_on())
    }

    /// Awaits `call` and records how long it took under `script` (the
    /// calls that answered; a failed call is counted by its caller's error).
    pub(crate) async fn timed<T>(
        &self,
        script: &'static str,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> redis::RedisResult<T> {
        let started = Instant::now();
        let answer = call.await?;
        if let Some(metrics) = &self.metrics {
            metrics.script_duration.with_label_values(&[script]).observe(started.elapsed().as_secs_f64());
        }
        Ok(answer)
    }
}

pub(crate) fn millis(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// `record` encoded without `fields`: the script that appends it to the
/// outbox adds them (what only Redis knows: a sequence number, a rank).
pub(crate) fn encoded_without(record: &seckill_core::Envelope, fields: &[&str]) -> redis::RedisResult<String> {
    let mut encoded = serde_json::to_value(record).map_err(|e| unexpected("a record", e.to_string()))?;
    if let Some(object) = encoded.as_object_mut() {
        for field in fields {
            object.remove(*field);
        }
    }
    Ok(encoded.to_string())
}
