//! A cost for bots: the proof of work of vouchers with `challenge_bits`
//! (`seckill_core::challenge` has the format).
//!
//! `GET /api/v1/vouchers/{id}/challenge` signs a challenge for the caller
//! and keeps nothing; an order, queue join or draw entry presents it with
//! its solution in the `Seckill-Challenge` and `Seckill-Solution` headers.
//! The signature, the solution and the raised difficulty are checked here,
//! before Redis; that the voucher asks for a proof at all, that it meets
//! the voucher's own bits, that it has not expired (by the Redis clock) and
//! that each is spent once are decided by the admission scripts, atomically
//! with what it pays for.
//!
//! The difficulty is the voucher's `challenge_bits`, raised while the
//! platform sees proofs for the voucher *spent* faster than
//! `challenge.raise_above_per_second` (one bit per doubling of the rate).
//! Proofs spent, not challenges handed out: asking for challenges costs
//! nothing, so counting those would let anyone raise everyone's bits by
//! asking and never solving. Each user may ask for challenges at
//! `challenge.per_user_per_second` (a bounded token bucket per user on each
//! ingress; `429 rate_limited` past it). The bits are judged when the proof
//! is spent, at the rate of that moment: a challenge fetched at the base
//! difficulty before the rush does not escape the raise (`challenge_too_easy`,
//! get a new one). Each ingress counts the proofs its requests spent and,
//! once a second per voucher, adds them to a count every ingress shares in
//! Redis (`lua/challenge_rate.lua`): the rate is the larger of its own and
//! the platform's, so a balancer spreading the load over many ingresses
//! does not divide the cost, and no request waits on Redis for it.
//!
//! One clock judges expiry, Redis's: a challenge's expiry is dated by the
//! Redis clock (read with the shared count) and judged by the admission
//! scripts' `TIME` when it is spent, never by this machine's clock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use seckill_core::challenge::{self, ChallengeError, MAX_BITS};
use seckill_core::{UserId, VoucherId};
use seckill_gate::{Admission, Gate, Proof, Rejection};
use seckill_web::ApiError;
use serde::Serialize;
use warp::http::{HeaderMap, StatusCode};

use crate::config::ChallengeConfig;
use crate::rate_limit::{RateLimiter, Verdict};

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
/// Most users whose challenge requests are paced at once (the limiter's
/// memory bound; a flood of users only resets quiet users' buckets).
const MAX_TRACKED_USERS: usize = 100_000;

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

/// One voucher's difficulty and rate of proofs spent on this ingress.
#[derive(Debug)]
struct Tracked {
    base_bits: u32,
    read_at: Instant,
    /// Proofs spent through here in the current second, and the last whole second's count.
    second_started: Instant,
    this_second: u64,
    last_second: u64,
    /// Proofs spent through here not yet added to the shared count.
    unshared: u64,
    /// Every ingress's rate, as last read from the shared count.
    shared_rate: u64,
}

impl Tracked {
    /// Starts a new second when the current one is over.
    fn roll(&mut self) {
        let elapsed = self.second_started.elapsed();
        if elapsed >= Duration::from_secs(1) {
            self.last_second = if elapsed < Duration::from_secs(2) { self.this_second } else { 0 };
            self.this_second = 0;
            self.second_started = Instant::now();
        }
    }
}

/// Issues and checks the challenges of this ingress.
#[derive(Debug)]
pub(crate) struct Challenges {
    key: std::sync::RwLock<Vec<u8>>,
    config: ChallengeConfig,
    tracked: Mutex<HashMap<VoucherId, Tracked>>,
    /// Challenges each user may ask for: asking is free for the caller and
    /// costs a signature and (once a second per voucher) a Redis read here.
    per_user: Option<RateLimiter<UserId>>,
    /// The Redis clock minus this machine's (ms), as last read: challenges
    /// are dated by the clock the admission scripts judge their expiry by.
    clock_offset_ms: AtomicI64,
}

impl Challenges {
    pub(crate) async fn new(gate: &Gate, config: ChallengeConfig) -> redis::RedisResult<Self> {
        let key = std::sync::RwLock::new(gate.challenge_key().await?);
        let per_user =
            RateLimiter::new(f64::from(config.per_user_per_second), config.per_user_burst, MAX_TRACKED_USERS);
        Ok(Self { key, config, tracked: Mutex::default(), per_user, clock_offset_ms: AtomicI64::new(0) })
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
    /// difficulty; None when the voucher is unknown; `429 rate_limited`
    /// past the user's pace of challenge requests.
    pub(crate) async fn issue(
        &self,
        gate: &Gate,
        voucher: VoucherId,
        user: &UserId,
    ) -> Result<Option<IssuedChallenge>, ApiError> {
        if let Some(Verdict::Limited { retry_after }) =
            self.per_user.as_ref().map(|limiter| limiter.check(user, Instant::now()))
        {
            return Err(ApiError::rate_limited(retry_after, "too many challenges asked for by this user; slow down"));
        }
        let Some(base_bits) = self.base_bits(gate, voucher).await? else { return Ok(None) };
        let bits = self.required_bits(voucher, base_bits);
        let redis_now = Utc::now() + chrono::Duration::milliseconds(self.clock_offset_ms.load(Ordering::Relaxed));
        let expires = redis_now + chrono::Duration::seconds(i64::from(self.config.seconds));
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
    /// voucher, the bits the rate asks for now, solution); None when they
    /// present none. Its expiry is left to the admission script, which
    /// judges it by the Redis clock.
    pub(crate) async fn proof(
        &self,
        gate: &Gate,
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
        let claims = challenge::verify_signed(&self.key.read().expect("key lock"), voucher, user, challenge_text)
            .map_err(refusal)?;
        // Judged now, at the rate of now: the voucher's own bits are
        // admit.lua's to judge (an unknown voucher is too).
        if let Some(base_bits) = self.base_bits(gate, voucher).await? {
            let bits = self.required_bits(voucher, base_bits);
            if claims.bits < bits {
                return Err(rejection_error(&Rejection::ChallengeTooEasy { bits }).expect("a proof's refusal"));
            }
        }
        challenge::check_solution(challenge_text, solution, claims.bits).map_err(refusal)?;
        Ok(Some(Proof { nonce: claims.nonce, bits: claims.bits, expires_ms: claims.expires_ms }))
    }

    /// Counts a proof spent for `voucher` (the admission script took it,
    /// whatever it answered after): the rate the difficulty follows.
    pub(crate) fn spent(&self, voucher: VoucherId) {
        let mut tracked = self.tracked.lock().expect("challenges lock");
        if let Some(entry) = tracked.get_mut(&voucher) {
            entry.roll();
            entry.this_second += 1;
            entry.unshared += 1;
        }
    }

    /// The voucher's own `challenge_bits` (None: no such voucher), read
    /// from Redis at most once a second per voucher; with them the proofs
    /// spent here go into the shared count, and the platform's rate and
    /// the Redis clock come back.
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
                Ok(rate) => {
                    self.clock_offset_ms.store(rate.now_ms - Utc::now().timestamp_millis(), Ordering::Relaxed);
                    Some(rate.last_second.max(rate.this_second))
                }
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

    /// The bits a proof for `voucher` needs now: its own, plus what the
    /// rate of proofs spent (this ingress's or the platform's, the larger)
    /// adds, one per doubling above `raise_above_per_second`.
    fn required_bits(&self, voucher: VoucherId, base_bits: u32) -> u32 {
        if base_bits == 0 {
            return 0;
        }
        let mut tracked = self.tracked.lock().expect("challenges lock");
        let Some(entry) = tracked.get_mut(&voucher) else { return base_bits };
        entry.roll();
        let rate = entry.last_second.max(entry.this_second).max(entry.shared_rate);
        let extra = raised_bits(rate, u64::from(self.config.raise_above_per_second), self.config.max_extra_bits);
        (base_bits + extra).min(MAX_BITS)
    }
}

/// Whether `admit.lua` spent the proof a request presented before it gave
/// this answer: it checks the voucher, the retry records, the pace, the
/// sale's window and pause before the proof, and spends it before the
/// entry, the win, the limit, the stock and the outbox.
pub(crate) fn admission_spent_proof(admission: &Admission) -> bool {
    match admission {
        Admission::Admitted { .. } | Admission::Unacknowledged { .. } | Admission::Backlogged { .. } => true,
        Admission::Replayed { .. } | Admission::Fenced => false,
        Admission::Rejected(rejection) => matches!(
            rejection,
            Rejection::DuplicateOrder { .. }
                | Rejection::LimitExceeded { .. }
                | Rejection::SoldOut { .. }
                | Rejection::EntryRequired
                | Rejection::EntryInvalid
                | Rejection::EntryExpired
                | Rejection::EntryUsed { .. }
                | Rejection::NotWon
                | Rejection::WindowClosed
                | Rejection::WinUsed { .. }
        ),
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
