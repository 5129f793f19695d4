//! Network partitions against the platform as real processes: servers on
//! test hosts of their own (network namespaces on a bridge the test makes,
//! `seckill_devstack::TestNet`), links cut, healed and slowed under the
//! fault suite's mixed load, each scenario judged by the fault suite's
//! invariant checker (its modules, shared by path).
//!
//! Only root may make namespaces, so every test here is `#[ignore]`d:
//! `scripts/test`'s `partitions` lane runs them with `--include-ignored`
//! where `ip netns add` works, and says in one line that it skipped them
//! where it does not (they then count as skipped, never as passed). Run
//! them by hand the same way:
//! `cargo test -p seckill --test partitions -- --include-ignored`.

#![allow(unreachable_pub)]

mod buyers;
mod emulated_link;
mod hosts;
mod kafka_link;
mod redis_cluster;
mod redis_link;
mod slow_links;
mod zombie;

// The fault suite's platform, load and checker, shared rather than copied;
// this lane uses only part of each.
#[allow(dead_code)]
#[path = "../faults/alerts.rs"]
mod alerts;
#[allow(dead_code)]
#[path = "../faults/check.rs"]
mod check;
#[allow(dead_code)]
#[path = "../faults/checkout.rs"]
mod checkout;
#[allow(dead_code)]
#[path = "../faults/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../faults/load.rs"]
mod load;
#[allow(dead_code)]
#[path = "../faults/paid.rs"]
mod paid;
#[allow(dead_code)]
#[path = "../faults/rooms.rs"]
mod rooms;
#[allow(dead_code)]
#[path = "../faults/sale.rs"]
mod sale;
#[path = "../faults/settle.rs"]
mod settle;

use std::time::Duration;

use seckill_devstack::TestNet;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Platforms running at once: one. Three brokers are three JVMs, and a
/// draw's 4-s entry window, at a sale's start, saw no entrants when two
/// platforms started together on two cores.
static TURN: Semaphore = Semaphore::const_new(1);

/// The right to run a platform; released when dropped.
async fn turn() -> SemaphorePermit<'static> {
    TURN.acquire().await.expect("the semaphore is never closed")
}

/// The fault suite's load: clients, and the pause between their requests.
const CLIENTS: usize = 8;
const PAUSE: Duration = Duration::from_millis(20);
/// The longest the platform may take to recover after a heal (a liveness
/// bound, as in the fault suite, not a figure: the figure is printed).
const RECOVERY_BOUND: Duration = Duration::from_secs(90);

/// A test network, or a failure that says why: these tests run only where
/// the lane found namespaces permitted, so not getting one is an error.
fn test_net() -> TestNet {
    TestNet::create().unwrap_or_else(|error| panic!("{error} (the partitions lane runs only where it is)"))
}
