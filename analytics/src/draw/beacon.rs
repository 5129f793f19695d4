//! The `beacon` check: for a draw whose creation record planned a beacon
//! round (`seckill_core::beacon`), the round is the first of its chain
//! published after `draw_at`, the reveal logs that round, its signature
//! verifies under the chain's public key, and the revealed seed is the
//! round's randomness (SHA-256 of the signature), so the `ranking` check,
//! which recomputes from the revealed seed, recomputes from the round. A
//! draw without a plan ranks by the operator's committed seed: the check
//! passes, saying that this seed trusts the operator, unless a reveal
//! names a round nobody planned.

use seckill_core::beacon::BeaconPlan;
use serde_json::json;

use super::Check;
use crate::beacon_plan;
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
    let judged = beacon_plan::judge(
        plan,
        draw_at,
        "draw_at",
        |after| format!("{} draw_at {}", if after { ">" } else { "≤" }, draw_at.to_rfc3339()),
        reveal.map(|reveal| (reveal.record.seed.as_str(), logged)),
    );
    let pass = judged.pass(reveal.is_some());
    Check::new(
        CHECK,
        pass,
        judged.parts.join("; "),
        json!({
            "planned": true,
            "chain_hash": plan.chain.hash,
            "round": plan.round,
            "round_time": judged.round_time,
            "draw_at": draw_at,
            "round_after_entries_closed": judged.after_close,
            "first_round_after": judged.first_after,
            "revealed": reveal.is_some(),
            "logged_round_matches": judged.right_round,
            "signature_verifies": judged.signature_ok,
            "seed_is_randomness": judged.seed_is_randomness,
        }),
    )
}

#[cfg(test)]
#[path = "beacon_tests.rs"]
mod tests;
