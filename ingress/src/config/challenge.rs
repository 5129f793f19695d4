//! `[challenge]`: the proof of work a voucher with `challenge_bits` asks of
//! each order, queue join and draw entry, how its difficulty rises with
//! the rate of proofs spent, and how many challenges a user may ask for.

use seckill_core::challenge::MAX_BITS;
use seckill_core::config::{ensure, ConfigError};
use serde::{Deserialize, Serialize};

/// How challenges are issued. The voucher's `challenge_bits` is the floor;
/// while the platform (every ingress together) sees more than
/// `raise_above_per_second` proofs a second spent for a voucher, each doubling of the rate adds a
/// bit (each bit doubles a solver's work), at most `max_extra_bits`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChallengeConfig {
    /// How long a challenge may be solved and spent.
    pub seconds: u32,
    /// Proofs spent per second per voucher (every ingress together) above
    /// which the difficulty rises; 0 never raises it.
    pub raise_above_per_second: u32,
    /// Most bits the rate adds to a voucher's own.
    pub max_extra_bits: u32,
    /// Challenges one user may ask for per second on one ingress (0: no
    /// limit); past it, and past the burst, `429 rate_limited`.
    pub per_user_per_second: u32,
    /// The user's burst of challenge requests.
    pub per_user_burst: u32,
}

impl Default for ChallengeConfig {
    fn default() -> Self {
        Self {
            seconds: 120,
            raise_above_per_second: 2_000,
            max_extra_bits: 6,
            per_user_per_second: 2,
            per_user_burst: 10,
        }
    }
}

impl ChallengeConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        ensure((10..=3_600).contains(&self.seconds), "challenge.seconds", "must be 10 to 3600")?;
        ensure(
            self.raise_above_per_second <= 1_000_000,
            "challenge.raise_above_per_second",
            "must be at most 1000000",
        )?;
        ensure(self.per_user_per_second <= 10_000, "challenge.per_user_per_second", "must be at most 10000")?;
        ensure(self.max_extra_bits <= MAX_BITS, "challenge.max_extra_bits", format!("must be 0 to {MAX_BITS}"))
    }
}
