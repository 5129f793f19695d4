//! The ingress's configuration.

mod auth;
mod challenge;
mod live;
mod rate_limit;
mod watch;

pub use auth::AuthConfig;
pub use challenge::ChallengeConfig;
pub use live::{LiveConfig, MAX_WAIT_SECONDS};
pub use rate_limit::RateLimitConfig;
pub use seckill_core::beacon::BeaconConfig;
use seckill_core::config::{
    ensure, ConfigError, DrawConfig, HttpConfig, KafkaConfig, PaymentsConfig, RedisConfig, Validate,
};
use serde::{Deserialize, Serialize};
pub use watch::WatchConfig;

/// Everything the ingress needs; see `config/ingress.toml` for an example.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngressConfig {
    pub http: HttpConfig,
    pub redis: RedisConfig,
    pub kafka: KafkaConfig,
    /// Who may call: user tokens and the admin token.
    pub auth: AuthConfig,
    /// How fast one user or one address may send order requests.
    pub rate_limit: RateLimitConfig,
    /// The read side: caches, waiters and streams.
    pub live: LiveConfig,
    /// The consumer groups watched for the alert rules.
    pub watch: WatchConfig,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: u64,
    /// Base URL of the projector's query API, used for status queries when
    /// the view is not in this process.
    pub view_url: String,
    /// How long in-flight requests may take to finish at shutdown.
    pub drain_ms: u64,
    /// How long a sell-out seen in Redis is answered from memory (0: never):
    /// also the longest a returned unit can go unnoticed.
    pub sold_out_memo_ms: u64,
    /// Most admitted orders an outbox may hold before new orders are
    /// refused with `503` (the log is down or far behind): on a single Redis
    /// its one outbox, so the whole backlog; on a Redis Cluster each voucher
    /// bucket's own outbox.
    pub max_outbox_entries: u64,
    /// How long an outbox entry may stay unacknowledged by the relay that
    /// read it before another relay publishes it (its process died).
    pub outbox_claim_idle_ms: u64,
    /// How long a relay consumer with no pending entry may stay idle in the
    /// outbox group before a live relay removes it (its process is gone).
    pub outbox_retire_consumer_ms: u64,
    /// On a Redis Cluster, how often the relay walks every master for
    /// outboxes (those its own ingress writes to it reads at once): how late
    /// the orders of an ingress that died before relaying them may be found.
    pub outbox_discovery_ms: u64,
    /// How long an admin's `Idempotency-Key` is remembered: a retry within
    /// it completes the first request's change and answers its answer.
    pub admin_idempotency_ttl_seconds: u64,
    /// The payment provider (off unless `base_url` is set).
    pub payments: PaymentsConfig,
    /// The proof of work of vouchers with `challenge_bits`.
    pub challenge: ChallengeConfig,
    /// Draws: the key sealing each draw's seed into the log.
    pub draw: DrawConfig,
    /// The public randomness beacon draws rank by (none unless `relays`).
    pub beacon: BeaconConfig,
}

impl Default for IngressConfig {
    fn default() -> Self {
        Self {
            http: HttpConfig::local(8080),
            redis: RedisConfig::default(),
            kafka: KafkaConfig::default(),
            auth: AuthConfig::default(),
            rate_limit: RateLimitConfig::default(),
            live: LiveConfig::default(),
            watch: WatchConfig::default(),
            max_body_bytes: 16 * 1024,
            view_url: "http://127.0.0.1:8082".to_owned(),
            drain_ms: 10_000,
            sold_out_memo_ms: 500,
            max_outbox_entries: 100_000,
            outbox_claim_idle_ms: 5_000,
            outbox_retire_consumer_ms: 600_000,
            outbox_discovery_ms: 5_000,
            admin_idempotency_ttl_seconds: 86_400,
            payments: PaymentsConfig::default(),
            challenge: ChallengeConfig::default(),
            draw: DrawConfig::default(),
            beacon: BeaconConfig::default(),
        }
    }
}

impl Validate for IngressConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.http.validate()?;
        self.redis.validate()?;
        self.kafka.validate()?;
        self.auth.validate()?;
        // Trusting X-User-Id is only safe where every client is on this
        // machine: a listener any other host can reach would let anyone act
        // as anyone.
        ensure(
            !self.auth.insecure_dev_user_header || self.http.listen.ip().is_loopback(),
            "auth.insecure_dev_user_header",
            format!(
                "is only allowed on a loopback listener (127.0.0.1 or ::1), not http.listen = {}: \
                 anyone who can reach it could act as any user",
                self.http.listen
            ),
        )?;
        self.rate_limit.validate()?;
        self.live.validate()?;
        self.watch.validate()?;
        self.payments.validate_receiving()?;
        self.challenge.validate()?;
        self.draw.validate()?;
        self.beacon.validate()?;
        ensure((256..=1024 * 1024).contains(&self.max_body_bytes), "max_body_bytes", "must be 256 to 1048576")?;
        ensure(
            self.view_url.starts_with("http://") || self.view_url.starts_with("https://"),
            "view_url",
            "must be an http(s) URL",
        )?;
        ensure(self.drain_ms <= 120_000, "drain_ms", "must be at most 120000")?;
        ensure(self.sold_out_memo_ms <= 1_000, "sold_out_memo_ms", "must be at most 1000")?;
        ensure((1..=10_000_000).contains(&self.max_outbox_entries), "max_outbox_entries", "must be 1 to 10000000")?;
        ensure((100..=600_000).contains(&self.outbox_claim_idle_ms), "outbox_claim_idle_ms", "must be 100 to 600000")?;
        ensure(
            (10_000..=86_400_000).contains(&self.outbox_retire_consumer_ms),
            "outbox_retire_consumer_ms",
            "must be 10000 to 86400000",
        )?;
        ensure((100..=600_000).contains(&self.outbox_discovery_ms), "outbox_discovery_ms", "must be 100 to 600000")?;
        ensure(
            (60..=30 * 86_400).contains(&self.admin_idempotency_ttl_seconds),
            "admin_idempotency_ttl_seconds",
            "must be 60 to 2592000 (30 days)",
        )
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use seckill_core::config::{load_with, Secret};

    use super::*;

    const SECRETS: [(&str, &str); 2] =
        [("auth.admin_token", "an admin token for tests"), ("auth.jwt_secret", "0123456789abcdef0123456789abcdef")];

    fn with_secrets() -> IngressConfig {
        let mut config = IngressConfig::default();
        config.auth.admin_token = Some(Secret::new(SECRETS[0].1));
        config.auth.jwt_secret = Some(Secret::new(SECRETS[1].1));
        config
    }

    #[test]
    fn the_example_config_with_its_secrets_matches_the_defaults() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/ingress.toml");
        let loaded: IngressConfig = load_with(Some(&example), &SECRETS).expect("the example loads");
        assert_eq!(loaded, with_secrets());
    }

    #[test]
    fn missing_or_weak_secrets_are_refused_by_name() {
        let refused =
            |overrides: &[(&str, &str)]| load_with::<IngressConfig>(None, overrides).expect_err("refused").to_string();
        assert!(refused(&[]).contains("auth.admin_token"));
        assert!(refused(&SECRETS[..1]).contains("auth.jwt_secret"));
        assert!(refused(&[SECRETS[0], ("auth.jwt_secret", "too short")]).contains("auth.jwt_secret"));
        assert!(refused(&[("auth.admin_token", "short"), SECRETS[1]]).contains("auth.admin_token"));
        assert!(refused(&[("auth.admin_token", "looks.like.a.user.token"), SECRETS[1]]).contains("auth.admin_token"));
        assert!(refused(&[SECRETS[0], SECRETS[1], ("rate_limit.per_user_burst", "0")])
            .contains("rate_limit.per_user_burst"));

        let dev: IngressConfig =
            load_with(None, &[SECRETS[0], ("auth.insecure_dev_user_header", "true")]).expect("dev setup");
        assert!(dev.auth.jwt_secret.is_none());
    }

    #[test]
    fn the_development_identity_header_is_refused_off_the_loopback() {
        let dev = |listen: &str| {
            load_with::<IngressConfig>(
                None,
                &[SECRETS[0], SECRETS[1], ("auth.insecure_dev_user_header", "true"), ("http.listen", listen)],
            )
        };
        for exposed in ["0.0.0.0:8080", "[::]:8080", "192.0.2.10:8080"] {
            let refused = dev(exposed).expect_err("refused").to_string();
            assert!(refused.contains("auth.insecure_dev_user_header") && refused.contains("loopback"), "{refused}");
        }
        for loopback in ["127.0.0.1:8080", "[::1]:8080"] {
            dev(loopback).expect("allowed on the loopback");
        }
        // Off, any listener is fine.
        load_with::<IngressConfig>(None, &[SECRETS[0], SECRETS[1], ("http.listen", "0.0.0.0:8080")]).expect("loads");
    }

    #[test]
    fn secrets_never_print() {
        let printed = format!("{:?}", with_secrets());
        for (_, secret) in SECRETS {
            assert!(!printed.contains(secret), "{printed}");
        }
    }
}
