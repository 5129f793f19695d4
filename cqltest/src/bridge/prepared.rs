//! PREPARED results: the partition-key index list that v4 added.
//!
//! In v4 the metadata of a prepared statement's bound variables carries,
//! right after the column count, an [int] count of partition-key indexes and
//! the indexes as [short]s; v3 has nothing there. The bridge inserts an empty
//! list (count 0): the driver then routes without token awareness, which
//! changes nothing with a single node.

use std::io;

use crate::protocol::body::Reader;
use crate::protocol::{FLAG_TRACING, RESULT_PREPARED};

/// Length of the tracing session id that starts a traced response body.
const TRACING_ID_LEN: usize = 16;

/// Adds the empty partition-key index list to a RESULT body if it holds a
/// prepared statement; leaves every other result alone.
pub(super) fn rewrite(flags: u8, body: &mut Vec<u8>) -> io::Result<()> {
    let start = if flags & FLAG_TRACING != 0 { TRACING_ID_LEN } else { 0 };
    let mut reader = Reader::new(body.get(start..).unwrap_or_default());
    if reader.int()? != RESULT_PREPARED {
        return Ok(());
    }
    // <id: short bytes><metadata: flags, columns_count, ...>
    let id_len = reader.short()?;
    reader.take(usize::from(id_len))?;
    reader.int()?;
    reader.int()?;
    let at = start + reader.position();
    body.splice(at..at, 0i32.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::body::{put_int, put_short, put_string};

    /// A v3 PREPARED body for one bound text column, global table spec.
    fn prepared_v3() -> Vec<u8> {
        let mut body = Vec::new();
        put_int(&mut body, RESULT_PREPARED);
        put_short(&mut body, 2);
        body.extend_from_slice(&[0xab, 0xcd]);
        put_int(&mut body, 0x0001);
        put_int(&mut body, 1);
        body.extend_from_slice(b"MARK");
        body
    }

    #[test]
    fn an_empty_key_index_list_follows_the_column_count() {
        let mut body = prepared_v3();
        rewrite(0, &mut body).expect("a valid body");
        let mut expected = prepared_v3();
        // kind (4), id length (2), id (2), flags (4), columns_count (4)
        expected.splice(16..16, [0, 0, 0, 0]);
        assert_eq!(body, expected);
        assert_eq!(&body[20..24], b"MARK");
    }

    #[test]
    fn a_traced_result_is_rewritten_after_its_session_id() {
        let mut body = vec![7u8; 16];
        body.extend(prepared_v3());
        rewrite(FLAG_TRACING, &mut body).expect("a valid body");
        assert_eq!(&body[16 + 16..16 + 20], &[0, 0, 0, 0]);
        assert_eq!(&body[..16], &[7u8; 16]);
    }

    #[test]
    fn other_results_are_left_alone() {
        let mut body = Vec::new();
        put_int(&mut body, 0x0003);
        put_string(&mut body, "ks").expect("short string");
        let before = body.clone();
        rewrite(0, &mut body).expect("a valid body");
        assert_eq!(body, before);
    }
}
