//! The shutdown signal: one [`CancellationToken`] cancelled by SIGINT or
//! SIGTERM, cloned into every task so each can finish its work and exit.

pub use tokio_util::sync::CancellationToken;

/// Returns a token cancelled on the first SIGINT or SIGTERM.
pub fn on_signals() -> std::io::Result<CancellationToken> {
    let token = CancellationToken::new();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("Received SIGINT, shutting down."),
            _ = terminate.recv() => tracing::info!("Received SIGTERM, shutting down."),
        }
        cancel.cancel();
    });
    Ok(token)
}

/// A fixed-period schedule that ends with a shutdown token, for background
/// loops (probes, gauges read from elsewhere): the first tick is at once,
/// and a tick that came late is not made up in a burst.
#[derive(Debug)]
pub struct Every {
    ticks: tokio::time::Interval,
}

impl Every {
    pub fn new(period: std::time::Duration) -> Self {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self { ticks }
    }

    /// Waits for the next tick: true then, false once `shutdown` fires.
    pub async fn tick(&mut self, shutdown: &CancellationToken) -> bool {
        tokio::select! {
            () = shutdown.cancelled() => false,
            _ = self.ticks.tick() => true,
        }
    }
}
