//! The server clock clients count down by.
//!
//! `admit.lua` judges every sale window by the Redis server's clock
//! (`TIME`), one clock for every ingress. This one follows it: the offset
//! between this host's clock and Redis' is measured at start and every few
//! seconds (half the round trip is the error bound), and `now()` is the
//! local clock plus that offset. A countdown read from it ends when
//! admission opens, whatever the client's or this host's clock says.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use seckill_gate::Gate;
use tokio_util::sync::CancellationToken;

/// How often the offset is measured again: clocks drift slowly.
const RESYNC_EVERY: Duration = Duration::from_secs(5);

/// This host's clock, set to the Redis server's.
#[derive(Debug, Default)]
pub(crate) struct ServerClock {
    /// Redis time minus local time, in microseconds.
    offset_us: AtomicI64,
}

impl ServerClock {
    /// The admission clock's time now.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::microseconds(self.offset_us.load(Ordering::Relaxed))
    }

    /// Measures the offset once.
    pub(crate) async fn sync(&self, gate: &Gate) -> redis::RedisResult<()> {
        let offset = gate.clock_offset().await?.num_microseconds().unwrap_or(0);
        self.offset_us.store(offset, Ordering::Relaxed);
        Ok(())
    }

    /// Keeps the offset measured until `shutdown`; a failed measurement
    /// keeps the last one.
    pub(crate) async fn follow(&self, gate: Gate, shutdown: CancellationToken) {
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
