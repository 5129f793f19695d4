//! The Redis admission gate shared by the services: the key layout, the Lua
//! scripts in `lua/` (each opening with its KEYS/ARGV contract) and their
//! typed results, on a single Redis or a Redis Cluster. The ingress admits
//! through it; the processor gives units back through it when an admitted
//! order fails or is cancelled, and both apply admin updates through it. A
//! hot voucher may be split into buckets on different slots
//! ([`Layout`]), which borrow units from each other by exactly-once
//! transfers ([`Transfer`]). Tested directly against a real Redis and a real
//! local Redis Cluster (`tests/`).

mod admin_requests;
mod admission;
mod borrowers;
mod challenge;
mod connection;
mod draw;
mod draw_history;
mod draw_restore;
mod gate;
mod holders;
mod keys;
mod layout;
mod ledger;
mod outbox;
mod read_side;
mod replica_acks;
mod restore;
mod room;
mod room_history;
mod room_rebuild;
mod room_restore;
mod room_revealed;
mod seed_commitments;
mod timeline;
mod transfers;
mod vouchers;
mod webhooks;

pub use admin_requests::{AdminRequest, AdminRetryKey};
pub use admission::{Pace, Presented, Proof};
pub use challenge::ChallengeRate;
pub use connection::{ClusterHandle, GateConnection};
pub use draw::{Entered, Entry, EntryState};
pub use draw_history::DrawHistory;
pub use draw_restore::DrawRestored;
pub use gate::{
    Admission, Gate, GateVoucher, Rejection, RestoreAction, RestoreMode, RestoreOutcome, Settlement, UpdateResult,
    DEFAULT_OUTBOX_LIMIT,
};
pub use holders::Holders;
pub use keys::{outbox_key, pending_order_key, RetryKey, VoucherKeys, FENCED, MAX_IDEMPOTENCY_KEY_LEN};
pub use layout::{home_bucket, share, slot, Layout};
pub use ledger::{Ledger, VoucherAdmission};
pub use outbox::{Outbox, OutboxEntry, OutboxHints, FULL_READ_EVERY};
pub use read_side::{AdmissionSnapshot, SaleState};
pub use room::{Joined, Place, PlaceState, Room, RoomState, RoomSummary, MOST_PLACES_PER_ADVANCE};
pub use room_history::RoomHistory;
pub use room_restore::{RoomRestored, StartedOver, MOST_PLACES_PER_RESTORE};
pub use seed_commitments::SeedCommitments;
pub use timeline::{DrawTimeline, QueueTimeline, Timeline};
pub use transfers::{Transfer, TransferDecision};
pub use webhooks::WEBHOOK_MEMORY;
