//! The platform's side of a Stripe-shaped payment provider: the JSON it
//! answers ([`types`]), the calls the platform makes ([`Provider`]) and the
//! signature on the webhooks it sends ([`signature`]).
//!
//! Only the API shape is assumed, so the same adapter talks to Stripe or to
//! the sandbox (`seckill-sandbox`) the tests and local runs use.

mod client;
pub mod signature;
pub mod types;

pub use client::{NewIntent, Provider, ProviderError, ProviderSettings};
pub use signature::SignatureError;
pub use types::{
    Charge, ChargeRef, ErrorBody, ErrorDetail, Event, EventData, IntentStatus, List, NextAction, PaymentIntent,
    RedirectToUrl, Refund,
};
