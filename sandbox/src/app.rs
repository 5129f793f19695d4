//! Building and running the sandbox: `build` binds, `run` serves and
//! delivers webhooks until shutdown.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seckill_core::config::Validate;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use warp::Filter;

use crate::failure::recover;
use crate::ledger::Ledger;
use crate::state::State;
use crate::switches::Switches;
use crate::webhooks::{self, Delivery};
use crate::{api, checkout, testing, ticker, SandboxConfig, SandboxError};

/// How long requests in flight may take to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(5);

/// A built sandbox: bound, not yet serving.
#[derive(Debug)]
pub struct Sandbox {
    listener: TcpListener,
    addr: SocketAddr,
    public_url: String,
    state: Arc<State>,
    delivery: Delivery,
}

impl Sandbox {
    /// Checks `config` and binds its address.
    pub async fn build(config: SandboxConfig) -> Result<Self, SandboxError> {
        config.validate()?;
        let bind_error = |source| SandboxError::Bind { addr: config.listen, source };
        let listener = TcpListener::bind(config.listen).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let public_url = config
            .public_url
            .as_deref()
            .map_or_else(|| format!("http://{addr}"), |url| url.trim_end_matches('/').to_owned());
        let switches = Arc::new(Mutex::new(Switches::new(&config)));
        let (webhooks, delivery) = webhooks::channel(&config, Arc::clone(&switches))?;
        let state = Arc::new(State {
            ledger: Mutex::new(Ledger::new(config.max_objects, &public_url)),
            switches,
            webhooks,
            api_key: config.api_key,
            min_session_seconds: i64::from(config.min_session_seconds),
        });
        Ok(Self { listener, addr, public_url, state, delivery })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base of the checkout URLs.
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    /// Serves and delivers webhooks until `shutdown`; then stops accepting
    /// and lets requests and deliveries in flight finish for a few seconds.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), SandboxError> {
        let routes = api::routes(Arc::clone(&self.state))
            .or(checkout::routes(Arc::clone(&self.state)))
            .unify()
            .or(testing::routes(Arc::clone(&self.state)))
            .unify()
            .recover(recover)
            .unify();
        // Aborted if `run` is dropped, like the rest of a crashed process.
        let delivery = AbortOnDropHandle::new(tokio::spawn(self.delivery.run(shutdown.clone())));
        let ticker = AbortOnDropHandle::new(tokio::spawn(ticker::run(Arc::clone(&self.state), shutdown.clone())));
        let server = warp::serve(routes).incoming(self.listener).graceful(shutdown.clone().cancelled_owned()).run();
        tokio::select! {
            () = server => {}
            () = async {
                shutdown.cancelled().await;
                tokio::time::sleep(DRAIN).await;
            } => tracing::warn!(drain = ?DRAIN, "Sandbox connections still open after the drain period; closing them."),
        }
        let _ = ticker.await;
        let _ = delivery.await;
        tracing::info!(addr = %self.addr, "Payments sandbox stopped.");
        Ok(())
    }
}
