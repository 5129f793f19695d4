//! The waiting room's entry tokens, checked from the log: each lasted as
//! long as the definition says, and each was spent within its lifetime,
//! lengthened by the stalls (`WindowsExtended`) that began while it was
//! open, as `queue_advance.lua` and `admit.lua` keep it (the window clock
//! of [`crate::draw::windows`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use super::RuleResult;
use crate::draw::windows::{extended_end, ms, stall_fault, stalls, CLOCK_SKEW};
use crate::sale::{Pass, VoucherLog};
use crate::wording::{plural, with_example};

/// Every `QueueEntryIssued`'s `expires_at` is its time plus
/// `token_seconds`, the logged stalls are sound, and every entry spent
/// (`QueueEntryUsed`, stamped by the admitting ingress before the Redis
/// call) was spent before its expiry moved by the stalls, give or take
/// [`CLOCK_SKEW`].
pub(super) fn entries_in_time(log: &VoucherLog) -> RuleResult {
    const RULE: (&str, &str) = ("queue_entries_in_time", "every entry token spent within its lifetime");
    let Some(token) = log.definition.as_ref().and_then(|definition| definition.queue.as_ref()) else {
        return RuleResult::new(RULE, false, "the log defines no waiting room".to_owned(), json!({}));
    };
    let lifetime = Duration::seconds(i64::from(token.token_seconds));
    let stalls = stalls(log);
    // entry -> (issued at, expiry moved by the stalls).
    let mut tokens: BTreeMap<u64, (DateTime<Utc>, DateTime<Utc>)> = BTreeMap::new();
    let mut wrong_length = 0u64;
    let mut example = None;
    for pass in log.queue.passes() {
        let Pass::Issued(issued) = &pass.record else { continue };
        let expected = pass.emitted_at + lifetime;
        if issued.expires_at.timestamp_millis() != expected.timestamp_millis() {
            wrong_length += 1;
            example.get_or_insert_with(|| {
                format!(
                    "entry {} issued at {} expires at {}, not {}",
                    issued.entry,
                    ms(pass.emitted_at),
                    ms(issued.expires_at),
                    ms(expected)
                )
            });
        }
        let ends = extended_end(pass.emitted_at, issued.expires_at, &stalls);
        tokens.entry(issued.entry).or_insert((pass.emitted_at, ends));
    }
    let mut late = 0u64;
    for used in log.queue.used.values() {
        let entry = used.record.entry;
        // An entry never issued: `queue_entries_single_use` says so.
        let Some((issued_at, ends)) = tokens.get(&entry) else { continue };
        if used.emitted_at >= *ends + CLOCK_SKEW || used.emitted_at + CLOCK_SKEW < *issued_at {
            late += 1;
            example.get_or_insert_with(|| {
                format!(
                    "order {} of {} spent entry {entry} at {}, its token valid {}..{}",
                    used.record.order_id,
                    used.record.user_id,
                    ms(used.emitted_at),
                    ms(*issued_at),
                    ms(*ends)
                )
            });
        }
    }
    let fault = stall_fault(&stalls);
    let pass = wrong_length == 0 && late == 0 && fault.is_none();
    let stalled: Duration = stalls.iter().map(|stall| stall.until - stall.from).sum();
    let mut detail = format!(
        "{} of {} s each: {wrong_length} of another lifetime; {} spent: {late} outside the lifetime (±{} s of \
         clock); {} logged ({} ms in all)",
        plural(tokens.len() as u64, "token"),
        lifetime.num_seconds(),
        log.queue.used.len(),
        CLOCK_SKEW.num_seconds(),
        plural(stalls.len() as u64, "stall"),
        stalled.num_milliseconds()
    );
    if let Some(fault) = &fault {
        detail.push_str(&format!("; {fault}"));
    }
    with_example(&mut detail, pass, example);
    RuleResult::new(
        RULE,
        pass,
        detail,
        json!({
            "tokens": tokens.len(),
            "token_seconds": lifetime.num_seconds(),
            "wrong_lifetime": wrong_length,
            "spent": log.queue.used.len(),
            "spent_outside_lifetime": late,
            "stalls": stalls.len(),
            "stalled_ms": stalled.num_milliseconds(),
            "stalls_unsound": fault.is_some(),
        }),
    )
}
