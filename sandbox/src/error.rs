//! Why the sandbox could not start.

use std::net::SocketAddr;

use seckill_core::config::ConfigError;

/// A failure to build the sandbox; once running it answers errors, it
/// does not fail.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("cannot build the webhook client: {0}")]
    Client(#[from] reqwest::Error),
}
