//! The waiting room of a queue-mode sale: its settings and the one rule
//! anyone can re-run from the log, the order of the pre-queue.
//!
//! Everyone who joins before the sale begins is placed by a shuffle. The
//! shuffle's seed is secret until the start, but its SHA-256 is in the log
//! (`QueueSeedCommitted`) before the room accepts its first join, and the
//! seed itself is logged at the start (`QueueSeedRevealed`). So an early
//! arrival gains nothing, and afterwards anyone holding the log can
//! recompute the order. Where the shuffle's key comes from decides whom it
//! trusts:
//!
//! - **A public beacon** (the settings carry a [`BeaconPlan`], fixed in the
//!   creation record: the chain and the first round published after the
//!   sale begins). The pre-queue closes at the start, before that round's
//!   time; the room serves nobody until the round is fetched, and the
//!   reveal logs it (`QueueSeedRevealed` with `beacon` and
//!   `entries_hash`). Nobody, the operator included, knows the key while
//!   joins are taken. The shuffle ([`beacon_pre_queue_order`]):
//!   1. the pre-queue's hash: the pre-queue joins' user ids in the byte
//!      order of `<user id>|1`, chained as a draw's entry list is
//!      (`h0` empty, `h(i) = SHA-1(h(i-1) ":" user(i))`, lowercase hex;
//!      empty with no pre-queue);
//!   2. a user's key is the first 13 hexadecimal digits of
//!      SHA-1(`<randomness>:<pre-queue hash>:<user id>`);
//!   3. and 4. as steps 2 and 3 below.
//! - **The operator's committed seed** (no beacon configured): this trusts
//!   the operator: whoever holds the seed (the gate's Redis) can try seeds
//!   before committing one, or mint user ids whose keys come first once it
//!   is committed. Its shuffle:
//!
//! 1. for each pre-queue join (`QueueJoined` with `pre_queue: true`), the
//!    user's key is the first 13 hexadecimal digits (52 bits) of
//!    SHA-1(`<seed>:<user id>`), read as an unsigned integer;
//! 2. places ascend by key; equal keys (about one pair in 2^52) are ordered
//!    by the bytes of `<user id>|1`;
//! 3. the pre-queue takes places 1..P in that order; a join after the start
//!    takes place P + its `seq` (first come, first placed).
//!
//! SHA-1 because the admission gate computes the key in Redis (`lua/
//! queue_join.lua`), whose scripts have no other hash; it is used as a
//! keyed shuffle of a set fixed before the key is known, not for collision
//! resistance. The seed is 64 hexadecimal digits.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};
use sha2::Sha256;

use crate::beacon::BeaconPlan;
use crate::ids::UserId;

/// The score of the first place after the start: every pre-queue key is
/// below it, and `FIFO_BASE + seq` stays exact in a double (Redis sorted
/// set scores) up to 2^52 joins.
pub const FIFO_BASE: u64 = 1 << 52;
/// Bounds of the settings, checked for admin requests and log records.
pub const FACTOR_PERCENT: std::ops::RangeInclusive<u32> = 100..=300;
pub const ENTRY_RATE: std::ops::RangeInclusive<u32> = 1..=100_000;
pub const IDLE_SECONDS: std::ops::RangeInclusive<u32> = 5..=3_600;
pub const TOKEN_SECONDS: std::ops::RangeInclusive<u32> = 5..=3_600;
/// Length of a seed in hexadecimal digits.
pub const SEED_HEX_LEN: usize = 64;

/// A queue-mode voucher's waiting room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueSettings {
    /// From when users may join (at or before the sale's `begins_at`).
    pub opens_at: DateTime<Utc>,
    /// Entries the room lets be open per unit left, in percent: 120 lets
    /// 1.2 buyers per remaining unit hold an entry (some never buy).
    pub factor_percent: u32,
    /// Most entries issued per second.
    pub entry_rate: u32,
    /// A place whose holder has not polled or streamed for this long is
    /// skipped when its turn comes.
    pub idle_seconds: u32,
    /// How long an entry token admits its order.
    pub token_seconds: u32,
    /// The beacon round the pre-queue's shuffle takes its key from; absent
    /// (no beacon configured, or a record from before beacons), the
    /// operator's committed seed. Boxed, as in a draw's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<Box<BeaconPlan>>,
}

/// The defaults an admin request leaves out.
impl QueueSettings {
    pub const DEFAULT_FACTOR_PERCENT: u32 = 120;
    pub const DEFAULT_ENTRY_RATE: u32 = 500;
    pub const DEFAULT_IDLE_SECONDS: u32 = 30;
    pub const DEFAULT_TOKEN_SECONDS: u32 = 120;

    /// Checks the ranges; `begins_at` is the sale's start.
    pub fn check(&self, begins_at: DateTime<Utc>) -> Result<(), String> {
        let within = |range: &std::ops::RangeInclusive<u32>, value: u32, name: &str| {
            if range.contains(&value) {
                Ok(())
            } else {
                Err(format!("{name} must be {} to {}", range.start(), range.end()))
            }
        };
        within(&FACTOR_PERCENT, self.factor_percent, "queue factor_percent")?;
        within(&ENTRY_RATE, self.entry_rate, "queue entry_rate")?;
        within(&IDLE_SECONDS, self.idle_seconds, "queue idle_seconds")?;
        within(&TOKEN_SECONDS, self.token_seconds, "queue token_seconds")?;
        if self.opens_at > begins_at {
            return Err("queue opens_at must be at or before begins_at".to_owned());
        }
        if let Some(plan) = &self.beacon {
            plan.chain.check()?;
            // The pre-queue closes at the start: the round must come after.
            if plan.round_time() <= begins_at {
                return Err("the waiting room's beacon round must be published after begins_at".to_owned());
            }
        }
        Ok(())
    }
}

/// A user's place key in the pre-queue under `seed` (step 1 above).
pub fn shuffle_key(seed: &str, user: &UserId) -> u64 {
    let digest = Sha1::digest(format!("{seed}:{user}").as_bytes());
    let mut first = [0u8; 8];
    first[1..].copy_from_slice(&digest[..7]);
    // 7 bytes are 14 hex digits; the key is the first 13.
    u64::from_be_bytes(first) >> 4
}

/// The pre-queue in place order (steps 1 and 2 above).
pub fn pre_queue_order(seed: &str, users: &[UserId]) -> Vec<UserId> {
    let mut keyed: Vec<(u64, String, &UserId)> =
        users.iter().map(|user| (shuffle_key(seed, user), format!("{user}|1"), user)).collect();
    keyed.sort();
    keyed.into_iter().map(|(_, _, user)| user.clone()).collect()
}

/// The pre-queue's hash under a beacon (step 1 of the beacon's shuffle):
/// the users in the byte order of `<user id>|1`, chained.
pub fn pre_queue_hash(users: &[UserId]) -> String {
    let mut sorted: Vec<(String, &UserId)> = users.iter().map(|user| (format!("{user}|1"), user)).collect();
    sorted.sort();
    crate::draw::entries_hash(sorted.into_iter().map(|(_, user)| user))
}

/// The pre-queue in place order under a beacon round's `randomness`
/// (the beacon's shuffle): keyed by the randomness and the pre-queue's
/// hash, then as [`pre_queue_order`].
pub fn beacon_pre_queue_order(randomness: &str, users: &[UserId]) -> Vec<UserId> {
    pre_queue_order(&format!("{randomness}:{}", pre_queue_hash(users)), users)
}

/// The commitment to `seed`: its SHA-256, 64 lowercase hexadecimal digits.
pub fn seed_commitment(seed: &str) -> String {
    hex(&Sha256::digest(seed.as_bytes()))
}

/// Whether `seed` is a seed as the room draws them.
pub fn is_seed(seed: &str) -> bool {
    seed.len() == SEED_HEX_LEN && seed.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// A fresh secret seed: 256 bits from the operating system's generator.
pub fn new_seed() -> String {
    let mut bytes = Vec::with_capacity(32);
    for _ in 0..2 {
        bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    }
    // Version and variant bits of a v4 UUID are fixed: hash the 244 random
    // bits into 256 so every digit of the seed varies.
    hex(&Sha256::digest(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str) -> UserId {
        UserId::parse(id).expect("valid user id")
    }

    #[test]
    fn the_key_is_the_first_thirteen_hex_digits_of_sha1() {
        let digest = Sha1::digest(b"s:alice");
        let expected = u64::from_str_radix(&hex(&digest)[..13], 16).expect("hex");
        assert_eq!(shuffle_key("s", &user("alice")), expected);
        assert!(shuffle_key("s", &user("alice")) < FIFO_BASE);
    }

    #[test]
    fn the_order_depends_on_the_seed_and_not_on_arrival() {
        let users: Vec<UserId> = (0..200).map(|i| user(&format!("u{i}"))).collect();
        let seed = new_seed();
        let order = pre_queue_order(&seed, &users);
        let mut reversed = users.clone();
        reversed.reverse();
        assert_eq!(order, pre_queue_order(&seed, &reversed), "arrival order changes nothing");
        assert_ne!(order, users, "the shuffle moved someone");
        assert_ne!(order, pre_queue_order(&new_seed(), &users), "another seed, another order");
        let mut sorted = order.clone();
        sorted.sort();
        let mut all = users.clone();
        all.sort();
        assert_eq!(sorted, all, "everyone placed once");
    }

    #[test]
    fn the_beacon_shuffle_keys_by_the_randomness_and_the_sorted_pre_queue() {
        let users: Vec<UserId> = ["b", "a1", "a"].into_iter().map(user).collect();
        // "a1|1" sorts before "a|1": '1' is below '|'.
        let chained = crate::draw::entries_hash([&users[1], &users[2], &users[0]]);
        assert_eq!(pre_queue_hash(&users), chained);
        let randomness = "7".repeat(64);
        let order = beacon_pre_queue_order(&randomness, &users);
        let key = |u: &UserId| shuffle_key(&format!("{randomness}:{chained}"), u);
        let mut expected = users.clone();
        expected.sort_by_key(|u| (key(u), format!("{u}|1")));
        assert_eq!(order, expected);
        let mut reversed = users.clone();
        reversed.reverse();
        assert_eq!(beacon_pre_queue_order(&randomness, &reversed), order, "arrival order changes nothing");
        assert_eq!(pre_queue_hash(&[]), "");
    }

    #[test]
    fn seeds_are_fresh_and_committed_by_sha256() {
        let (a, b) = (new_seed(), new_seed());
        assert!(is_seed(&a) && is_seed(&b));
        assert_ne!(a, b);
        assert_eq!(seed_commitment("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(!is_seed("ABC"));
    }

    #[test]
    fn settings_are_checked() {
        let begins = Utc::now();
        let good = QueueSettings {
            opens_at: begins - chrono::Duration::minutes(5),
            factor_percent: 120,
            entry_rate: 500,
            idle_seconds: 30,
            token_seconds: 120,
            beacon: None,
        };
        assert!(good.check(begins).is_ok());
        let chain = crate::beacon::BeaconChain::quicknet();
        let planned =
            QueueSettings { beacon: Some(Box::new(BeaconPlan::after(chain.clone(), begins))), ..good.clone() };
        assert!(planned.check(begins).is_ok());
        let early = BeaconPlan { round: chain.first_round_after(begins) - 1, chain };
        assert!(QueueSettings { beacon: Some(Box::new(early)), ..good.clone() }.check(begins).is_err());
        assert!(QueueSettings { factor_percent: 99, ..good.clone() }.check(begins).is_err());
        assert!(QueueSettings { entry_rate: 0, ..good.clone() }.check(begins).is_err());
        assert!(QueueSettings { opens_at: begins + chrono::Duration::seconds(1), ..good }.check(begins).is_err());
    }
}
