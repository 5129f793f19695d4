//! Why the test CQL server could not be reached.

/// Why [`crate::TestCql`] could not start or open a session.
#[derive(Debug, thiserror::Error)]
pub enum CqlTestError {
    #[error(transparent)]
    Process(#[from] seckill_devstack::DevstackError),
    #[error("the start of the tests' Cassandra node was interrupted: {0}")]
    Interrupted(String),
    #[error("cannot open a scylla session: {0}")]
    Session(#[source] Box<scylla::errors::NewSessionError>),
}

impl From<scylla::errors::NewSessionError> for CqlTestError {
    fn from(error: scylla::errors::NewSessionError) -> Self {
        // Boxed: the driver's error is large, and this one travels in every Result.
        Self::Session(Box::new(error))
    }
}
