//! Admitting an order, settling a call that failed without an answer, and
//! giving an order's units back: each in the order's bucket, its user's.
//!
//! The caller's count of a voucher's buckets is checked by `admit.lua`
//! itself (a wrong one is answered `wrong_shards` before anything changes,
//! the pace and the proof of work included, so the call after the recount
//! takes both), so the hot path asks nothing before admitting: a voucher
//! this process has not seen is taken to have one bucket, and learned on
//! the first answer. When the user's bucket is dry and the voucher has others, units
//! are borrowed from them (`crate::transfers`) and the order is tried again;
//! `sold_out` is answered only once every bucket is found dry. The requests
//! of one process that find the same bucket dry borrow one at a time
//! (`crate::borrowers`): the others wait and try their bucket again, instead
//! of all reading every bucket and racing for the same units.
//!
//! Admitting and settling are promises: when the replica wait is on
//! (`crate::replica_acks`), their answers count only once a replica has
//! acknowledged them, else they are [`Admission::Unacknowledged`] and
//! [`Settlement::Unacknowledged`].

use std::sync::Arc;

use seckill_core::event::{DrawWinUsed, Event, OrderAccepted, QueueEntryUsed};
use seckill_core::{Envelope, OrderId, UserId, VoucherId};

use crate::borrowers::Borrowed;
use crate::connection::through_moving_slots;
use crate::gate::{encoded_without, unexpected};
use crate::keys::pending_order_key;
use crate::layout::Layout;
use crate::replica_acks::Durable;
use crate::{Admission, Gate, Rejection, RetryKey, Settlement};

/// How many times one request borrows units (or finds them borrowed by
/// another request) and tries again before it is answered `sold_out` with
/// what the last look found: each round someone else took the units just
/// moved, so the voucher is selling meanwhile.
const BORROW_ROUNDS: u32 = 16;

/// What a request presents besides its order, and the pace it is held to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Presented {
    /// The waiting room's entry (the id of the user's entry token).
    pub entry: Option<u64>,
    /// A solved challenge (its signature and solution checked by the caller).
    pub proof: Option<Proof>,
    pub pace: Pace,
}

/// A proof of work whose signature and solution the caller checked: what
/// the admission scripts need to require it and spend it once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    /// The challenge's id.
    pub nonce: String,
    /// Leading zero bits the solution has.
    pub bits: u32,
    /// When the challenge expires (Unix ms).
    pub expires_ms: i64,
}

/// The per-user and per-address admission buckets (0 per second: none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pace {
    pub user_per_second: u32,
    pub user_burst: u32,
    /// The client's address as the limits count it.
    pub address: Option<String>,
    pub address_per_second: u32,
    pub address_burst: u32,
}

/// What one `admit.lua` call answered.
enum Reply {
    Decided(Admission),
    /// The voucher has this many buckets, not the number assumed.
    WrongShards(u32),
}

impl Gate {
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
            accepted_at: seckill_core::clock::now(),
            amount: 0,
            currency: None,
            idempotency_key: None,
        };
        self.admit_order(&order, retry).await
    }

    /// Runs the admission check for `order` in its user's bucket; when
    /// admitted, exactly this record is in that bucket's outbox, written in
    /// the same script. An error means the script may or may not have run
    /// (or may still run): ask [`Gate::settle`] before telling anyone it did
    /// not.
    pub async fn admit_order(&self, order: &OrderAccepted, retry: Option<&RetryKey>) -> redis::RedisResult<Admission> {
        self.admit_presenting(order, retry, &Presented::default()).await
    }

    /// [`Gate::admit_order`] with what the request `presented`: a waiting
    /// room's entry (a queue-mode voucher admits only with the user's
    /// served, unexpired, unused entry, and spends it in the same script,
    /// logging `QueueEntryUsed` with the order; a draw voucher, only with
    /// the user's open win, logging `DrawWinUsed`), a proof of work (spent
    /// once), and the pace the user and the address are held to.
    pub async fn admit_presenting(
        &self,
        order: &OrderAccepted,
        retry: Option<&RetryKey>,
        presented: &Presented,
    ) -> redis::RedisResult<Admission> {
        let voucher = order.voucher_id;
        let known = self.layouts.get(voucher);
        let mut layout = known.clone().unwrap_or_else(|| Arc::new(Layout::new(voucher, 1)));
        let mut rounds = 0;
        let mut recounted = false;
        // A later round of this request (after a borrow) has paid its proof
        // and its pace in the first. A recount has not: `wrong_shards` is
        // answered before either is taken, so the round after it pays them.
        let mut again = false;
        loop {
            let bucket = layout.home(&order.user_id);
            // Read before the call: a borrow finished after it is news.
            let seen = self.borrowers.epoch(voucher, bucket);
            let call = self.admit_in(&layout, bucket, order, retry, presented, again).await;
            let admission = match call? {
                Reply::WrongShards(shards) if !recounted => {
                    recounted = true;
                    layout = self.layouts.learn(voucher, shards);
                    continue;
                }
                Reply::WrongShards(shards) => {
                    return Err(unexpected("admit.lua disagreed twice on the voucher's buckets", shards.to_string()))
                }
                Reply::Decided(admission) => admission,
            };
            again = true;
            if known.is_none() && admission != Admission::Rejected(Rejection::UnknownVoucher) {
                layout = self.layouts.learn(voucher, layout.shards());
            }
            let Admission::Rejected(Rejection::SoldOut { .. }) = admission else {
                return Ok(admission);
            };
            if layout.shards() == 1 {
                return Ok(admission);
            }
            match self.borrow_once(&layout, bucket, u64::from(order.quantity), seen).await? {
                Borrowed::Dry { available } => {
                    return Ok(Admission::Rejected(Rejection::SoldOut { remaining: available }))
                }
                Borrowed::Moved { available } if rounds >= BORROW_ROUNDS => {
                    return Ok(Admission::Rejected(Rejection::SoldOut { remaining: available }))
                }
                Borrowed::Moved { .. } => rounds += 1,
            }
        }
    }

    /// Runs a request-path script call, patient with slots that are moving
    /// between masters, and records its duration under `script`.
    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        script: &'static str,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> redis::RedisResult<T> {
        let call = through_moving_slots(|| {
            let mut redis = self.redis.clone();
            async move { invocation.invoke_async(&mut redis).await }
        });
        self.timed(script, call).await
    }

    /// Runs a call whose answer is a promise (`admit.lua`, `settle.lua`) in
    /// the bucket on `slot`: behind a replica's acknowledgement when the
    /// wait is on, else as any other call. Answers the reply and whether it
    /// was acknowledged (always, when the wait is off).
    pub(crate) async fn invoke_acknowledged<T: redis::FromRedisValue>(
        &self,
        script: &'static str,
        slot: u16,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> redis::RedisResult<(T, bool)> {
        let Some(acks) = self.acks.as_ref().filter(|acks| acks.is_on()) else {
            return Ok((self.invoke(script, invocation).await?, true));
        };
        let slot = self.redis.is_cluster().then_some(slot);
        let acknowledged = self.timed(script, acks.invoke(slot, invocation)).await?;
        Ok((T::from_redis_value(acknowledged.value)?, acknowledged.by_replica))
    }

    /// Runs a call the log's follower counts on (`release.lua`,
    /// `update_voucher.lua`, `load_voucher.lua`) in the bucket on `slot`,
    /// routed by `key`: when the wait is on, an answer whose master has
    /// replicas, none of which acknowledged it, is an error naming `what`
    /// (the caller asks again); one from a master with no replica connected
    /// stands (see `ReplicaAcks::invoke_durable`).
    pub(crate) async fn invoke_durable<T: redis::FromRedisValue>(
        &self,
        script: &'static str,
        (slot, key): (u16, &str),
        invocation: &redis::ScriptInvocation<'_>,
        what: impl FnOnce() -> String,
    ) -> redis::RedisResult<T> {
        let Some(acks) = self.acks.as_ref().filter(|acks| acks.is_on()) else {
            return self.invoke(script, invocation).await;
        };
        let slot = self.redis.is_cluster().then_some(slot);
        let (value, durable) = self.timed(script, acks.invoke_durable(slot, key, invocation)).await?;
        if durable == Durable::Unacknowledged {
            return Err(unacknowledged(what()));
        }
        Ok(T::from_redis_value(value)?)
    }

    /// One `admit.lua` call in `bucket` of `layout`.
    async fn admit_in(
        &self,
        layout: &Layout,
        bucket: u32,
        order: &OrderAccepted,
        retry: Option<&RetryKey>,
        presented: &Presented,
        again: bool,
    ) -> redis::RedisResult<Reply> {
        let keys = layout.keys(&self.prefix, bucket);
        let outbox = self.outbox_of(&keys);
        let record = Envelope::new(Event::OrderAccepted(order.clone()));
        let used = match presented.entry {
            Some(entry) => Envelope::new(Event::QueueEntryUsed(QueueEntryUsed {
                voucher_id: order.voucher_id,
                user_id: order.user_id.clone(),
                entry,
                order_id: order.order_id,
            }))
            .encode(),
            // Used only if the voucher is a draw, which adds the rank.
            None => win_used_without_rank(order)?,
        };
        let (nonce, bits, expires) = presented.proof.as_ref().map_or((String::new(), 0, 0), |proof| {
            (if again { format!("again:{}", proof.nonce) } else { proof.nonce.clone() }, proof.bits, proof.expires_ms)
        });
        let unpaced = Pace::default();
        let pace = if again { &unpaced } else { &presented.pace };
        let mut invocation = self.scripts.admit.prepare_invoke();
        invocation
            .key(&keys.voucher)
            .key(&keys.bought)
            .key(&keys.orders)
            .key(&keys.retries)
            .key(&keys.admitted)
            .key(outbox)
            .key(&keys.places)
            .key(&keys.holds)
            .key(&keys.solved)
            .key(&keys.pace)
            .arg(order.user_id.as_str())
            .arg(order.quantity)
            .arg(order.order_id.to_string())
            .arg(retry.map(RetryKey::field).unwrap_or_default())
            .arg(record.encode())
            .arg(order.voucher_id.to_string())
            .arg(self.outbox_limit)
            .arg(self.ended_sale_ttl_ms)
            .arg(layout.shards())
            .arg(presented.entry.map(|entry| entry.to_string()).unwrap_or_default())
            .arg(used)
            .arg(nonce)
            .arg(bits)
            .arg(expires)
            .arg(pace.user_per_second)
            .arg(pace.user_burst.max(1))
            .arg(pace.address.as_deref().unwrap_or_default())
            .arg(pace.address_per_second)
            .arg(pace.address_burst.max(1));
        if let Some(ttl) = self.pending_ttl_ms {
            invocation.key(pending_order_key(&self.prefix, order.order_id)).arg(ttl);
        }
        let reply: redis::RedisResult<((String, String), bool)> =
            self.invoke_acknowledged("admit", layout.slot(bucket), &invocation).await;
        // Only a call that wrote to the outbox, or may have (no answer: it
        // may still run), has anything for this process's relay.
        let wrote = reply.as_ref().map_or(true, |((code, _), _)| code == "admitted");
        if let (Some(hints), true, true) = (&self.hints, wrote, self.redis.is_cluster()) {
            hints.touch(outbox);
        }
        let ((code, detail), acknowledged) = reply?;
        let decided = |admission| Ok(Reply::Decided(admission));
        let rejected = |rejection| Ok(Reply::Decided(Admission::Rejected(rejection)));
        // A promise only once a replica has it (when the wait is on).
        let promised =
            |order, admission| decided(if acknowledged { admission } else { Admission::Unacknowledged { order } });
        match code.as_str() {
            "admitted" => {
                promised(order.order_id, Admission::Admitted { remaining: detail.parse().unwrap_or_default() })
            }
            "replayed" => {
                let (order, quantity) = detail.split_once('|').unwrap_or((detail.as_str(), ""));
                match order.parse() {
                    Ok(order) => promised(order, Admission::Replayed { order, quantity: quantity.parse().ok() }),
                    Err(_) => Err(unexpected("admit.lua replayed an unreadable order id", detail)),
                }
            }
            "unknown_voucher" => rejected(Rejection::UnknownVoucher),
            "not_started" => rejected(Rejection::NotStarted),
            "ended" => rejected(Rejection::Ended),
            "paused" => rejected(Rejection::Paused),
            "duplicate_order" => rejected(Rejection::DuplicateOrder { existing: detail.parse().ok() }),
            "limit_exceeded" => rejected(Rejection::LimitExceeded { limit: detail.parse().unwrap_or_default() }),
            "sold_out" => rejected(Rejection::SoldOut { remaining: detail.parse().unwrap_or_default() }),
            "backlog_full" => decided(Admission::Backlogged { entries: detail.parse().unwrap_or_default() }),
            "fenced" => decided(Admission::Fenced),
            "entry_required" => rejected(Rejection::EntryRequired),
            "entry_invalid" => rejected(Rejection::EntryInvalid),
            "entry_expired" => rejected(Rejection::EntryExpired),
            "entry_used" => rejected(Rejection::EntryUsed { order: detail.parse().ok() }),
            "not_won" => rejected(Rejection::NotWon),
            "window_closed" => rejected(Rejection::WindowClosed),
            "win_used" => rejected(Rejection::WinUsed { order: detail.parse().ok() }),
            "rate_limited" => {
                let (wait, by) = detail.split_once('|').unwrap_or((detail.as_str(), "user"));
                rejected(Rejection::RateLimited {
                    retry_after_ms: wait.parse().unwrap_or(1_000),
                    by_address: by == "address",
                })
            }
            "challenge_required" => rejected(Rejection::ChallengeRequired { bits: detail.parse().unwrap_or_default() }),
            "challenge_too_easy" => rejected(Rejection::ChallengeTooEasy { bits: detail.parse().unwrap_or_default() }),
            "challenge_expired" => rejected(Rejection::ChallengeExpired),
            "challenge_used" => rejected(Rejection::ChallengeUsed),
            "wrong_shards" => match detail.parse() {
                Ok(shards) => Ok(Reply::WrongShards(shards)),
                Err(_) => Err(unexpected("admit.lua named an unreadable number of buckets", detail)),
            },
            other => Err(unexpected("admit.lua returned an unknown code", other.to_owned())),
        }
    }

    /// Whether `order` of `user` for `voucher` was admitted, after an
    /// admission call for it failed without an answer; "not admitted" is
    /// made final (a late call with that id is refused), so the answer is
    /// exact even if the failed call is still on its way to Redis. When
    /// the replica wait is on, an answer no replica acknowledged in time is
    /// [`Settlement::Unacknowledged`].
    pub async fn settle(&self, voucher: VoucherId, user: &UserId, order: OrderId) -> redis::RedisResult<Settlement> {
        let layout = self.layout_or_single(voucher).await?;
        let bucket = layout.home(user);
        let keys = layout.keys(&self.prefix, bucket);
        let mut invocation = self.scripts.settle.prepare_invoke();
        invocation.key(&keys.voucher).key(&keys.admitted).arg(order.to_string()).arg(self.ended_sale_ttl_ms);
        let (settled, acknowledged): (String, bool) =
            self.invoke_acknowledged("settle", layout.slot(bucket), &invocation).await?;
        match settled.as_str() {
            _ if !acknowledged => Ok(Settlement::Unacknowledged),
            "admitted" => Ok(Settlement::Admitted),
            "not_admitted" => Ok(Settlement::NotAdmitted),
            other => Err(unexpected("settle.lua returned an unknown answer", other.to_owned())),
        }
    }

    /// Gives an admitted order's units back to its bucket (its user's);
    /// false if it was released before, or if this Redis never admitted it
    /// (its admission was lost in a failover: nothing was taken here, so
    /// nothing goes back, and the id is fenced). `retry` is the key that admitted
    /// it, when the order never reached the log (a retry must then admit
    /// afresh).
    pub async fn release(
        &self,
        voucher: VoucherId,
        user: &UserId,
        quantity: u32,
        order: OrderId,
        retry: Option<&RetryKey>,
    ) -> redis::RedisResult<bool> {
        let layout = self.layout_or_single(voucher).await?;
        let keys = layout.keys(&self.prefix, layout.home(user));
        let mut invocation = self.scripts.release.prepare_invoke();
        invocation
            .key(&keys.voucher)
            .key(&keys.bought)
            .key(&keys.orders)
            .key(&keys.released)
            .key(&keys.retries)
            .key(&keys.admitted)
            .arg(user.as_str())
            .arg(quantity)
            .arg(order.to_string())
            .arg(retry.map(RetryKey::field).unwrap_or_default())
            .arg(self.ended_sale_ttl_ms);
        // A release is a promise too: the follower stores its offset once
        // this answers, and nothing gives the units back again. A master
        // cut off from its peers still takes the call alone until a replica
        // is promoted without it, so when the replica wait is on an answer
        // its silent replicas did not acknowledge is an error, and the
        // caller asks again (release.lua acts once, and writes its record
        // again for the wait).
        let bucket = layout.home(user);
        let released: i64 = self
            .invoke_durable("release", (layout.slot(bucket), &keys.voucher), &invocation, || {
                format!("release.lua for order {order}")
            })
            .await?;
        Ok(released == 1)
    }

    /// The layout of `voucher`, or one bucket when Redis does not have it
    /// (the scripts then find nothing, as for any unknown voucher).
    pub(crate) async fn layout_or_single(&self, voucher: VoucherId) -> redis::RedisResult<Arc<Layout>> {
        Ok(self.layout(voucher).await?.unwrap_or_else(|| Arc::new(Layout::new(voucher, 1))))
    }
}

/// The error of a call (`what`) no replica acknowledged in time: its
/// effect may stand on the master alone, so the caller asks again rather
/// than count on it.
fn unacknowledged(what: String) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, "no replica acknowledged the call in time", what))
}

/// The `DrawWinUsed` record of `order` without its rank: `admit.lua` knows
/// the rank and adds it when the voucher is a draw.
fn win_used_without_rank(order: &OrderAccepted) -> redis::RedisResult<Vec<u8>> {
    let record = Envelope::new(Event::DrawWinUsed(DrawWinUsed {
        voucher_id: order.voucher_id,
        user_id: order.user_id.clone(),
        rank: 1,
        order_id: order.order_id,
    }));
    Ok(encoded_without(&record, &["rank"])?.into_bytes())
}
