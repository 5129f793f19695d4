//! A draw sale: its settings and the rule anyone can re-run from the log to
//! check who won.
//!
//! Users enter between `entries_open_at` and `draw_at`; each entry is a
//! `DrawEntered` record with its number `seq` (1, 2, … in the order the
//! admission gate took them). At `draw_at` entries close and the ranking's
//! seed is logged (`DrawSeedRevealed`, with the number of entries and the
//! hash of their list). Where the seed comes from decides whom it trusts:
//!
//! - **A public beacon** (the sale's settings carry a
//!   [`crate::beacon::BeaconPlan`]): the seed is the randomness of the
//!   drand round fixed at the sale's creation, the first published after
//!   `draw_at`, and the reveal logs the round's signature. Nobody, the
//!   operator included, knows it while entries are open, so nobody can
//!   choose a seed or grind a last entry against it; anyone can check the
//!   signature against the chain's public key.
//! - **The operator's committed seed** (no beacon configured): the log holds
//!   the SHA-256 of a secret seed (`DrawSeedCommitted`) before the first
//!   entry. This fallback trusts the operator: whoever holds the seed
//!   (the gate's Redis, the `[draw] seal_key`) can try seeds before
//!   committing one, or grind a last entry or user id against it.
//!
//! The ranking from the seed and the entry list:
//!
//! 1. the entry list's hash: `h0` is the empty string and, for the entries
//!    in `seq` order, `h(i) = SHA-1(h(i-1) ":" user(i))` in lowercase hex;
//!    the list's hash is `h(N)` (the empty string when nobody entered);
//! 2. each entrant's key is the first 13 hexadecimal digits (52 bits) of
//!    SHA-1(`<seed>:<list hash>:<user id>`), read as an unsigned integer;
//! 3. ranks ascend by key (1 is drawn first); equal keys, by the bytes of
//!    the user id.
//!
//! The full ranking is logged in chunks of [`RANK_CHUNK`] users
//! (`DrawRanked`). Ranks 1..W win, W being the units left at the draw over
//! the per-user limit, rounded up (at most the entries): each winner may
//! order once within `purchase_seconds` of time in which ordering is
//! possible (`DrawWinnersSelected`; stalls, `WindowsExtended`, do not
//! count). Whenever the open wins, a limit's worth of units each, stand for
//! fewer units than are left (a win lapsed unused, an order was cancelled or
//! expired, stock was added), the next rank wins (`DrawWinnerPromoted`),
//! until the stock is sold or the ranks run out.
//!
//! SHA-1 because the admission gate computes the chain and the keys in
//! Redis (`lua/draw_enter.lua`, `lua/draw_advance.lua`), whose scripts have
//! no other hash; it is a keyed shuffle of a list fixed before the key is
//! public, not a collision-resistance claim. The seed's commitment is
//! SHA-256 ([`crate::queue::seed_commitment`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

use crate::beacon::BeaconPlan;
use crate::ids::UserId;

/// Users per `DrawRanked` record (and per step of the ranking in Redis):
/// 500 user ids of the longest kind (64 characters) stay well inside a
/// record's 64 KiB bound.
pub const RANK_CHUNK: usize = 500;
/// Bounds of a winner's purchase window.
pub const PURCHASE_SECONDS: std::ops::RangeInclusive<u32> = 2..=86_400;

/// A draw-mode voucher's settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrawSettings {
    /// From when users may enter.
    pub entries_open_at: DateTime<Utc>,
    /// When entries close and the draw is made.
    pub draw_at: DateTime<Utc>,
    /// How long a winner may order once they win.
    pub purchase_seconds: u32,
    /// The beacon round the ranking's seed comes from; absent (no beacon
    /// configured, or a record from before beacons), the operator's
    /// committed seed. Boxed: most records carry none, and every event
    /// would otherwise grow by a chain's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<Box<BeaconPlan>>,
}

impl DrawSettings {
    pub const DEFAULT_PURCHASE_SECONDS: u32 = 600;

    /// Checks the settings against the sale's window: winners order within
    /// it, so it must be open at the draw.
    pub fn check(&self, begins_at: DateTime<Utc>, ends_at: DateTime<Utc>) -> Result<(), String> {
        if !PURCHASE_SECONDS.contains(&self.purchase_seconds) {
            return Err(format!(
                "draw purchase_seconds must be {} to {}",
                PURCHASE_SECONDS.start(),
                PURCHASE_SECONDS.end()
            ));
        }
        if self.entries_open_at >= self.draw_at {
            return Err("draw entries_open_at must be before draw_at".to_owned());
        }
        if begins_at > self.draw_at {
            return Err("a draw's begins_at must be at or before draw_at (winners order in the sale window)".to_owned());
        }
        if self.draw_at >= ends_at {
            return Err("draw_at must be before ends_at".to_owned());
        }
        if let Some(plan) = &self.beacon {
            plan.chain.check()?;
            if plan.round_time() <= self.draw_at {
                return Err("the draw's beacon round must be published after draw_at".to_owned());
            }
        }
        Ok(())
    }
}

/// The entry list's hash (step 1), from the entrants in `seq` order.
pub fn entries_hash<'a>(entrants: impl IntoIterator<Item = &'a UserId>) -> String {
    entrants.into_iter().fold(String::new(), |chain, user| hex(&Sha1::digest(format!("{chain}:{user}").as_bytes())))
}

/// An entrant's key (step 2).
pub fn rank_key(seed: &str, entries_hash: &str, user: &UserId) -> u64 {
    let digest = Sha1::digest(format!("{seed}:{entries_hash}:{user}").as_bytes());
    let mut first = [0u8; 8];
    first[1..].copy_from_slice(&digest[..7]);
    // 7 bytes are 14 hex digits; the key is the first 13.
    u64::from_be_bytes(first) >> 4
}

/// The ranking (steps 1 to 3): the entrants, given in `seq` order, from
/// rank 1 on.
pub fn ranking(seed: &str, entrants: &[UserId]) -> Vec<UserId> {
    let list = entries_hash(entrants);
    let mut keyed: Vec<(u64, &str, &UserId)> =
        entrants.iter().map(|user| (rank_key(seed, &list, user), user.as_str(), user)).collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, _, user)| user.clone()).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::new_seed;

    fn users(n: usize) -> Vec<UserId> {
        (0..n).map(|i| UserId::parse(&format!("u{i}")).expect("valid user id")).collect()
    }

    #[test]
    fn the_list_hash_chains_sha1_over_the_entries_in_order() {
        let entrants = users(2);
        let first = hex(&Sha1::digest(b":u0"));
        let second = hex(&Sha1::digest(format!("{first}:u1").as_bytes()));
        assert_eq!(entries_hash(&entrants), second);
        assert_eq!(entries_hash(&[]), "");
        let mut swapped = entrants.clone();
        swapped.reverse();
        assert_ne!(entries_hash(&swapped), second, "the order of entry is part of the list");
    }

    #[test]
    fn the_key_is_the_first_thirteen_hex_digits() {
        let user = UserId::parse("alice").expect("valid");
        let expected = u64::from_str_radix(&hex(&Sha1::digest(b"s:h:alice"))[..13], 16).expect("hex");
        assert_eq!(rank_key("s", "h", &user), expected);
    }

    #[test]
    fn the_ranking_is_reproducible_and_depends_on_seed_and_every_entry() {
        let entrants = users(500);
        let seed = new_seed();
        let ranked = ranking(&seed, &entrants);
        assert_eq!(ranked, ranking(&seed, &entrants), "the same log ranks the same");
        assert_ne!(ranked, entrants, "not the order of entry");
        assert_ne!(ranked, ranking(&new_seed(), &entrants), "another seed, another ranking");
        let mut changed = entrants.clone();
        changed[250] = UserId::parse("mallory").expect("valid");
        let other = ranking(&seed, &changed);
        let common: Vec<&UserId> = other.iter().filter(|user| user.as_str() != "mallory").collect();
        let before: Vec<&UserId> = ranked.iter().filter(|user| user.as_str() != "u250").collect();
        assert_ne!(common, before, "changing one entry reorders everyone");
        let mut sorted = ranked.clone();
        sorted.sort();
        let mut all = entrants;
        all.sort();
        assert_eq!(sorted, all, "everyone ranked once");
    }

    #[test]
    fn settings_are_checked_against_the_sale_window() {
        let now = Utc::now();
        let minute = chrono::Duration::minutes(1);
        let good = DrawSettings { entries_open_at: now, draw_at: now + minute, purchase_seconds: 600, beacon: None };
        assert!(good.check(now, now + minute * 10).is_ok());
        assert!(good.check(now + minute * 2, now + minute * 10).is_err(), "sale begins after the draw");
        assert!(good.check(now, now + minute).is_err(), "sale ends at the draw");
        assert!(DrawSettings { purchase_seconds: 1, ..good.clone() }.check(now, now + minute * 10).is_err());
        assert!(DrawSettings { draw_at: now, ..good.clone() }.check(now, now + minute * 10).is_err());
        let chain = crate::beacon::BeaconChain::quicknet();
        let planned =
            DrawSettings { beacon: Some(Box::new(BeaconPlan::after(chain.clone(), good.draw_at))), ..good.clone() };
        assert!(planned.check(now, now + minute * 10).is_ok());
        let early = BeaconPlan { round: chain.first_round_after(good.draw_at) - 1, chain };
        assert!(
            DrawSettings { beacon: Some(Box::new(early)), ..good }.check(now, now + minute * 10).is_err(),
            "a round published before entries close"
        );
    }
}
