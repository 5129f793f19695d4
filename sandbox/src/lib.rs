//! A payment provider sandbox speaking Stripe's API shape (version
//! `2024-06-20`), run as its own process (`seckill serve payments`) or
//! in-process by tests, because no real provider is reachable from where
//! the platform runs. Beyond the shapes it keeps Stripe's semantics that
//! decide money: sessions that expire, bank debits that settle later,
//! search that lags, answers saved under idempotency keys (failures too),
//! refunds that stay pending and may fail.
//!
//! # Routes
//!
//! | Route | What |
//! |---|---|
//! | `POST /v1/checkout/sessions` | open a Checkout Session: `mode=payment`, one `line_items[0]` with `price_data[currency]`, `price_data[unit_amount]`, `price_data[product_data][name]` and `quantity`; `success_url`, `cancel_url`, `client_reference_id`, `metadata[…]`, `payment_intent_data[metadata][…]`, `expires_at` (30 min to 24 h away; default 24 h); any other parameter `400 parameter_unknown`; total above 99 999 999 `amount_too_large`, 0 `amount_too_small` |
//! | `GET /v1/checkout/sessions/{id}` | retrieve; `expand[]=payment_intent` (or `payment_intent.latest_charge`) for the intent as an object, else its id |
//! | `POST /v1/checkout/sessions/{id}/expire` | expire an open session; another: `400` with Stripe's message and no code |
//! | `POST /v1/payment_intents` | create a bare intent (`amount`, `currency`, `metadata[…]`, `return_url`) |
//! | `GET /v1/payment_intents/{id}` | retrieve |
//! | `POST /v1/payment_intents/{id}/cancel` | cancel; a final intent: `400 payment_intent_unexpected_state` |
//! | `GET /v1/payment_intents/search?query=metadata['order_id']:'X'` | an order's intents (`limit`, `page`), as of `search_lag_ms` ago |
//! | `POST /v1/refunds` | refund a succeeded intent in full (`payment_intent`); while a refund is pending or succeeded, `charge_already_refunded` |
//! | `GET /v1/refunds?payment_intent=pi_…` | an intent's refunds, newest first (`limit`) |
//! | `GET /v1/refunds/{id}` | retrieve a refund |
//! | `GET /checkout/{id}` | the buyer's page of a session (`cs_…`) or a bare intent (`pi_…`): order, amount, currency, `#pay` and `#decline` |
//! | `POST /checkout/{id}/pay`, `/decline` | the buttons: `303` to the session's `success_url` (`{CHECKOUT_SESSION_ID}` replaced) or `cancel_url`, or to the intent's `return_url`; a session no longer open: a page saying so, `409` |
//! | `POST /sandbox/checkout/sessions/{id}/pay`, `/decline` | the same, answering the session as JSON (`409` when not open) |
//! | `POST /sandbox/payment_intents/{id}/pay`, `/decline` | a bare intent's, answering the intent as JSON |
//! | `GET`, `POST /sandbox/settings` | the test switches below |
//! | `GET /sandbox/ledger` | every intent, refund and session; per intent its refunds and every refund call's `Idempotency-Key`; the webhook counts |
//! | `GET /healthz` | `200` |
//!
//! `/v1` wants `Authorization: Bearer <api_key>` and takes a
//! `Stripe-Version` of `2024-06-20` or none (another is refused: the
//! sandbox cannot answer its shapes); the rest is open (a sandbox is never
//! exposed beyond its tests). Every `POST /v1` takes an `Idempotency-Key`.
//! Intents' charges are always answered expanded; a session's intent is
//! an id unless expanded. Ids are `cs_test_…`, `pi_…`, `ch_…`, `re_…`.
//!
//! A session's intent exists once the buyer pays (as at Stripe since
//! 2022-08-01): made `succeeded` with `amount_received` and a charge dated
//! then, its metadata from `payment_intent_data[metadata]`; the session is
//! then `complete`/`paid`. Sessions expire by themselves at `expires_at`
//! (checked on every call and by a 50 ms ticker).
//!
//! # Events
//!
//! Each is POSTed to `webhook_url` signed with
//! `seckill_payments::signature::sign`, with `api_version: "2024-06-20"`
//! and `livemode: false`; `data.object` is the object after the change,
//! nothing expanded (an intent's charge, a session's intent: ids).
//!
//! | Type | When | `data.object` |
//! |---|---|---|
//! | `checkout.session.completed` | the buyer paid (by debit: `payment_status: unpaid`) | session |
//! | `checkout.session.async_payment_succeeded` | a debit settled: session `paid` | session |
//! | `checkout.session.async_payment_failed` | a debit failed: session stays `unpaid` | session |
//! | `checkout.session.expired` | expired by a call or at `expires_at` | session |
//! | `payment_intent.succeeded` | an intent paid (a session's too; dated as its charge) | intent |
//! | `payment_intent.processing` | a session paid by debit | intent |
//! | `payment_intent.payment_failed` | a bare intent declined, or a debit failed | intent |
//! | `charge.refunded` | a refund made, pending ones too (as Stripe counts them) | charge |
//! | `refund.updated` | a pending refund succeeded or failed | refund |
//! | `refund.failed` | a pending refund failed (the charge can be refunded again) | refund |
//!
//! # Test switches
//!
//! `POST /sandbox/settings` with any of these JSON fields (the others stay):
//!
//! | Field | Default | Effect |
//! |---|---|---|
//! | `webhook_delay_ms: u64` | 0 | wait this long before delivering each event |
//! | `duplicate_webhooks: bool` | false | deliver every event twice, same event id |
//! | `drop_webhooks: u32` | 0 | the next N events are never delivered (lost callbacks) |
//! | `reorder_webhooks: bool` | false | hold events 250 ms and deliver each batch newest first |
//! | `enabled_events: [String]` | `["*"]` (config) | the event types the endpoint is subscribed to, as Stripe's `enabled_events`; others are counted as `filtered` |
//! | `fail_refunds_for_ms: u64` | 0 | every refund call answers `500 api_error` for this long from now (0 ends it) |
//! | `refund_answer_delay_ms: u64` | 0 | a refund call's answer is held back this long after the refund is made (a caller killed meanwhile never hears of it) |
//! | `search_lag_ms: u64` | 2000 (config) | search finds a change only this long after it is made (before: the intent as it was, or nothing) |
//! | `replay_failures: bool` | true | a failure met while executing (a `500`, a refusal of state) is saved under the call's idempotency key and replayed to its retries, as Stripe does; validation refusals and `429` never are |
//! | `idempotency_ttl_ms: u64` | 86 400 000 | how long a key's answer is kept (at most 24 h) |
//! | `async_payments: bool` | false | checkout is paid by a bank debit: session `complete`/`unpaid`, intent `processing` |
//! | `async_payments_fail: bool` | false | such a debit fails (intent back to `requires_payment_method`) |
//! | `async_settle_ms: u64` | 2000 | how long a debit takes to settle or fail |
//! | `pending_refunds_ms: u64` | 0 | refunds are made `pending` and settle this long after (0: `succeeded` at once) |
//! | `fail_pending_refunds: bool` | false | a pending refund ends `failed` (`failure_reason: unknown`) |
//!
//! Delays are capped at an hour. A debit's or pending refund's outcome is
//! the switch's value when it was made. `GET /sandbox/settings` answers
//! them all (`fail_refunds_for_ms`: what is left).
//!
//! Config fields beyond the addresses and secrets: `max_objects`,
//! `webhook_attempts`, `webhook_retry_ms`, `enabled_events`,
//! `search_lag_ms`, `pending_refunds_ms`, and the test knob `min_session_seconds` (default
//! 1800, Stripe's 30 minutes): the shortest `expires_at` a session may ask
//! for, lowered by tests to see sessions expire by themselves.
//!
//! # Bounds
//!
//! Bodies of at most 16 KiB; at most `max_objects` intents, refunds and
//! sessions together (then `429`), as many idempotency keys (the oldest
//! forgotten); one timer per object (an expiry, a settling); 100 refund
//! calls kept per intent; at most 100 000 events queued (then dropped and
//! counted), 32 deliveries at once.

mod api;
mod app;
mod body;
mod checkout;
mod clock;
mod config;
mod error;
mod events;
mod failure;
mod idempotency;
mod ids;
mod ledger;
mod params;
mod search;
mod state;
mod switches;
mod sync;
mod testing;
mod ticker;
mod webhooks;

pub use app::Sandbox;
pub use config::SandboxConfig;
pub use error::SandboxError;
