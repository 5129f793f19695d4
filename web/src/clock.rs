//! Keeping the platform's clock ([`seckill_core::clock`]) set to the Redis
//! server's, in every service.
//!
//! `admit.lua` judges every sale window by the Redis server's clock
//! (`TIME`), one clock for every ingress. The services stamp the other
//! deadlines' times (an order's acceptance, a decision's `pay_by`, a claim,
//! the expiry sweeper's now) and the countdowns clients read by the same
//! clock: the offset between this host's clock and Redis's is measured at
//! start and every few seconds (half the round trip is the error bound), and
//! `seckill_core::clock::now()` is the local clock plus that offset. A
//! measurement whose round trip took longer than [`MAX_ROUND_TRIP`] is
//! dropped, so a busy moment does not move the clock by its delay, unless
//! none was taken yet: any measurement is closer than the host's clock.

use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_gate::Gate;
use tokio_util::sync::CancellationToken;

/// How often the offset is measured again: clocks drift slowly.
const RESYNC_EVERY: Duration = Duration::from_secs(5);
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

    /// Measures the offset once; a measurement too slow to be exact keeps
    /// the last one, if there is one.
    pub async fn sync(&self, gate: &Gate) -> redis::RedisResult<()> {
        let (offset, round_trip) = gate.clock_reading().await?;
        if round_trip <= MAX_ROUND_TRIP || !seckill_core::clock::measured() {
            seckill_core::clock::set_offset(offset);
        }
        Ok(())
    }

    /// Keeps the offset measured until `shutdown`; a failed measurement
    /// keeps the last one.
    pub async fn follow(&self, gate: Gate, shutdown: CancellationToken) {
        loop {
            if let Err(error) = self.sync(&gate).await {
                tracing::debug!(%error, "Could not read the Redis clock; keeping the last offset.");
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(RESYNC_EVERY) => {}
            }
        }
    }
}
