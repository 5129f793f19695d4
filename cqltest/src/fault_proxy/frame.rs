//! One CQL native-protocol v4 frame, as the fault proxy sees it: the 9-byte
//! header read, the body carried along unread.
//!
//! Header: version (0x04 request, 0x84 response), flags, stream (i16),
//! opcode, body length (i32). Compression applies to bodies only, so the
//! header is readable whatever the connection negotiated.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Header length in protocol versions 3 and 4.
pub(super) const HEADER_LEN: usize = 9;
/// The protocol's own limit on a body (256 MB); anything longer is garbage.
const MAX_BODY_LEN: usize = 256 * 1024 * 1024;

/// Request version byte of protocol v4.
pub(super) const V4_REQUEST: u8 = 0x04;
/// Response version byte of protocol v4.
pub(super) const V4_RESPONSE: u8 = 0x84;

/// Opcode: ERROR (a response).
pub(super) const OPCODE_ERROR: u8 = 0x00;
/// Opcode: BATCH (a request).
pub(super) const OPCODE_BATCH: u8 = 0x0D;
/// ERROR code: server error (the server failed; the request may be retried).
const SERVER_ERROR: i32 = 0x0000;

/// A whole frame: its header's fields and the body's bytes, unread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Frame {
    pub(super) version: u8,
    pub(super) flags: u8,
    pub(super) stream: i16,
    pub(super) opcode: u8,
    pub(super) body: Vec<u8>,
}

impl Frame {
    /// Reads the next frame; `None` when the peer closed the connection
    /// between two frames.
    pub(super) async fn read(reader: &mut (impl AsyncRead + Unpin)) -> io::Result<Option<Self>> {
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

    /// Writes the frame, header and body, in one write.
    pub(super) async fn write(&self, writer: &mut (impl AsyncWrite + Unpin)) -> io::Result<()> {
        writer.write_all(&self.to_bytes()).await
    }

    /// The frame on the wire: header (with the body's length) then body.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER_LEN + self.body.len());
        bytes.extend_from_slice(&[self.version, self.flags]);
        bytes.extend_from_slice(&self.stream.to_be_bytes());
        bytes.push(self.opcode);
        let len = u32::try_from(self.body.len()).unwrap_or(u32::MAX);
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes.extend_from_slice(&self.body);
        bytes
    }

    /// A v4 ERROR response (server error, uncompressed) on `stream`.
    pub(super) fn server_error(stream: i16, message: &str) -> Self {
        let message = &message.as_bytes()[..message.len().min(usize::from(u16::MAX))];
        let mut body = SERVER_ERROR.to_be_bytes().to_vec();
        body.extend_from_slice(&u16::try_from(message.len()).unwrap_or(u16::MAX).to_be_bytes());
        body.extend_from_slice(message);
        Self { version: V4_RESPONSE, flags: 0, stream, opcode: OPCODE_ERROR, body }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_frame_survives_a_round_trip() {
        let frame = Frame { version: V4_REQUEST, flags: 0, stream: -2, opcode: 0x07, body: vec![1, 2, 3] };
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

    #[test]
    fn a_server_error_carries_its_code_and_message() {
        let frame = Frame::server_error(7, "no");
        assert_eq!(frame.to_bytes(), [0x84, 0, 0, 7, 0x00, 0, 0, 0, 8, 0, 0, 0, 0, 0, 2, b'n', b'o']);
    }
}
