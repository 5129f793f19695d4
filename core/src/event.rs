//! The event schema: what the log says happened.
//!
//! Every record on a seckill topic is one JSON [`Envelope`]: a `type` tag, the
//! schema version, a unique event id, when it was emitted, and the event's own
//! fields, flat, so `kcat` users and analysts read it without a decoder.
//!
//! ```json
//! {"schema":1,"event_id":"0192…","emitted_at":"2026-11-21T10:00:00.123Z",
//!  "type":"OrderAccepted","order_id":"0192…","voucher_id":"0192…",
//!  "user_id":"alice","quantity":1,"accepted_at":"2026-11-21T10:00:00.122Z"}
//! ```
//!
//! Consumers call [`Envelope::decode`], which also checks ranges, so a record
//! that parses but makes no sense is dead-lettered instead of applied.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::challenge;
use crate::draw::{self, DrawSettings};
use crate::ids::{OrderId, UserId, VoucherId};
use crate::money::{Currency, MAX_PRICE};
use crate::queue::{self, QueueSettings};

/// The schema version this build writes and the newest it reads.
pub const SCHEMA_VERSION: u16 = 1;
/// Upper bound on a voucher's stock; keeps arithmetic far from overflow.
pub const MAX_STOCK: u64 = 1_000_000_000;
/// Upper bound on the units in one order and on a per-user limit.
pub const MAX_QUANTITY: u32 = 10_000;
/// Largest record a consumer decodes; anything bigger is dead-lettered unread.
pub const MAX_EVENT_BYTES: usize = 64 * 1024;
/// Longest time a voucher may hold an unconfirmed order (seven days).
pub const MAX_HOLD_SECONDS: u32 = 7 * 24 * 3600;
/// Most buckets a voucher's stock may be split into (`shards`).
pub const MAX_SHARDS: u32 = 64;
/// Longest voucher title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest voucher description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;
/// Longest provider id (payment, refund) a record may carry.
pub const MAX_PROVIDER_ID_BYTES: usize = 255;

/// One record on a topic: metadata plus the event itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Envelope {
    /// Lets readers refuse records from a newer, incompatible writer.
    pub schema: u16,
    /// Unique per emitted event; a re-emitted outcome keeps its first id so
    /// duplicates on the topic are recognisable as such.
    pub event_id: Uuid,
    /// When the writer produced the record.
    pub emitted_at: DateTime<Utc>,
    /// The event, tagged by `type`.
    #[serde(flatten)]
    pub event: Event,
}

/// Everything that can happen to a voucher or an order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type")]
pub enum Event {
    /// An admin opened a flash sale; carries the persistent stock.
    VoucherCreated(VoucherCreated),
    /// An admin paused or resumed a sale, moved its end or added stock.
    VoucherUpdated(VoucherUpdated),
    /// Redis admitted an order; the processor has yet to decide it.
    OrderAccepted(OrderAccepted),
    /// The owner, an admin or the expiry sweeper asks to cancel an order.
    CancelRequested(OrderRequest),
    /// The owner claims a free order (price 0), so it no longer expires.
    /// Priced orders are paid instead (`PaymentReceived`).
    ConfirmRequested(OrderRequest),
    /// The payment provider reported a completed payment for an order: a
    /// verified webhook, or found by asking the provider before the order
    /// was closed as unpaid. The processor decides whether it pays the
    /// order or is refunded.
    PaymentReceived(PaymentReceived),
    /// The processor took the order's units from the persistent stock.
    OrderCreated(OrderCreated),
    /// The processor refused the order; the units were never taken.
    OrderFailed(OrderFailed),
    /// A created order was paid in time (or, free, claimed); it keeps its
    /// units for good. Logs written before payments call it
    /// `OrderConfirmed`, read as this.
    #[serde(alias = "OrderConfirmed")]
    OrderPaid(OrderPaid),
    /// A created order gave its units back to the persistent stock.
    OrderCancelled(OrderCancelled),
    /// A payment lost (late, duplicate, wrong amount) or an admin refunded
    /// a paid order: the money goes back, exactly once per payment.
    RefundRequested(RefundRequested),
    /// The provider acknowledged a refund.
    PaymentRefunded(PaymentRefunded),
    /// The waiting room of a queue-mode sale committed to its shuffle's
    /// secret seed, before its first join.
    QueueSeedCommitted(QueueSeedCommitted),
    /// A user took a place in a waiting room.
    QueueJoined(QueueJoined),
    /// The sale began: the seed is public, the pre-queue's order fixed.
    QueueSeedRevealed(QueueSeedRevealed),
    /// A place's turn came: its holder got an entry token.
    QueueEntryIssued(QueueEntryIssued),
    /// A place's turn came while its holder was gone: skipped.
    QueuePlaceExpired(QueuePlaceExpired),
    /// An entry token admitted an order (written with its `OrderAccepted`,
    /// in the same admission).
    QueueEntryUsed(QueueEntryUsed),
    /// A draw sale committed to its secret seed, before its first entry.
    DrawSeedCommitted(DrawSeedCommitted),
    /// A user entered a draw.
    DrawEntered(DrawEntered),
    /// Entries closed at `draw_at`: the seed is public, the list fixed.
    DrawSeedRevealed(DrawSeedRevealed),
    /// A chunk of the draw's full ranking.
    DrawRanked(DrawRanked),
    /// Ranks 1..W won a purchase window.
    DrawWinnersSelected(DrawWinnersSelected),
    /// A unit came free (a win lapsed, an order ended): the next rank won.
    DrawWinnerPromoted(DrawWinnerPromoted),
    /// A win admitted an order (written with its `OrderAccepted`).
    DrawWinUsed(DrawWinUsed),
    /// Ordering was impossible for a while (the sale paused, the log down,
    /// Redis out of reach, a draw's winners still being granted): every
    /// entry token or purchase window open then runs that much longer.
    WindowsExtended(WindowsExtended),
    /// The platform opened the provider's hosted checkout for a created
    /// order: the session the buyer pays on, kept in the log so the order
    /// closes it when it closes, and is reconciled by its id, not by the
    /// provider's (eventually consistent) search.
    CheckoutOpened(CheckoutOpened),
}

/// A checkout session opened for an order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckoutOpened {
    #[schemars(with = "uuid::Uuid")]
    pub order_id: OrderId,
    /// The partition key: the session follows its order.
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    /// The provider's id (`cs_…`).
    pub session_id: String,
    /// When the platform opened it.
    pub opened_at: DateTime<Utc>,
    /// When the provider expires it by itself (at least 30 minutes after
    /// it opened, Stripe's rule: the platform expires it sooner at the
    /// order's `pay_by`).
    pub expires_at: DateTime<Utc>,
}

/// Most checkout sessions kept per order: one per day of the longest
/// payment window (a session lives at most 24 hours), with room to spare;
/// a later one is not recorded (and closes with the provider's own expiry).
pub const MAX_CHECKOUTS: usize = 8;

/// A new flash-sale voucher.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VoucherCreated {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    /// Units for sale.
    pub stock: u64,
    /// Most units one user may hold.
    pub per_user_limit: u32,
    pub begins_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    /// Seconds a created order may stay unpaid before it is cancelled as
    /// `expired` (its `pay_by`); 0 (the default) keeps orders without
    /// payment. Written `payment_seconds`; records from before payments
    /// say `hold_seconds`.
    #[serde(default, rename = "payment_seconds", alias = "hold_seconds")]
    pub hold_seconds: u32,
    /// Buckets the admission gate splits the stock into (1 to
    /// [`MAX_SHARDS`]), each on its own Redis Cluster slot, so one hot
    /// voucher is admitted by several Redis cores. Only the gate reads it:
    /// decisions are per voucher whatever it is. Absent (records written
    /// before it existed) means 1, and 1 is not written.
    #[serde(default = "one_shard", skip_serializing_if = "is_one_shard")]
    #[schemars(extend("default" = 1))]
    pub shards: u32,
    /// What is sold, shown on the sale page (1 to [`MAX_TITLE_CHARS`]
    /// characters); absent, pages show the voucher id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Price of one unit in the currency's minor unit; 0 (the default) is
    /// free: orders are claimed (`confirm`), not paid.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub price: u64,
    /// The price's currency; present exactly when `price` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub currency: Option<Currency>,
    /// Present for a queue-mode sale (`"mode": "queue"` in the API):
    /// orders need an entry token from its waiting room. Absent, the sale
    /// is first come, first served.
    /// Boxed: most sales have none, and every event would otherwise grow
    /// by its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<Box<QueueSettings>>,
    /// Present for a draw sale (`"mode": "draw"` in the API): users enter,
    /// a draw at `draw_at` ranks them, and only winners may order, each
    /// within their purchase window ([`crate::draw`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<DrawSettings>,
    /// Leading zero bits of the proof of work each order, queue join or
    /// draw entry needs ([`crate::challenge`]); 0 (the default, not
    /// written) asks for none.
    #[serde(default, skip_serializing_if = "is_zero_bits")]
    pub challenge_bits: u32,
}

fn is_zero_bits(bits: &u32) -> bool {
    *bits == 0
}

fn one_shard() -> u32 {
    1
}

fn is_one_shard(shards: &u32) -> bool {
    *shards == 1
}

/// A change to a running sale. Each field left out stays as it was.
///
/// Applied once per record: the envelope's `event_id` identifies the update
/// (added stock is added once however often the record is delivered), and
/// as a UUIDv7 it also orders updates, so an older update delivered late
/// never undoes a newer pause, resume or end time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VoucherUpdated {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<DateTime<Utc>>,
    /// Units added to the stock (and to what is left).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub add_stock: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// An order admitted by the Redis gate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrderAccepted {
    #[schemars(with = "uuid::Uuid")]
    pub order_id: OrderId,
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    #[schemars(with = "String")]
    pub user_id: UserId,
    pub quantity: u32,
    pub accepted_at: DateTime<Utc>,
    /// What the order owes: the voucher's price × quantity, fixed by the
    /// admission script from the price Redis holds. 0 for free vouchers
    /// (and not written).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub amount: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub currency: Option<Currency>,
    /// The `Idempotency-Key` the order was requested with (1 to 128 visible
    /// ASCII characters), absent when it had none, and in records written
    /// before it was logged. A retry Redis admitted a second time (a
    /// failover lost the first admission) carries the same key, and the
    /// processor fails it as a duplicate of the first order
    /// ([`FailReason::DuplicateRequest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// The longest `Idempotency-Key`, in bytes (visible ASCII).
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 128;

/// An order that now holds its units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrderCreated {
    /// The admitted order, repeated so a reader of this topic alone can
    /// build the full order row.
    #[serde(flatten)]
    pub order: OrderAccepted,
    pub decided_at: DateTime<Utc>,
    /// Persistent stock left after this order.
    pub remaining: u64,
    /// When the order expires unless paid (whole seconds; see
    /// `decision::StockLevel::hold_deadline`); absent when the voucher
    /// holds orders without payment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pay_by: Option<DateTime<Utc>>,
}

/// An order the processor refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrderFailed {
    #[serde(flatten)]
    pub order: OrderAccepted,
    pub decided_at: DateTime<Utc>,
    pub reason: FailReason,
}

/// A request about one order, decided by the processor in log order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrderRequest {
    #[schemars(with = "uuid::Uuid")]
    pub order_id: OrderId,
    /// The partition key: the request follows the order on its partition.
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    /// Why a cancellation was asked for (absent for a confirmation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CancelReason>,
    pub requested_at: DateTime<Utc>,
    /// For an expiry asked for by the processor's sweeper with a payment
    /// provider: the checkout sessions it found closed and unpaid at the
    /// provider first. The expiry is decided only if they are every session
    /// the log holds for the order by then: the sweeper reads them from a
    /// store that can be behind the log, and a session it did not know of
    /// may have been paid in time. Absent: decided on the log's word alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_checkouts: Option<Vec<String>>,
}

/// A created order paid in time, or claimed when free.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrderPaid {
    #[serde(flatten)]
    pub order: OrderAccepted,
    /// When it was decided paid (`confirmed_at` in older logs).
    #[serde(alias = "confirmed_at")]
    pub paid_at: DateTime<Utc>,
    /// The provider's payment that paid it; absent for a free claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_id: Option<String>,
}

/// A payment the provider reports completed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PaymentReceived {
    #[schemars(with = "uuid::Uuid")]
    pub order_id: OrderId,
    /// The partition key: the payment follows its order.
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    /// The provider's id (`pi_…`): one payment, however often reported.
    pub payment_id: String,
    pub amount: u64,
    #[schemars(with = "String")]
    pub currency: Currency,
    /// When the provider completed it; the payment deadline is judged by
    /// this, not by when the processor reads it.
    pub paid_at: DateTime<Utc>,
    /// How the platform learnt of it.
    pub source: PaymentSource,
}

/// How a payment reached the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PaymentSource {
    /// The provider's signed callback.
    Webhook,
    /// Found by asking the provider before closing the order as unpaid.
    Reconciliation,
}

/// Money to give back for one payment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefundRequested {
    #[schemars(with = "uuid::Uuid")]
    pub order_id: OrderId,
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    pub payment_id: String,
    pub amount: u64,
    #[schemars(with = "String")]
    pub currency: Currency,
    pub reason: RefundReason,
    pub requested_at: DateTime<Utc>,
}

/// Why a payment is refunded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefundReason {
    /// Completed at or after the order's `pay_by`, or for an order no
    /// longer payable (cancelled, failed).
    Late,
    /// A second payment for an order already paid.
    Duplicate,
    /// An admin refunded the paid order.
    Admin,
    /// The amount or currency is not what the order owes.
    AmountMismatch,
}

impl RefundReason {
    /// The snake_case name used in events and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Late => "late",
            Self::Duplicate => "duplicate",
            Self::Admin => "admin",
            Self::AmountMismatch => "amount_mismatch",
        }
    }
}

/// A refund the provider acknowledged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PaymentRefunded {
    #[schemars(with = "uuid::Uuid")]
    pub order_id: OrderId,
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    pub payment_id: String,
    /// The provider's refund id (`re_…`).
    pub refund_id: String,
    pub amount: u64,
    #[schemars(with = "String")]
    pub currency: Currency,
    pub refunded_at: DateTime<Utc>,
}

/// A created order whose units went back to the stock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrderCancelled {
    #[serde(flatten)]
    pub order: OrderAccepted,
    pub cancelled_at: DateTime<Utc>,
    pub reason: CancelReason,
    /// Persistent stock left after the units came back.
    pub remaining: u64,
}

/// The SHA-256 of a waiting room's secret seed (`seckill_core::queue`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueSeedCommitted {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    /// 64 lowercase hexadecimal digits.
    pub seed_hash: String,
    /// The seed sealed under the operator's key (`seckill_core::sealed_seed`,
    /// 64 hex digits), when the ingress has one: what rebuilds a room Redis
    /// lost before its reveal with the same seed, so every pre-queue place
    /// comes back where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_seed: Option<String>,
}

/// A place taken in a waiting room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueJoined {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    #[schemars(with = "String")]
    pub user_id: UserId,
    pub joined_at: DateTime<Utc>,
    /// Joined before the sale began (by the admission clock): placed by
    /// the shuffle. Otherwise placed by `seq`.
    pub pre_queue: bool,
    /// The join's number among those after the start (1, 2, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The user's how-many-th place in this room (a place that expired may
    /// be taken again, at the back).
    pub attempt: u32,
}

/// The seed whose hash was committed, logged when the sale began.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueSeedRevealed {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    pub seed: String,
    /// Places taken before the start.
    pub pre_queued: u64,
    /// The beacon round whose randomness is `seed`, for a room whose
    /// settings planned one (`seckill_core::queue`); absent, `seed` is the
    /// operator's committed seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<crate::beacon::BeaconRound>,
    /// With a beacon: the pre-queue's hash the shuffle is keyed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries_hash: Option<String>,
}

/// An entry token issued to the holder of `place`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueEntryIssued {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    #[schemars(with = "String")]
    pub user_id: UserId,
    /// The place served (1 is the first place of the room).
    pub place: u64,
    /// The entry's number (1, 2, … in issue order): the token's id.
    pub entry: u64,
    /// Until when the token admits an order (the admission clock).
    pub expires_at: DateTime<Utc>,
}

/// A place skipped because its holder had stopped watching it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueuePlaceExpired {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    #[schemars(with = "String")]
    pub user_id: UserId,
    pub place: u64,
}

/// An entry token spent on an order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueEntryUsed {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    #[schemars(with = "String")]
    pub user_id: UserId,
    pub entry: u64,
    #[schemars(with = "uuid::Uuid")]
    pub order_id: OrderId,
}

/// The SHA-256 of a draw's secret seed (`seckill_core::draw`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrawSeedCommitted {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    /// 64 lowercase hexadecimal digits.
    pub seed_hash: String,
    /// The seed sealed under the operator's key (`seckill_core::sealed_seed`,
    /// 64 hex digits), when the ingress has one: what rebuilds a draw Redis
    /// lost before its reveal with the same seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_seed: Option<String>,
}

/// An entry in a draw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrawEntered {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    #[schemars(with = "String")]
    pub user_id: UserId,
    pub entered_at: DateTime<Utc>,
    /// The entry's number (1, 2, … in the order the gate took them): the
    /// order of the entry list the draw hashes.
    pub seq: u64,
}

/// The draw's seed and the list it ranks, logged when entries closed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrawSeedRevealed {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    pub seed: String,
    /// Entries taken: the entries with `seq` 1..=entries are the list.
    pub entries: u64,
    /// The list's hash (`seckill_core::draw`, step 1): 40 hex digits, or
    /// empty when nobody entered.
    pub entries_hash: String,
    /// The beacon round whose randomness is `seed`, for a sale whose
    /// settings planned one (`seckill_core::beacon`); absent, `seed` is the
    /// operator's committed seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<crate::beacon::BeaconRound>,
}

/// Users ranked `first_rank`, `first_rank + 1`, … by the draw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrawRanked {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    /// This record's number, 0 to `chunks - 1`.
    pub chunk: u64,
    pub chunks: u64,
    pub first_rank: u64,
    #[schemars(with = "Vec<String>")]
    pub users: Vec<UserId>,
}

/// Ranks 1..=winners won; each may order once until `purchase_until`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrawWinnersSelected {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    pub winners: u64,
    pub purchase_until: DateTime<Utc>,
}

/// The next rank won, as a unit came free.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrawWinnerPromoted {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    #[schemars(with = "String")]
    pub user_id: UserId,
    pub rank: u64,
    pub purchase_until: DateTime<Utc>,
}

/// A win spent on an order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrawWinUsed {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    #[schemars(with = "String")]
    pub user_id: UserId,
    pub rank: u64,
    #[schemars(with = "uuid::Uuid")]
    pub order_id: OrderId,
}

/// A stall of a waiting room or a draw: from `from` to `until` (the Redis
/// clock) nobody could order, so every entry token or purchase window still
/// open at `from` ends `until - from` later than it would have.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowsExtended {
    #[schemars(with = "uuid::Uuid")]
    pub voucher_id: VoucherId,
    pub from: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub reason: StallReason,
}

/// Why nobody could order (`lua/queue_advance.lua`, `lua/draw_advance.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StallReason {
    /// An admin paused the sale.
    Paused,
    /// The outbox was full (the log was down): admission refused orders.
    Backlog,
    /// No ingress reached Redis (or none ran) for over five seconds.
    Outage,
    /// A draw's winners were more than one step's worth: no window ran until
    /// the last winner could order.
    Granting,
}

/// Why an order was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// Its owner or an admin asked.
    Requested,
    /// It was not paid within the voucher's `payment_seconds`.
    Expired,
    /// An admin refunded the paid order (its status reads `REFUNDED`).
    Refunded,
}

impl CancelReason {
    /// The snake_case name used in events, API bodies and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::Expired => "expired",
            Self::Refunded => "refunded",
        }
    }
}

/// Why the processor refused an order Redis had admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailReason {
    /// The persistent stock had fewer units than the order asked for
    /// (Redis and the store disagreed, e.g. after a Redis data loss).
    SoldOut,
    /// No `VoucherCreated` precedes the order on its partition.
    UnknownVoucher,
    /// The user's created orders already hold so many units that this one
    /// would pass the per-user limit (Redis and the store disagreed, e.g.
    /// after Redis lost its last second of writes).
    LimitExceeded,
    /// An earlier order of the same user and voucher was requested under
    /// the same `Idempotency-Key`: this one is a retry that Redis admitted
    /// again (a failover lost the first admission, and its answer to the
    /// retry), and the first order is the request's.
    DuplicateRequest,
    /// Accepted while the log says an admin had paused the sale: Redis
    /// lost the pause (a failover promoted a replica without it) and
    /// admitted anyway (`seckill_core::decision::SaleWindow`).
    Paused,
    /// Accepted at or after the sale's end as the log records it: Redis
    /// lost an earlier end, or the admitting ingress's clock ran ahead of
    /// Redis's, which judged the end.
    Ended,
}

impl FailReason {
    /// The snake_case name used in events, API bodies and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SoldOut => "sold_out",
            Self::UnknownVoucher => "unknown_voucher",
            Self::LimitExceeded => "limit_exceeded",
            Self::DuplicateRequest => "duplicate_request",
            Self::Paused => "paused",
            Self::Ended => "ended",
        }
    }
}

/// Why a record could not be used.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("record is {0} bytes, over the {MAX_EVENT_BYTES}-byte limit")]
    TooLarge(usize),
    #[error("record is not a valid event: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("schema version {0} is not supported (newest known: {SCHEMA_VERSION})")]
    UnsupportedSchema(u16),
    #[error("event is out of range: {0}")]
    Invalid(String),
}

/// A record's metadata and `type` tag, read in one pass that skips the
/// event's own fields. The event is then read straight into its type's
/// struct (which skips these): two plain passes instead of serde's
/// flattened, internally tagged route, which copies every field of the
/// record into an intermediate tree first and was most of the cost of
/// reading the log.
#[derive(Deserialize)]
struct Head<'a> {
    schema: u16,
    event_id: Uuid,
    emitted_at: DateTime<Utc>,
    /// A name: serde's tagged enums would also take a variant's index
    /// (`"type": 2`), which no writer of the log means.
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
}

/// A record's schema version alone, read before the rest: a newer writer
/// may have changed the event's shape (new types, renamed fields), and such
/// a record is "newer", not malformed.
#[derive(Deserialize)]
struct SchemaTag {
    schema: u16,
}

impl Envelope {
    /// Wraps `event` in fresh metadata, emitted now by the platform's clock
    /// ([`crate::clock`]).
    pub fn new(event: Event) -> Self {
        Self { schema: SCHEMA_VERSION, event_id: Uuid::now_v7(), emitted_at: crate::clock::now(), event }
    }

    /// Parses and validates one record.
    pub fn decode(bytes: &[u8]) -> Result<Self, EventError> {
        if bytes.len() > MAX_EVENT_BYTES {
            return Err(EventError::TooLarge(bytes.len()));
        }
        let head = match serde_json::from_slice::<Head<'_>>(bytes) {
            Ok(head) => head,
            Err(error) => {
                // A newer writer may have changed the metadata too.
                if let Ok(SchemaTag { schema }) = serde_json::from_slice::<SchemaTag>(bytes) {
                    if schema == 0 || schema > SCHEMA_VERSION {
                        return Err(EventError::UnsupportedSchema(schema));
                    }
                }
                return Err(error.into());
            }
        };
        if head.schema == 0 || head.schema > SCHEMA_VERSION {
            return Err(EventError::UnsupportedSchema(head.schema));
        }
        let event = Event::read_as(&head.kind, bytes)?;
        check(within_supported_years(head.emitted_at), "emitted_at must be in the years 1970 to 9999")?;
        event.validate()?;
        Ok(Self { schema: head.schema, event_id: head.event_id, emitted_at: head.emitted_at, event })
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("events serialize: every field is plain data")
    }

    /// The `type` tag, for logs and metric labels.
    pub fn kind(&self) -> &'static str {
        self.event.kind()
    }
}

impl Event {
    /// The voucher this event belongs to: the partition key of every topic,
    /// so all of a voucher's history is one ordered sequence.
    pub fn voucher_id(&self) -> VoucherId {
        match self {
            Self::VoucherCreated(e) => e.voucher_id,
            Self::VoucherUpdated(e) => e.voucher_id,
            Self::OrderAccepted(e) => e.voucher_id,
            Self::CancelRequested(e) | Self::ConfirmRequested(e) => e.voucher_id,
            Self::PaymentReceived(e) => e.voucher_id,
            Self::OrderCreated(e) => e.order.voucher_id,
            Self::OrderFailed(e) => e.order.voucher_id,
            Self::OrderPaid(e) => e.order.voucher_id,
            Self::OrderCancelled(e) => e.order.voucher_id,
            Self::RefundRequested(e) => e.voucher_id,
            Self::PaymentRefunded(e) => e.voucher_id,
            Self::QueueSeedCommitted(e) => e.voucher_id,
            Self::QueueJoined(e) => e.voucher_id,
            Self::QueueSeedRevealed(e) => e.voucher_id,
            Self::QueueEntryIssued(e) => e.voucher_id,
            Self::QueuePlaceExpired(e) => e.voucher_id,
            Self::QueueEntryUsed(e) => e.voucher_id,
            Self::DrawSeedCommitted(e) => e.voucher_id,
            Self::DrawEntered(e) => e.voucher_id,
            Self::DrawSeedRevealed(e) => e.voucher_id,
            Self::DrawRanked(e) => e.voucher_id,
            Self::DrawWinnersSelected(e) => e.voucher_id,
            Self::DrawWinnerPromoted(e) => e.voucher_id,
            Self::DrawWinUsed(e) => e.voucher_id,
            Self::WindowsExtended(e) => e.voucher_id,
            Self::CheckoutOpened(e) => e.voucher_id,
        }
    }

    /// The order this event carries the fields of: an acceptance or an
    /// outcome (requests name their order by id only).
    pub fn order(&self) -> Option<&OrderAccepted> {
        match self {
            Self::OrderAccepted(order) => Some(order),
            Self::OrderCreated(e) => Some(&e.order),
            Self::OrderFailed(e) => Some(&e.order),
            Self::OrderPaid(e) => Some(&e.order),
            Self::OrderCancelled(e) => Some(&e.order),
            Self::VoucherCreated(_)
            | Self::VoucherUpdated(_)
            | Self::CancelRequested(_)
            | Self::ConfirmRequested(_)
            | Self::PaymentReceived(_)
            | Self::RefundRequested(_)
            | Self::PaymentRefunded(_)
            | Self::QueueSeedCommitted(_)
            | Self::QueueJoined(_)
            | Self::QueueSeedRevealed(_)
            | Self::QueueEntryIssued(_)
            | Self::QueuePlaceExpired(_)
            | Self::QueueEntryUsed(_)
            | Self::DrawSeedCommitted(_)
            | Self::DrawEntered(_)
            | Self::DrawSeedRevealed(_)
            | Self::DrawRanked(_)
            | Self::DrawWinnersSelected(_)
            | Self::DrawWinnerPromoted(_)
            | Self::DrawWinUsed(_)
            | Self::WindowsExtended(_)
            | Self::CheckoutOpened(_) => None,
        }
    }

    /// Whether this is one of the waiting room's records (the sales topic
    /// carries them; the order-deciding consumers pass them by).
    pub fn is_queue(&self) -> bool {
        matches!(
            self,
            Self::QueueSeedCommitted(_)
                | Self::QueueJoined(_)
                | Self::QueueSeedRevealed(_)
                | Self::QueueEntryIssued(_)
                | Self::QueuePlaceExpired(_)
                | Self::QueueEntryUsed(_)
                | Self::WindowsExtended(_)
        )
    }

    /// Whether this is one of a draw's records (the sales topic carries
    /// them; the order-deciding consumers pass them by).
    pub fn is_draw(&self) -> bool {
        matches!(
            self,
            Self::DrawSeedCommitted(_)
                | Self::DrawEntered(_)
                | Self::DrawSeedRevealed(_)
                | Self::DrawRanked(_)
                | Self::DrawWinnersSelected(_)
                | Self::DrawWinnerPromoted(_)
                | Self::DrawWinUsed(_)
                | Self::WindowsExtended(_)
        )
    }

    /// Every `type` tag, in declaration order: what [`Event::kind`] returns.
    pub const KINDS: [&'static str; 27] = [
        "VoucherCreated",
        "VoucherUpdated",
        "OrderAccepted",
        "CancelRequested",
        "ConfirmRequested",
        "PaymentReceived",
        "OrderCreated",
        "OrderFailed",
        "OrderPaid",
        "OrderCancelled",
        "RefundRequested",
        "PaymentRefunded",
        "QueueSeedCommitted",
        "QueueJoined",
        "QueueSeedRevealed",
        "QueueEntryIssued",
        "QueuePlaceExpired",
        "QueueEntryUsed",
        "DrawSeedCommitted",
        "DrawEntered",
        "DrawSeedRevealed",
        "DrawRanked",
        "DrawWinnersSelected",
        "DrawWinnerPromoted",
        "DrawWinUsed",
        "WindowsExtended",
        "CheckoutOpened",
    ];

    /// Reads `bytes` as the event of type `kind`, ignoring the envelope's
    /// fields (see [`Envelope::decode`]).
    fn read_as(kind: &str, bytes: &[u8]) -> Result<Self, serde_json::Error> {
        fn read<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, serde_json::Error> {
            serde_json::from_slice(bytes)
        }
        Ok(match kind {
            "VoucherCreated" => Self::VoucherCreated(read(bytes)?),
            "VoucherUpdated" => Self::VoucherUpdated(read(bytes)?),
            "OrderAccepted" => Self::OrderAccepted(read(bytes)?),
            "CancelRequested" => Self::CancelRequested(read(bytes)?),
            "ConfirmRequested" => Self::ConfirmRequested(read(bytes)?),
            "PaymentReceived" => Self::PaymentReceived(read(bytes)?),
            "OrderCreated" => Self::OrderCreated(read(bytes)?),
            "OrderFailed" => Self::OrderFailed(read(bytes)?),
            // Its name before payments (the variant's serde alias).
            "OrderPaid" | "OrderConfirmed" => Self::OrderPaid(read(bytes)?),
            "OrderCancelled" => Self::OrderCancelled(read(bytes)?),
            "RefundRequested" => Self::RefundRequested(read(bytes)?),
            "PaymentRefunded" => Self::PaymentRefunded(read(bytes)?),
            "QueueSeedCommitted" => Self::QueueSeedCommitted(read(bytes)?),
            "QueueJoined" => Self::QueueJoined(read(bytes)?),
            "QueueSeedRevealed" => Self::QueueSeedRevealed(read(bytes)?),
            "QueueEntryIssued" => Self::QueueEntryIssued(read(bytes)?),
            "QueuePlaceExpired" => Self::QueuePlaceExpired(read(bytes)?),
            "QueueEntryUsed" => Self::QueueEntryUsed(read(bytes)?),
            "DrawSeedCommitted" => Self::DrawSeedCommitted(read(bytes)?),
            "DrawEntered" => Self::DrawEntered(read(bytes)?),
            "DrawSeedRevealed" => Self::DrawSeedRevealed(read(bytes)?),
            "DrawRanked" => Self::DrawRanked(read(bytes)?),
            "DrawWinnersSelected" => Self::DrawWinnersSelected(read(bytes)?),
            "DrawWinnerPromoted" => Self::DrawWinnerPromoted(read(bytes)?),
            "DrawWinUsed" => Self::DrawWinUsed(read(bytes)?),
            "WindowsExtended" => Self::WindowsExtended(read(bytes)?),
            "CheckoutOpened" => Self::CheckoutOpened(read(bytes)?),
            other => {
                return Err(serde::de::Error::unknown_variant(other, &Self::KINDS));
            }
        })
    }

    /// The `type` tag.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::VoucherCreated(_) => "VoucherCreated",
            Self::VoucherUpdated(_) => "VoucherUpdated",
            Self::OrderAccepted(_) => "OrderAccepted",
            Self::CancelRequested(_) => "CancelRequested",
            Self::ConfirmRequested(_) => "ConfirmRequested",
            Self::PaymentReceived(_) => "PaymentReceived",
            Self::OrderCreated(_) => "OrderCreated",
            Self::OrderFailed(_) => "OrderFailed",
            Self::OrderPaid(_) => "OrderPaid",
            Self::OrderCancelled(_) => "OrderCancelled",
            Self::RefundRequested(_) => "RefundRequested",
            Self::PaymentRefunded(_) => "PaymentRefunded",
            Self::QueueSeedCommitted(_) => "QueueSeedCommitted",
            Self::QueueJoined(_) => "QueueJoined",
            Self::QueueSeedRevealed(_) => "QueueSeedRevealed",
            Self::QueueEntryIssued(_) => "QueueEntryIssued",
            Self::QueuePlaceExpired(_) => "QueuePlaceExpired",
            Self::QueueEntryUsed(_) => "QueueEntryUsed",
            Self::DrawSeedCommitted(_) => "DrawSeedCommitted",
            Self::DrawEntered(_) => "DrawEntered",
            Self::DrawSeedRevealed(_) => "DrawSeedRevealed",
            Self::DrawRanked(_) => "DrawRanked",
            Self::DrawWinnersSelected(_) => "DrawWinnersSelected",
            Self::DrawWinnerPromoted(_) => "DrawWinnerPromoted",
            Self::DrawWinUsed(_) => "DrawWinUsed",
            Self::WindowsExtended(_) => "WindowsExtended",
            Self::CheckoutOpened(_) => "CheckoutOpened",
        }
    }

    fn validate(&self) -> Result<(), EventError> {
        match self {
            Self::VoucherCreated(v) => v.validate(),
            Self::VoucherUpdated(u) => u.validate(),
            Self::OrderAccepted(o) => o.validate(),
            Self::CancelRequested(r) => {
                check(r.reason.is_some(), "a cancellation needs a reason")?;
                r.validate()
            }
            Self::ConfirmRequested(r) => {
                check(r.reason.is_none(), "a confirmation has no reason")?;
                r.validate()
            }
            Self::PaymentReceived(p) => {
                check_provider_id(&p.payment_id, "payment_id")?;
                check((1..=MAX_PRICE * u64::from(MAX_QUANTITY)).contains(&p.amount), "amount out of range")?;
                check(within_supported_years(p.paid_at), "paid_at must be in the years 1970 to 9999")
            }
            Self::OrderPaid(c) => {
                c.order.validate()?;
                check(within_supported_years(c.paid_at), "paid_at must be in the years 1970 to 9999")?;
                check(c.paid_at >= c.order.accepted_at, "paid_at precedes accepted_at")?;
                c.payment_id.as_deref().map_or(Ok(()), |id| check_provider_id(id, "payment_id"))
            }
            Self::RefundRequested(r) => {
                check_provider_id(&r.payment_id, "payment_id")?;
                check(r.amount <= MAX_PRICE * u64::from(MAX_QUANTITY), "amount out of range")?;
                check(within_supported_years(r.requested_at), "requested_at must be in the years 1970 to 9999")
            }
            Self::PaymentRefunded(r) => {
                check_provider_id(&r.payment_id, "payment_id")?;
                check_provider_id(&r.refund_id, "refund_id")?;
                check(r.amount <= MAX_PRICE * u64::from(MAX_QUANTITY), "amount out of range")?;
                check(within_supported_years(r.refunded_at), "refunded_at must be in the years 1970 to 9999")
            }
            Self::OrderCancelled(c) => {
                c.order.validate()?;
                check(within_supported_years(c.cancelled_at), "cancelled_at must be in the years 1970 to 9999")?;
                check(c.cancelled_at >= c.order.accepted_at, "cancelled_at precedes accepted_at")?;
                check(c.remaining <= MAX_STOCK, "remaining exceeds the largest stock")
            }
            Self::OrderCreated(c) => {
                c.order.validate()?;
                check(within_supported_years(c.decided_at), "decided_at must be in the years 1970 to 9999")?;
                check(c.decided_at >= c.order.accepted_at, "decided_at precedes accepted_at")?;
                check(c.remaining <= MAX_STOCK, "remaining exceeds the largest stock")
            }
            Self::OrderFailed(f) => {
                f.order.validate()?;
                check(within_supported_years(f.decided_at), "decided_at must be in the years 1970 to 9999")?;
                check(f.decided_at >= f.order.accepted_at, "decided_at precedes accepted_at")
            }
            Self::QueueSeedCommitted(c) => {
                check(queue::is_seed(&c.seed_hash), "seed_hash must be 64 hex digits")?;
                check(c.sealed_seed.as_deref().is_none_or(queue::is_seed), "sealed_seed must be 64 hex digits")
            }
            Self::QueueJoined(j) => {
                check(within_supported_years(j.joined_at), "joined_at must be in the years 1970 to 9999")?;
                check(j.attempt >= 1, "attempt starts at 1")?;
                check(j.pre_queue == j.seq.is_none(), "a join after the start has a seq, and only it")?;
                check(j.seq.is_none_or(|seq| (1..queue::FIFO_BASE).contains(&seq)), "seq out of range")
            }
            Self::QueueSeedRevealed(r) => check(queue::is_seed(&r.seed), "seed must be 64 hex digits"),
            Self::QueueEntryIssued(e) => {
                check(e.place >= 1 && e.entry >= 1, "place and entry start at 1")?;
                check(within_supported_years(e.expires_at), "expires_at must be in the years 1970 to 9999")
            }
            Self::QueuePlaceExpired(e) => check(e.place >= 1, "place starts at 1"),
            Self::QueueEntryUsed(e) => check(e.entry >= 1, "entry starts at 1"),
            Self::DrawSeedCommitted(c) => {
                check(queue::is_seed(&c.seed_hash), "seed_hash must be 64 hex digits")?;
                check(c.sealed_seed.as_deref().is_none_or(queue::is_seed), "sealed_seed must be 64 hex digits")
            }
            Self::DrawEntered(e) => {
                check(within_supported_years(e.entered_at), "entered_at must be in the years 1970 to 9999")?;
                check(e.seq >= 1, "seq starts at 1")
            }
            Self::DrawSeedRevealed(r) => {
                check(queue::is_seed(&r.seed), "seed must be 64 hex digits")?;
                check(
                    (r.entries == 0) == r.entries_hash.is_empty()
                        && (r.entries_hash.is_empty() || r.entries_hash.len() == 40)
                        && r.entries_hash.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                    "entries_hash must be 40 lowercase hex digits (empty for no entries)",
                )
            }
            Self::DrawRanked(r) => {
                check(r.chunk < r.chunks, "chunk must be below chunks")?;
                check(r.first_rank >= 1, "first_rank starts at 1")?;
                check(!r.users.is_empty() && r.users.len() <= draw::RANK_CHUNK, "a chunk ranks 1 to 500 users")
            }
            Self::DrawWinnersSelected(w) => {
                check(w.winners <= MAX_STOCK, "winners exceeds the largest stock")?;
                check(within_supported_years(w.purchase_until), "purchase_until must be in the years 1970 to 9999")
            }
            Self::DrawWinnerPromoted(p) => {
                check(p.rank >= 1, "rank starts at 1")?;
                check(within_supported_years(p.purchase_until), "purchase_until must be in the years 1970 to 9999")
            }
            Self::DrawWinUsed(u) => check(u.rank >= 1, "rank starts at 1"),
            Self::WindowsExtended(w) => {
                check(within_supported_years(w.from), "from must be in the years 1970 to 9999")?;
                check(within_supported_years(w.until), "until must be in the years 1970 to 9999")?;
                check(w.until >= w.from, "until precedes from")
            }
            Self::CheckoutOpened(c) => {
                check_provider_id(&c.session_id, "session_id")?;
                check(within_supported_years(c.opened_at), "opened_at must be in the years 1970 to 9999")?;
                check(within_supported_years(c.expires_at), "expires_at must be in the years 1970 to 9999")?;
                check(c.expires_at >= c.opened_at, "expires_at precedes opened_at")
            }
        }
    }
}

impl VoucherCreated {
    /// Checks the ranges an admin request and a log record must both meet.
    pub fn validate(&self) -> Result<(), EventError> {
        check(self.stock <= MAX_STOCK, "stock exceeds 1000000000")?;
        check((1..=MAX_QUANTITY).contains(&self.per_user_limit), "per_user_limit must be 1 to 10000")?;
        check(self.hold_seconds <= MAX_HOLD_SECONDS, "payment_seconds must be 0 to 604800")?;
        if let Some(title) = &self.title {
            let chars = title.chars().count();
            check((1..=MAX_TITLE_CHARS).contains(&chars), "title must be 1 to 200 characters")?;
            check(!title.chars().any(char::is_control), "title must not contain control characters")?;
        }
        if let Some(description) = &self.description {
            check(description.chars().count() <= MAX_DESCRIPTION_CHARS, "description must be at most 2000 characters")?;
        }
        check(self.price <= MAX_PRICE, "price must be 0 to 100000000000 minor units")?;
        check((self.price > 0) == self.currency.is_some(), "a price needs a currency, and a currency a price")?;
        // An unpaid order must end: otherwise it would hold its units for good.
        check(self.price == 0 || self.hold_seconds > 0, "a priced voucher needs payment_seconds above 0")?;
        check((1..=MAX_SHARDS).contains(&self.shards), "shards must be 1 to 64")?;
        check(within_supported_years(self.begins_at), "begins_at must be in the years 1970 to 9999")?;
        check(within_supported_years(self.ends_at), "ends_at must be in the years 1970 to 9999")?;
        check(self.ends_at > self.begins_at, "ends_at must be after begins_at")?;
        if let Some(queue) = &self.queue {
            check(within_supported_years(queue.opens_at), "queue opens_at must be in the years 1970 to 9999")?;
            queue.check(self.begins_at).map_err(EventError::Invalid)?;
            // The room serves one user's turn in one place: a split stock
            // would need the room in every bucket's slot.
            check(self.shards == 1, "a queue-mode voucher has one bucket (shards 1)")?;
        }
        if let Some(draw) = &self.draw {
            check(self.queue.is_none(), "a voucher is sold by a queue or by a draw, not both")?;
            check(within_supported_years(draw.entries_open_at), "entries_open_at must be in the years 1970 to 9999")?;
            check(within_supported_years(draw.draw_at), "draw_at must be in the years 1970 to 9999")?;
            draw.check(self.begins_at, self.ends_at).map_err(EventError::Invalid)?;
            // The draw's ranks and wins live in one slot, as a room's places.
            check(self.shards == 1, "a draw-mode voucher has one bucket (shards 1)")?;
        }
        check(self.challenge_bits <= challenge::MAX_BITS, "challenge_bits must be 0 to 28")?;
        Ok(())
    }

    /// The sale's mode as the API names it.
    pub fn mode(&self) -> &'static str {
        if self.queue.is_some() {
            "queue"
        } else if self.draw.is_some() {
            "draw"
        } else {
            "fcfs"
        }
    }
}

impl VoucherUpdated {
    /// Checks what can be checked without the voucher's current state.
    pub fn validate(&self) -> Result<(), EventError> {
        check(self.add_stock <= MAX_STOCK, "add_stock exceeds 1000000000")?;
        check(self.ends_at.is_none_or(within_supported_years), "ends_at must be in the years 1970 to 9999")?;
        check(
            self.paused.is_some() || self.ends_at.is_some() || self.add_stock > 0,
            "an update must change paused, ends_at or add_stock",
        )
    }
}

impl OrderAccepted {
    /// A new order of `user_id` for `voucher_id`, accepted now by the
    /// platform's clock ([`crate::clock`]), under a fresh id.
    pub fn now(voucher_id: VoucherId, user_id: UserId, quantity: u32) -> Self {
        Self {
            order_id: OrderId::generate(),
            voucher_id,
            user_id,
            quantity,
            accepted_at: crate::clock::now(),
            amount: 0,
            currency: None,
            idempotency_key: None,
        }
    }

    fn validate(&self) -> Result<(), EventError> {
        check((1..=MAX_QUANTITY).contains(&self.quantity), "quantity must be 1 to 10000")?;
        if let Some(key) = &self.idempotency_key {
            let visible =
                (1..=MAX_IDEMPOTENCY_KEY_BYTES).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic());
            check(visible, "idempotency_key must be 1 to 128 visible ASCII characters")?;
        }
        check(self.amount <= MAX_PRICE * u64::from(MAX_QUANTITY), "amount out of range")?;
        check((self.amount > 0) == self.currency.is_some(), "an amount comes with its currency and only then")?;
        check(within_supported_years(self.accepted_at), "accepted_at must be in the years 1970 to 9999")
    }
}

impl OrderRequest {
    fn validate(&self) -> Result<(), EventError> {
        if let Some(sessions) = &self.settled_checkouts {
            check(sessions.len() <= MAX_CHECKOUTS, "settled_checkouts holds at most 8 sessions")?;
            sessions.iter().try_for_each(|session| check_provider_id(session, "settled_checkouts"))?;
        }
        check(within_supported_years(self.requested_at), "requested_at must be in the years 1970 to 9999")
    }
}

/// Every time an event carries: sale times live in Redis as Unix
/// milliseconds and all times travel as RFC 3339, which has four-digit
/// years, so both hold from 1970 to 9999. The bound also keeps arithmetic
/// on them (a hold deadline, a latency) far from the ends of chrono's range,
/// which a parser accepting signed five- and six-digit years would reach.
fn within_supported_years(time: DateTime<Utc>) -> bool {
    (1970..=9999).contains(&chrono::Datelike::year(&time))
}

/// A provider's id: printable ASCII, 1 to [`MAX_PROVIDER_ID_BYTES`] bytes.
fn check_provider_id(id: &str, what: &str) -> Result<(), EventError> {
    let ok = (1..=MAX_PROVIDER_ID_BYTES).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic());
    check(ok, &format!("{what} must be 1 to 255 printable ASCII characters"))
}

fn check(ok: bool, what: &str) -> Result<(), EventError> {
    if ok {
        Ok(())
    } else {
        Err(EventError::Invalid(what.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted() -> OrderAccepted {
        OrderAccepted::now(VoucherId::generate(), UserId::parse("alice").expect("valid"), 1)
    }

    #[test]
    fn envelope_is_flat_json_with_a_type_tag() {
        let envelope = Envelope::new(Event::OrderAccepted(accepted()));
        let json: serde_json::Value = serde_json::from_slice(&envelope.encode()).expect("json");
        assert_eq!(json["type"], "OrderAccepted");
        assert_eq!(json["schema"], 1);
        assert_eq!(json["user_id"], "alice");
        assert_eq!(Envelope::decode(&envelope.encode()).expect("decodes"), envelope);
    }

    #[test]
    fn outcome_round_trips_with_flattened_order() {
        let order = accepted();
        let created = Envelope::new(Event::OrderCreated(OrderCreated {
            decided_at: order.accepted_at,
            order,
            remaining: 9,
            pay_by: None,
        }));
        let json: serde_json::Value = serde_json::from_slice(&created.encode()).expect("json");
        assert_eq!(json["remaining"], 9);
        assert!(json["order_id"].is_string());
        assert_eq!(Envelope::decode(&created.encode()).expect("decodes"), created);
    }

    #[test]
    fn decode_refuses_garbage_newer_schemas_and_bad_ranges() {
        assert!(matches!(Envelope::decode(b"\xff\x00"), Err(EventError::Malformed(_))));
        assert!(matches!(Envelope::decode(&vec![b' '; MAX_EVENT_BYTES + 1]), Err(EventError::TooLarge(_))));

        let mut newer = Envelope::new(Event::OrderAccepted(accepted()));
        newer.schema = SCHEMA_VERSION + 1;
        assert!(matches!(Envelope::decode(&newer.encode()), Err(EventError::UnsupportedSchema(_))));
        // A newer writer's record need not have today's shape at all.
        let reshaped = br#"{"schema":99,"event_id":"0192f0c4-7a7e-7cc1-8000-000000000000","type":"OrderTeleported","where":"mars"}"#;
        assert!(matches!(Envelope::decode(reshaped), Err(EventError::UnsupportedSchema(99))));

        let mut zero = accepted();
        zero.quantity = 0;
        let zero = Envelope::new(Event::OrderAccepted(zero));
        assert!(matches!(Envelope::decode(&zero.encode()), Err(EventError::Invalid(_))));

        let unknown_type = br#"{"schema":1,"event_id":"0192f0c4-7a7e-7cc1-8000-000000000000","emitted_at":"2026-01-01T00:00:00Z","type":"Nope"}"#;
        assert!(matches!(Envelope::decode(unknown_type), Err(EventError::Malformed(_))));

        let mut numeric_tag: serde_json::Value =
            serde_json::from_slice(&Envelope::new(Event::OrderAccepted(accepted())).encode()).expect("json");
        numeric_tag["type"] = 2.into();
        let numeric_tag = serde_json::to_vec(&numeric_tag).expect("json");
        assert!(matches!(Envelope::decode(&numeric_tag), Err(EventError::Malformed(_))), "a tag is a name");
    }

    #[test]
    fn lifecycle_events_round_trip_and_are_validated() {
        let order = accepted();
        let cancelled = Envelope::new(Event::OrderCancelled(OrderCancelled {
            cancelled_at: order.accepted_at,
            order: order.clone(),
            reason: CancelReason::Expired,
            remaining: 4,
        }));
        let json: serde_json::Value = serde_json::from_slice(&cancelled.encode()).expect("json");
        assert_eq!((json["type"].as_str(), json["reason"].as_str()), (Some("OrderCancelled"), Some("expired")));
        assert_eq!(Envelope::decode(&cancelled.encode()).expect("decodes"), cancelled);

        let request = OrderRequest {
            order_id: order.order_id,
            voucher_id: order.voucher_id,
            reason: None,
            requested_at: Utc::now(),
            settled_checkouts: None,
        };
        let confirm = Envelope::new(Event::ConfirmRequested(request.clone()));
        assert_eq!(Envelope::decode(&confirm.encode()).expect("decodes"), confirm);
        let reasonless_cancel = Envelope::new(Event::CancelRequested(request));
        assert!(matches!(Envelope::decode(&reasonless_cancel.encode()), Err(EventError::Invalid(_))));

        let nothing = VoucherUpdated { voucher_id: order.voucher_id, paused: None, ends_at: None, add_stock: 0 };
        assert!(matches!(
            Envelope::decode(&Envelope::new(Event::VoucherUpdated(nothing.clone())).encode()),
            Err(EventError::Invalid(_))
        ));
        let pause = Envelope::new(Event::VoucherUpdated(VoucherUpdated { paused: Some(true), ..nothing }));
        let json: serde_json::Value = serde_json::from_slice(&pause.encode()).expect("json");
        assert!(json.get("add_stock").is_none() && json.get("ends_at").is_none(), "unchanged fields are left out");
        assert_eq!(Envelope::decode(&pause.encode()).expect("decodes"), pause);
    }

    #[test]
    fn voucher_definitions_without_a_hold_still_decode() {
        let old = br#"{"schema":1,"event_id":"0192f0c4-7a7e-7cc1-8000-000000000000","emitted_at":"2026-01-01T00:00:00Z","type":"VoucherCreated","voucher_id":"0192f0c4-7a7e-7cc1-8000-000000000001","stock":5,"per_user_limit":1,"begins_at":"2026-01-01T00:00:00Z","ends_at":"2026-01-02T00:00:00Z"}"#;
        let Event::VoucherCreated(voucher) = Envelope::decode(old).expect("decodes").event else {
            panic!("a voucher definition")
        };
        assert_eq!(voucher.hold_seconds, 0);
        assert_eq!(voucher.shards, 1, "written before buckets existed: one bucket");
    }

    #[test]
    fn one_bucket_is_not_written_and_more_round_trip() {
        let old = br#"{"schema":1,"event_id":"0192f0c4-7a7e-7cc1-8000-000000000000","emitted_at":"2026-01-01T00:00:00Z","type":"VoucherCreated","voucher_id":"0192f0c4-7a7e-7cc1-8000-000000000001","stock":5,"per_user_limit":1,"begins_at":"2026-01-01T00:00:00Z","ends_at":"2026-01-02T00:00:00Z"}"#;
        let Event::VoucherCreated(mut voucher) = Envelope::decode(old).expect("decodes").event else {
            panic!("a voucher definition")
        };
        let json = serde_json::to_value(&voucher).expect("serializes");
        assert!(json.get("shards").is_none(), "readers of the old schema see the same record: {json}");
        voucher.shards = 8;
        let written = Envelope::new(Event::VoucherCreated(voucher.clone())).encode();
        let Event::VoucherCreated(read) = Envelope::decode(&written).expect("decodes").event else {
            panic!("a voucher definition")
        };
        assert_eq!(read, voucher);
    }

    #[test]
    fn logs_written_before_payments_still_read() {
        let old_paid =
            br#"{"schema":1,"event_id":"0192a000-0000-7000-8000-000000000001","emitted_at":"2026-11-21T10:00:01Z",
            "type":"OrderConfirmed","order_id":"0192a000-0000-7000-8000-000000000002",
            "voucher_id":"0192a000-0000-7000-8000-000000000003","user_id":"alice","quantity":1,
            "accepted_at":"2026-11-21T10:00:00Z","confirmed_at":"2026-11-21T10:00:01Z"}"#;
        let Event::OrderPaid(paid) = Envelope::decode(old_paid).expect("decodes").event else { panic!("paid") };
        assert_eq!((paid.payment_id, paid.order.amount, paid.order.currency), (None, 0, None));
        let written: serde_json::Value = serde_json::from_slice(
            &Envelope::new(Event::OrderPaid(OrderPaid { payment_id: None, ..paid_at(paid.paid_at, paid.order) }))
                .encode(),
        )
        .expect("json");
        assert_eq!((written["type"].as_str(), written.get("confirmed_at")), (Some("OrderPaid"), None));

        let old_voucher =
            br#"{"schema":1,"event_id":"0192a000-0000-7000-8000-000000000004","emitted_at":"2026-11-21T10:00:00Z",
            "type":"VoucherCreated","voucher_id":"0192a000-0000-7000-8000-000000000003","stock":5,"per_user_limit":1,
            "begins_at":"2026-11-21T10:00:00Z","ends_at":"2026-11-21T11:00:00Z","hold_seconds":60}"#;
        let Event::VoucherCreated(voucher) = Envelope::decode(old_voucher).expect("decodes").event else {
            panic!("voucher")
        };
        assert_eq!((voucher.hold_seconds, voucher.price, voucher.title.clone()), (60, 0, None));
        let written: serde_json::Value =
            serde_json::from_slice(&Envelope::new(Event::VoucherCreated(voucher)).encode()).expect("json");
        assert_eq!((written["payment_seconds"].as_u64(), written.get("hold_seconds")), (Some(60), None));
    }

    fn paid_at(at: DateTime<Utc>, order: OrderAccepted) -> OrderPaid {
        OrderPaid { order, paid_at: at, payment_id: Some("pi_1".to_owned()) }
    }

    #[test]
    fn prices_and_amounts_come_with_their_currency() {
        let mut order = accepted();
        order.amount = 500;
        assert!(Envelope::decode(&Envelope::new(Event::OrderAccepted(order.clone())).encode()).is_err(), "no currency");
        order.currency = Some(Currency::parse("EUR").expect("valid"));
        let json: serde_json::Value =
            serde_json::from_slice(&Envelope::new(Event::OrderAccepted(order.clone())).encode()).expect("json");
        assert_eq!((json["amount"].as_u64(), json["currency"].as_str()), (Some(500), Some("EUR")));
        let payment = PaymentReceived {
            order_id: order.order_id,
            voucher_id: order.voucher_id,
            payment_id: "pi 1".to_owned(),
            amount: 500,
            currency: Currency::parse("EUR").expect("valid"),
            paid_at: Utc::now(),
            source: PaymentSource::Webhook,
        };
        assert!(Envelope::decode(&Envelope::new(Event::PaymentReceived(payment.clone())).encode()).is_err(), "a space");
        let payment = PaymentReceived { payment_id: "pi_1".to_owned(), ..payment };
        assert!(Envelope::decode(&Envelope::new(Event::PaymentReceived(payment)).encode()).is_ok());
    }
}
