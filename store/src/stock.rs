//! The processor's persistent stock.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use seckill_core::decision::{OrderRecord, StockLevel};
use seckill_core::event::{
    CheckoutOpened, Event, OrderAccepted, OrderRequest, PaymentReceived, RefundRequested, VoucherCreated,
    VoucherUpdated,
};
use seckill_core::{Envelope, OrderId, VoucherId};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::StoreError;

/// Most expired orders one sweep returns.
pub const MAX_EXPIRED_PAGE: usize = 1_000;

/// A hold's place in deadline order: where a sweep's next page starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HoldCursor {
    pub deadline: DateTime<Utc>,
    pub order_id: OrderId,
}

/// A hold that ended: the cancellation to request, and its place.
#[derive(Clone, Debug, PartialEq)]
pub struct DueHold {
    pub request: OrderRequest,
    pub cursor: HoldCursor,
}

/// Most pending refunds one read returns.
pub const MAX_PENDING_REFUNDS_PAGE: usize = 100;

/// A refund the provider accepted but holds `pending`, kept until its next
/// check is due (see the processor's refund worker).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingRefund {
    /// What the processor asked to refund.
    pub request: RefundRequested,
    /// The provider's refund (`re_…`) being followed.
    pub refund_id: String,
    /// The attempt that made it (its idempotency key's number).
    pub attempt: u32,
    /// When the provider is next asked how it ended.
    pub next_check: DateTime<Utc>,
    /// The pause before the check after that.
    pub pause_ms: u64,
}

/// One record of the sales topic, as the processor applies it.
#[derive(Clone, Debug)]
pub enum StockInput {
    /// Defines a voucher's stock; applying it again changes nothing.
    Voucher(VoucherCreated),
    /// Adds stock, pauses, resumes or moves the end; `update_id` (the
    /// record's event id, a UUIDv7) makes it apply once and dates it.
    Update { update_id: Uuid, update: VoucherUpdated },
    /// An order to decide; deciding it again returns the first outcome.
    Order(OrderAccepted),
    /// An order decided again from the log (`seckill rebuild-stock`): as
    /// `Order`, its decision dated `decided_at`, the processor's logged
    /// decision's, so its `pay_by` is the one the buyer was told rather
    /// than one counted from the rebuild's clock.
    OrderAsDecided { order: OrderAccepted, decided_at: DateTime<Utc> },
    /// Gives a created order's units back (see `seckill_core::decision`).
    Cancel(OrderRequest),
    /// Claims a created free order, ending its hold.
    Confirm(OrderRequest),
    /// A payment the provider reported: pays the order or is refunded.
    Pay(PaymentReceived),
    /// A checkout session opened for the order: recorded with it, so it is
    /// closed and reconciled by id.
    Checkout(CheckoutOpened),
}

impl StockInput {
    /// What a sales-topic record asks of the processor: None for the
    /// waiting room's and the draw's records, which decide no order;
    /// `Err` with its kind for a record that does not belong on the sales
    /// topic. The processor and a rebuild read the log alike through it.
    pub fn of(envelope: Envelope) -> Result<Option<Self>, &'static str> {
        Ok(Some(match envelope.event {
            Event::VoucherCreated(voucher) => Self::Voucher(voucher),
            Event::VoucherUpdated(update) => Self::Update { update_id: envelope.event_id, update },
            Event::OrderAccepted(order) => Self::Order(order),
            Event::CancelRequested(request) => Self::Cancel(request),
            Event::ConfirmRequested(request) => Self::Confirm(request),
            Event::PaymentReceived(payment) => Self::Pay(payment),
            Event::CheckoutOpened(opened) => Self::Checkout(opened),
            room if room.is_queue() || room.is_draw() => return Ok(None),
            other => return Err(other.kind()),
        }))
    }

    /// The order to decide, for `Order` and `OrderAsDecided`.
    pub fn order(&self) -> Option<&OrderAccepted> {
        match self {
            Self::Order(order) | Self::OrderAsDecided { order, .. } => Some(order),
            _ => None,
        }
    }
}

/// An outcome to emit.
#[derive(Clone, Debug, PartialEq)]
pub struct Decided {
    /// The `OrderCreated`, `OrderFailed`, `OrderPaid`, `OrderCancelled`
    /// or `RefundRequested` event.
    pub outcome: Envelope,
    /// True when the input had been decided before (a redelivery): nothing
    /// moved this time and `outcome` is the stored event.
    pub replayed: bool,
}

/// Persistent stock and the latest outcome of every decided order.
#[async_trait]
pub trait StockStore: Send + Sync + std::fmt::Debug + 'static {
    /// Applies `batch` in order, atomically: either every change is durable,
    /// or none is. Returns the outcomes to emit, each once, in the order they
    /// were decided: a new decision per order, confirmation and
    /// cancellation; for an input decided before (a redelivery), every
    /// outcome of its order again, in order (`replayed`), so outcomes lost
    /// in a crash reach the log. Requests the rules ignore return nothing;
    /// requests about an order not yet accepted are kept and decided right
    /// after it.
    async fn apply(&self, batch: Vec<StockInput>) -> Result<Vec<Decided>, StoreError>;

    /// A voucher's persistent stock, if it is defined.
    async fn stock(&self, voucher: VoucherId) -> Result<Option<StockLevel>, StoreError>;

    /// Created, unconfirmed orders whose hold ended at or before `now`,
    /// oldest deadline first, starting after `after` (from the beginning
    /// when None), at most `limit` (capped at [`MAX_EXPIRED_PAGE`]), as the
    /// cancellations to request.
    async fn expired(
        &self,
        now: DateTime<Utc>,
        after: Option<HoldCursor>,
        limit: usize,
    ) -> Result<Vec<DueHold>, StoreError>;

    /// Keeps `refund` until its next check (replacing nothing: a refund
    /// kept twice is checked twice, which changes nothing).
    async fn put_pending_refund(&self, refund: &PendingRefund) -> Result<(), StoreError>;

    /// Pending refunds whose next check is at or before `now`, soonest
    /// first, at most `limit` (capped at [`MAX_PENDING_REFUNDS_PAGE`]).
    async fn due_pending_refunds(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<PendingRefund>, StoreError>;

    /// Forgets `refund` as kept (its `next_check` and `refund_id` name it).
    async fn delete_pending_refund(&self, refund: &PendingRefund) -> Result<(), StoreError>;

    /// What was decided and recorded about one order (its outcomes and
    /// checkout sessions), if anything.
    async fn order_record(&self, voucher: VoucherId, order: OrderId) -> Result<Option<OrderRecord>, StoreError>;
    /// Takes a fencing epoch, later than every one taken before, and writes
    /// under it from now on: a processor calls it after each partition
    /// assignment. A write to a voucher that a later epoch wrote is refused
    /// ([`StoreError::Fenced`]), so a processor that lost its partitions
    /// without knowing it (cut off from Kafka past its session, a zombie)
    /// decides nothing more against the stock once the new owner has
    /// touched the voucher. 0: the store does not fence (one process owns
    /// it, as the embedded store's single file is).
    async fn take_epoch(&self) -> Result<i64, StoreError> {
        Ok(0)
    }

    /// Whether a later epoch than this store's has written `voucher`: its
    /// outcomes are the new owner's to send, not this processor's.
    async fn fenced(&self, voucher: VoucherId) -> Result<bool, StoreError> {
        let _ = voucher;
        Ok(false)
    }
}
