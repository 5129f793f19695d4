//! Keeping the platform's clock ([`seckill_core::clock`]) set to the Redis
//! server's, in every service.
//!
//! `admit.lua` judges every sale window by the Redis server's clock
//! (`TIME`), one clock for every ingress. The services stamp the other
//! deadlines' times (an order's acceptance, a decision's `pay_by`, a claim,
//! the expiry sweeper's now) and the countdowns clients read by the same
//! clock: the offset between this host's clock and Redis's is measured once
//! before the service serves ([`ServerClock::sync`]), then by the Redis
//! probe every [`crate::probes::PROBE_EVERY`] (the reading that also gives
//! `seckill_clock_offset_seconds`), half the round trip being the error
//! bound; `seckill_core::clock::now()` is the local clock plus that offset.
//! A measurement whose round trip took longer than [`MAX_ROUND_TRIP`] is
//! dropped, so a busy moment does not move the clock by its delay, unless
//! none was taken yet: any measurement is closer than the host's clock.

use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_gate::Gate;

/// The longest round trip a measurement may take to be used: its error is
/// at most half of it.
pub const MAX_ROUND_TRIP: Duration = Duration::from_millis(50);

/// This host's clock, set to the Redis server's.
#[derive(Debug, Default)]
pub struct ServerClock;

impl ServerClock {
    /// The platform's time now.
    pub fn now(&self) -> DateTime<Utc> {
        seckill_core::clock::now()
    }

    /// Measures the offset once (before the service serves; the Redis
    /// probe measures it from then on).
    pub async fn sync(&self, gate: &Gate) -> redis::RedisResult<()> {
        let (offset, round_trip) = gate.clock_reading().await?;
        Self::take(offset, round_trip);
        Ok(())
    }

    /// Takes a measurement of the offset (Redis's clock minus this host's)
    /// made over `round_trip`, unless it is too slow to be exact and an
    /// earlier one was taken.
    pub fn take(offset: chrono::Duration, round_trip: Duration) {
        if round_trip <= MAX_ROUND_TRIP || !seckill_core::clock::measured() {
            seckill_core::clock::set_offset(offset);
        }
    }
}
