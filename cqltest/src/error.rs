//! Why a test CQL server could not be started or reached.

use std::path::PathBuf;
use std::time::Duration;

/// Why [`crate::TestCql`] or [`crate::Cassandra`] could not start.
#[derive(Debug, thiserror::Error)]
pub enum CqlTestError {
    #[error("Cassandra is not installed at {0}; run scripts/setup")]
    NotInstalled(PathBuf),
    #[error("the Cassandra data directory {0} contains whitespace, which bin/cassandra cannot pass on")]
    UnusableDir(PathBuf),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Process(#[from] seckill_devstack::DevstackError),
    #[error(
        "Cassandra on {addr} accepted connections but answered no query within {timeout:?} ({last_error}); see {log}"
    )]
    NotAnswering { addr: std::net::SocketAddr, timeout: Duration, last_error: String, log: PathBuf },
    #[error("cannot open a scylla session through the bridge: {0}")]
    Session(#[source] Box<scylla::errors::NewSessionError>),
}

impl From<scylla::errors::NewSessionError> for CqlTestError {
    fn from(error: scylla::errors::NewSessionError) -> Self {
        // Boxed: the driver's error is large, and this one travels in every Result.
        Self::Session(Box::new(error))
    }
}

impl CqlTestError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}
