//! The Redis admission gate: key layout, the Lua scripts, and their typed
//! results. Tested directly against a real Redis (`tests/lua.rs`).

mod gate;
mod keys;

pub use gate::{Admission, Gate, Rejection};
pub use keys::VoucherKeys;
