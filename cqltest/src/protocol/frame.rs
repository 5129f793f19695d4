//! One CQL native-protocol frame: the 9-byte header and its body.
//!
//! Versions 3 and 4 share the header layout (version, flags, stream as i16,
//! opcode, body length as i32), so the bridge can read every frame in either
//! direction the same way and only look inside the bodies it has to change.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Header length in protocol versions 3 and 4.
pub(crate) const HEADER_LEN: usize = 9;
/// The protocol's own limit on a body (256 MB); anything longer is garbage.
const MAX_BODY_LEN: usize = 256 * 1024 * 1024;

/// Request version byte of protocol v3 (responses set the high bit).
pub(crate) const V3_REQUEST: u8 = 0x03;
/// Request version byte of protocol v4.
pub(crate) const V4_REQUEST: u8 = 0x04;
/// Response version byte of protocol v3.
pub(crate) const V3_RESPONSE: u8 = 0x83;
/// Response version byte of protocol v4.
pub(crate) const V4_RESPONSE: u8 = 0x84;

/// Header flag: the body is compressed.
pub(crate) const FLAG_COMPRESSION: u8 = 0x01;
/// Header flag: tracing; a response body then starts with a 16-byte session id.
pub(crate) const FLAG_TRACING: u8 = 0x02;

/// The opcodes the bridge and the client look at.
pub(crate) mod opcode {
    pub(crate) const ERROR: u8 = 0x00;
    pub(crate) const STARTUP: u8 = 0x01;
    pub(crate) const READY: u8 = 0x02;
    pub(crate) const QUERY: u8 = 0x07;
    pub(crate) const RESULT: u8 = 0x08;
    pub(crate) const PREPARE: u8 = 0x09;
    pub(crate) const BATCH: u8 = 0x0D;
}

/// A whole frame, read into memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) version: u8,
    pub(crate) flags: u8,
    pub(crate) stream: i16,
    pub(crate) opcode: u8,
    pub(crate) body: Vec<u8>,
}

impl Frame {
    /// Reads the next frame; `None` when the peer closed the connection
    /// between two frames.
    pub(crate) async fn read(reader: &mut (impl AsyncRead + Unpin)) -> io::Result<Option<Self>> {
        let mut header = [0u8; HEADER_LEN];
        let first = reader.read(&mut header).await?;
        if first == 0 {
            return Ok(None);
        }
        reader.read_exact(&mut header[first..]).await?;
        let [version, flags, stream_hi, stream_lo, opcode, len @ ..] = header;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_BODY_LEN {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a CQL frame body of {len} bytes")));
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).await?;
        Ok(Some(Self { version, flags, stream: i16::from_be_bytes([stream_hi, stream_lo]), opcode, body }))
    }

    /// Writes the frame with its header in one write.
    pub(crate) async fn write(&self, writer: &mut (impl AsyncWrite + Unpin)) -> io::Result<()> {
        writer.write_all(&self.to_bytes()).await
    }

    /// The frame on the wire: header (with the body's length) then body.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER_LEN + self.body.len());
        bytes.extend_from_slice(&[self.version, self.flags]);
        bytes.extend_from_slice(&self.stream.to_be_bytes());
        bytes.push(self.opcode);
        let len = u32::try_from(self.body.len()).unwrap_or(u32::MAX);
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes.extend_from_slice(&self.body);
        bytes
    }

    /// Whether the body is compressed (and so cannot be looked into).
    pub(crate) fn is_compressed(&self) -> bool {
        self.flags & FLAG_COMPRESSION != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_frame_survives_a_round_trip() {
        let frame = Frame { version: V4_REQUEST, flags: 0, stream: -2, opcode: opcode::QUERY, body: vec![1, 2, 3] };
        let bytes = frame.to_bytes();
        assert_eq!(&bytes[..HEADER_LEN], &[0x04, 0, 0xff, 0xfe, 0x07, 0, 0, 0, 3]);
        let mut reader = &bytes[..];
        assert_eq!(Frame::read(&mut reader).await.ok().flatten(), Some(frame));
        assert_eq!(Frame::read(&mut reader).await.ok().flatten(), None);
    }

    #[tokio::test]
    async fn a_truncated_frame_is_an_error() {
        let mut reader = &[0x04u8, 0, 0, 1, 0x07, 0, 0, 0, 3, 1][..];
        assert!(Frame::read(&mut reader).await.is_err());
    }
}
