//! What the partition scenarios share: buyers the test sends itself
//! during and after a fault (timed, and tallied for the checker), the time
//! to recover. The closing check is the fault suite's (`settle.rs`).

use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::user_token;
use tokio::time::Instant;

use crate::check::{self, Voucher};
use crate::cluster::{Cluster, Service};
use crate::load::{Promised, Tally};
use crate::RECOVERY_BOUND;

/// What a buyer the test sends itself saw, beside the load's.
#[derive(Default)]
pub struct Buyers {
    /// Each answer's status (None: none within the client's 10 s) and time.
    pub answers: Vec<(Option<StatusCode>, Duration)>,
    /// Their `202`s and the orders their `503`s named, for the checker.
    pub tally: Tally,
}

impl Buyers {
    /// One order as `user` of `voucher`, timed and tallied; its status.
    pub async fn order(&mut self, cluster: &Cluster, voucher: &str, user: &str) -> Option<StatusCode> {
        let started = Instant::now();
        let answer = cluster
            .http
            .post(format!("{}/api/v1/vouchers/{voucher}/orders", cluster.url(Service::Ingress)))
            .bearer_auth(user_token(user))
            .send()
            .await;
        let took = started.elapsed();
        let Ok(answer) = answer else {
            self.tally.no_answer += 1;
            self.answers.push((None, took));
            return None;
        };
        let status = answer.status();
        let body: serde_json::Value = answer.json().await.unwrap_or_default();
        let order = body["order_id"].as_str().map(str::to_owned);
        match (status, order) {
            (StatusCode::ACCEPTED, Some(order)) => self.tally.promised.push(Promised {
                order,
                voucher: voucher.to_owned(),
                user: user.to_owned(),
                quantity: 1,
            }),
            // "It may have been admitted": the order may still be decided.
            (StatusCode::SERVICE_UNAVAILABLE, Some(order)) => {
                self.tally.named_in_503.insert(order);
            }
            _ => {}
        }
        self.answers.push((Some(status), took));
        Some(status)
    }
}

/// How long after the heal the platform admits a new buyer again and its
/// outbox is empty; bounded.
pub async fn recovered(cluster: &Cluster, buyers: &mut Buyers, voucher: &str, fault: &str) -> (Duration, Duration) {
    let started = Instant::now();
    let mut admitting = None;
    for attempt in 0.. {
        assert!(started.elapsed() < RECOVERY_BOUND, "[{fault}] not recovered after {RECOVERY_BOUND:?}");
        if admitting.is_none() {
            let status = buyers.order(cluster, voucher, &format!("after-heal-{attempt}")).await;
            if status == Some(StatusCode::ACCEPTED) {
                admitting = Some(started.elapsed());
            }
        }
        if admitting.is_some() && check::outbox_len(cluster).await == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (admitting.expect("admitting"), started.elapsed())
}

/// How long `user`'s `order` takes from now to be decided (not `PENDING`
/// as its owner reads it), bounded.
/// (`http` and `ingress`: a cluster's client and its ingress's URL, which a
/// task of its own can keep).
pub async fn decided(http: reqwest::Client, ingress: String, user: String, order: String, fault: &str) -> Duration {
    let started = Instant::now();
    loop {
        let read = http.get(format!("{ingress}/api/v1/orders/{order}")).bearer_auth(user_token(&user)).send().await;
        if let Ok(read) = read {
            let row: serde_json::Value = read.json().await.unwrap_or_default();
            if row["status"].as_str().is_some_and(|status| status != "PENDING") {
                return started.elapsed();
            }
        }
        assert!(started.elapsed() < RECOVERY_BOUND, "[{fault}] {order} undecided after {RECOVERY_BOUND:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the draw is made and its winners had a win's window (8 s)
/// to read it and buy, so a fault that stalls the load's clients still
/// leaves wins read and orders admitted with them (the checker requires
/// some).
pub async fn draw_made(cluster: &Cluster, vouchers: &[Voucher]) {
    for voucher in vouchers.iter().filter(|voucher| voucher.drawn) {
        check::until_drawn(cluster, voucher).await;
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
}
