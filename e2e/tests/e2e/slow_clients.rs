//! Slow and idle connections cannot take the ingress down: connections that
//! send half a request header and then nothing are closed once the header
//! read timeout passes, those past the per-address bound are answered `503`
//! and closed at once (not left in the backlog), an idle kept-alive
//! connection is closed after as long, and meanwhile a buyer from another
//! address orders and polls as usual.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::helpers::Platform;

const HEADER_TIMEOUT: Duration = Duration::from_secs(3);
const PER_ADDRESS: usize = 500;
const SLOW: usize = 1_500;

/// A connection to `to` from the loopback address `from`.
async fn connect_from(from: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.bind(SocketAddr::from((from, 0))).expect("binds a loopback address");
    socket.connect(to).await.expect("connects")
}

/// What the server sent before closing, or None if it still holds the
/// connection open after `within`.
async fn until_closed(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    match tokio::time::timeout(within, stream.read_to_end(&mut received)).await {
        Ok(_) => Some(received),
        Err(_) => None,
    }
}

fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort_unstable();
    latencies[(latencies.len() * 99).div_ceil(100).saturating_sub(1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_closed_or_refused_while_a_buyer_is_answered() {
    let platform = Platform::start_configured(None, |config| {
        config.http.header_read_timeout_ms = HEADER_TIMEOUT.as_millis() as u64;
        config.http.max_connections_per_address = PER_ADDRESS;
    })
    .await;
    let voucher = platform.create_voucher(1_000, 1).await;
    let ingress: SocketAddr = platform.base.trim_start_matches("http://").parse().expect("an address");

    // An attacker on 127.0.0.3 opens connections that send half a header.
    let opened = Instant::now();
    let mut slow = Vec::with_capacity(SLOW);
    for _ in 0..SLOW {
        let mut stream = connect_from([127, 0, 0, 3], ingress).await;
        let _ = stream.write_all(b"GET /healthz HTTP/1.1\r\nhost: seckill\r\n").await;
        slow.push(stream);
    }
    let opening = opened.elapsed();
    assert!(opening < HEADER_TIMEOUT, "opening took {opening:?}: no slow connection timed out yet");

    // A buyer on 127.0.0.2 orders and polls meanwhile.
    let buyer = reqwest::Client::builder()
        .local_address(IpAddr::from([127, 0, 0, 2]))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client");
    let mut latencies = Vec::new();
    for i in 0..40 {
        let started = Instant::now();
        let placed = buyer
            .post(format!("{}/api/v1/vouchers/{voucher}/orders", platform.base))
            .header("authorization", Platform::as_user(&format!("buyer-{i}")))
            .send()
            .await
            .expect("the order is answered");
        assert_eq!(placed.status(), StatusCode::ACCEPTED);
        let order: serde_json::Value = placed.json().await.expect("json");
        let polled = buyer
            .get(format!("{}/api/v1/orders/{}", platform.base, order["order_id"].as_str().expect("id")))
            .header("authorization", Platform::as_user(&format!("buyer-{i}")))
            .send()
            .await
            .expect("the poll is answered");
        assert_eq!(polled.status(), StatusCode::OK);
        latencies.push(started.elapsed());
    }
    println!("buyer: order + poll p99 {:?} over {} rounds, with {SLOW} slow connections", p99(latencies), 40);

    // Past the bound: answered 503 and closed at once. Within it: held
    // until the header read timeout, then closed.
    let (mut refused, mut closed_later) = (0, 0);
    for stream in &mut slow {
        match until_closed(stream, HEADER_TIMEOUT * 3).await {
            Some(answer) if answer.starts_with(b"HTTP/1.1 503") => refused += 1,
            Some(_) => closed_later += 1,
            None => panic!("a slow connection was still open {:?} after the header timeout", HEADER_TIMEOUT * 2),
        }
    }
    assert_eq!(refused + closed_later, SLOW);
    assert!(refused >= SLOW - PER_ADDRESS, "{refused} refused, {closed_later} closed by the timeout");
    assert!(closed_later <= PER_ADDRESS, "{closed_later} held at once");

    // An idle kept-alive connection is closed after as long.
    let mut idle = connect_from([127, 0, 0, 2], ingress).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: seckill\r\n\r\n").await.expect("writes");
    let mut first = [0u8; 12];
    idle.read_exact(&mut first).await.expect("an answer");
    assert_eq!(&first, b"HTTP/1.1 200");
    let waited = Instant::now();
    assert!(until_closed(&mut idle, HEADER_TIMEOUT * 3).await.is_some(), "the idle connection is closed");
    assert!(waited.elapsed() >= HEADER_TIMEOUT / 2, "not before the timeout: {:?}", waited.elapsed());

    // Healthy after, and the refusals are counted.
    let health = platform.http.get(format!("{}/healthz", platform.base)).send().await.expect("health");
    assert_eq!(health.status(), StatusCode::OK);
    let metrics = platform.http.get(format!("{}/metrics", platform.base)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("text");
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("seckill_http_connections_refused_total") && line.contains("address_full")),
        "{metrics}"
    );
}
