//! The sandbox's configuration: one flat section of its own, loaded with
//! `seckill_core::config::load_sandbox` (so `SECKILL_SANDBOX_WEBHOOK_URL=…` overrides the
//! file's `webhook_url`).

use std::fmt;
use std::net::SocketAddr;

use seckill_core::config::{ensure, ConfigError, Validate};
use serde::{Deserialize, Serialize};

/// Everything the sandbox needs; every field has a local default.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Address of the API and the checkout pages; port 0 picks one (tests).
    pub listen: SocketAddr,
    /// Base of the checkout URLs handed to buyers, when they reach the
    /// sandbox by another name than its bound address (a container, a
    /// proxy). Default: `http://<bound address>`.
    pub public_url: Option<String>,
    /// The secret key the platform must send as `Authorization: Bearer`.
    pub api_key: String,
    /// Where events are POSTed (the platform's webhook route); none: events
    /// are counted as dropped.
    pub webhook_url: Option<String>,
    /// Key of the webhooks' `Stripe-Signature`; the platform must hold it.
    pub webhook_secret: String,
    /// Most intents and refunds kept (all in memory): past it, creating
    /// either is refused `429`.
    pub max_objects: usize,
    /// Deliveries of one event tried before it is given up as failed.
    pub webhook_attempts: u32,
    /// Wait before the first retry of a delivery; doubled for each next.
    pub webhook_retry_ms: u64,
    /// The event types the webhook endpoint is subscribed to, as a Stripe
    /// endpoint's `enabled_events`: `["*"]` (all) or names such as
    /// `checkout.session.completed`; by default the platform's
    /// (`seckill_payments::events::SUBSCRIBED`). The `enabled_events`
    /// switch changes it.
    pub enabled_events: Vec<String>,
    /// How long a change to an intent takes to show in search (Stripe's
    /// search is eventually consistent); the `search_lag_ms` switch
    /// changes it.
    pub search_lag_ms: u64,
    /// How long a refund stays `pending` before it ends (0: refunds succeed
    /// at once); the `pending_refunds_ms` switch changes it.
    pub pending_refunds_ms: u64,
    /// Test knob: the shortest lifetime a checkout session's `expires_at`
    /// may ask for. Stripe's is 30 minutes (1800, the default); tests lower
    /// it to see sessions expire by themselves.
    pub min_session_seconds: u32,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8090)),
            public_url: None,
            api_key: "sk_test_sandbox".to_owned(),
            webhook_url: None,
            webhook_secret: "whsec_sandbox".to_owned(),
            max_objects: 1_000_000,
            webhook_attempts: 8,
            webhook_retry_ms: 200,
            // The platform's endpoint as operators register it at Stripe.
            enabled_events: seckill_payments::events::SUBSCRIBED.iter().map(|&kind| kind.to_owned()).collect(),
            search_lag_ms: 2_000,
            pending_refunds_ms: 0,
            min_session_seconds: 1_800,
        }
    }
}

impl SandboxConfig {
    /// The defaults on `127.0.0.1:0`, delivering to `webhook_url`: tests.
    pub fn local(webhook_url: Option<String>) -> Self {
        Self { listen: SocketAddr::from(([127, 0, 0, 1], 0)), webhook_url, ..Self::default() }
    }
}

impl fmt::Debug for SandboxConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxConfig")
            .field("listen", &self.listen)
            .field("public_url", &self.public_url)
            .field("api_key", &"[redacted]")
            .field("webhook_url", &self.webhook_url)
            .field("webhook_secret", &"[redacted]")
            .field("max_objects", &self.max_objects)
            .field("webhook_attempts", &self.webhook_attempts)
            .field("webhook_retry_ms", &self.webhook_retry_ms)
            .field("enabled_events", &self.enabled_events)
            .field("search_lag_ms", &self.search_lag_ms)
            .field("pending_refunds_ms", &self.pending_refunds_ms)
            .field("min_session_seconds", &self.min_session_seconds)
            .finish()
    }
}

fn is_http_url(url: &str) -> bool {
    (url.starts_with("http://") || url.starts_with("https://")) && !url.contains(char::is_whitespace)
}

impl Validate for SandboxConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        ensure(self.public_url.as_deref().is_none_or(is_http_url), "public_url", "must be an http(s) URL")?;
        ensure(
            !self.api_key.is_empty() && self.api_key.is_ascii() && !self.api_key.contains(char::is_whitespace),
            "api_key",
            "must be non-empty ASCII without spaces",
        )?;
        ensure(self.webhook_url.as_deref().is_none_or(is_http_url), "webhook_url", "must be an http(s) URL")?;
        ensure(!self.webhook_secret.is_empty(), "webhook_secret", "must not be empty")?;
        ensure((1..=100_000_000).contains(&self.max_objects), "max_objects", "must be 1 to 100000000")?;
        ensure((1..=30).contains(&self.webhook_attempts), "webhook_attempts", "must be 1 to 30")?;
        ensure((1..=60_000).contains(&self.webhook_retry_ms), "webhook_retry_ms", "must be 1 to 60000")?;
        let enabled = crate::switches::check_enabled_events(&self.enabled_events);
        ensure(enabled.is_ok(), "enabled_events", "must be [\"*\"] or 1 to 256 event types")?;
        ensure(self.search_lag_ms <= 3_600_000, "search_lag_ms", "must be at most 3600000")?;
        ensure(self.pending_refunds_ms <= 3_600_000, "pending_refunds_ms", "must be at most 3600000")?;
        ensure((1..=1_800).contains(&self.min_session_seconds), "min_session_seconds", "must be 1 to 1800")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_load_and_keys_are_checked() {
        let config: SandboxConfig = seckill_core::config::load_with(None, &[]).expect("defaults load");
        assert_eq!(config, SandboxConfig::default());
        let config: SandboxConfig =
            seckill_core::config::load_with(None, &[("webhook_url", "http://127.0.0.1:8080/api/v1/payments/webhook")])
                .expect("loads");
        assert_eq!(config.webhook_url.as_deref(), Some("http://127.0.0.1:8080/api/v1/payments/webhook"));
        let error = seckill_core::config::load_with::<SandboxConfig>(None, &[("webhook_attempts", "0")])
            .expect_err("refused")
            .to_string();
        assert!(error.contains("webhook_attempts"), "{error}");
        let error = seckill_core::config::load_with::<SandboxConfig>(None, &[("webhook_url", "127.0.0.1:8080")])
            .expect_err("refused")
            .to_string();
        assert!(error.contains("webhook_url"), "{error}");
        let error = seckill_core::config::load_with::<SandboxConfig>(None, &[("min_session_seconds", "0")])
            .expect_err("refused")
            .to_string();
        assert!(error.contains("min_session_seconds"), "{error}");
    }

    #[test]
    fn secrets_do_not_print() {
        let printed = format!("{:?}", SandboxConfig::default());
        assert!(!printed.contains("sk_test_sandbox") && !printed.contains("whsec_sandbox"), "{printed}");
    }
}
