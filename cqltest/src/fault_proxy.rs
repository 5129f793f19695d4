//! A TCP proxy in front of a CQL server that fails requests on purpose: the
//! network or the server failing at a point a test chooses.
//!
//! Bytes are copied unchanged both ways, a frame at a time: only the 9-byte
//! headers are read (bodies may be compressed; headers never are), so the
//! proxy can answer a request itself without splitting a response. A
//! protocol-v4 BATCH request that a fault catches is answered with a server
//! ERROR and never reaches the server. Connections that do not start with a
//! v4 frame are relayed blindly.
//!
//! Drivers find the other nodes in `system.local` and `system.peers`; the
//! scylla driver takes their IPs from there but keeps the contact point's
//! port, and this proxy listens on the node's own IP (127.0.0.1), so a
//! session opened on [`FaultProxy::local_addr`] of a single node sends every
//! request through the proxy (no address translation needed; the tests
//! check it).

mod faults;
mod frame;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::task::{JoinHandle, JoinSet};

use faults::Faults;
use frame::{Frame, OPCODE_BATCH, V4_REQUEST};

/// A running proxy on 127.0.0.1; stopped, with all its connections, when
/// dropped.
#[derive(Debug)]
pub struct FaultProxy {
    local_addr: SocketAddr,
    /// The accept loop; it owns the connection tasks, so aborting it ends them.
    task: JoinHandle<()>,
    faults: Arc<Faults>,
}

impl FaultProxy {
    /// Starts accepting connections for `upstream` on a free port of
    /// 127.0.0.1, on the current tokio runtime.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let local_addr = listener.local_addr()?;
        let faults = Arc::new(Faults::new());
        let task = tokio::spawn(accept(listener, upstream, Arc::clone(&faults)));
        tracing::debug!(%local_addr, %upstream, "CQL fault proxy started.");
        Ok(Self { local_addr, task, faults })
    }

    /// The address drivers connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The contact point for the scylla driver: `127.0.0.1:PORT` of the proxy.
    pub fn nodes(&self) -> String {
        self.local_addr.to_string()
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

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, faults: Arc<Faults>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let faults = Arc::clone(&faults);
                    connections.spawn(async move {
                        if let Err(error) = serve(socket, upstream, &faults).await {
                            tracing::debug!(%peer, %error, "CQL fault proxy connection ended.");
                        }
                    });
                }
                Err(error) => {
                    // Out of file descriptors, typically: wait rather than spin.
                    tracing::warn!(%error, "CQL fault proxy cannot accept a connection.");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next() => {}
        }
    }
}

/// Serves `client` until either side closes the connection.
async fn serve(client: TcpStream, upstream: SocketAddr, faults: &Faults) -> io::Result<()> {
    client.set_nodelay(true)?;
    let upstream = TcpStream::connect(upstream).await?;
    upstream.set_nodelay(true)?;
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();

    let Some(first) = Frame::read(&mut client_read).await? else { return Ok(()) };
    first.write(&mut upstream_write).await?;
    if first.version != V4_REQUEST {
        return tokio::select! {
            result = tokio::io::copy(&mut client_read, &mut upstream_write) => result.map(drop),
            result = tokio::io::copy(&mut upstream_read, &mut client_write) => result.map(drop),
        };
    }
    // The request side writes to the client too, when a fault answers.
    let client_write = Mutex::new(client_write);
    tokio::select! {
        result = requests(client_read, upstream_write, &client_write, faults) => result,
        result = responses(upstream_read, &client_write) => result,
    }
}

/// Client to server, but for the requests a fault answers.
async fn requests(
    mut client_read: OwnedReadHalf,
    mut upstream_write: OwnedWriteHalf,
    client_write: &Mutex<OwnedWriteHalf>,
    faults: &Faults,
) -> io::Result<()> {
    while let Some(frame) = Frame::read(&mut client_read).await? {
        if frame.opcode == OPCODE_BATCH && faults.batch_fails() {
            let answer = Frame::server_error(frame.stream, "the test proxy failed this batch on purpose");
            answer.write(&mut *client_write.lock().await).await?;
        } else {
            frame.write(&mut upstream_write).await?;
        }
    }
    Ok(())
}

/// Server to client, a whole frame at a time.
async fn responses(mut upstream_read: OwnedReadHalf, client_write: &Mutex<OwnedWriteHalf>) -> io::Result<()> {
    while let Some(frame) = Frame::read(&mut upstream_read).await? {
        frame.write(&mut *client_write.lock().await).await?;
    }
    Ok(())
}
