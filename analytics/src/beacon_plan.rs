//! Judging a sale's planned beacon round against its reveal, shared by a
//! draw's `beacon` check (`draw/beacon.rs`) and a waiting room's
//! `queue_beacon` rule (`audit/queue_beacon.rs`): the chain is sound, the
//! planned round is the first of its chain published after the moment the
//! sale's entries closed, and, once revealed, the reveal logs that round,
//! its signature verifies under the chain's key and the revealed seed is
//! its randomness.

use chrono::{DateTime, Utc};
use seckill_core::beacon::{BeaconPlan, BeaconRound, QUICKNET_HASH};

/// What was found, each part also said in `parts`.
pub(crate) struct Judged {
    /// Readable findings, in order.
    pub(crate) parts: Vec<String>,
    pub(crate) round_time: DateTime<Utc>,
    pub(crate) chain_ok: bool,
    /// The round was published after entries closed.
    pub(crate) after_close: bool,
    /// The round is the first of its chain after entries closed.
    pub(crate) first_after: bool,
    /// None before the reveal (or when it logs no round).
    pub(crate) right_round: Option<bool>,
    pub(crate) signature_ok: Option<bool>,
    pub(crate) seed_is_randomness: Option<bool>,
}

impl Judged {
    /// Whether the plan holds and, when `revealed`, the reveal agrees.
    pub(crate) fn pass(&self, revealed: bool) -> bool {
        let revealed_ok = !revealed
            || [self.right_round, self.signature_ok, self.seed_is_randomness].iter().all(|ok| *ok == Some(true));
        self.chain_ok && self.after_close && self.first_after && revealed_ok
    }
}

/// Judges `plan` against entries closing at `closed_at` (named
/// `closed_name`, e.g. `draw_at`; `describe_close(after)` says where the
/// round fell against it) and the reveal: None before it, else the seed it
/// revealed and the round it logged.
pub(crate) fn judge(
    plan: &BeaconPlan,
    closed_at: DateTime<Utc>,
    closed_name: &str,
    describe_close: impl Fn(bool) -> String,
    reveal: Option<(&str, Option<&BeaconRound>)>,
) -> Judged {
    let chain = &plan.chain;
    let chain_ok = chain.check();
    let round_time = plan.round_time();
    let after_close = round_time > closed_at;
    let first_after = plan.round == chain.first_round_after(closed_at);
    let mut parts = vec![format!(
        "round {} of chain {}… ({}) at {}, {}",
        plan.round,
        &chain.hash[..chain.hash.len().min(8)],
        if chain.hash == QUICKNET_HASH { "drand quicknet" } else { "not drand quicknet" },
        round_time.to_rfc3339(),
        describe_close(after_close),
    )];
    if let Err(problem) = &chain_ok {
        parts.push(problem.clone());
    }
    if !first_after {
        parts.push(format!(
            "the first round after {closed_name} is {}, not {}",
            chain.first_round_after(closed_at),
            plan.round
        ));
    }
    let (mut right_round, mut signature_ok, mut seed_is_randomness) = (None, None, None);
    match reveal {
        None => parts.push("not revealed yet".to_owned()),
        Some((_, None)) => parts.push("the reveal logs no beacon round".to_owned()),
        Some((seed, Some(round))) => {
            right_round = Some(round.round == plan.round);
            if round.round != plan.round {
                parts.push(format!("the reveal logs round {}, not the planned {}", round.round, plan.round));
            }
            match seckill_beacon::verify(chain, round) {
                Ok(randomness) => {
                    signature_ok = Some(true);
                    seed_is_randomness = Some(randomness == seed);
                    parts.push(if randomness == seed {
                        "signature verifies; the revealed seed is its randomness".to_owned()
                    } else {
                        format!("signature verifies, but the revealed seed is not its randomness {}…", &randomness[..8])
                    });
                }
                Err(error) => {
                    signature_ok = Some(false);
                    parts.push(error.to_string());
                }
            }
        }
    }
    Judged {
        parts,
        round_time,
        chain_ok: chain_ok.is_ok(),
        after_close,
        first_after,
        right_round,
        signature_ok,
        seed_is_randomness,
    }
}
