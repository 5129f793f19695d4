//! Redis key layout.
//!
//! Every key of one voucher bucket carries the bucket's hash tag (bucket 0,
//! the only one of a voucher that is not split: `{v:<voucher id>}`; see
//! [`crate::Layout`] for the others), so a bucket's keys live in one Redis
//! Cluster slot and one script can touch them all atomically. Scripts
//! receive every key in KEYS; none is built in Lua.

use seckill_core::{OrderId, UserId, VoucherId};

/// The keys of one voucher under a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoucherKeys {
    /// Hash: stock, remaining, begins_ms, ends_ms, limit, hold_seconds,
    /// paused, settings_version (the newest update whose pause and end
    /// apply), keys_expire_ms (the expiry `admit.lua` last gave the keys it
    /// writes).
    pub voucher: String,
    /// Hash: user id → units admitted.
    pub bought: String,
    /// Hash: user id → latest admitted order id.
    pub orders: String,
    /// Set: order ids whose units were given back.
    pub released: String,
    /// Hash: `"<user>|<Idempotency-Key>"` → the order it admitted.
    pub retries: String,
    /// Set: ids of the admin updates applied.
    pub updates: String,
    /// Hash: order id → `"<user id>|<quantity>"` of every order admitted, or
    /// [`FENCED`] for an id settled as never admitted (a late call with it
    /// is refused).
    pub admitted: String,
    /// Hash: update id → units it added, for updates that added stock (so
    /// `restore.lua` can count an update applied after the log was read).
    pub added: String,
    /// Hash: transfer id → its record in this bucket (`out|<to>|<units>|
    /// pending|done|returned`, `in|<from>|<units>` or `fenced|<from>|<units>`):
    /// the journal that makes transfers between buckets exactly-once.
    pub transfers: String,
    /// Stream: this bucket's outbox on a Redis Cluster (a single Redis has
    /// one outbox for everything, [`outbox_key`]).
    pub outbox: String,
    /// String: the newest end (Unix ms) an admin gave the sale, kept until
    /// the keys of every end it had would have expired, so a definition
    /// delivered again (a replay of the log) is judged by the end the sale
    /// has now, not the one it was created with.
    pub newest_end: String,
    /// The waiting room of a queue-mode voucher (`lua/queue_*.lua` say
    /// what each holds): its hash, the line of places (sorted set), each
    /// user's place, when each holder last watched, the entries open.
    pub room: String,
    pub line: String,
    pub places: String,
    pub seen: String,
    pub holds: String,
    /// A draw's ranking (sorted set: user → key; `lua/draw_advance.lua`).
    pub ranks: String,
    /// Sorted set: the nonces of the proofs of work spent, by expiry.
    pub solved: String,
    /// Hash: the per-user and per-address admission buckets (`admit.lua`).
    pub pace: String,
    /// Hash: proofs of work spent through every ingress, per second
    /// (`lua/challenge_rate.lua`).
    pub challenge_rate: String,
}

/// The `admitted` value of an order id that was settled as not admitted.
pub const FENCED: &str = "fenced";

impl VoucherKeys {
    /// Every key of the bucket that expires with its sale (not the outbox:
    /// the relays remove an outbox once it is empty and its bucket gone).
    pub fn all(&self) -> [&str; 9] {
        [
            &self.voucher,
            &self.bought,
            &self.orders,
            &self.released,
            &self.retries,
            &self.updates,
            &self.admitted,
            &self.added,
            &self.transfers,
        ]
    }

    /// The keys of `voucher` (its bucket 0, the only one of a voucher not
    /// split into buckets) under `prefix`.
    pub fn new(prefix: &str, voucher: VoucherId) -> Self {
        Self::tagged(prefix, &voucher_tag(voucher))
    }

    /// The keys under `prefix` and the hash tag `{tag}`.
    pub(crate) fn tagged(prefix: &str, tag: &str) -> Self {
        let base = format!("{prefix}:{{{tag}}}");
        Self {
            voucher: format!("{base}:voucher"),
            bought: format!("{base}:bought"),
            orders: format!("{base}:orders"),
            released: format!("{base}:released"),
            retries: format!("{base}:retries"),
            updates: format!("{base}:updates"),
            admitted: format!("{base}:admitted"),
            added: format!("{base}:added"),
            transfers: format!("{base}:transfers"),
            outbox: format!("{base}:outbox"),
            newest_end: format!("{base}:newest_end"),
            room: format!("{base}:room"),
            line: format!("{base}:line"),
            places: format!("{base}:places"),
            seen: format!("{base}:seen"),
            holds: format!("{base}:holds"),
            ranks: format!("{base}:ranks"),
            solved: format!("{base}:solved"),
            pace: format!("{base}:pace"),
            challenge_rate: format!("{base}:challenge_rate"),
        }
    }
}

/// The set of vouchers with a waiting room: `<prefix>:rooms`, how every
/// ingress finds the rooms it moves on. Not a voucher's key: any slot.
pub(crate) fn rooms_key(prefix: &str) -> String {
    format!("{prefix}:rooms")
}

/// What the outbox streams of a cluster are called: `<prefix>:{v:…}:outbox`,
/// as a SCAN pattern.
pub(crate) fn bucket_outbox_pattern(prefix: &str) -> String {
    format!("{prefix}:{{v:*}}:outbox")
}

/// The voucher hash of the bucket whose outbox is `outbox` (same tag, so
/// same slot), if `outbox` is a bucket's outbox.
pub(crate) fn voucher_of_outbox(outbox: &str) -> Option<String> {
    outbox.strip_suffix(":outbox").map(|base| format!("{base}:voucher"))
}

/// The hash tag of `voucher`'s keys (of its bucket 0, the only one of a
/// voucher not split into buckets, and of its room or draw).
pub(crate) fn voucher_tag(voucher: VoucherId) -> String {
    format!("v:{voucher}")
}

/// The record of an admitted order, readable by its id alone until the log
/// has it: `<prefix>:{o:<order id>}:pending`. Its own hash tag: it is
/// looked up without knowing the voucher.
pub fn pending_order_key(prefix: &str, order: OrderId) -> String {
    format!("{prefix}:{{o:{order}}}:pending")
}

/// The marker of a handled provider callback: `<prefix>:webhook:<event
/// id>`. Not a voucher's key (a callback is checked before its order is
/// known), so it has no hash tag: any slot of a cluster.
pub(crate) fn webhook_key(prefix: &str, event_id: &str) -> String {
    format!("{prefix}:webhook:{event_id}")
}

/// The outbox stream under `prefix`: admitted orders not yet in the log.
pub fn outbox_key(prefix: &str) -> String {
    format!("{prefix}:outbox")
}

/// Longest `Idempotency-Key` accepted.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// Refuses an `Idempotency-Key` that is not 1 to 128 visible ASCII
/// characters, saying so.
pub(crate) fn check_idempotency_key(key: &str) -> Result<(), String> {
    let visible = |c: char| c.is_ascii_graphic();
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN || !key.chars().all(visible) {
        return Err(format!("Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} visible ASCII characters"));
    }
    Ok(())
}

/// A user's `Idempotency-Key`, scoped to that user: two users choosing the
/// same key never see each other's orders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryKey(String);

impl RetryKey {
    /// Validates `key` (1 to 128 visible ASCII characters) for `user`.
    pub fn new(user: &UserId, key: &str) -> Result<Self, String> {
        check_idempotency_key(key)?;
        // `|` cannot occur in a user id, so the field is unambiguous.
        Ok(Self(format!("{user}|{key}")))
    }

    /// The hash field.
    pub fn field(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let voucher = VoucherId::generate();
        let keys = VoucherKeys::new("t1", voucher);
        let tag = format!("{{v:{voucher}}}");
        let room = [&keys.room, &keys.line, &keys.places, &keys.seen, &keys.holds];
        for key in keys
            .all()
            .into_iter()
            .chain([keys.outbox.as_str(), keys.newest_end.as_str()])
            .chain(room.map(String::as_str))
        {
            assert!(key.starts_with("t1:"), "{key}");
            assert_eq!(key.matches('{').count(), 1, "{key}");
            assert!(key.contains(&tag), "{key}");
        }
    }
}
