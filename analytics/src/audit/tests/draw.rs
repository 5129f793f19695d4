//! The draw's rules on a clean draw-mode sale, and doctored logs breaking
//! exactly the rule they should: the checks of `seckill draw verify`,
//! grouped.

use seckill_core::event::Event;
use seckill_core::ids::UserId;
use seckill_core::queue;

use super::{detail, failing, text};
use crate::audit::audit_voucher;
use crate::sale::draw_script::draw_sale;
use crate::sale::queue_script::queue_sale;
use crate::sale::script::busy_sale;

const DRAW_RULES: [&str; 4] =
    ["draw_seed_committed", "draw_ranking_reproduced", "draw_orders_by_winners", "draw_windows_kept"];

#[test]
fn a_clean_draw_passes_every_rule() {
    let sale = draw_sale().script;
    let audit = audit_voucher(&sale.log, None);
    assert!(audit.pass, "{}", text(&audit));
    let names: Vec<&str> = audit.rules.iter().map(|rule| rule.rule).collect();
    assert_eq!(names[5..], DRAW_RULES, "after the five rules every sale has (a free sale: no payment rules)");
    let seed = detail(&audit, "draw_seed_committed");
    assert!(seed.starts_with("commitment: 1 commitment (1 distinct); all 2000 entries after it;"), "{seed}");
    assert!(seed.contains("; timing: revealed at "), "{seed}");
    let ranking = detail(&audit, "draw_ranking_reproduced");
    assert!(ranking.starts_with("entries: 2000 entries, seq 1..2000: 0 missing"), "{ranking}");
    assert!(
        ranking.ends_with(
            "ranking: 4 chunks (ranks 1..2000) = the ranking recomputed from the revealed seed and the 2000 entries"
        ),
        "{ranking}"
    );
    let orders = detail(&audit, "draw_orders_by_winners");
    assert!(orders.starts_with("winners: 20 winners at the draw within stock 20 and 2000 entries;"), "{orders}");
    let figures = &audit.rules[7].figures;
    assert_eq!(figures["orders"]["figures"]["wins_used"].as_u64(), Some(19));
    assert_eq!(figures["winners"]["pass"].as_bool(), Some(true));
}

#[test]
fn other_sales_get_no_draw_rules() {
    for sale in [busy_sale(), queue_sale()] {
        let audit = audit_voucher(&sale.log, None);
        assert!(audit.rules.iter().all(|rule| !rule.rule.starts_with("draw_")), "{}", text(&audit));
        assert!(!sale.log.draw_mode());
    }
}

#[test]
fn redelivered_draw_records_change_nothing() {
    let mut sale = draw_sale().script;
    let before = audit_voucher(&sale.log, None);
    for (envelope, orders_topic) in sale.records.clone() {
        sale.put(&envelope, orders_topic);
    }
    let after = audit_voucher(&sale.log, None);
    assert!(after.pass, "{}", text(&after));
    assert_eq!(after.rules, before.rules);
}

#[test]
fn a_changed_entry_breaks_only_the_ranking_rule_and_says_which() {
    let sale = draw_sale().script;
    let log = sale.edited(|event| {
        if let Event::DrawEntered(entry) = event {
            if entry.seq == 1_234 {
                entry.user_id = UserId::parse("mallory").expect("valid");
            }
        }
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["draw_ranking_reproduced"], "{}", text(&audit));
    let detail = detail(&audit, "draw_ranking_reproduced");
    assert!(detail.starts_with("entries_hash: SHA-1 chain over the 2000 logged entries"), "{detail}");
    assert!(detail.ends_with("1 entry entered but not ranked (e.g. mallory, seq 1234)"), "{detail}");
}

#[test]
fn a_seed_other_than_the_committed_one_breaks_the_commitment_rule() {
    let sale = draw_sale().script;
    let other = queue::seed_commitment(&queue::new_seed());
    let log = sale.edited(|event| {
        if let Event::DrawSeedCommitted(commitment) = event {
            commitment.seed_hash = other.clone();
        }
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["draw_seed_committed"], "{}", text(&audit));
    assert!(detail(&audit, "draw_seed_committed").starts_with("commitment: 1 commitment (1 distinct); all 2000"));
}

#[test]
fn orders_past_the_winners_break_the_orders_rule() {
    let mut sale = draw_sale();
    let order = sale.script.accept("gatecrasher", 1, 10_000);
    sale.script.decide(&order, 10_010);
    let audit = audit_voucher(&sale.script.log, None);
    assert_eq!(failing(&audit), ["draw_orders_by_winners"], "{}", text(&audit));
    assert!(detail(&audit, "draw_orders_by_winners").starts_with("orders: 20 orders accepted: 1 without a win"));

    // The first winner's win admits a second order: over the limit too.
    let mut sale = draw_sale();
    let first = sale.ranking[0].clone();
    sale.script.order_with_win(&first, 1, 20_000);
    let audit = audit_voucher(&sale.script.log, None);
    assert_eq!(failing(&audit), ["per_user_limit", "draw_orders_by_winners"], "{}", text(&audit));
    assert!(detail(&audit, "draw_orders_by_winners").ends_with("(e.g. rank 1 admitted 2 orders)"));
}
