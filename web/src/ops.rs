//! Operational routes and request instrumentation.

use std::sync::{Arc, OnceLock};

use prometheus::{Histogram, IntCounter, Registry};
use seckill_core::metrics::{render, HttpMetrics};
use warp::filters::log::{Info, Log};
use warp::{Filter, Rejection, Reply};

/// `GET /healthz`: the process is up and serving.
pub fn healthz() -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("healthz").and(warp::get()).map(|| warp::reply::json(&serde_json::json!({"status": "ok"})))
}

/// `GET /metrics`: the registry in the Prometheus text format.
pub fn metrics(registry: Registry) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    let registry = Arc::new(registry);
    warp::path!("metrics")
        .and(warp::get())
        .map(move || warp::reply::with_header(render(&registry), "content-type", "text/plain; version=0.0.4"))
}

/// Records every answered request in `metrics`, labelled by the route
/// template it matched (`routes` lists the templates, `{id}` standing for one
/// path segment); other paths count as `unmatched`, so clients cannot grow
/// the label set.
pub fn instrumented(metrics: HttpMetrics, routes: &'static [&'static str]) -> Log<impl Fn(Info<'_>) + Clone> {
    let table = Arc::new(RouteTable::new(metrics, routes));
    warp::log::custom(move |info| {
        let route = table.route(info.path());
        route.observe(info.status().as_u16(), info.elapsed().as_secs_f64());
    })
}

/// The route templates, split once, each with its metric handles: finding
/// a request's route allocates nothing, and recording it takes no label
/// lookup (this runs for every request, the sold-out storm's included).
struct RouteTable {
    routes: Vec<Route>,
    unmatched: Route,
}

struct Route {
    parts: Vec<&'static str>,
    label: &'static str,
    metrics: HttpMetrics,
    /// `seckill_http_requests_total` per status class (1xx to 5xx),
    /// resolved on first use so unused classes export no series.
    by_class: [OnceLock<IntCounter>; 5],
    duration: Histogram,
}

impl RouteTable {
    fn new(metrics: HttpMetrics, templates: &'static [&'static str]) -> Self {
        let route = |label: &'static str| Route {
            parts: label.trim_matches('/').split('/').collect(),
            label,
            duration: metrics.duration.with_label_values(&[label]),
            metrics: metrics.clone(),
            by_class: Default::default(),
        };
        Self { routes: templates.iter().map(|template| route(template)).collect(), unmatched: route(UNMATCHED) }
    }

    fn route(&self, path: &str) -> &Route {
        self.routes.iter().find(|route| route.matches(path)).unwrap_or(&self.unmatched)
    }
}

impl Route {
    fn matches(&self, path: &str) -> bool {
        let mut segments = path.trim_matches('/').split('/');
        self.parts.iter().all(|part| segments.next().is_some_and(|segment| *part == "{id}" || *part == segment))
            && segments.next().is_none()
    }

    fn observe(&self, status: u16, seconds: f64) {
        let class = usize::from((status / 100).clamp(1, 5)) - 1;
        self.by_class[class]
            .get_or_init(|| self.metrics.requests.with_label_values(&[self.label, STATUS_CLASSES[class]]))
            .inc();
        self.duration.observe(seconds);
    }
}

/// The route label of requests no template matches.
const UNMATCHED: &str = "unmatched";
const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

#[cfg(test)]
fn route_label(path: &str, routes: &'static [&'static str]) -> &'static str {
    let registry = prometheus::Registry::new();
    RouteTable::new(HttpMetrics::register(&registry, "test"), routes).route(path).label
}

#[cfg(test)]
mod tests {
    use super::route_label;

    const ROUTES: &[&str] = &["/healthz", "/api/v1/orders/{id}", "/api/v1/vouchers/{id}/orders"];

    #[test]
    fn labels_are_templates_or_unmatched() {
        assert_eq!(route_label("/api/v1/orders/0192", ROUTES), "/api/v1/orders/{id}");
        assert_eq!(route_label("/api/v1/vouchers/x/orders", ROUTES), "/api/v1/vouchers/{id}/orders");
        assert_eq!(route_label("/healthz", ROUTES), "/healthz");
        assert_eq!(route_label("/api/v1/orders/1/2", ROUTES), "unmatched");
        assert_eq!(route_label("/random-attacker-path", ROUTES), "unmatched");
    }
}
