//! A cost for bots: the proof of work of vouchers with `challenge_bits`
//! (`seckill_core::challenge` has the format).
//!
//! `GET /api/v1/vouchers/{id}/challenge` signs a challenge for the caller
//! and keeps nothing; an order, queue join or draw entry presents it with
//! its solution in the `Seckill-Challenge` and `Seckill-Solution` headers.
//! The signature, expiry and solution are checked here, before Redis; that
//! the voucher asks for a proof at all, that it is hard enough, and that
//! each is spent once are decided by the admission scripts, atomically
//! with what it pays for.
//!
//! The difficulty is the voucher's `challenge_bits`, raised while the
//! platform hands out challenges for the voucher faster than
//! `challenge.raise_above_per_second` (one bit per doubling of the rate).
//! Each ingress counts its own challenges as it issues them and, once a
//! second per voucher, adds them to a count every ingress shares in Redis
//! (`lua/challenge_rate.lua`): the rate is the larger of its own and the
//! platform's, so a balancer spreading the load over many ingresses does
//! not divide the cost, and no request waits on Redis for it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use seckill_core::challenge::{self, ChallengeError, MAX_BITS};
use seckill_core::{UserId, VoucherId};
use seckill_gate::{Gate, Proof, Rejection};
use seckill_web::ApiError;
use serde::Serialize;
use warp::http::{HeaderMap, StatusCode};

use crate::config::ChallengeConfig;

/// The request headers a proof travels in.
pub(crate) const CHALLENGE_HEADER: &str = "seckill-challenge";
pub(crate) const SOLUTION_HEADER: &str = "seckill-solution";
/// How often the shared key is read again: an ingress started after Redis
/// lost it drew a new one, which every other ingress must take up.
const KEY_REREAD_EVERY: Duration = Duration::from_secs(5);
/// How long a voucher's `challenge_bits` read from Redis is trusted.
const BITS_FRESH_FOR: Duration = Duration::from_secs(1);
/// Most vouchers whose rate and bits are kept (a flood of made-up voucher
/// ids finds nothing in Redis and is not kept).
const MAX_TRACKED_VOUCHERS: usize = 10_000;

/// What `GET …/challenge` answers.
#[derive(Debug, Serialize)]
pub(crate) struct IssuedChallenge {
    /// Whether this voucher asks for a proof at all.
    pub(crate) required: bool,
    pub(crate) challenge: String,
    /// Leading zero bits SHA-256(`<challenge>:<solution>`) needs.
    pub(crate) bits: u32,
    pub(crate) expires_at: String,
    pub(crate) algorithm: &'static str,
}

/// One voucher's difficulty and request rate on this ingress.
#[derive(Debug)]
struct Tracked {
    base_bits: u32,
    read_at: Instant,
    /// Challenges issued here in the current second, and the last whole second's count.
    second_started: Instant,
    this_second: u64,
    last_second: u64,
    /// Challenges issued here not yet added to the shared count.
    unshared: u64,
    /// Every ingress's rate, as last read from the shared count.
    shared_rate: u64,
}

/// Issues and checks the challenges of this ingress.
#[derive(Debug)]
pub(crate) struct Challenges {
    key: std::sync::RwLock<Vec<u8>>,
    config: ChallengeConfig,
    tracked: Mutex<HashMap<VoucherId, Tracked>>,
}

impl Challenges {
    pub(crate) async fn new(gate: &Gate, config: ChallengeConfig) -> redis::RedisResult<Self> {
        let key = std::sync::RwLock::new(gate.challenge_key().await?);
        Ok(Self { key, config, tracked: Mutex::default() })
    }

    /// Follows the shared key in Redis until `closing`.
    pub(crate) async fn follow_key(&self, gate: Gate, closing: tokio_util::sync::CancellationToken) {
        let mut every = tokio::time::interval(KEY_REREAD_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = closing.cancelled() => return,
                _ = every.tick() => {}
            }
            match gate.challenge_key().await {
                Ok(key) => {
                    let mut current = self.key.write().expect("key lock");
                    if *current != key {
                        tracing::warn!("The shared challenge key changed in Redis (it was lost and drawn again).");
                        *current = key;
                    }
                }
                Err(error) => tracing::debug!(%error, "Could not read the shared challenge key; keeping the last."),
            }
        }
    }

    /// A new challenge for `user` on `voucher` at the voucher's current
    /// difficulty; None when the voucher is unknown.
    pub(crate) async fn issue(
        &self,
        gate: &Gate,
        voucher: VoucherId,
        user: &UserId,
    ) -> Result<Option<IssuedChallenge>, ApiError> {
        let Some(base_bits) = self.base_bits(gate, voucher).await? else { return Ok(None) };
        let bits = if base_bits == 0 { 0 } else { (base_bits + self.extra_bits(voucher)).min(MAX_BITS) };
        let expires = Utc::now() + chrono::Duration::seconds(i64::from(self.config.seconds));
        Ok(Some(IssuedChallenge {
            required: base_bits > 0,
            challenge: challenge::issue(
                &self.key.read().expect("key lock"),
                voucher,
                user,
                expires.timestamp_millis(),
                bits,
            ),
            bits,
            expires_at: expires.to_rfc3339_opts(SecondsFormat::Millis, true),
            algorithm: "sha256-leading-zero-bits",
        }))
    }

    /// The proof the request's headers present, checked (signature, user,
    /// voucher, expiry, solution); None when they present none.
    pub(crate) fn proof(
        &self,
        voucher: VoucherId,
        user: &UserId,
        headers: &HeaderMap,
    ) -> Result<Option<Proof>, ApiError> {
        let text = |name: &str| headers.get(name).map(|value| value.to_str().unwrap_or("\u{0}"));
        // Half a proof is a wrong one: a missing solution does not solve,
        // a solution without its challenge solves nothing this server issued.
        let (challenge_text, solution) = match (text(CHALLENGE_HEADER), text(SOLUTION_HEADER)) {
            (None, None) => return Ok(None),
            (Some(challenge_text), solution) => (challenge_text, solution.unwrap_or_default()),
            (None, Some(_)) => return Err(refusal(ChallengeError::Malformed)),
        };
        let now = Utc::now().timestamp_millis();
        let claims = challenge::verify(&self.key.read().expect("key lock"), voucher, user, challenge_text, now)
            .map_err(refusal)?;
        challenge::check_solution(challenge_text, solution, claims.bits).map_err(refusal)?;
        Ok(Some(Proof { nonce: claims.nonce, bits: claims.bits, expires_ms: claims.expires_ms }))
    }

    /// The voucher's own `challenge_bits` (None: no such voucher), read
    /// from Redis at most once a second per voucher; with them the
    /// challenges issued here go into the shared count, and the platform's
    /// rate comes back.
    async fn base_bits(&self, gate: &Gate, voucher: VoucherId) -> Result<Option<u32>, ApiError> {
        let unshared = match self.tracked.lock().expect("challenges lock").get_mut(&voucher) {
            Some(tracked) if tracked.read_at.elapsed() < BITS_FRESH_FOR => return Ok(Some(tracked.base_bits)),
            Some(tracked) => std::mem::take(&mut tracked.unshared),
            None => 0,
        };
        let sales = gate.sales(&[voucher]).await.map_err(|error| {
            tracing::warn!(%error, %voucher, "A voucher's challenge bits could not be read.");
            ApiError::unavailable("the voucher could not be read; retry")
        })?;
        let Some(sale) = sales.into_iter().next().flatten() else { return Ok(None) };
        // Only a voucher that asks for proofs has a difficulty to raise.
        let shared_rate = if sale.challenge_bits > 0 {
            match gate.count_challenges(voucher, unshared).await {
                Ok(rate) => Some(rate.last_second.max(rate.this_second)),
                Err(error) => {
                    tracing::debug!(%error, %voucher, "The shared challenge count could not be updated.");
                    None
                }
            }
        } else {
            None
        };
        let mut tracked = self.tracked.lock().expect("challenges lock");
        if tracked.len() >= MAX_TRACKED_VOUCHERS && !tracked.contains_key(&voucher) {
            tracked.clear();
        }
        let now = Instant::now();
        let entry = tracked.entry(voucher).or_insert(Tracked {
            base_bits: sale.challenge_bits,
            read_at: now,
            second_started: now,
            this_second: 0,
            last_second: 0,
            unshared: 0,
            shared_rate: 0,
        });
        entry.base_bits = sale.challenge_bits;
        entry.read_at = now;
        // Unread (Redis busy), the platform's rate is taken as this ingress's own.
        entry.shared_rate = shared_rate.unwrap_or(0);
        Ok(Some(sale.challenge_bits))
    }

    /// Counts one challenge for `voucher` and returns the bits its rate
    /// (this ingress's or the platform's, the larger) adds: one per
    /// doubling above `raise_above_per_second`.
    fn extra_bits(&self, voucher: VoucherId) -> u32 {
        let mut tracked = self.tracked.lock().expect("challenges lock");
        let Some(entry) = tracked.get_mut(&voucher) else { return 0 };
        let elapsed = entry.second_started.elapsed();
        if elapsed >= Duration::from_secs(1) {
            entry.last_second = if elapsed < Duration::from_secs(2) { entry.this_second } else { 0 };
            entry.this_second = 0;
            entry.second_started = Instant::now();
        }
        entry.this_second += 1;
        entry.unshared += 1;
        let rate = entry.last_second.max(entry.this_second).max(entry.shared_rate);
        raised_bits(rate, u64::from(self.config.raise_above_per_second), self.config.max_extra_bits)
    }
}

/// Bits a rate adds: 0 up to `threshold`, then 1 + log2(rate / threshold).
fn raised_bits(rate: u64, threshold: u64, most: u32) -> u32 {
    if threshold == 0 || rate <= threshold {
        return 0;
    }
    (1 + (rate / threshold).ilog2()).min(most)
}

/// The answer to a proof refused before Redis.
fn refusal(error: ChallengeError) -> ApiError {
    let code = match error {
        ChallengeError::Malformed | ChallengeError::BadSignature => "challenge_invalid",
        ChallengeError::Expired => "challenge_expired",
        ChallengeError::MalformedSolution | ChallengeError::WrongSolution => "challenge_wrong_solution",
    };
    ApiError::new(
        StatusCode::FORBIDDEN,
        code,
        format!("{error}: get a new one (GET /api/v1/vouchers/{{id}}/challenge)"),
    )
}

/// How the admission scripts' refusals of a proof are answered.
pub(crate) fn rejection_error(rejection: &Rejection) -> Option<ApiError> {
    let code = rejection.code();
    Some(match rejection {
        Rejection::ChallengeRequired { bits } => ApiError::new(
            StatusCode::FORBIDDEN,
            code,
            "this sale asks for a proof of work: GET /api/v1/vouchers/{id}/challenge, solve it, and send it in the \
             Seckill-Challenge and Seckill-Solution headers",
        )
        .with_detail("bits", *bits),
        Rejection::ChallengeTooEasy { bits } => {
            ApiError::new(StatusCode::FORBIDDEN, code, "the challenge is easier than this sale asks: get a new one")
                .with_detail("bits", *bits)
        }
        Rejection::ChallengeExpired => {
            ApiError::new(StatusCode::FORBIDDEN, code, "the challenge expired: get a new one")
        }
        Rejection::ChallengeUsed => ApiError::new(
            StatusCode::CONFLICT,
            code,
            "this challenge paid for a request already: each solution is accepted once, get a new one",
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_doubling_of_the_rate_adds_a_bit_up_to_the_cap() {
        assert_eq!(raised_bits(2_000, 2_000, 6), 0);
        assert_eq!(raised_bits(2_001, 2_000, 6), 1);
        assert_eq!(raised_bits(4_000, 2_000, 6), 2);
        assert_eq!(raised_bits(8_000, 2_000, 6), 3);
        assert_eq!(raised_bits(10_000_000, 2_000, 6), 6);
        assert_eq!(raised_bits(10_000_000, 0, 6), 0, "0 never raises");
    }
}
