//! The sale page: the reference client, plain HTML, CSS and JavaScript
//! from `ingress/static/`, compiled into the binary (`pow.js` is the Web
//! Worker that solves a sale's proof of work).

use seckill_core::VoucherId;
use seckill_web::ApiError;
use warp::http::{header, HeaderValue};
use warp::{Filter, Rejection, Reply};

const PAGE: &str = include_str!("../../../static/sale.html");
const SCRIPT: &str = include_str!("../../../static/sale.js");
const STYLE: &str = include_str!("../../../static/sale.css");
const POW: &str = include_str!("../../../static/pow.js");

fn asset(body: &'static str, content_type: &'static str) -> warp::reply::Response {
    let mut response = warp::reply::Response::new(body.into());
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    response
}

/// `GET /sale/{voucher_id}` and its assets.
pub(super) fn routes() -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    let page = warp::path!("sale" / String).and(warp::get()).and_then(|raw: String| async move {
        // The page itself shows an unknown voucher as such; a malformed id
        // is refused like anywhere else.
        raw.parse::<VoucherId>().map_err(|e| Rejection::from(ApiError::invalid(format!("voucher_id: {e}"))))?;
        Ok::<_, Rejection>(asset(PAGE, "text/html; charset=utf-8"))
    });
    let script = warp::path!("sale" / "assets" / "sale.js")
        .and(warp::get())
        .map(|| asset(SCRIPT, "text/javascript; charset=utf-8"));
    let style =
        warp::path!("sale" / "assets" / "sale.css").and(warp::get()).map(|| asset(STYLE, "text/css; charset=utf-8"));
    let pow =
        warp::path!("sale" / "assets" / "pow.js").and(warp::get()).map(|| asset(POW, "text/javascript; charset=utf-8"));
    script.or(style).or(pow).or(page)
}
