//! Operational routes and request instrumentation.

use std::sync::Arc;

use prometheus::Registry;
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
    warp::log::custom(move |info| {
        let route = route_label(info.path(), routes);
        metrics.observe(route, info.status().as_u16(), info.elapsed().as_secs_f64());
    })
}

fn route_label(path: &str, routes: &'static [&'static str]) -> &'static str {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    routes
        .iter()
        .find(|template| {
            let parts: Vec<&str> = template.trim_matches('/').split('/').collect();
            parts.len() == segments.len()
                && parts.iter().zip(&segments).all(|(part, segment)| *part == "{id}" || part == segment)
        })
        .copied()
        .unwrap_or("unmatched")
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
