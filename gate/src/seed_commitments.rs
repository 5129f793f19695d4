//! A secret seed's commitments as the log tells them, for a draw's or a
//! waiting room's rebuild before its reveal: each commitment's hash with
//! the seeds logged sealed under the operator's key
//! (`seckill_core::sealed_seed`), and which one is newest. Whoever holds the
//! key opens the newest one's seal ([`SeedCommitments::open`]).
//!
//! Folded in any order and any number of times, as the rest of the
//! [`crate::Ledger`]: several ingresses may log one commitment, and a seed
//! lost with its room is followed by a newer one.

use std::collections::{BTreeMap, BTreeSet};

use seckill_core::{sealed_seed, VoucherId};
use uuid::Uuid;

/// One seed's commitments, folded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeedCommitments {
    /// The sealed seeds logged with each commitment, by seed hash (one
    /// logged unsealed has none).
    sealed: BTreeMap<String, BTreeSet<String>>,
    /// The newest commitment (by event id) and its hash: the seed Redis
    /// last had (an older one was lost with what it ordered).
    latest: Option<(Uuid, String)>,
    /// The seed opened from the newest commitment's seal.
    opened: Option<String>,
    /// A key was tried on the seal ([`SeedCommitments::open`]).
    key_tried: bool,
}

impl SeedCommitments {
    /// Takes in the commitment `event_id` logged: `seed_hash`, sealed as
    /// `sealed_seed` when the ingress had a key.
    pub(crate) fn record(&mut self, event_id: Uuid, seed_hash: &str, sealed_seed: Option<&String>) {
        self.sealed.entry(seed_hash.to_owned()).or_default().extend(sealed_seed.cloned());
        if self.latest.as_ref().is_none_or(|(id, _)| event_id > *id) {
            self.latest = Some((event_id, seed_hash.to_owned()));
        }
    }

    /// Whether no commitment was logged.
    pub fn is_empty(&self) -> bool {
        self.sealed.is_empty()
    }

    /// Opens the newest commitment's sealed seed with `key`; whether it did
    /// (a seed whose SHA-256 is the commitment).
    pub fn open(&mut self, voucher: VoucherId, key: &[u8]) -> bool {
        self.key_tried = true;
        let Some((_, hash)) = &self.latest else { return false };
        let sealed = self.sealed.get(hash).into_iter().flatten();
        self.opened = sealed.filter_map(|sealed| sealed_seed::unseal(key, voucher, hash, sealed)).next();
        self.opened.is_some()
    }

    /// The secret seed before its reveal, when it was opened.
    pub fn opened(&self) -> Option<&str> {
        self.opened.as_deref()
    }

    /// Whether the newest commitment holds its seed sealed.
    pub fn newest_sealed(&self) -> bool {
        self.latest.as_ref().is_some_and(|(_, hash)| self.sealed.get(hash).is_some_and(|sealed| !sealed.is_empty()))
    }

    /// Whether a key was tried on the seal.
    pub fn key_tried(&self) -> bool {
        self.key_tried
    }
}
