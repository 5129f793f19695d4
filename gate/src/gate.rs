//! The gate: the scripts, loaded once and called by EVALSHA.
//!
//! `redis::Script` sends EVALSHA and, on NOSCRIPT (a restarted or failed-over
//! Redis), loads the script and retries once, so a Redis restart is
//! recovered without the caller noticing. The scripts are also loaded at
//! startup, so the first order pays no load.

use std::collections::HashMap;
use std::time::Instant;

use chrono::{DateTime, Utc};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use seckill_core::config::{RedisConfig, DEFAULT_ENDED_SALE_TTL_SECONDS};
use seckill_core::event::{Event, OrderAccepted, VoucherCreated, VoucherUpdated};
use seckill_core::metrics::AdmissionMetrics;
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use uuid::Uuid;

use crate::keys::outbox_key;
use crate::{Holders, RetryKey, VoucherAdmission, VoucherKeys};

/// Default bound of the outbox: past it, orders are refused (`Backlogged`)
/// rather than admitted into a backlog that grows while the log is down.
pub const DEFAULT_OUTBOX_LIMIT: u64 = 100_000;

const ADMIT: &str = include_str!("../../lua/admit.lua");
const LOAD_VOUCHER: &str = include_str!("../../lua/load_voucher.lua");
const RELEASE: &str = include_str!("../../lua/release.lua");
const RESTORE: &str = include_str!("../../lua/restore.lua");
const SETTLE: &str = include_str!("../../lua/settle.lua");
const UPDATE_VOUCHER: &str = include_str!("../../lua/update_voucher.lua");

/// The gate's verdict on one order request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Stock and the user's count were taken.
    Admitted { remaining: u64 },
    /// The request's Idempotency-Key admitted `order` before; nothing changed.
    Replayed { order: OrderId },
    /// The outbox holds `entries` orders not yet in the log (the broker is
    /// down or slow); nothing changed.
    Backlogged { entries: u64 },
    /// Refused; nothing changed.
    Rejected(Rejection),
    /// The order id was settled as not admitted before this call ran (its
    /// caller had given up on it); nothing changed.
    Fenced,
}

/// What became of an admission call that failed without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// `admit.lua` admitted the order: it is in the outbox.
    Admitted,
    /// It was not admitted, and now never will be: the id is fenced.
    NotAdmitted,
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
    /// Fewer units left than asked for; `remaining` is what is left.
    SoldOut {
        remaining: u64,
    },
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
        }
    }
}

/// A voucher as the gate holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateVoucher {
    /// Units for sale in all.
    pub stock: u64,
    /// Units the gate still admits.
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

/// What [`Gate::restore`] found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestoreOutcome {
    pub action: RestoreAction,
    /// Units Redis admitted before (None: the voucher was missing).
    pub remaining_before: Option<u64>,
    /// Units it admits after (None: expired).
    pub remaining_after: Option<u64>,
    /// Users whose units differed.
    pub users_fixed: u64,
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

/// Redis with the admission scripts loaded.
#[derive(Clone)]
pub struct Gate {
    pub(crate) redis: ConnectionManager,
    pub(crate) prefix: String,
    admit: Script,
    load_voucher: Script,
    release: Script,
    restore: Script,
    settle: Script,
    update_voucher: Script,
    outbox: String,
    outbox_limit: u64,
    /// How long a voucher's keys outlive its sale: every script that writes
    /// one sets its expiry to `ends_ms` plus this.
    ended_sale_ttl_ms: u64,
    metrics: Option<AdmissionMetrics>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl Gate {
    /// Connects to the Redis `config` names (reconnecting by itself after
    /// failures) and loads the scripts.
    pub async fn connect(config: &RedisConfig) -> redis::RedisResult<Self> {
        // Bounds connecting and every call: a slow Redis answers 503, not a hang.
        let timeout = std::time::Duration::from_millis(config.response_timeout_ms);
        let redis = redis::Client::open(config.url.as_str())?
            .get_connection_manager_with_config(
                ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout)),
            )
            .await?;
        Ok(Self::new(redis, &config.key_prefix)
            .await?
            .with_ended_sale_ttl(std::time::Duration::from_secs(config.ended_sale_ttl_seconds)))
    }

    /// Loads the scripts into `redis` (SCRIPT LOAD) once.
    pub async fn new(mut redis: ConnectionManager, prefix: &str) -> redis::RedisResult<Self> {
        let gate = Self {
            admit: Script::new(ADMIT),
            load_voucher: Script::new(LOAD_VOUCHER),
            release: Script::new(RELEASE),
            restore: Script::new(RESTORE),
            settle: Script::new(SETTLE),
            update_voucher: Script::new(UPDATE_VOUCHER),
            outbox: outbox_key(prefix),
            outbox_limit: DEFAULT_OUTBOX_LIMIT,
            ended_sale_ttl_ms: DEFAULT_ENDED_SALE_TTL_SECONDS * 1_000,
            prefix: prefix.to_owned(),
            metrics: None,
            redis: redis.clone(),
        };
        let scripts =
            [&gate.admit, &gate.load_voucher, &gate.release, &gate.restore, &gate.settle, &gate.update_voucher];
        for script in scripts {
            script.load_async(&mut redis).await?;
        }
        Ok(gate)
    }

    /// Refuses admissions once the outbox holds `limit` orders.
    pub fn with_outbox_limit(mut self, limit: u64) -> Self {
        self.outbox_limit = limit;
        self
    }

    /// Lets a voucher's keys expire `ttl` after its sale ends.
    pub fn with_ended_sale_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.ended_sale_ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Records script latencies in `metrics`.
    pub fn with_metrics(mut self, metrics: AdmissionMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The prefix of every key.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The keys of `voucher`.
    pub fn keys(&self, voucher: VoucherId) -> VoucherKeys {
        VoucherKeys::new(&self.prefix, voucher)
    }

    /// Makes a voucher admissible as `definition` defines it; false if it
    /// was loaded before (loading again never resets a sale) or its sale
    /// ended longer ago than the keys outlive it (a definition delivered
    /// again never brings an old sale back).
    pub async fn load_voucher(&self, definition: &VoucherCreated) -> redis::RedisResult<bool> {
        let keys = self.keys(definition.voucher_id);
        let started = Instant::now();
        let loaded: i64 = self
            .load_voucher
            .key(keys.all().as_slice())
            .arg(definition.stock)
            .arg(definition.begins_at.timestamp_millis())
            .arg(definition.ends_at.timestamp_millis())
            .arg(definition.per_user_limit)
            .arg(definition.hold_seconds)
            .arg(self.ended_sale_ttl_ms)
            .invoke_async(&mut self.redis.clone())
            .await?;
        self.observe("load_voucher", started);
        Ok(loaded == 1)
    }

    /// Runs the admission check for one request, accepted now. When
    /// admitted, the order's `OrderAccepted` record is in the outbox,
    /// written in the same script.
    pub async fn admit(
        &self,
        voucher: VoucherId,
        user: &UserId,
        quantity: u32,
        order: OrderId,
        retry: Option<&RetryKey>,
    ) -> redis::RedisResult<Admission> {
        let order = OrderAccepted {
            order_id: order,
            voucher_id: voucher,
            user_id: user.clone(),
            quantity,
            accepted_at: Utc::now(),
        };
        self.admit_order(&order, retry).await
    }

    /// Runs the admission check for `order`; when admitted, exactly this
    /// record is in the outbox, written in the same script. An error means
    /// the script may or may not have run (or may still run): ask
    /// [`Gate::settle`] before telling anyone it did not.
    pub async fn admit_order(&self, order: &OrderAccepted, retry: Option<&RetryKey>) -> redis::RedisResult<Admission> {
        let (voucher, user, quantity) = (order.voucher_id, &order.user_id, order.quantity);
        let keys = self.keys(voucher);
        let record = Envelope::new(Event::OrderAccepted(order.clone()));
        let started = Instant::now();
        let (code, detail): (String, String) = self
            .admit
            .key(&keys.voucher)
            .key(&keys.bought)
            .key(&keys.orders)
            .key(&keys.retries)
            .key(&keys.admitted)
            .key(&self.outbox)
            .arg(user.as_str())
            .arg(quantity)
            .arg(order.order_id.to_string())
            .arg(retry.map(RetryKey::field).unwrap_or_default())
            .arg(record.encode())
            .arg(voucher.to_string())
            .arg(self.outbox_limit)
            .arg(self.ended_sale_ttl_ms)
            .invoke_async(&mut self.redis.clone())
            .await?;
        self.observe("admit", started);
        let rejected = |rejection| Ok(Admission::Rejected(rejection));
        match code.as_str() {
            "admitted" => Ok(Admission::Admitted { remaining: detail.parse().unwrap_or_default() }),
            "replayed" => match detail.parse() {
                Ok(order) => Ok(Admission::Replayed { order }),
                Err(_) => Err(unexpected("admit.lua replayed an unreadable order id", detail)),
            },
            "unknown_voucher" => rejected(Rejection::UnknownVoucher),
            "not_started" => rejected(Rejection::NotStarted),
            "ended" => rejected(Rejection::Ended),
            "paused" => rejected(Rejection::Paused),
            "duplicate_order" => rejected(Rejection::DuplicateOrder { existing: detail.parse().ok() }),
            "limit_exceeded" => rejected(Rejection::LimitExceeded { limit: detail.parse().unwrap_or_default() }),
            "sold_out" => rejected(Rejection::SoldOut { remaining: detail.parse().unwrap_or_default() }),
            "backlog_full" => Ok(Admission::Backlogged { entries: detail.parse().unwrap_or_default() }),
            "fenced" => Ok(Admission::Fenced),
            other => Err(unexpected("admit.lua returned an unknown code", other.to_owned())),
        }
    }

    /// Whether `order` of `voucher` was admitted, after an admission call
    /// for it failed without an answer; "not admitted" is made final (a
    /// late call with that id is refused), so the answer is exact even if
    /// the failed call is still on its way to Redis.
    pub async fn settle(&self, voucher: VoucherId, order: OrderId) -> redis::RedisResult<Settlement> {
        let keys = self.keys(voucher);
        let started = Instant::now();
        let settled: String = self
            .settle
            .key(&keys.voucher)
            .key(&keys.admitted)
            .arg(order.to_string())
            .arg(self.ended_sale_ttl_ms)
            .invoke_async(&mut self.redis.clone())
            .await?;
        self.observe("settle", started);
        match settled.as_str() {
            "admitted" => Ok(Settlement::Admitted),
            "not_admitted" => Ok(Settlement::NotAdmitted),
            other => Err(unexpected("settle.lua returned an unknown answer", other.to_owned())),
        }
    }

    /// Gives an admitted order's units back; false if it was released before.
    /// `retry` is the key that admitted it, when the order never reached the
    /// log (a retry must then admit afresh).
    pub async fn release(
        &self,
        voucher: VoucherId,
        user: &UserId,
        quantity: u32,
        order: OrderId,
        retry: Option<&RetryKey>,
    ) -> redis::RedisResult<bool> {
        let keys = self.keys(voucher);
        let started = Instant::now();
        let released: i64 = self
            .release
            .key(&keys.voucher)
            .key(&keys.bought)
            .key(&keys.orders)
            .key(&keys.released)
            .key(&keys.retries)
            .arg(user.as_str())
            .arg(quantity)
            .arg(order.to_string())
            .arg(retry.map(RetryKey::field).unwrap_or_default())
            .arg(self.ended_sale_ttl_ms)
            .invoke_async(&mut self.redis.clone())
            .await?;
        self.observe("release", started);
        Ok(released == 1)
    }

    /// Applies an admin update, once per `update_id` (the record's event id).
    pub async fn update_voucher(&self, update_id: Uuid, update: &VoucherUpdated) -> redis::RedisResult<UpdateResult> {
        let keys = self.keys(update.voucher_id);
        let started = Instant::now();
        let paused = update.paused.map(|paused| if paused { "1" } else { "0" }).unwrap_or_default();
        let ends_ms = update.ends_at.map(|at| at.timestamp_millis().to_string()).unwrap_or_default();
        type Reply = (String, String, String, String, String, String);
        let (code, stock, remaining, paused, begins_ms, ends_ms): Reply = self
            .update_voucher
            .key(&keys.voucher)
            .key(&keys.updates)
            .key(&keys.bought)
            .key(&keys.orders)
            .key(&keys.released)
            .key(&keys.retries)
            .key(&keys.admitted)
            .key(&keys.added)
            .arg(update_id.to_string())
            .arg(paused)
            .arg(ends_ms)
            .arg(update.add_stock)
            .arg(self.ended_sale_ttl_ms)
            .invoke_async(&mut self.redis.clone())
            .await?;
        self.observe("update_voucher", started);
        if code == "unknown_voucher" {
            return Ok(UpdateResult::UnknownVoucher);
        }
        let voucher = GateVoucher {
            stock: stock.parse().unwrap_or_default(),
            remaining: remaining.parse().unwrap_or_default(),
            paused: paused == "1",
            begins_at: millis(begins_ms.parse().unwrap_or_default()),
            ends_at: millis(ends_ms.parse().unwrap_or_default()),
        };
        match code.as_str() {
            "applied" => Ok(UpdateResult::Applied(voucher)),
            "repeated" => Ok(UpdateResult::Repeated(voucher)),
            other => Err(unexpected("update_voucher.lua returned an unknown code", other.to_owned())),
        }
    }

    /// The voucher as the gate holds it (None: not loaded).
    pub async fn voucher(&self, voucher: VoucherId) -> redis::RedisResult<Option<GateVoucher>> {
        type Fields = (Option<u64>, Option<u64>, Option<String>, Option<i64>, Option<i64>);
        let (stock, remaining, paused, begins_ms, ends_ms): Fields = redis::cmd("HMGET")
            .arg(self.keys(voucher).voucher)
            .arg(&["stock", "remaining", "paused", "begins_ms", "ends_ms"])
            .query_async(&mut self.redis.clone())
            .await?;
        let (Some(stock), Some(remaining), Some(begins_ms), Some(ends_ms)) = (stock, remaining, begins_ms, ends_ms)
        else {
            return Ok(None);
        };
        Ok(Some(GateVoucher {
            stock,
            remaining,
            paused: paused.as_deref() == Some("1"),
            begins_at: millis(begins_ms),
            ends_at: millis(ends_ms),
        }))
    }

    /// Rebuilds `state.voucher_id`'s admission state from what the log
    /// says (`restore.lua`, one atomic step), counting what landed in Redis
    /// since the log was read: orders given back, orders admitted, updates
    /// applied. [`RestoreMode::Check`] only compares. Idempotency keys are
    /// not in the log and are left as they are.
    pub async fn restore(&self, state: &VoucherAdmission, mode: RestoreMode) -> redis::RedisResult<RestoreOutcome> {
        let keys = self.keys(state.voucher_id);
        let mut call = self.restore.key(keys.all().as_slice());
        call.arg(match mode {
            RestoreMode::Check => "check",
            RestoreMode::Write => "write",
        })
        .arg(state.stock)
        .arg(state.begins_ms)
        .arg(state.ends_ms)
        .arg(state.limit)
        .arg(state.hold_seconds)
        .arg(if state.paused { "1" } else { "0" })
        .arg(state.settings_version.map(|v| v.to_string()).unwrap_or_default())
        .arg(self.ended_sale_ttl_ms)
        .arg(state.released.len())
        .arg(state.updates.len());
        for order in &state.released {
            call.arg(order.to_string());
        }
        for update in &state.updates {
            call.arg(update.to_string());
        }
        for order in &state.orders {
            call.arg(order.order_id.to_string()).arg(order.user_id.as_str()).arg(order.quantity);
        }
        let started = Instant::now();
        let (action, before, after, users_fixed): (String, String, String, String) =
            call.invoke_async(&mut self.redis.clone()).await?;
        self.observe("restore", started);
        let action = match action.as_str() {
            "unchanged" => RestoreAction::Unchanged,
            "corrected" => RestoreAction::Corrected,
            "restored" => RestoreAction::Restored,
            "expired" => RestoreAction::Expired,
            other => return Err(unexpected("restore.lua returned an unknown action", other.to_owned())),
        };
        Ok(RestoreOutcome {
            action,
            remaining_before: before.parse().ok(),
            remaining_after: after.parse().ok(),
            users_fixed: users_fixed.parse().unwrap_or_default(),
        })
    }

    /// The records in the outbox (admitted, not yet published), oldest
    /// first, at most `limit`.
    pub async fn outbox_records(&self, limit: usize) -> redis::RedisResult<Vec<Vec<u8>>> {
        let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(&self.outbox)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(limit)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(reply
            .ids
            .into_iter()
            .filter_map(|entry| match entry.map.get("record") {
                Some(redis::Value::BulkString(bytes)) => Some(bytes.clone()),
                _ => None,
            })
            .collect())
    }

    /// Who holds units of `voucher`, for the sold-out memo; None when there
    /// are more than `max_holders` (not worth remembering) or the voucher is
    /// gone.
    pub async fn holders(&self, voucher: VoucherId, max_holders: usize) -> redis::RedisResult<Option<Holders>> {
        let keys = self.keys(voucher);
        let mut redis = self.redis.clone();
        let count: usize = redis::cmd("HLEN").arg(&keys.bought).query_async(&mut redis).await?;
        if count > max_holders {
            return Ok(None);
        }
        let (limit, bought, orders): (Option<u32>, HashMap<String, u32>, HashMap<String, String>) = redis::pipe()
            .cmd("HGET")
            .arg(&keys.voucher)
            .arg("limit")
            .cmd("HGETALL")
            .arg(&keys.bought)
            .cmd("HGETALL")
            .arg(&keys.orders)
            .query_async(&mut redis)
            .await?;
        let orders = orders.into_iter().filter_map(|(user, order)| Some((user, order.parse().ok()?))).collect();
        Ok(limit.map(|limit| Holders { limit, bought, orders }))
    }

    /// Units the gate still admits for `voucher` (None: not loaded).
    pub async fn remaining(&self, voucher: VoucherId) -> redis::RedisResult<Option<u64>> {
        redis::cmd("HGET").arg(self.keys(voucher).voucher).arg("remaining").query_async(&mut self.redis.clone()).await
    }

    fn observe(&self, script: &str, started: Instant) {
        if let Some(metrics) = &self.metrics {
            metrics.script_duration.with_label_values(&[script]).observe(started.elapsed().as_secs_f64());
        }
    }
}

fn millis(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

fn unexpected(what: &'static str, detail: String) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, what, detail))
}
