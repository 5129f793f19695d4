//! A payment provider sandbox speaking Stripe's API shape, run as its own
//! process (`seckill serve payments`) or in-process by tests, because no
//! real provider is reachable from where the platform runs.
//!
//! # Routes
//!
//! | Route | What |
//! |---|---|
//! | `POST /v1/payment_intents` | create (`amount`, `currency`, `metadata[…]`, `return_url`); `Idempotency-Key` replays |
//! | `GET /v1/payment_intents/{id}` | retrieve |
//! | `POST /v1/payment_intents/{id}/cancel` | cancel; a final intent: `400 payment_intent_unexpected_state` |
//! | `GET /v1/payment_intents/search?query=metadata['order_id']:'X'` | an order's intents (`limit`, `page`) |
//! | `POST /v1/refunds` | refund a succeeded intent in full, once (`charge_already_refunded`) |
//! | `GET /v1/refunds?payment_intent=pi_…` | an intent's refunds |
//! | `GET /checkout/{id}` | the buyer's page: `#pay` and `#decline` buttons |
//! | `POST /checkout/{id}/pay`, `/decline` | the buttons; `303` to the `return_url` |
//! | `POST /sandbox/payment_intents/{id}/pay`, `/decline` | the same, answering the intent as JSON |
//! | `GET`, `POST /sandbox/settings` | the test switches below |
//! | `GET /sandbox/ledger` | every intent and refund, and the webhook counts |
//! | `GET /healthz` | `200` |
//!
//! `/v1` wants `Authorization: Bearer <api_key>`; the rest is open (a
//! sandbox is never exposed beyond its tests). Charges are always
//! answered expanded.
//!
//! # Events
//!
//! Paying sends `payment_intent.succeeded` (dated as the charge), declining
//! `payment_intent.payment_failed`, refunding `charge.refunded` (the charge
//! as `data.object`), each POSTed to `webhook_url` signed with
//! `seckill_payments::signature::sign`.
//!
//! # Test switches
//!
//! `POST /sandbox/settings` with any of these JSON fields (the others stay):
//!
//! | Field | Effect |
//! |---|---|
//! | `webhook_delay_ms: u64` | wait this long before delivering each event |
//! | `duplicate_webhooks: bool` | deliver every event twice, same event id |
//! | `drop_webhooks: u32` | the next N events are never delivered (lost callbacks) |
//! | `reorder_webhooks: bool` | hold events 250 ms and deliver each batch newest first |
//! | `fail_refunds_for_ms: u64` | every refund call answers `500 api_error` for this long from now (0 ends it) |
//! | `refund_answer_delay_ms: u64` | a refund call's answer is held back this long after the refund is made (a caller killed meanwhile never hears of it) |
//!
//! `GET /sandbox/settings` answers them (`fail_refunds_for_ms`: what is left).
//!
//! # Bounds
//!
//! Bodies of at most 16 KiB; at most `max_objects` intents and refunds
//! (then `429`), as many idempotency keys (the oldest forgotten); at most
//! 100 000 events queued (then dropped and counted), 32 deliveries at once.

mod api;
mod app;
mod body;
mod checkout;
mod config;
mod error;
mod failure;
mod idempotency;
mod ledger;
mod params;
mod search;
mod state;
mod switches;
mod sync;
mod testing;
mod webhooks;

pub use app::Sandbox;
pub use config::SandboxConfig;
pub use error::SandboxError;
