//! When does a client see its order's final status? A sample of admitted
//! orders is polled from the moment their `202` arrives until the status
//! view shows them final, as a client would, so the figure includes the
//! relay, the broker, the processor, the projector and the query path.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seckill_core::UserId;
use tokio::task::JoinSet;

use crate::check::final_row;
use crate::Credentials;

/// Pause between two polls of one order: the measurement's resolution.
pub(crate) const POLL_EVERY: Duration = Duration::from_millis(10);
/// Most orders watched at once. Polling is load on the very path being
/// measured: this bounds it (at most `MAX_WATCHED` polls per `POLL_EVERY`,
/// 1,600/s) however slow the pipeline gets, where watching every sampled
/// order would multiply the polls by the latency.
pub(crate) const MAX_WATCHED: usize = 16;

/// Polls sampled orders in the background and collects their latencies.
#[derive(Debug)]
pub(crate) struct VisibilityProbe {
    http: reqwest::Client,
    base_url: String,
    credentials: Credentials,
    give_up_after: Duration,
    /// One admitted order in `every` is polled.
    every: usize,
    admitted: AtomicUsize,
    /// Orders being polled now.
    watching: Arc<AtomicUsize>,
    latencies_ms: Arc<Mutex<Vec<f64>>>,
    polls: Mutex<JoinSet<()>>,
}

impl VisibilityProbe {
    /// Polls one admitted order in `every` (at least 1), for at most
    /// `give_up_after` each.
    pub(crate) fn new(
        http: reqwest::Client,
        base_url: &str,
        credentials: Credentials,
        every: usize,
        give_up_after: Duration,
    ) -> Self {
        Self {
            http,
            base_url: base_url.to_owned(),
            credentials,
            give_up_after,
            every: every.max(1),
            admitted: AtomicUsize::new(0),
            watching: Arc::default(),
            latencies_ms: Arc::default(),
            polls: Mutex::new(JoinSet::new()),
        }
    }

    /// Counts an admitted order and, if it is one of the sample and fewer
    /// than [`MAX_WATCHED`] are being polled, starts polling it (`order` of
    /// `user`, whose `202` arrived at `answered_at`).
    pub(crate) fn admitted(&self, order: &str, user: &UserId, answered_at: Instant) {
        if self.admitted.fetch_add(1, Ordering::Relaxed) % self.every != 0 {
            return;
        }
        let free = self.watching.fetch_update(Ordering::AcqRel, Ordering::Acquire, |watching| {
            (watching < MAX_WATCHED).then_some(watching + 1)
        });
        if free.is_ok() {
            self.watch(order.to_owned(), user.clone(), answered_at);
        }
    }

    fn watch(&self, order: String, user: UserId, answered_at: Instant) {
        let (http, credentials) = (self.http.clone(), self.credentials.clone());
        let url = format!("{}/api/v1/orders/{order}", self.base_url);
        let (latencies, give_up_after) = (Arc::clone(&self.latencies_ms), self.give_up_after);
        let watching = Arc::clone(&self.watching);
        let poll = async move {
            let _slot = Slot(watching);
            while answered_at.elapsed() < give_up_after {
                if final_row(&http, &credentials, &url, &user).await.is_some() {
                    let latency_ms = answered_at.elapsed().as_secs_f64() * 1000.0;
                    latencies.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(latency_ms);
                    return;
                }
                tokio::time::sleep(POLL_EVERY).await;
            }
        };
        self.polls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).spawn(poll);
    }

    /// Waits for every poll to end; the latencies seen, in milliseconds.
    pub(crate) async fn finish(self) -> Vec<f64> {
        let mut polls = self.polls.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        while polls.join_next().await.is_some() {}
        let latencies = self.latencies_ms.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        latencies.clone()
    }
}

/// A watching slot, given back however the poll ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
