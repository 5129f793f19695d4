//! The platform's clock: this process's wall clock set to the Redis
//! server's.
//!
//! `admit.lua` and the waiting room's scripts judge every sale window, entry
//! token and win by Redis's `TIME`. The services stamp the times the other
//! deadlines are judged by: an order's `accepted_at` (against the sale's end
//! and its pauses), a decision's `decided_at` and so its `pay_by`, a claim's
//! `requested_at` (against that `pay_by`), the expiry sweeper's "now". Each
//! service stamps them with [`now`], its own clock plus the offset to Redis's
//! it last measured (`seckill_web::ServerClock`: at start, then by the Redis
//! probe every 2 s), so every deadline is judged on one clock whatever the hosts'
//! clocks say, within the measurement's error (half a round trip to Redis).
//!
//! One offset for the process: the clock is the host's, and so is its
//! error. Until the first measurement the offset is 0 (the host's clock);
//! `seckill_clock_offset_seconds` and the `SeckillClockSkew` alert still
//! report the host's own clock, which NTP should keep right.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use chrono::{DateTime, Duration, Utc};

/// Redis's clock minus this host's, in microseconds.
static OFFSET_US: AtomicI64 = AtomicI64::new(0);
/// Whether an offset was ever set.
static MEASURED: AtomicBool = AtomicBool::new(false);

/// The platform's time now: this host's clock plus the measured offset.
pub fn now() -> DateTime<Utc> {
    Utc::now() + Duration::microseconds(OFFSET_US.load(Ordering::Relaxed))
}

/// Sets the offset to Redis's clock (Redis's minus this host's).
pub fn set_offset(offset: Duration) {
    OFFSET_US.store(offset.num_microseconds().unwrap_or(0), Ordering::Relaxed);
    MEASURED.store(true, Ordering::Relaxed);
}

/// Whether an offset was set: before, [`now`] is the host's clock.
pub fn measured() -> bool {
    MEASURED.load(Ordering::Relaxed)
}
