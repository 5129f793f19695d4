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
