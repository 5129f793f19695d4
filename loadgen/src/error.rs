//! What stops a load run.

/// Why a run could not be carried out (answers the server gives are
/// measurements, not errors).
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("{0}")]
    Invalid(String),
}
