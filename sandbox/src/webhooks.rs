//! Webhook delivery, as a provider does it: each event POSTed as JSON to
//! the configured URL, signed in `Stripe-Signature`, retried with doubling
//! waits until a `2xx` or the last attempt. Only the event types the
//! endpoint is subscribed to (`enabled_events`) are sent.
//!
//! Events wait in a bounded queue; when it is full the event is dropped
//! (the change it announces is still made), as a lost callback would be,
//! and counted. Deliveries run side by side, a bounded number at once, so
//! one slow or failing event does not hold up the rest. The switches can
//! delay, repeat, drop and reorder deliveries.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use seckill_payments::signature;
use seckill_payments::Event;
use serde::Serialize;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{sleep, sleep_until, timeout, Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::events::Delivered;
use crate::switches::Switches;
use crate::sync::lock;
use crate::SandboxConfig;

/// Events waiting for delivery at most; past it new ones are dropped.
pub(crate) const QUEUE_CAPACITY: usize = 100_000;
/// Deliveries in flight at most.
const CONCURRENCY: usize = 32;
/// How long the reorder switch holds events to gather a batch to reverse.
const REORDER_HOLD: Duration = Duration::from_millis(250);
/// Largest batch the reorder switch reverses.
const MAX_REORDER_BATCH: usize = 1_000;
/// Longest wait between two attempts, however many failed.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long one attempt may take before it counts as failed.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long deliveries in flight may take to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(5);

/// What became of events, since start.
#[derive(Debug, Default)]
struct Counters {
    queued: AtomicU64,
    delivered: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    pending: AtomicU64,
    filtered: AtomicU64,
    reordered: AtomicU64,
}

/// The counters as `GET /sandbox/ledger` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct WebhookCounts {
    /// Events accepted into the queue.
    queued: u64,
    /// Deliveries answered `2xx` (a duplicated event counts twice).
    delivered: u64,
    /// Events never sent: the drop switch, a full queue, no `webhook_url`.
    dropped: u64,
    /// Deliveries given up after the last attempt.
    failed: u64,
    /// Events queued or being delivered now: `0` once all is settled.
    pending: u64,
    /// Events of types the endpoint is not subscribed to (`enabled_events`).
    filtered: u64,
    /// Events delivered in a reversed batch (the reorder switch): sent
    /// after events that happened later.
    reordered: u64,
}

/// The routes' side: hands events to the delivery.
#[derive(Debug)]
pub(crate) struct Webhooks {
    /// `None` when no `webhook_url` is configured.
    sender: Option<mpsc::Sender<Event>>,
    switches: Arc<Mutex<Switches>>,
    counters: Arc<Counters>,
}

/// The delivering side, run by [`crate::Sandbox::run`].
#[derive(Debug)]
pub(crate) struct Delivery {
    receiver: Option<mpsc::Receiver<Event>>,
    target: Arc<Target>,
    switches: Arc<Mutex<Switches>>,
}

/// Where and how events are sent.
#[derive(Debug)]
struct Target {
    client: reqwest::Client,
    url: String,
    secret: String,
    attempts: u32,
    first_retry: Duration,
    counters: Arc<Counters>,
}

/// The two sides of delivery for `config`.
pub(crate) fn channel(
    config: &SandboxConfig,
    switches: Arc<Mutex<Switches>>,
) -> Result<(Webhooks, Delivery), reqwest::Error> {
    let counters = Arc::new(Counters::default());
    let (sender, receiver) = match config.webhook_url {
        Some(_) => {
            let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
            (Some(sender), Some(receiver))
        }
        None => (None, None),
    };
    let target = Target {
        client: reqwest::Client::builder().timeout(ATTEMPT_TIMEOUT).build()?,
        url: config.webhook_url.clone().unwrap_or_default(),
        secret: config.webhook_secret.clone(),
        attempts: config.webhook_attempts.max(1),
        first_retry: Duration::from_millis(config.webhook_retry_ms),
        counters: Arc::clone(&counters),
    };
    let webhooks = Webhooks { sender, switches: Arc::clone(&switches), counters };
    Ok((webhooks, Delivery { receiver, target: Arc::new(target), switches }))
}

impl Webhooks {
    /// Queues `event` for delivery, or drops it (counted) when the drop
    /// switch claims it, the queue is full or there is nowhere to send it;
    /// an event the endpoint is not subscribed to is only counted.
    pub(crate) fn enqueue(&self, event: Event) {
        let counters = &self.counters;
        let (enabled, dropped) = {
            let mut switches = lock(&self.switches);
            let enabled = switches.enabled(&event.kind);
            (enabled, enabled && switches.take_drop())
        };
        if !enabled {
            counters.filtered.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(event = %event.id, kind = %event.kind, "Event type not enabled; not sent.");
            return;
        }
        if dropped {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::info!(event = %event.id, kind = %event.kind, "Webhook dropped by the drop switch.");
            return;
        }
        let Some(sender) = &self.sender else {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(event = %event.id, kind = %event.kind, "No webhook_url; event not delivered.");
            return;
        };
        // Counted before it can be delivered, so `pending` never underflows.
        counters.pending.fetch_add(1, Ordering::Relaxed);
        match sender.try_send(event) {
            Ok(()) => {
                counters.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(event) | TrySendError::Closed(event)) => {
                counters.pending.fetch_sub(1, Ordering::Relaxed);
                counters.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    event = %event.id,
                    kind = %event.kind,
                    capacity = QUEUE_CAPACITY,
                    "Webhook queue full or closed; event dropped."
                );
            }
        }
    }

    /// What became of events so far.
    pub(crate) fn counts(&self) -> WebhookCounts {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let counters = &self.counters;
        WebhookCounts {
            queued: read(&counters.queued),
            delivered: read(&counters.delivered),
            dropped: read(&counters.dropped),
            failed: read(&counters.failed),
            pending: read(&counters.pending),
            filtered: read(&counters.filtered),
            reordered: read(&counters.reordered),
        }
    }
}

impl Delivery {
    /// Delivers queued events until `shutdown`, then lets deliveries in
    /// flight finish for a few seconds; what is still queued is lost.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let Some(mut receiver) = self.receiver else {
            return;
        };
        let permits = Arc::new(Semaphore::new(CONCURRENCY));
        let mut deliveries = JoinSet::new();
        loop {
            while deliveries.try_join_next().is_some() {}
            let first = tokio::select! {
                () = shutdown.cancelled() => break,
                event = receiver.recv() => match event {
                    Some(event) => event,
                    None => break,
                },
            };
            let switches = lock(&self.switches).clone();
            let mut batch = vec![first];
            if switches.reorder_webhooks {
                let until = Instant::now() + REORDER_HOLD;
                while batch.len() < MAX_REORDER_BATCH {
                    tokio::select! {
                        () = sleep_until(until) => break,
                        event = receiver.recv() => match event {
                            Some(event) => batch.push(event),
                            None => break,
                        },
                    }
                }
                batch.reverse();
                if batch.len() > 1 {
                    self.target.counters.reordered.fetch_add(batch.len() as u64, Ordering::Relaxed);
                }
            }
            let permit = tokio::select! {
                () = shutdown.cancelled() => break,
                permit = Arc::clone(&permits).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
            };
            deliveries.spawn(deliver_batch(Arc::clone(&self.target), batch, switches, shutdown.clone(), permit));
        }
        receiver.close();
        let drained = timeout(DRAIN, async { while deliveries.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(drain = ?DRAIN, "Webhook deliveries still running after the drain period; abandoning them.");
        }
        let pending = self.target.counters.pending.load(Ordering::Relaxed);
        if pending > 0 {
            tracing::warn!(pending, "Webhooks not delivered at shutdown.");
        }
    }
}

/// Delivers `batch` in order (one event, or a reordered batch).
async fn deliver_batch(
    target: Arc<Target>,
    batch: Vec<Event>,
    switches: Switches,
    shutdown: CancellationToken,
    _permit: OwnedSemaphorePermit,
) {
    if switches.webhook_delay_ms > 0 {
        // At shutdown a delayed event goes at once rather than being lost.
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = sleep(Duration::from_millis(switches.webhook_delay_ms)) => {}
        }
    }
    for event in batch {
        let body = serde_json::to_vec(&Delivered::new(&event)).expect("an event serializes");
        let copies = if switches.duplicate_webhooks { 2 } else { 1 };
        for _ in 0..copies {
            target.deliver(&event, &body, &shutdown).await;
        }
        target.counters.pending.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Target {
    /// Tries one delivery until a `2xx`, the last attempt or shutdown.
    async fn deliver(&self, event: &Event, body: &[u8], shutdown: &CancellationToken) {
        let mut backoff = self.first_retry;
        for attempt in 1..=self.attempts {
            // Signed afresh for each attempt, as a provider does, so a late
            // retry is not refused as stale.
            let header = signature::sign(&self.secret, chrono::Utc::now().timestamp(), body);
            let sent = self
                .client
                .post(&self.url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header("Stripe-Signature", header)
                .body(body.to_vec())
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => {
                    self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Ok(response) => {
                    tracing::debug!(event = %event.id, attempt, status = response.status().as_u16(), "Webhook refused.");
                }
                Err(error) => tracing::debug!(event = %event.id, attempt, %error, "Webhook not delivered."),
            }
            if attempt == self.attempts {
                break;
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        self.counters.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(event = %event.id, kind = %event.kind, url = %self.url, "Webhook delivery given up.");
    }
}
