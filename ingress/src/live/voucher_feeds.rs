//! One feed per watched voucher: a single task refreshes the voucher while
//! someone watches it, and every stream of that voucher waits on the
//! feed's watch channel. Ten thousand people watching one countdown cost
//! one refresh per push interval, not ten thousand.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seckill_core::VoucherId;
use tokio::sync::watch;

use super::vouchers::Representation;
use super::Live;

/// The feeds of the vouchers being watched now.
#[derive(Debug, Default)]
pub(crate) struct VoucherFeeds {
    feeds: Mutex<HashMap<VoucherId, watch::Sender<Arc<Representation>>>>,
}

impl VoucherFeeds {
    fn feeds(&self) -> std::sync::MutexGuard<'_, HashMap<VoucherId, watch::Sender<Arc<Representation>>>> {
        self.feeds.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A receiver of `voucher`'s representation as it changes; the first
    /// watcher starts the feed's refresher with `current`.
    pub(crate) fn watch(
        live: &Arc<Live>,
        voucher: VoucherId,
        current: Arc<Representation>,
    ) -> watch::Receiver<Arc<Representation>> {
        let mut feeds = live.voucher_feeds.feeds();
        if let Some(sender) = feeds.get(&voucher) {
            return sender.subscribe();
        }
        let (sender, receiver) = watch::channel(current);
        feeds.insert(voucher, sender.clone());
        tokio::spawn(refresh(Arc::clone(live), voucher, sender));
        receiver
    }
}

/// Refreshes `voucher` every push interval and publishes it when its state
/// changed, until nobody watches or the ingress shuts down.
async fn refresh(live: Arc<Live>, voucher: VoucherId, sender: watch::Sender<Arc<Representation>>) {
    let every = Duration::from_millis(live.config.voucher_push_ms);
    loop {
        tokio::select! {
            () = live.closing.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
        {
            let mut feeds = live.voucher_feeds.feeds();
            if sender.receiver_count() == 0 {
                feeds.remove(&voucher);
                return;
            }
        }
        match live.vouchers.voucher(voucher).await {
            Ok(Some(served)) => {
                sender.send_if_modified(|shown| {
                    let changed = shown.state != served.representation.state;
                    if changed {
                        *shown = Arc::clone(&served.representation);
                    }
                    changed
                });
            }
            Ok(None) => break,
            Err(error) => tracing::debug!(%error, %voucher, "A voucher feed could not refresh; retrying."),
        }
    }
    live.voucher_feeds.feeds().remove(&voucher);
}
