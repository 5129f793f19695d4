//! The Redis admission gate shared by the services: the key layout, the Lua
//! scripts in `lua/` (each opening with its KEYS/ARGV contract) and their
//! typed results. The ingress admits through it; the processor gives units
//! back through it when an admitted order fails or is cancelled, and both
//! apply admin updates through it. Tested directly against a
//! real Redis (`tests/lua.rs`).

mod admin_requests;
mod gate;
mod holders;
mod keys;
mod ledger;
mod outbox;
mod read_side;

pub use admin_requests::{AdminRequest, AdminRetryKey};
pub use gate::{
    Admission, Gate, GateVoucher, Rejection, RestoreAction, RestoreMode, RestoreOutcome, Settlement, UpdateResult,
    DEFAULT_OUTBOX_LIMIT,
};
pub use holders::Holders;
pub use keys::{outbox_key, pending_order_key, RetryKey, VoucherKeys, FENCED, MAX_IDEMPOTENCY_KEY_LEN};
pub use ledger::{Ledger, VoucherAdmission};
pub use outbox::{Outbox, OutboxEntry};
pub use read_side::{AdmissionSnapshot, SaleState};
