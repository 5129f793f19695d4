//! Continuous order traffic while faults happen, and what the clients saw.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::user_token;
use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// An order a client got `202` for: the platform promised it.
#[derive(Clone, Debug)]
pub struct Promised {
    pub order: String,
    pub voucher: String,
    pub user: String,
}

/// What the clients saw.
#[derive(Debug, Default)]
pub struct Tally {
    pub requests: u64,
    pub promised: Vec<Promised>,
    /// Rejections by error code (`sold_out`, ...).
    pub refused: HashMap<String, u64>,
    /// `503`: Redis or the log unavailable; nothing admitted.
    pub unavailable: u64,
    /// No answer (the ingress was down or died mid-request).
    pub no_answer: u64,
}

impl Tally {
    /// Adds what a later round of clients saw.
    pub fn absorb(&mut self, later: Tally) {
        self.requests += later.requests;
        self.promised.extend(later.promised);
        for (code, count) in later.refused {
            *self.refused.entry(code).or_default() += count;
        }
        self.unavailable += later.unavailable;
        self.no_answer += later.no_answer;
    }
}

/// Clients ordering until stopped.
pub struct Load {
    stop: CancellationToken,
    clients: JoinSet<()>,
    tally: Arc<Mutex<Tally>>,
}

impl Load {
    /// `clients` clients, each ordering as a new user (named from `round`)
    /// every `pause`, cycling over `vouchers`, against the ingress at `base`.
    pub fn start(
        http: &reqwest::Client,
        base: &str,
        round: &str,
        vouchers: &[String],
        clients: usize,
        pause: Duration,
    ) -> Self {
        let stop = CancellationToken::new();
        let tally = Arc::new(Mutex::new(Tally::default()));
        let mut set = JoinSet::new();
        for client in 0..clients {
            let (http, base, vouchers, round) = (http.clone(), base.to_owned(), vouchers.to_vec(), round.to_owned());
            let (stop, tally) = (stop.clone(), Arc::clone(&tally));
            set.spawn(async move {
                for n in 0.. {
                    if stop.is_cancelled() {
                        return;
                    }
                    let voucher = &vouchers[n % vouchers.len()];
                    let user = format!("{round}{client}-{n}");
                    let answer = http
                        .post(format!("{base}/api/v1/vouchers/{voucher}/orders"))
                        .header("authorization", format!("Bearer {}", user_token(&user)))
                        .send()
                        .await;
                    let seen = match answer {
                        Ok(response) => {
                            let status = response.status();
                            (status, response.json::<Value>().await.unwrap_or(Value::Null))
                        }
                        Err(_) => (StatusCode::BAD_GATEWAY, Value::Null),
                    };
                    record(&tally, voucher, user, seen);
                    tokio::time::sleep(pause).await;
                }
            });
        }
        Self { stop, clients: set, tally }
    }

    /// Stops the clients and returns what they saw.
    pub async fn finish(mut self) -> Tally {
        self.stop.cancel();
        while self.clients.join_next().await.is_some() {}
        std::mem::take(&mut *self.tally.lock().expect("tally"))
    }
}

fn record(tally: &Mutex<Tally>, voucher: &str, user: String, (status, body): (StatusCode, Value)) {
    let mut tally = tally.lock().expect("tally");
    tally.requests += 1;
    match status {
        StatusCode::ACCEPTED => {
            let order = body["order_id"].as_str().expect("a 202 names its order").to_owned();
            tally.promised.push(Promised { order, voucher: voucher.to_owned(), user });
        }
        StatusCode::SERVICE_UNAVAILABLE => tally.unavailable += 1,
        StatusCode::BAD_GATEWAY => tally.no_answer += 1,
        _ => {
            let code = body["error"].as_str().unwrap_or("unreadable").to_owned();
            assert!(status.is_client_error(), "unexpected answer {status}: {body}");
            *tally.refused.entry(code).or_default() += 1;
        }
    }
}
