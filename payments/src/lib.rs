//! The platform's side of a Stripe-shaped payment provider: the JSON it
//! answers ([`types`]), the calls the platform makes ([`Provider`]) and the
//! signature on the webhooks it sends ([`signature`]).
//!
//! Only the API shape is assumed, so the same adapter talks to Stripe or to
//! the sandbox (`seckill-sandbox`) the tests and local runs use.

mod client;
pub mod events;
pub mod signature;
pub mod types;

pub use client::{
    NewCheckout, Provider, ProviderError, ProviderSettings, MAX_AMOUNT, MAX_SESSION_SECONDS, MIN_SESSION_SECONDS,
    STRIPE_VERSION,
};
pub use signature::SignatureError;
pub use types::{
    Charge, ChargeRef, CheckoutSession, ErrorBody, ErrorDetail, Event, EventData, IntentRef, IntentStatus, List,
    NextAction, PaymentIntent, RedirectToUrl, Refund, SessionPaymentStatus, SessionStatus,
};
