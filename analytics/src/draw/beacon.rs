//! The `beacon` check: for a draw whose creation record planned a beacon
//! round (`seckill_core::beacon`), the round is the first of its chain
//! published after `draw_at`, the reveal logs that round, its signature
//! verifies under the chain's public key, and the revealed seed is the
//! round's randomness (SHA-256 of the signature), so the `ranking` check,
//! which recomputes from the revealed seed, recomputes from the round. A
//! draw without a plan ranks by the operator's committed seed: the check
//! passes, saying that this seed trusts the operator, unless a reveal
//! names a round nobody planned.

use seckill_core::beacon::{BeaconPlan, QUICKNET_HASH};
use serde_json::json;

use super::Check;
use crate::sale::VoucherLog;

const CHECK: (&str, &str) = ("beacon", "seed is the planned beacon round's");

/// The plan in `log`'s creation record.
pub(super) fn plan(log: &VoucherLog) -> Option<&BeaconPlan> {
    log.definition.as_ref()?.draw.as_ref()?.beacon.as_deref()
}

/// The check.
pub(super) fn beacon(log: &VoucherLog) -> Check {
    let reveal = log.draw.reveal();
    let logged = reveal.and_then(|reveal| reveal.record.beacon.as_ref());
    let Some(plan) = plan(log) else {
        let pass = logged.is_none();
        let detail = if pass {
            "no beacon planned: the seed is the operator's, committed before the first entry (this trusts the operator)"
                .to_owned()
        } else {
            "the reveal names a beacon round the creation record did not plan".to_owned()
        };
        return Check::new(CHECK, pass, detail, json!({"planned": false, "logged": logged.is_some()}));
    };
    let Some(draw_at) = log.definition.as_ref().and_then(|d| d.draw.as_ref()).map(|draw| draw.draw_at) else {
        return Check::new(CHECK, false, "no draw settings".to_owned(), json!({"planned": true}));
    };
    let chain = &plan.chain;
    let chain_ok = chain.check();
    let round_time = plan.round_time();
    let after_close = round_time > draw_at;
    let first_after = plan.round == chain.first_round_after(draw_at);
    let mut parts = vec![format!(
        "round {} of chain {}… ({}) at {}, {} draw_at {}",
        plan.round,
        &chain.hash[..chain.hash.len().min(8)],
        if chain.hash == QUICKNET_HASH { "drand quicknet" } else { "not drand quicknet" },
        round_time.to_rfc3339(),
        if after_close { ">" } else { "≤" },
        draw_at.to_rfc3339(),
    )];
    if let Err(problem) = &chain_ok {
        parts.push(problem.clone());
    }
    if !first_after {
        parts.push(format!(
            "the first round after draw_at is {}, not {}",
            chain.first_round_after(draw_at),
            plan.round
        ));
    }
    let (mut right_round, mut signature_ok, mut seed_is_randomness) = (None, None, None);
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
        }
    }
    let revealed_ok = reveal.is_none()
        || (right_round == Some(true) && signature_ok == Some(true) && seed_is_randomness == Some(true));
    let pass = chain_ok.is_ok() && after_close && first_after && revealed_ok;
    Check::new(
        CHECK,
        pass,
        parts.join("; "),
        json!({
            "planned": true,
            "chain_hash": chain.hash,
            "round": plan.round,
            "round_time": round_time,
            "draw_at": draw_at,
            "round_after_entries_closed": after_close,
            "first_round_after": first_after,
            "revealed": reveal.is_some(),
            "logged_round_matches": right_round,
            "signature_verifies": signature_ok,
            "seed_is_randomness": seed_is_randomness,
        }),
    )
}

#[cfg(test)]
#[path = "beacon_tests.rs"]
mod tests;
