//! Log setup shared by the binaries.

use tracing_subscriber::EnvFilter;

/// Installs a `tracing` subscriber writing to stderr, filtered by `RUST_LOG`
/// (default `info`, with the chatty HTTP internals at `warn`).
pub fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,hyper=warn,rdkafka=warn"));
    // A second call (tests, the all-in-one run) keeps the first subscriber.
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
