//! The ingress's HTTP API: the write side (placing orders, cancel and
//! confirm requests, admin changes) here, the read side in [`crate::live`].

mod admin_retries;
mod body;
mod challenge;
mod draw;
pub(crate) mod openapi;
mod order_actions;
mod orders;
mod payment;
mod queue;
mod vouchers;
pub(crate) mod webhook;

use std::sync::Arc;

use prometheus::Registry;
use seckill_core::metrics::{AdmissionMetrics, HttpMetrics};
use seckill_core::topics::Topics;
use seckill_kafka::EventProducer;
use seckill_web::{healthz, instrumented, metrics, recover};
use warp::{Filter, Rejection, Reply};

use crate::access::Access;
use crate::live::http::Reading;
use crate::live::{self, Live};
use crate::sold_out::SoldOutMemo;
use seckill_gate::Gate;

/// Route templates, for the request metrics: the write side's, the read
/// side's, and the operational ones.
const ROUTES: &[&str] = &[
    "/api/v1/vouchers",
    "/api/v1/vouchers/{id}",
    "/api/v1/vouchers/{id}/orders",
    "/api/v1/vouchers/{id}/stream",
    "/api/v1/vouchers/{id}/queue",
    "/api/v1/vouchers/{id}/queue/me",
    "/api/v1/vouchers/{id}/queue/me/stream",
    "/api/v1/vouchers/{id}/entries",
    "/api/v1/vouchers/{id}/entries/me",
    "/api/v1/vouchers/{id}/entries/me/stream",
    "/api/v1/vouchers/{id}/challenge",
    "/api/v1/orders/{id}",
    "/api/v1/orders/{id}/cancel",
    "/api/v1/orders/{id}/confirm",
    "/api/v1/orders/{id}/refund",
    "/api/v1/orders/{id}/payment",
    "/api/v1/payments/webhook",
    "/api/v1/users/{id}/orders",
    "/api/v1/users/{id}/orders/stream",
    "/api/v1/time",
    "/api/v1/openapi.json",
    "/sale/{id}",
    "/sale/assets/{id}",
    "/healthz",
    "/metrics",
];

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct Ingress {
    pub(crate) gate: Gate,
    pub(crate) sold_out: SoldOutMemo,
    pub(crate) producer: EventProducer,
    pub(crate) topics: Topics,
    pub(crate) metrics: AdmissionMetrics,
    /// Who may call and how fast.
    pub(crate) access: Arc<Access>,
    /// The read side: where reads are answered and orders looked up.
    pub(crate) live: Arc<Live>,
    /// How long an admin's `Idempotency-Key` is remembered.
    pub(crate) admin_retry_ttl: std::time::Duration,
    /// The payment provider; None when payments are off.
    pub(crate) payments: Option<crate::payments::Payments>,
    /// The waiting rooms of queue-mode sales, and the draws.
    pub(crate) rooms: Arc<crate::room::Rooms>,
    /// The proof of work of vouchers with `challenge_bits`.
    pub(crate) challenges: Arc<crate::challenge::Challenges>,
    /// The per-user and per-address admission buckets of the order route
    /// (kept by `admit.lua`, per voucher, for every ingress at once).
    pub(crate) pace: crate::config::RateLimitConfig,
}

impl Ingress {
    /// The buckets an order from `address` is held to.
    pub(crate) fn pace(&self, address: Option<std::net::IpAddr>) -> seckill_gate::Pace {
        seckill_gate::Pace {
            user_per_second: self.pace.per_user_per_second,
            user_burst: self.pace.per_user_burst,
            address: address.map(|address| address.to_string()),
            address_per_second: self.pace.per_ip_per_second,
            address_burst: self.pace.per_ip_burst,
        }
    }
}

/// Every route, with errors mapped and requests measured.
pub(crate) fn routes(
    ingress: Arc<Ingress>,
    registry: Registry,
    http_metrics: HttpMetrics,
    max_body_bytes: u64,
) -> impl Filter<Extract = (impl Reply,), Error = std::convert::Infallible> + Clone {
    // The flash-sale hot path first: warp tries routes in order.
    let api = orders::place(Arc::clone(&ingress), max_body_bytes)
        .or(vouchers::create(Arc::clone(&ingress), max_body_bytes))
        .or(vouchers::update(Arc::clone(&ingress), max_body_bytes))
        .or(order_actions::cancel(Arc::clone(&ingress)))
        .or(order_actions::confirm(Arc::clone(&ingress)))
        .or(order_actions::refund(Arc::clone(&ingress)))
        .or(payment::create(Arc::clone(&ingress)))
        .or(webhook::receive(Arc::clone(&ingress)))
        .or(queue::join(Arc::clone(&ingress)))
        .or(draw::enter(Arc::clone(&ingress)))
        .or(challenge::issue(Arc::clone(&ingress)))
        .or(live::http::routes(Arc::new(Reading {
            live: Arc::clone(&ingress.live),
            access: Arc::clone(&ingress.access),
            rooms: Arc::clone(&ingress.rooms),
        })))
        .or(openapi::document());
    with_state_free_routes(api, registry)
        .or(openapi::method_not_allowed())
        .recover(recover)
        .with(instrumented(http_metrics, ROUTES))
}

fn with_state_free_routes<F>(
    api: F,
    registry: Registry,
) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone
where
    F: Filter<Error = Rejection> + Clone,
    F::Extract: Reply,
{
    api.or(healthz()).or(metrics(registry))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// `/api/v1/orders/{order_id}` → `/api/v1/orders/{id}`.
    fn as_template(path: &str) -> String {
        path.split('/')
            .map(|segment| if segment.starts_with('{') { "{id}" } else { segment })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn the_openapi_document_names_exactly_the_routed_paths() {
        let document: serde_json::Value = serde_json::from_str(openapi::OPENAPI_JSON).expect("valid JSON");
        let documented: BTreeSet<String> =
            document["paths"].as_object().expect("paths").keys().map(|path| as_template(path)).collect();
        let routed: BTreeSet<String> = ROUTES.iter().map(|route| (*route).to_owned()).collect();
        assert_eq!(documented, routed, "ingress/openapi.json and the route table disagree");
    }
}
