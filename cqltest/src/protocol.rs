//! The parts of the CQL native protocol (v3 and v4) this crate reads and
//! writes: frames and the notation of their bodies.

pub(crate) mod body;
mod frame;

pub(crate) use frame::{opcode, Frame, FLAG_TRACING, V3_REQUEST, V3_RESPONSE, V4_REQUEST, V4_RESPONSE};

/// The CQL version Cassandra 2.1 accepts in STARTUP (drivers for v4 send 4.0.0
/// or later, which 2.1 refuses).
pub(crate) const CQL_VERSION_V3: &str = "3.2.0";

/// RESULT kind: rows.
pub(crate) const RESULT_ROWS: i32 = 0x0002;
/// RESULT kind: a prepared statement.
pub(crate) const RESULT_PREPARED: i32 = 0x0004;
