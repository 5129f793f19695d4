//! Redis key layout.
//!
//! Every key of one voucher carries the hash tag `{v:<voucher id>}`, so a
//! voucher's keys live in one Redis Cluster slot and one script can touch
//! them all atomically. Scripts receive every key in KEYS; none is built in
//! Lua.

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
    /// Hash: "<user>|<Idempotency-Key>" → the order it admitted.
    pub retries: String,
    /// Set: ids of the admin updates applied.
    pub updates: String,
    /// Hash: order id → "<user id>|<quantity>" of every order admitted, or
    /// [`FENCED`] for an id settled as never admitted (a late call with it
    /// is refused).
    pub admitted: String,
    /// Hash: update id → units it added, for updates that added stock (so
    /// `restore.lua` can count an update applied after the log was read).
    pub added: String,
}

/// The `admitted` value of an order id that was settled as not admitted.
pub const FENCED: &str = "fenced";

impl VoucherKeys {
    /// Every key of the voucher.
    pub fn all(&self) -> [&str; 8] {
        [
            &self.voucher,
            &self.bought,
            &self.orders,
            &self.released,
            &self.retries,
            &self.updates,
            &self.admitted,
            &self.added,
        ]
    }

    /// The keys of `voucher` under `prefix`.
    pub fn new(prefix: &str, voucher: VoucherId) -> Self {
        let base = format!("{prefix}:{{v:{voucher}}}");
        Self {
            voucher: format!("{base}:voucher"),
            bought: format!("{base}:bought"),
            orders: format!("{base}:orders"),
            released: format!("{base}:released"),
            retries: format!("{base}:retries"),
            updates: format!("{base}:updates"),
            admitted: format!("{base}:admitted"),
            added: format!("{base}:added"),
        }
    }
}

/// The record of an admitted order, readable by its id alone until the log
/// has it: `<prefix>:{o:<order id>}:pending`. Its own hash tag: it is
/// looked up without knowing the voucher.
pub fn pending_order_key(prefix: &str, order: OrderId) -> String {
    format!("{prefix}:{{o:{order}}}:pending")
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
        for key in keys.all() {
            assert!(key.starts_with("t1:"), "{key}");
            assert_eq!(key.matches('{').count(), 1, "{key}");
            assert!(key.contains(&tag), "{key}");
        }
    }
}
