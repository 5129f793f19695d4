//! The ingress's HTTP API.

mod auth;
mod body;
mod order_actions;
mod orders;
mod vouchers;

use std::sync::Arc;

use prometheus::Registry;
use seckill_core::metrics::{AdmissionMetrics, HttpMetrics};
use seckill_core::topics::Topics;
use seckill_kafka::EventProducer;
use seckill_store::ViewReader;
use seckill_web::{healthz, instrumented, metrics, query_routes, recover};
use warp::{Filter, Rejection, Reply};

use crate::sold_out::SoldOutMemo;
use seckill_core::config::Secret;
use seckill_gate::Gate;

/// Route templates, for the request metrics.
const ROUTES: &[&str] = &[
    "/api/v1/vouchers",
    "/api/v1/vouchers/{id}",
    "/api/v1/vouchers/{id}/orders",
    "/api/v1/orders/{id}",
    "/api/v1/orders/{id}/cancel",
    "/api/v1/orders/{id}/confirm",
    "/api/v1/users/{id}/orders",
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
    pub(crate) admin_token: Option<Secret>,
    /// Where cancel and confirm requests look the order up.
    pub(crate) view: Arc<dyn ViewReader>,
}

/// Every route, with errors mapped and requests measured.
pub(crate) fn routes(
    ingress: Arc<Ingress>,
    registry: Registry,
    http_metrics: HttpMetrics,
    max_body_bytes: u64,
) -> impl Filter<Extract = (impl Reply,), Error = std::convert::Infallible> + Clone {
    let api = vouchers::create(Arc::clone(&ingress), max_body_bytes)
        .or(vouchers::update(Arc::clone(&ingress), max_body_bytes))
        .or(orders::place(Arc::clone(&ingress), max_body_bytes))
        .or(order_actions::cancel(Arc::clone(&ingress)))
        .or(order_actions::confirm(Arc::clone(&ingress)))
        .or(query_routes(Arc::clone(&ingress.view)));
    with_state_free_routes(api, registry).recover(recover).with(instrumented(http_metrics, ROUTES))
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
