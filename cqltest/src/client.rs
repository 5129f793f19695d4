//! A minimal protocol-v3 client for Cassandra itself.
//!
//! The scylla driver speaks only v4, so before the bridge exists something
//! else has to check that Cassandra answers queries and create the bridge's
//! mirror tables. This client does just that: STARTUP, then one QUERY at a
//! time, with the rows returned as raw cells.

use std::io;
use std::net::SocketAddr;

use tokio::net::TcpStream;

use crate::protocol::body::{self, Reader};
use crate::protocol::{opcode, Frame, CQL_VERSION_V3, RESULT_ROWS, V3_REQUEST};

/// Consistency ONE: every caller talks to the single local node.
const CONSISTENCY_ONE: u16 = 0x0001;
/// QUERY flag: values follow.
const QUERY_FLAG_VALUES: u8 = 0x01;
/// Rows metadata flags.
const ROWS_GLOBAL_TABLE_SPEC: i32 = 0x0001;
const ROWS_HAS_MORE_PAGES: i32 = 0x0002;
const ROWS_NO_METADATA: i32 = 0x0004;

/// A row as its cells' serialized values; `None` is null.
pub(crate) type RawRow = Vec<Option<Vec<u8>>>;

/// One connection to Cassandra, in protocol v3.
#[derive(Debug)]
pub(crate) struct Client {
    stream: TcpStream,
}

impl Client {
    /// Connects and completes the STARTUP handshake.
    pub(crate) async fn connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut client = Self { stream };
        let mut startup = Vec::new();
        body::put_string_map(&mut startup, &[("CQL_VERSION", CQL_VERSION_V3)])?;
        let reply = client.request(opcode::STARTUP, startup).await?;
        match reply.opcode {
            opcode::READY => Ok(client),
            opcode::ERROR => Err(server_error("STARTUP", &reply.body)),
            other => Err(io::Error::other(format!("Cassandra answered STARTUP with opcode {other:#04x}"))),
        }
    }

    /// Runs one statement with positional values at consistency ONE and
    /// returns the rows of its first page (none for statements without rows).
    pub(crate) async fn query(&mut self, cql: &str, values: &[Option<&[u8]>]) -> io::Result<Vec<RawRow>> {
        let mut request = Vec::new();
        body::put_long_string(&mut request, cql)?;
        body::put_short(&mut request, CONSISTENCY_ONE);
        if values.is_empty() {
            request.push(0);
        } else {
            request.push(QUERY_FLAG_VALUES);
            body::put_short(&mut request, u16::try_from(values.len()).map_err(|_| body::invalid("too many values"))?);
            for value in values {
                body::put_bytes(&mut request, *value)?;
            }
        }
        let reply = self.request(opcode::QUERY, request).await?;
        match reply.opcode {
            opcode::RESULT => {
                let mut reader = Reader::new(&reply.body);
                if reader.int()? == RESULT_ROWS {
                    read_rows(&mut reader)
                } else {
                    Ok(Vec::new())
                }
            }
            opcode::ERROR => Err(server_error(cql, &reply.body)),
            other => Err(io::Error::other(format!("Cassandra answered `{cql}` with opcode {other:#04x}"))),
        }
    }

    /// Sends one request on stream 0 and waits for its answer, skipping
    /// events (which come on stream -1).
    async fn request(&mut self, opcode: u8, body: Vec<u8>) -> io::Result<Frame> {
        Frame { version: V3_REQUEST, flags: 0, stream: 0, opcode, body }.write(&mut self.stream).await?;
        loop {
            let frame = Frame::read(&mut self.stream)
                .await?
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "Cassandra closed the connection"))?;
            if frame.stream == 0 {
                return Ok(frame);
            }
        }
    }
}

/// Reads a Rows result after its kind: metadata, then the cells.
fn read_rows(reader: &mut Reader<'_>) -> io::Result<Vec<RawRow>> {
    let flags = reader.int()?;
    let columns = usize::try_from(reader.int()?).map_err(|_| body::invalid("a negative column count"))?;
    if flags & ROWS_HAS_MORE_PAGES != 0 {
        reader.bytes()?;
    }
    if flags & ROWS_NO_METADATA == 0 {
        let global = flags & ROWS_GLOBAL_TABLE_SPEC != 0;
        if global {
            reader.string()?;
            reader.string()?;
        }
        for _ in 0..columns {
            if !global {
                reader.string()?;
                reader.string()?;
            }
            reader.string()?;
            reader.skip_type()?;
        }
    }
    let rows = reader.int()?;
    (0..rows).map(|_| (0..columns).map(|_| Ok(reader.bytes()?.map(<[u8]>::to_vec))).collect()).collect()
}

/// An ERROR body (code, message) as an I/O error naming the request.
fn server_error(request: &str, body: &[u8]) -> io::Error {
    let mut reader = Reader::new(body);
    match (reader.int(), reader.string()) {
        (Ok(code), Ok(message)) => {
            io::Error::other(format!("Cassandra refused `{request}` (error {code:#06x}): {message}"))
        }
        _ => io::Error::other(format!("Cassandra refused `{request}` with an unreadable error")),
    }
}
