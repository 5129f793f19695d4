//! Serving a filter until shutdown, on connections no client can hoard.
//!
//! Every open connection holds a file descriptor and a task, whatever it
//! sends. Clients that open connections and send half a request header, or
//! nothing, would otherwise keep them until the process runs out of
//! descriptors and every legitimate request fails. So:
//!
//! - a client has `http.header_read_timeout_ms` to send a request's headers,
//!   on a new connection and between two requests on a kept-alive one (an
//!   idle connection is closed after as long); a response being written (an
//!   event stream, a long-poll) is not reading headers, so is not cut;
//! - at most `http.max_connections` are open, and at most
//!   `http.max_connections_per_address` from one address (an IPv6 /64);
//!   past either bound a new connection is answered `503` and closed at
//!   once, rather than left in the kernel's backlog holding the client
//!   waiting and a descriptor on each side.
//!
//! A connection speaks HTTP/1.1, or HTTP/2 in cleartext when it opens with
//! HTTP/2's preface (prior knowledge: what a load balancer that terminates
//! TLS sends on, and how many thousands of long-polls and event streams fit
//! in few connections). An HTTP/2 connection carries at most
//! `http.max_streams_per_connection` requests at once, and is closed when
//! it sends no frame within the header read timeout of being pinged, as an
//! HTTP/1.1 one is when it sends no headers.
//!
//! The read side's own bounds (waiters, streams) apply within these.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use seckill_core::config::HttpConfig;
use seckill_core::metrics::HttpMetrics;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service as _;
use warp::{Filter, Reply};

/// How long accepting pauses after an error such as running out of file
/// descriptors, so the loop does not spin while connections close.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// The client's socket address, put on every request served here; read it
/// with [`peer_address`].
#[derive(Clone, Copy, Debug)]
pub struct PeerAddress(pub SocketAddr);

/// The client's socket address (None for a request not served by
/// [`serve`], e.g. in `warp::test`).
pub fn peer_address() -> impl Filter<Extract = (Option<SocketAddr>,), Error = Infallible> + Clone {
    warp::ext::optional::<PeerAddress>().map(|peer: Option<PeerAddress>| peer.map(|peer| peer.0))
}

/// The unit a per-address bound counts. An IPv6 host is given a whole /64
/// and can pick any address in it per connection, so the /64 is one client;
/// an IPv4-mapped IPv6 address is the IPv4 client it names.
pub fn counted_address(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        },
    }
}

/// How a service serves, beyond its `[http]` configuration.
#[derive(Clone, Debug)]
pub struct Serving {
    /// How long in-flight requests may take to finish at shutdown.
    pub drain: Duration,
    /// Where open and refused connections are counted.
    pub metrics: Option<HttpMetrics>,
}

/// What is answered on a connection refused by a bound, before closing it.
static REFUSAL: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let body = r#"{"error":"unavailable","message":"too many connections; retry later"}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
});

/// Connections open, in all and per address.
#[derive(Debug)]
struct Connections {
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
    max: usize,
    max_per_address: usize,
}

/// One open connection's place; given back when dropped.
struct Held {
    connections: Arc<Connections>,
    address: IpAddr,
    metrics: Option<HttpMetrics>,
}

impl Connections {
    /// A place for a connection from `address`, or the bound it would pass.
    fn hold(self: &Arc<Self>, address: IpAddr, metrics: Option<&HttpMetrics>) -> Result<Held, &'static str> {
        let address = counted_address(address);
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if open.0 >= self.max {
            return Err("full");
        }
        let from_address = open.1.entry(address).or_default();
        if *from_address >= self.max_per_address {
            return Err("address_full");
        }
        *from_address += 1;
        open.0 += 1;
        if let Some(metrics) = metrics {
            metrics.connections.inc();
        }
        Ok(Held { connections: Arc::clone(self), address, metrics: metrics.cloned() })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self.connections.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        open.0 -= 1;
        if let Some(count) = open.1.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.1.remove(&self.address);
            }
        }
        if let Some(metrics) = &self.metrics {
            metrics.connections.dec();
        }
    }
}

/// Serves `routes` on `listener` until `shutdown`, then stops accepting and
/// lets in-flight requests finish for at most `serving.drain`.
pub async fn serve<F>(listener: TcpListener, routes: F, shutdown: CancellationToken, http: HttpConfig, serving: Serving)
where
    F: Filter + Clone + Send + Sync + 'static,
    F::Extract: Reply,
{
    let connections = Arc::new(Connections {
        open: Mutex::default(),
        max: http.max_connections,
        max_per_address: http.max_connections_per_address,
    });
    let header_read_timeout = Duration::from_millis(http.header_read_timeout_ms);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(http.max_streams_per_connection)
        .keep_alive_interval(header_read_timeout)
        .keep_alive_timeout(header_read_timeout);
    let tracker = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "Accepting an HTTP connection failed; pausing.");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let held = match connections.hold(peer.ip(), serving.metrics.as_ref()) {
            Ok(held) => held,
            Err(reason) => {
                refuse(&stream, reason, serving.metrics.as_ref());
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let connection = serve_connection(&builder, stream, peer, routes.clone(), shutdown.clone());
        tracker.spawn(async move {
            connection.await;
            drop(held);
        });
    }
    drop(listener);
    tracker.close();
    if tokio::time::timeout(serving.drain, tracker.wait()).await.is_err() {
        tracing::warn!(drain = ?serving.drain, "HTTP connections still open after the drain period; closing them.");
    }
}

/// Answers `503` and closes: the answer fits the empty send buffer of a
/// fresh connection, so this never waits for the client.
fn refuse(stream: &TcpStream, reason: &'static str, metrics: Option<&HttpMetrics>) {
    let _ = stream.try_write(&REFUSAL);
    if let Some(metrics) = metrics {
        metrics.connections_refused.with_label_values(&[reason]).inc();
    }
}

/// One connection's requests, until it closes, or until `shutdown`, when
/// the request in flight finishes and the connection closes.
fn serve_connection<F>(
    builder: &auto::Builder<TokioExecutor>,
    stream: TcpStream,
    peer: SocketAddr,
    routes: F,
    shutdown: CancellationToken,
) -> impl std::future::Future<Output = ()> + Send + 'static
where
    F: Filter + Clone + Send + Sync + 'static,
    F::Extract: Reply,
{
    let service = warp::service(routes);
    let with_peer = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(PeerAddress(peer));
        service.clone().call(request)
    });
    let builder = builder.clone();
    async move {
        let connection = builder.serve_connection(TokioIo::new(stream), with_peer);
        tokio::pin!(connection);
        let closed = tokio::select! {
            closed = connection.as_mut() => closed,
            () = shutdown.cancelled() => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        if let Err(error) = closed {
            // Timeouts and clients going away are the normal end of many
            // connections; nothing for the operator.
            tracing::debug!(%error, %peer, "HTTP connection ended with an error.");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One listener answers HTTP/1.1 and HTTP/2 with prior knowledge; an
    /// HTTP/2 connection carries many requests at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_http1_and_cleartext_http2_on_one_port() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("bound");
        let routes = warp::path!("hello").map(|| "hi");
        let shutdown = CancellationToken::new();
        let http = HttpConfig::on(addr);
        let serving = Serving { drain: Duration::from_secs(1), metrics: None };
        let server = tokio::spawn(serve(listener, routes, shutdown.clone(), http, serving));

        let http1 = reqwest::Client::builder().http1_only().build().expect("client");
        let answer = http1.get(format!("http://{addr}/hello")).send().await.expect("answers");
        assert_eq!(
            (answer.version(), answer.text().await.expect("body")),
            (reqwest::Version::HTTP_11, "hi".to_owned())
        );

        let http2 = reqwest::Client::builder().http2_prior_knowledge().build().expect("client");
        let requests = (0..300).map(|_| {
            let http2 = http2.clone();
            async move { http2.get(format!("http://{addr}/hello")).send().await.map(|answer| answer.version()) }
        });
        let versions = futures::future::join_all(requests).await;
        assert!(versions.iter().all(|v| matches!(v, Ok(reqwest::Version::HTTP_2))), "{versions:?}");
        shutdown.cancel();
        server.await.expect("the server stops");
    }
}
