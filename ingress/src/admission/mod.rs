//! The Redis admission gate: key layout, the Lua scripts, and their typed
//! results. Tested directly against a real Redis (`tests/lua.rs`).

mod gate;
mod keys;
mod sold_out;

pub use gate::{Admission, Gate, Rejection};
pub use keys::{RetryKey, VoucherKeys, MAX_IDEMPOTENCY_KEY_LEN};
pub use sold_out::{Holders, SoldOutMemo};
