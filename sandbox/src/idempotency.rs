//! Idempotency keys, as Stripe keeps them: the first answer to a key is
//! saved and replayed to every retry with the same parameters; a retry
//! with other parameters is refused. Stripe saves an answer once the call
//! began executing, whether it succeeded or failed (a `500` included), so
//! a retry under the same key gets that failure again until the key is
//! forgotten. The caller decides which answers are saved (the
//! `replay_failures` switch can keep failures out, as before).
//!
//! Stripe forgets keys after 24 hours (`idempotency_ttl_ms`); the sandbox
//! also forgets the oldest once it holds its bound, so memory stays bounded
//! under any load.

use std::collections::{HashMap, VecDeque};

use warp::http::StatusCode;

use crate::clock::Moment;
use crate::failure::Failure;

/// Stripe's limit on a key's length.
pub(crate) const MAX_KEY_CHARS: usize = 255;

/// A saved first answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    /// The JSON answered then.
    pub(crate) body: String,
}

#[derive(Debug, Clone)]
struct Stored {
    /// Of the route and parameters the key was first used with.
    fingerprint: u64,
    answer: Answer,
    /// When it was saved, for the key's lifetime.
    at: Moment,
}

/// The remembered keys, oldest first.
#[derive(Debug)]
pub(crate) struct Replays {
    stored: HashMap<String, Stored>,
    order: VecDeque<String>,
    max: usize,
}

impl Replays {
    /// Remembers at most `max` keys.
    pub(crate) fn new(max: usize) -> Self {
        Self { stored: HashMap::new(), order: VecDeque::new(), max: max.max(1) }
    }

    /// The answer to replay for `key` at `now`, if it was used before with
    /// the same `fingerprint` less than `ttl_ms` ago; refused if it was used
    /// with another.
    pub(crate) fn replay(
        &mut self,
        key: &str,
        fingerprint: u64,
        now: Moment,
        ttl_ms: u64,
    ) -> Result<Option<Answer>, Failure> {
        if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
            return Err(Failure::invalid(
                "idempotency_key_invalid",
                format!("Idempotency keys must be 1 to {MAX_KEY_CHARS} characters."),
            ));
        }
        self.forget_before(now.before_ms(ttl_ms));
        match self.stored.get(key) {
            None => Ok(None),
            Some(stored) if stored.fingerprint == fingerprint => Ok(Some(stored.answer.clone())),
            Some(_) => Err(Failure::idempotency_mismatch(key)),
        }
    }

    /// Saves the first answer to `key`.
    pub(crate) fn remember(&mut self, key: &str, fingerprint: u64, answer: Answer, now: Moment) {
        if self.stored.contains_key(key) {
            return;
        }
        if self.order.len() >= self.max {
            if let Some(oldest) = self.order.pop_front() {
                self.stored.remove(&oldest);
            }
        }
        self.order.push_back(key.to_owned());
        self.stored.insert(key.to_owned(), Stored { fingerprint, answer, at: now });
    }

    /// Forgets the keys saved before `cutoff`: the oldest come first, so
    /// this stops at the first one kept.
    fn forget_before(&mut self, cutoff: Moment) {
        while let Some(oldest) = self.order.front() {
            if self.stored.get(oldest).is_some_and(|stored| stored.at >= cutoff) {
                break;
            }
            if let Some(oldest) = self.order.pop_front() {
                self.stored.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: u64 = 86_400_000;

    fn ok(body: &str) -> Answer {
        Answer { status: StatusCode::OK, body: body.to_owned() }
    }

    #[test]
    fn a_key_replays_its_answer_and_refuses_other_parameters() {
        let now = Moment::from_secs(1_000);
        let mut replays = Replays::new(10);
        assert_eq!(replays.replay("k", 1, now, DAY_MS), Ok(None));
        replays.remember("k", 1, ok("{\"id\":\"pi_1\"}"), now);
        assert_eq!(replays.replay("k", 1, now, DAY_MS), Ok(Some(ok("{\"id\":\"pi_1\"}"))));
        let refused = replays.replay("k", 2, now, DAY_MS).expect_err("other parameters");
        assert_eq!(refused.code, Some("idempotency_key_in_use"));
        assert!(replays.replay("", 1, now, DAY_MS).is_err());
        assert!(replays.replay(&"k".repeat(256), 1, now, DAY_MS).is_err());
    }

    #[test]
    fn a_saved_failure_is_replayed_like_a_success() {
        let now = Moment::from_secs(1_000);
        let mut replays = Replays::new(10);
        let failure = Answer { status: StatusCode::INTERNAL_SERVER_ERROR, body: "{}".to_owned() };
        replays.remember("k", 1, failure.clone(), now);
        replays.remember("k", 1, ok("later"), now);
        assert_eq!(replays.replay("k", 1, now.after_ms(DAY_MS - 1), DAY_MS), Ok(Some(failure)));
    }

    #[test]
    fn keys_are_forgotten_at_the_bound_and_after_their_lifetime() {
        let now = Moment::from_secs(1_000);
        let mut replays = Replays::new(2);
        replays.remember("a", 1, ok("a"), now);
        replays.remember("b", 1, ok("b"), now.after_ms(50));
        replays.remember("c", 1, ok("c"), now.after_ms(100));
        assert_eq!(replays.replay("a", 1, now, DAY_MS), Ok(None));
        assert_eq!(replays.replay("c", 1, now.after_ms(100), DAY_MS), Ok(Some(ok("c"))));
        assert_eq!(replays.replay("b", 1, now.after_ms(149), 100), Ok(Some(ok("b"))));
        assert_eq!(replays.replay("b", 1, now.after_ms(151), 100), Ok(None));
        assert_eq!(replays.replay("c", 1, now.after_ms(151), 100), Ok(Some(ok("c"))));
    }
}
