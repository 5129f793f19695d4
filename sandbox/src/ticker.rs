//! The ticker: makes the changes that come due by themselves (a session
//! expiring, a bank debit or a pending refund settling) even when no call
//! touches the books, so their events are sent on time. Calls make the
//! changes due before their own too, so no answer shows a stale object.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::state::State;

/// How often due changes are looked for: the lateness of an event at most.
const TICK: Duration = Duration::from_millis(50);
/// Changes made per tick at most, so the books are never held long.
const DUE_PER_TICK: usize = 10_000;

/// Ticks until `shutdown`.
pub(crate) async fn run(state: Arc<State>, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = ticks.tick() => {
                state.with_ledger(|ledger, now| ledger.run_due(now, DUE_PER_TICK));
            }
        }
    }
}
