//! Fetching a draw's beacon round once its entries closed: the driver sees
//! the draw answer `awaiting_beacon` and starts one task per draw here,
//! which asks the relays for the round the sale's creation fixed, checks
//! its signature against the chain's public key, and puts it in place of
//! the seed (`Gate::apply_beacon`). A round not published yet is asked for
//! again at its time; relays that fail are retried after `[beacon]
//! retry_ms`. Every ingress may do this: the first to apply it wins, the
//! others find the draw no longer waiting.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use seckill_beacon::FetchError;
use seckill_core::beacon::BeaconChain;
use seckill_core::VoucherId;

use super::Rooms;

impl Rooms {
    /// The chain new draws are planned on (None: no beacon configured).
    pub(crate) fn beacon_chain(&self) -> Option<BeaconChain> {
        self.beacon.as_ref().map(|relays| relays.chain().clone())
    }

    /// Starts fetching `voucher`'s beacon round unless a task here is.
    pub(super) fn fetch_beacon(&self, voucher: VoucherId) {
        let Some(relays) = self.beacon.clone() else {
            tracing::warn!(%voucher, "A draw waits for a beacon round, but no [beacon] relays are configured here.");
            return;
        };
        if !self.fetching.lock().expect("fetching lock").insert(voucher) {
            return;
        }
        let (gate, fetching) = (self.gate.clone(), Arc::clone(&self.fetching));
        tokio::spawn(async move {
            loop {
                let plan = match gate.awaited_beacon(voucher).await {
                    Ok(Some(plan)) => plan,
                    Ok(None) => break,
                    Err(error) => {
                        tracing::warn!(%error, %voucher, "Could not read the draw's beacon round; retrying.");
                        tokio::time::sleep(relays.retry()).await;
                        continue;
                    }
                };
                let pause = match relays.fetch(&plan.chain, plan.round).await {
                    Ok(round) => match seckill_beacon::verify(&plan.chain, &round) {
                        Ok(randomness) => match gate.apply_beacon(voucher, &round, &randomness).await {
                            Ok(_) => {
                                tracing::info!(%voucher, round = round.round, "The draw's beacon round is in.");
                                break;
                            }
                            Err(error) => {
                                tracing::warn!(%error, %voucher, "Could not apply the beacon round; retrying.");
                                relays.retry()
                            }
                        },
                        Err(error) => {
                            tracing::warn!(%error, %voucher, "A beacon round did not verify; retrying.");
                            relays.retry()
                        }
                    },
                    Err(FetchError::TooEarly(_)) => {
                        let due = plan.round_time() - Utc::now();
                        due.to_std().unwrap_or_default().max(relays.retry() / 5).min(Duration::from_secs(60))
                    }
                    Err(error) => {
                        tracing::warn!(%error, %voucher, "The draw waits for its beacon round.");
                        relays.retry()
                    }
                };
                tokio::time::sleep(pause).await;
            }
            fetching.lock().expect("fetching lock").remove(&voucher);
        });
    }
}
