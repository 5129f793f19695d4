//! The payment invariants every fault test ends with (see `check`).
//!
//! Once the platform is quiet: every payment the provider's sandbox
//! completed for an order either paid that order (its view row names it,
//! `PAID`) and was never refunded, or was refunded exactly once (one
//! refund at the provider, the same one the log records); never both,
//! never neither. No order was paid by two payments, the log reported
//! every completed payment, and the money the provider kept and gave back
//! equals what the log says was paid and refunded.

use std::collections::{BTreeMap, HashMap, HashSet};

use reqwest::StatusCode;
use seckill_core::{Envelope, Event};
use serde_json::Value;

use crate::cluster::{Cluster, Service};
use crate::load::Tally;

/// What the log says of payments.
#[derive(Debug, Default)]
pub struct Payments {
    /// `PaymentReceived`: payment → its order.
    pub received: HashMap<String, String>,
    /// `PaymentReceived`: payment → (the provider's payment time, amount).
    pub received_at: HashMap<String, (chrono::DateTime<chrono::Utc>, u64)>,
    /// `OrderPaid` with a payment: order → the payments that paid it.
    pub paid: HashMap<String, HashSet<String>>,
    /// `RefundRequested`: payment → the reasons given.
    pub refund_requested: HashMap<String, HashSet<&'static str>>,
    /// `PaymentRefunded`: payment → (refund ids, amount).
    pub refunded: HashMap<String, (HashSet<String>, u64)>,
}

impl Payments {
    /// Takes a record of the log into account; duplicates change nothing.
    pub fn take(&mut self, envelope: &Envelope) {
        match &envelope.event {
            Event::PaymentReceived(p) => {
                self.received.insert(p.payment_id.clone(), p.order_id.to_string());
                self.received_at.insert(p.payment_id.clone(), (p.paid_at, p.amount));
            }
            Event::OrderPaid(p) => {
                if let Some(payment) = &p.payment_id {
                    self.paid.entry(p.order.order_id.to_string()).or_default().insert(payment.clone());
                }
            }
            Event::RefundRequested(r) => {
                self.refund_requested.entry(r.payment_id.clone()).or_default().insert(r.reason.as_str());
            }
            Event::PaymentRefunded(r) => {
                let entry = self.refunded.entry(r.payment_id.clone()).or_default();
                entry.0.insert(r.refund_id.clone());
                entry.1 = r.amount;
            }
            _ => {}
        }
    }

    /// Payments not settled yet: completed at the provider (`reported`)
    /// but not in the log, or refunds requested but not acknowledged.
    pub fn unsettled<'a>(&'a self, reported: &HashSet<&'a str>) -> Vec<&'a str> {
        let unreported = reported.iter().copied().filter(|payment| !self.received.contains_key(*payment));
        let unrefunded =
            self.refund_requested.keys().map(String::as_str).filter(|payment| !self.refunded.contains_key(*payment));
        unreported.chain(unrefunded).collect()
    }
}

/// Checks the payments of the orders the clients paid against the view,
/// the log and the sandbox's books; a summary for the test's output.
pub async fn check(cluster: &Cluster, tally: &Tally, log: &Payments, fault: &str) -> String {
    let ledger = ledger(cluster).await;
    let intents: HashMap<&str, &Value> = ledger["payment_intents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| Some((i["id"].as_str()?, i)))
        .collect();
    let mut provider_refunds: HashMap<&str, Vec<&Value>> = HashMap::new();
    for refund in ledger["refunds"].as_array().into_iter().flatten() {
        let payment = refund["payment_intent"].as_str().expect("a refund names its payment");
        provider_refunds.entry(payment).or_default().push(refund);
    }

    let (mut kept, mut given_back, mut both_ways) = (0u64, 0u64, BTreeMap::<String, u64>::new());
    for (order, payments) in &tally.paid {
        let row = view_order(cluster, order).await;
        let status = row["status"].as_str().unwrap_or("?");
        let paid_with = row["payment_id"].as_str();
        let by_log = log.paid.get(order).map(HashSet::len).unwrap_or(0);
        assert!(by_log <= 1, "[{fault}] order {order} was paid by {by_log} payments in the log");
        *both_ways.entry(status.to_owned()).or_default() += 1;
        for payment in payments {
            assert!(log.received.contains_key(payment), "[{fault}] payment {payment} of {order} is not in the log");
            let refunds = provider_refunds.get(payment.as_str()).map(Vec::as_slice).unwrap_or_default();
            let logged = log.refunded.get(payment).map(|(ids, _)| ids.clone()).unwrap_or_default();
            let pays_the_order = status == "PAID" && paid_with == Some(payment.as_str());
            if pays_the_order {
                assert!(
                    refunds.is_empty() && logged.is_empty() && !log.refund_requested.contains_key(payment),
                    "[{fault}] payment {payment} paid order {order} and was refunded too"
                );
                kept += 1;
            } else {
                assert_eq!(
                    refunds.len(),
                    1,
                    "[{fault}] payment {payment} of order {order} ({status}, paid by {paid_with:?}) was refunded {} \
                     times at the provider",
                    refunds.len()
                );
                let refund_id = refunds[0]["id"].as_str().expect("a refund id");
                assert_eq!(
                    logged,
                    HashSet::from([refund_id.to_owned()]),
                    "[{fault}] the log's refunds of {payment} are the provider's"
                );
                given_back += 1;
            }
        }
        assert!(
            status == "CANCELLED" || (status == "PAID" && paid_with.is_some_and(|p| payments.iter().any(|q| q == p))),
            "[{fault}] order {order} was paid by {payments:?} and ends {status} (paid by {paid_with:?})"
        );
        // A right payment made before the deadline pays the order: it is
        // never refunded for an order cancelled after all.
        if status == "CANCELLED" {
            let pay_by: Option<chrono::DateTime<chrono::Utc>> = row["pay_by"].as_str().and_then(|t| t.parse().ok());
            let owed = row["amount"].as_u64();
            let paying = payments.iter().find(|payment| {
                log.received_at.get(payment.as_str()).is_some_and(|(paid_at, amount)| {
                    Some(*amount) == owed && pay_by.is_some_and(|pay_by| *paid_at < pay_by)
                })
            });
            assert!(
                paying.is_none() || row["reason"] == "requested" || row["reason"] == "refunded",
                "[{fault}] order {order} was paid in time and for its amount by {paying:?}, yet ends CANCELLED: {row}"
            );
        }
    }

    // The provider's books: nothing refunded twice, nothing refunded the log
    // does not know, and the same money both sides.
    let mut refunded_at_provider = 0u64;
    for (payment, refunds) in &provider_refunds {
        assert_eq!(refunds.len(), 1, "[{fault}] payment {payment} has {} refunds at the provider", refunds.len());
        assert!(
            log.refunded.contains_key(*payment),
            "[{fault}] the provider refunded {payment}; the log does not say so"
        );
        let intent = intents.get(payment).expect("a refunded payment is known to the provider");
        assert_eq!(refunds[0]["amount"], intent["amount"], "[{fault}] {payment} refunded in full");
        refunded_at_provider += refunds[0]["amount"].as_u64().unwrap_or(0);
    }
    let refunded_in_log: u64 = log.refunded.values().map(|(_, amount)| amount).sum();
    assert_eq!(refunded_at_provider, refunded_in_log, "[{fault}] refunded amounts: provider vs log");
    assert!(kept > 0 || tally.paid.is_empty(), "[{fault}] no payment paid its order: the payment path did nothing");
    let summary = format!(
        "payments: {} orders paid at the provider ({both_ways:?}), {kept} payments kept, {given_back} refunded once \
         ({refunded_at_provider} cents), reasons {:?}",
        tally.paid.len(),
        log.refund_requested.values().flatten().fold(BTreeMap::<&str, u64>::new(), |mut counts, reason| {
            *counts.entry(reason).or_default() += 1;
            counts
        })
    );
    println!("[{fault}] {summary}");
    summary
}

/// The sandbox's books.
pub(crate) async fn ledger(cluster: &Cluster) -> Value {
    let response = cluster
        .http
        .get(format!("{}/sandbox/ledger", cluster.url(Service::Payments)))
        .send()
        .await
        .expect("the sandbox answers");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("the ledger is JSON")
}

/// The order as the view has it once paid or closed (the log is settled,
/// the view follows it within moments).
async fn view_order(cluster: &Cluster, order: &str) -> Value {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let response = cluster
            .http
            .get(format!("{}/api/v1/orders/{order}", cluster.url(Service::Projector)))
            .send()
            .await
            .expect("the projector answers");
        assert_eq!(response.status(), StatusCode::OK, "order {order} in the view");
        let row: Value = response.json().await.expect("an order is JSON");
        let settled = matches!(row["status"].as_str(), Some("PAID" | "CANCELLED" | "REFUNDED" | "FAILED"));
        if settled || tokio::time::Instant::now() >= deadline {
            return row;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
