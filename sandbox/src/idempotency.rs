//! Idempotency keys, as Stripe keeps them: the first successful answer to
//! a key is stored and replayed to every retry with the same parameters; a
//! retry with other parameters is refused. Failures are not stored, so a
//! call refused for a passing reason (a `500`) can be retried under its key.
//!
//! Stripe forgets keys after a day; the sandbox forgets the oldest once it
//! holds its bound, so memory stays bounded under any load.

use std::collections::{HashMap, VecDeque};

use crate::failure::Failure;

/// Stripe's limit on a key's length.
pub(crate) const MAX_KEY_CHARS: usize = 255;

/// A stored first answer.
#[derive(Debug, Clone)]
struct Stored {
    /// Of the route and parameters the key was first used with.
    fingerprint: u64,
    /// The JSON answered then.
    body: String,
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

    /// The answer to replay for `key`, if it was used before with the same
    /// `fingerprint`; refused if it was used with another.
    pub(crate) fn replay(&self, key: &str, fingerprint: u64) -> Result<Option<String>, Failure> {
        if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
            return Err(Failure::invalid(
                "idempotency_key_invalid",
                format!("Idempotency keys must be 1 to {MAX_KEY_CHARS} characters."),
            ));
        }
        match self.stored.get(key) {
            None => Ok(None),
            Some(stored) if stored.fingerprint == fingerprint => Ok(Some(stored.body.clone())),
            Some(_) => Err(Failure::idempotency_mismatch(key)),
        }
    }

    /// Stores the first successful answer to `key`.
    pub(crate) fn remember(&mut self, key: &str, fingerprint: u64, body: &str) {
        if self.stored.contains_key(key) {
            return;
        }
        if self.order.len() >= self.max {
            if let Some(oldest) = self.order.pop_front() {
                self.stored.remove(&oldest);
            }
        }
        self.order.push_back(key.to_owned());
        self.stored.insert(key.to_owned(), Stored { fingerprint, body: body.to_owned() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_replays_its_answer_and_refuses_other_parameters() {
        let mut replays = Replays::new(10);
        assert_eq!(replays.replay("k", 1), Ok(None));
        replays.remember("k", 1, "{\"id\":\"pi_1\"}");
        assert_eq!(replays.replay("k", 1), Ok(Some("{\"id\":\"pi_1\"}".to_owned())));
        let refused = replays.replay("k", 2).expect_err("other parameters");
        assert_eq!(refused.code, Some("idempotency_key_in_use"));
        assert!(replays.replay("", 1).is_err());
        assert!(replays.replay(&"k".repeat(256), 1).is_err());
    }

    #[test]
    fn the_oldest_key_is_forgotten_at_the_bound() {
        let mut replays = Replays::new(2);
        replays.remember("a", 1, "a");
        replays.remember("b", 1, "b");
        replays.remember("c", 1, "c");
        assert_eq!(replays.replay("a", 1), Ok(None));
        assert_eq!(replays.replay("c", 1), Ok(Some("c".to_owned())));
    }
}
