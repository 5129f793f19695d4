//! One driver connection: frames copied both ways, rewritten on the way.
//!
//! Towards Cassandra: the version byte 0x04 becomes 0x03, STARTUP and the
//! topology queries are rewritten. Back to the driver: 0x83 becomes 0x84 and
//! PREPARED results get their v4 metadata. A connection whose first frame is
//! not v4 is left alone (Cassandra answers v1-v3 clients itself).

use std::io;
use std::net::SocketAddr;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::faults::Faults;
use super::startup::Startup;
use super::{prepared, startup, topology};
use crate::protocol::body;
use crate::protocol::{opcode, Frame, V3_REQUEST, V3_RESPONSE, V4_REQUEST, V4_RESPONSE};

/// ERROR code: protocol error.
const PROTOCOL_ERROR: i32 = 0x000A;
/// ERROR code: server error.
const SERVER_ERROR: i32 = 0x0000;

/// Where a request from the driver goes.
enum Route {
    /// To Cassandra.
    Upstream(Frame),
    /// Back to the driver: the bridge answers it itself.
    Answer(Frame),
}

/// Serves `client` until either side closes the connection.
pub(super) async fn serve(client: TcpStream, upstream: SocketAddr, faults: &Faults) -> io::Result<()> {
    client.set_nodelay(true)?;
    let upstream = TcpStream::connect(upstream).await?;
    upstream.set_nodelay(true)?;
    let (mut client_read, client_write) = client.into_split();
    let (upstream_read, mut upstream_write) = upstream.into_split();

    let Some(first) = Frame::read(&mut client_read).await? else { return Ok(()) };
    if first.version != V4_REQUEST {
        first.write(&mut upstream_write).await?;
        return pass_through(client_read, client_write, upstream_read, upstream_write).await;
    }
    // The request side writes to the driver too, when the bridge answers.
    let client_write = Mutex::new(client_write);
    tokio::select! {
        result = requests(first, client_read, upstream_write, &client_write, faults) => result,
        result = responses(upstream_read, &client_write) => result,
    }
}

/// Driver to Cassandra.
async fn requests(
    first: Frame,
    mut client_read: OwnedReadHalf,
    mut upstream_write: OwnedWriteHalf,
    client_write: &Mutex<OwnedWriteHalf>,
    faults: &Faults,
) -> io::Result<()> {
    let mut next = Some(first);
    loop {
        let frame = match next.take() {
            Some(frame) => frame,
            None => match Frame::read(&mut client_read).await? {
                Some(frame) => frame,
                None => return Ok(()),
            },
        };
        if frame.opcode == opcode::BATCH && faults.batch_fails() {
            let answer = error_frame(frame.stream, SERVER_ERROR, "the test bridge failed this batch on purpose")?;
            answer.write(&mut *client_write.lock().await).await?;
            continue;
        }
        match to_cassandra(frame)? {
            Route::Upstream(frame) => frame.write(&mut upstream_write).await?,
            Route::Answer(frame) => frame.write(&mut *client_write.lock().await).await?,
        }
    }
}

/// Cassandra to driver.
async fn responses(mut upstream_read: OwnedReadHalf, client_write: &Mutex<OwnedWriteHalf>) -> io::Result<()> {
    while let Some(frame) = Frame::read(&mut upstream_read).await? {
        to_driver(frame)?.write(&mut *client_write.lock().await).await?;
    }
    Ok(())
}

/// A request as Cassandra 2.1 understands it, or the bridge's own answer.
fn to_cassandra(mut frame: Frame) -> io::Result<Route> {
    if frame.version == V4_REQUEST {
        frame.version = V3_REQUEST;
    }
    if frame.is_compressed() {
        // Not negotiated (see startup.rs); nothing to look into.
        return Ok(Route::Upstream(frame));
    }
    match frame.opcode {
        opcode::STARTUP => match startup::rewrite(&frame.body)? {
            Startup::Forward(body) => frame.body = body,
            Startup::Refuse(message) => return error_answer(frame.stream, &message).map(Route::Answer),
        },
        opcode::QUERY | opcode::PREPARE => topology::rewrite_statement(&mut frame.body)?,
        _ => {}
    }
    Ok(Route::Upstream(frame))
}

/// A response as the v4 driver expects it.
fn to_driver(mut frame: Frame) -> io::Result<Frame> {
    if frame.version == V3_RESPONSE {
        frame.version = V4_RESPONSE;
    }
    if frame.opcode == opcode::RESULT && !frame.is_compressed() {
        prepared::rewrite(frame.flags, &mut frame.body)?;
    }
    Ok(frame)
}

/// A v4 ERROR response (protocol error) on `stream`.
fn error_answer(stream: i16, message: &str) -> io::Result<Frame> {
    error_frame(stream, PROTOCOL_ERROR, message)
}

/// A v4 ERROR response with `code` on `stream`.
fn error_frame(stream: i16, code: i32, message: &str) -> io::Result<Frame> {
    let mut body = Vec::new();
    body::put_int(&mut body, code);
    body::put_string(&mut body, message)?;
    Ok(Frame { version: V4_RESPONSE, flags: 0, stream, opcode: opcode::ERROR, body })
}

/// Copies bytes both ways unchanged until either side closes.
async fn pass_through(
    mut client_read: OwnedReadHalf,
    mut client_write: OwnedWriteHalf,
    mut upstream_read: OwnedReadHalf,
    mut upstream_write: OwnedWriteHalf,
) -> io::Result<()> {
    tokio::select! {
        result = tokio::io::copy(&mut client_read, &mut upstream_write) => result.map(drop),
        result = tokio::io::copy(&mut upstream_read, &mut client_write) => result.map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_go_down_to_v3_and_responses_up_to_v4() {
        let options = Frame { version: V4_REQUEST, flags: 0, stream: 3, opcode: 0x05, body: Vec::new() };
        let Ok(Route::Upstream(sent)) = to_cassandra(options) else { panic!("OPTIONS goes to Cassandra") };
        assert_eq!(sent.version, V3_REQUEST);
        let ready = Frame { version: V3_RESPONSE, flags: 0, stream: 3, opcode: opcode::READY, body: Vec::new() };
        assert_eq!(to_driver(ready).expect("a valid frame").version, V4_RESPONSE);
    }

    #[test]
    fn a_refused_startup_is_answered_on_its_stream() {
        let mut body = Vec::new();
        body::put_string_map(&mut body, &[("CQL_VERSION", "4.0.0"), ("COMPRESSION", "snappy")]).expect("small map");
        let startup = Frame { version: V4_REQUEST, flags: 0, stream: 9, opcode: opcode::STARTUP, body };
        let Ok(Route::Answer(answer)) = to_cassandra(startup) else { panic!("the bridge answers") };
        assert_eq!((answer.version, answer.stream, answer.opcode), (V4_RESPONSE, 9, opcode::ERROR));
    }
}
