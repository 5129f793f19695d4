//! `warp-floor`: the least work a warp server can do for an order request,
//! the reference the ingress's sold-out storm is measured against
//! (`bench/run`).
//!
//! It answers `POST /api/v1/vouchers/{id}/orders` with the ingress's
//! sold-out answer (`409 {"error":"sold_out",...}`) without reading the
//! body, checking a token or touching anything, and `POST /api/v1/vouchers`
//! with a made-up voucher (`201`) so the load generator can be pointed at
//! it too. Same runtime, same warp, same build profile as the ingress.
//!
//! ```text
//! warp-floor 127.0.0.1:18090
//! ```

use std::net::SocketAddr;

use warp::http::StatusCode;
use warp::Filter;

#[tokio::main]
async fn main() {
    let listen: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18090".to_owned())
        .parse()
        .expect("the first argument is the address to listen on, e.g. 127.0.0.1:18090");
    let sold_out =
        warp::path!("api" / "v1" / "vouchers" / String / "orders").and(warp::post()).map(|_voucher: String| {
            let body = serde_json::json!({"error": "sold_out", "message": "sold out"});
            warp::reply::with_status(warp::reply::json(&body), StatusCode::CONFLICT)
        });
    let create = warp::path!("api" / "v1" / "vouchers").and(warp::post()).map(|| {
        let body = serde_json::json!({"voucher_id": uuid::Uuid::now_v7()});
        warp::reply::with_status(warp::reply::json(&body), StatusCode::CREATED)
    });
    println!("warp-floor listening on {listen}");
    warp::serve(sold_out.or(create)).run(listen).await;
}
