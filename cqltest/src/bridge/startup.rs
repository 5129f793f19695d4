//! STARTUP: the CQL version, and no compression.
//!
//! A v4 driver announces CQL_VERSION 4.0.0 (or later), which Cassandra 2.1
//! refuses; 3.2.0 is what 2.1 speaks, so the option is rewritten and the
//! string map re-encoded. Compressed frames could not be looked into, so a
//! STARTUP asking for compression is answered with an error instead of being
//! negotiated (the scylla driver does not compress unless told to).

use std::io;

use crate::protocol::body::{self, Reader};
use crate::protocol::CQL_VERSION_V3;

/// What to do with a STARTUP.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Startup {
    /// Send this body to Cassandra instead.
    Forward(Vec<u8>),
    /// Refuse the connection with this message.
    Refuse(String),
}

/// Rewrites a STARTUP body (a [string map] of options).
pub(super) fn rewrite(body: &[u8]) -> io::Result<Startup> {
    let options = Reader::new(body).string_map()?;
    if let Some((_, algorithm)) = options.iter().find(|(key, _)| key.eq_ignore_ascii_case("COMPRESSION")) {
        return Ok(Startup::Refuse(format!(
            "the CQL bridge in front of Cassandra 2.1 does not support compression ({algorithm}); \
             open the session without compression"
        )));
    }
    let options: Vec<(&str, &str)> = options
        .into_iter()
        .map(|(key, value)| if key == "CQL_VERSION" { (key, CQL_VERSION_V3) } else { (key, value) })
        .collect();
    let mut rewritten = Vec::with_capacity(body.len());
    body::put_string_map(&mut rewritten, &options)?;
    Ok(Startup::Forward(rewritten))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(options: &[(&str, &str)]) -> Vec<u8> {
        let mut body = Vec::new();
        body::put_string_map(&mut body, options).expect("a small map");
        body
    }

    #[test]
    fn the_cql_version_becomes_3_2_0_and_the_rest_stays() {
        let startup = encode(&[("CQL_VERSION", "4.0.0"), ("DRIVER_NAME", "ScyllaDB Rust Driver")]);
        let expected = encode(&[("CQL_VERSION", "3.2.0"), ("DRIVER_NAME", "ScyllaDB Rust Driver")]);
        assert_eq!(rewrite(&startup).expect("a valid body"), Startup::Forward(expected));
    }

    #[test]
    fn compression_is_refused() {
        let startup = encode(&[("CQL_VERSION", "4.0.0"), ("COMPRESSION", "lz4")]);
        assert!(matches!(rewrite(&startup), Ok(Startup::Refuse(message)) if message.contains("lz4")));
    }
}
