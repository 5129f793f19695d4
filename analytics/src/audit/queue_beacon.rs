//! The `queue_beacon` rule: for a waiting room whose creation record
//! planned a beacon round (`seckill_core::queue`), the round is the first
//! of its chain published after the sale's start (when the pre-queue
//! closed), the reveal logs that round, its signature verifies under the
//! chain's public key, the revealed seed is the round's randomness, and
//! the revealed pre-queue hash is the logged pre-queue's. So
//! `queue_served_in_shuffle`, which recomputes the shuffle from the
//! revealed seed and the logged joins, recomputes it from the round. A room
//! without a plan is shuffled by the operator's committed seed: the rule
//! passes, saying that this seed trusts the operator, unless a reveal
//! names a round nobody planned.

use seckill_core::beacon::{BeaconPlan, QUICKNET_HASH};
use seckill_core::queue;
use serde_json::json;

use super::RuleResult;
use crate::sale::VoucherLog;

const RULE: (&str, &str) = ("queue_beacon", "the pre-queue's shuffle is keyed by the planned beacon round");

/// The plan in `log`'s creation record.
pub(super) fn plan(log: &VoucherLog) -> Option<&BeaconPlan> {
    log.definition.as_ref()?.queue.as_ref()?.beacon.as_deref()
}

/// The rule.
pub(super) fn beacon(log: &VoucherLog) -> RuleResult {
    let reveal = log.queue.reveal();
    let logged = reveal.and_then(|reveal| reveal.record.beacon.as_ref());
    let Some(plan) = plan(log) else {
        let pass = logged.is_none();
        let detail = if pass {
            "no beacon planned: the shuffle's seed is the operator's, committed before the first join (this trusts the \
             operator)"
                .to_owned()
        } else {
            "the reveal names a beacon round the creation record did not plan".to_owned()
        };
        return RuleResult::new(RULE, pass, detail, json!({"planned": false, "logged": logged.is_some()}));
    };
    let Some(begins_at) = log.definition.as_ref().map(|definition| definition.begins_at) else {
        return RuleResult::new(RULE, false, "no definition".to_owned(), json!({"planned": true}));
    };
    let chain = &plan.chain;
    let chain_ok = chain.check();
    let round_time = plan.round_time();
    let after_close = round_time > begins_at;
    let first_after = plan.round == chain.first_round_after(begins_at);
    let mut parts = vec![format!(
        "round {} of chain {}… ({}) at {}, {} the pre-queue closed (begins_at {})",
        plan.round,
        &chain.hash[..chain.hash.len().min(8)],
        if chain.hash == QUICKNET_HASH { "drand quicknet" } else { "not drand quicknet" },
        round_time.to_rfc3339(),
        if after_close { "after" } else { "not after" },
        begins_at.to_rfc3339(),
    )];
    if let Err(problem) = &chain_ok {
        parts.push(problem.clone());
    }
    if !first_after {
        parts.push(format!(
            "the first round after begins_at is {}, not {}",
            chain.first_round_after(begins_at),
            plan.round
        ));
    }
    let (mut right_round, mut signature_ok, mut seed_is_randomness, mut hash_ok) = (None, None, None, None);
    match (reveal, logged) {
        (None, _) => parts.push("not revealed yet".to_owned()),
        (Some(_), None) => parts.push("the reveal logs no beacon round".to_owned()),
        (Some(reveal), Some(round)) => {
            right_round = Some(round.round == plan.round);
            if round.round != plan.round {
                parts.push(format!("the reveal logs round {}, not the planned {}", round.round, plan.round));
            }
            match seckill_beacon::verify(chain, round) {
                Ok(randomness) => {
                    signature_ok = Some(true);
                    seed_is_randomness = Some(randomness == reveal.record.seed);
                    parts.push(if randomness == reveal.record.seed {
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
            let hash = queue::pre_queue_hash(&log.queue.pre_queue_users());
            hash_ok = Some(reveal.record.entries_hash.as_deref() == Some(hash.as_str()));
            if hash_ok == Some(false) {
                parts.push("the revealed pre-queue hash is not the logged pre-queue's".to_owned());
            }
        }
    }
    let revealed_ok =
        reveal.is_none() || [right_round, signature_ok, seed_is_randomness, hash_ok].iter().all(|ok| *ok == Some(true));
    let pass = chain_ok.is_ok() && after_close && first_after && revealed_ok;
    RuleResult::new(
        RULE,
        pass,
        parts.join("; "),
        json!({
            "planned": true,
            "chain_hash": chain.hash,
            "round": plan.round,
            "round_time": round_time,
            "begins_at": begins_at,
            "round_after_pre_queue_closed": after_close,
            "first_round_after": first_after,
            "revealed": reveal.is_some(),
            "logged_round_matches": right_round,
            "signature_verifies": signature_ok,
            "seed_is_randomness": seed_is_randomness,
            "pre_queue_hash_matches": hash_ok,
        }),
    )
}
