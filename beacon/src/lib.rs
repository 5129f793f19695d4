//! drand beacon rounds for the draws ([`seckill_core::beacon`] says how a
//! draw uses one): [`verify`] checks a round's BLS signature against its
//! chain's public key, [`Relays`] fetches a round from drand HTTP relays,
//! and [`sandbox`] is a beacon of its own that speaks drand's HTTP API and
//! signs with the `quicknet` scheme, for tests and the local run, where no
//! drand network is reachable (`seckill-beacon-sandbox`).
//!
//! The platform and `seckill draw verify` run the same code against drand
//! and against the sandbox: only the chain's hash, public key and genesis
//! differ.

mod hex;
mod relays;
pub mod sandbox;
mod verify;

pub use relays::{FetchError, Relays};
pub use verify::{randomness, verify, BeaconError, DST};
