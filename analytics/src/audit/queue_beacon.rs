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

use seckill_core::beacon::BeaconPlan;
use seckill_core::queue;
use serde_json::json;

use super::RuleResult;
use crate::beacon_plan;
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
    let mut judged = beacon_plan::judge(
        plan,
        begins_at,
        "begins_at",
        |after| {
            let when = if after { "after" } else { "not after" };
            format!("{when} the pre-queue closed (begins_at {})", begins_at.to_rfc3339())
        },
        reveal.map(|reveal| (reveal.record.seed.as_str(), logged)),
    );
    let mut parts = std::mem::take(&mut judged.parts);
    // The pre-queue's hash, once a reveal logs its round.
    let hash_ok = reveal.filter(|_| logged.is_some()).map(|reveal| {
        let hash = queue::pre_queue_hash(&log.queue.pre_queue_users());
        reveal.record.entries_hash.as_deref() == Some(hash.as_str())
    });
    if hash_ok == Some(false) {
        parts.push("the revealed pre-queue hash is not the logged pre-queue's".to_owned());
    }
    let pass = judged.pass(reveal.is_some()) && (reveal.is_none() || hash_ok == Some(true));
    RuleResult::new(
        RULE,
        pass,
        parts.join("; "),
        json!({
            "planned": true,
            "chain_hash": plan.chain.hash,
            "round": plan.round,
            "round_time": judged.round_time,
            "begins_at": begins_at,
            "round_after_pre_queue_closed": judged.after_close,
            "first_round_after": judged.first_after,
            "revealed": reveal.is_some(),
            "logged_round_matches": judged.right_round,
            "signature_verifies": judged.signature_ok,
            "seed_is_randomness": judged.seed_is_randomness,
            "pre_queue_hash_matches": hash_ok,
        }),
    )
}
