//! A TCP bridge that lets the protocol-v4-only scylla driver use Cassandra
//! 2.1, which speaks protocol v3 at most.
//!
//! The two versions frame messages the same way and differ, for what the
//! driver uses, in a few places; the bridge rewrites exactly those and copies
//! everything else untouched (see `connection.rs`):
//!
//! - the version byte of every frame (`connection.rs`);
//! - STARTUP's CQL_VERSION, and compression refused (`startup.rs`);
//! - the partition-key indexes of PREPARED results (`prepared.rs`);
//! - the driver's topology queries, answered from mirror tables
//!   (`topology.rs`, `mirror.rs`).
//!
//! A test can also make it fail requests on purpose (`faults.rs`).

mod connection;
mod faults;
mod mirror;
mod prepared;
mod startup;
mod topology;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// A running bridge on 127.0.0.1; stopped, with all its connections, when
/// dropped.
#[derive(Debug)]
pub struct CqlBridge {
    local_addr: SocketAddr,
    /// The accept loop; it owns the connection tasks, so aborting it ends them.
    task: JoinHandle<()>,
    faults: Arc<faults::Faults>,
}

impl CqlBridge {
    /// Prepares the mirror tables on the Cassandra at `upstream` and starts
    /// accepting connections on a free port, on the current tokio runtime.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        mirror::prepare(upstream).await?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let local_addr = listener.local_addr()?;
        let faults = Arc::new(faults::Faults::new());
        let task = tokio::spawn(accept(listener, upstream, Arc::clone(&faults)));
        tracing::debug!(%local_addr, %upstream, "CQL bridge started.");
        Ok(Self { local_addr, task, faults })
    }

    /// The address drivers connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Lets the next `passing` BATCH requests (of any connection) through,
    /// then answers every later one with a server error without passing it
    /// on, as if the server had failed before applying it: for tests of a
    /// writer that fails between two of its batches.
    pub fn fail_batches_after(&self, passing: u64) {
        self.faults.fail_batches_after(passing);
    }

    /// Passes every request again.
    pub fn heal(&self) {
        self.faults.heal();
    }
}

impl Drop for CqlBridge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, faults: Arc<faults::Faults>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let faults = Arc::clone(&faults);
                    connections.spawn(async move {
                        match connection::serve(socket, upstream, &faults).await {
                            Err(error) if error.kind() == io::ErrorKind::InvalidData => {
                                tracing::warn!(%peer, %error, "CQL bridge dropped a connection with a frame it cannot translate.");
                            }
                            Err(error) => tracing::debug!(%peer, %error, "CQL bridge connection ended."),
                            Ok(()) => {}
                        }
                    });
                }
                Err(error) => {
                    // Out of file descriptors, typically: wait rather than spin.
                    tracing::warn!(%error, "CQL bridge cannot accept a connection.");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::client::Client;
    use crate::TestCql;

    /// A v3 client (this crate's own) is not translated, just relayed.
    #[tokio::test]
    async fn v3_clients_pass_through_unchanged() {
        let cql = TestCql::start().await.expect("Cassandra starts (run scripts/setup if it is missing)");
        let mut client = Client::connect(cql.bridge().local_addr()).await.expect("a v3 STARTUP passes");
        // Not redirected: a v3 client reads the real table (no rpc_address in 2.1).
        let rows = client
            .query("SELECT host_id, data_center FROM system.local WHERE key = 'local'", &[])
            .await
            .expect("a v3 query passes");
        assert_eq!(rows.len(), 1);
        let refused = client.query("SELECT rpc_address FROM system.local", &[]).await;
        assert!(refused.is_err(), "Cassandra 2.1's system.local has no rpc_address");
    }
}
