//! Serving a filter until shutdown.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use warp::{Filter, Reply};

/// Serves `routes` on `listener` until `shutdown`, then stops accepting and
/// lets in-flight requests finish for at most `drain`.
pub async fn serve<F>(listener: TcpListener, routes: F, shutdown: CancellationToken, drain: Duration)
where
    F: Filter + Clone + Send + Sync + 'static,
    F::Extract: Reply,
{
    let signal = shutdown.clone();
    let server = warp::serve(routes).incoming(listener).graceful(async move { signal.cancelled().await }).run();
    tokio::pin!(server);
    tokio::select! {
        () = &mut server => {}
        () = shutdown.cancelled() => {
            if tokio::time::timeout(drain, &mut server).await.is_err() {
                tracing::warn!(?drain, "HTTP connections still open after the drain period; closing them.");
            }
        }
    }
}
