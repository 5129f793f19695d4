//! The report of a scripted draw-mode sale: its draw's figures, and the
//! draw verified from the report's own log, a doctored copy failing.

use super::{about, field, lede, parse};
use crate::report::render;
use crate::sale::draw_script::{draw_sale, entrant, ENTRIES, PROMOTED, STOCK};
use crate::sale::script::busy_sale;
use crate::sale::VoucherSale;
use seckill_core::event::Event;
use seckill_core::ids::UserId;

const CHECKS: [&str; 12] = [
    "entries",
    "commitment",
    "beacon",
    "entries_hash",
    "entry_count",
    "ranking",
    "winners",
    "orders",
    "timing",
    "window_lengths",
    "wins_in_window",
    "promotions_needed",
];

#[test]
fn a_draw_sale_reports_its_draw_and_its_verification() {
    let sale = draw_sale().script.sale();
    let html = render(std::slice::from_ref(&sale), &about()).expect("renders");
    let document = parse(&html);

    let counts = [
        ("draw_entries", ENTRIES),
        ("draw_ranking_records", ENTRIES.div_ceil(500)),
        ("draw_winners", STOCK),
        ("draw_promoted", PROMOTED),
        ("draw_wins_used", 19),
        // 20 winners and 3 promoted, 19 spent: ranks 5, 12, 18 lapsed, 23 unspent.
        ("draw_wins_unspent", 4),
    ];
    for (name, wanted) in counts {
        assert_eq!(field(&document, name), Some(wanted.to_string()), "{name}");
    }
    assert_eq!(field(&document, "draw_at"), Some("2027-01-15T07:59:59.000Z".to_owned()));
    assert_eq!(field(&document, "draw_winners_after_ms"), Some("20".to_owned()));
    for check in CHECKS {
        assert_eq!(field(&document, &format!("draw_check_{check}")), Some("pass".to_owned()), "{check}");
    }
    let table = document.descendants().find(|n| n.attribute("class") == Some("draw-checks")).expect("the checks");
    assert_eq!(table.attribute("data-pass"), Some("true"));
    assert!(html.contains("12 of 12 checks pass"));
    let lede = lede(&document);
    assert!(lede.is_some_and(|lede| lede.contains("a draw at 2027-01-15 07:59:59 UTC")), "{lede:?}");
}

#[test]
fn a_doctored_draw_shows_the_checks_it_fails() {
    let script = draw_sale().script;
    let mut records = script.records.clone();
    let impostor = UserId::parse("impostor").expect("valid user");
    for (envelope, _) in &mut records {
        if let Event::DrawEntered(entered) = &mut envelope.event {
            if entered.user_id == entrant(7) {
                entered.user_id = impostor.clone();
            }
        }
    }
    let sale = VoucherSale { log: script.refolded(&records), stats: script.sale().stats };
    let html = render(std::slice::from_ref(&sale), &about()).expect("renders");
    let document = parse(&html);
    assert_eq!(field(&document, "draw_check_entries_hash"), Some("fail".to_owned()));
    assert_eq!(field(&document, "draw_check_ranking"), Some("fail".to_owned()));
    assert_eq!(field(&document, "draw_check_commitment"), Some("pass".to_owned()));
    let failures: Vec<String> = document
        .descendants()
        .filter(|n| n.has_tag_name("li") && n.parent().and_then(|p| p.attribute("class")) == Some("draw-failures"))
        .filter_map(|n| n.descendants().find(|c| c.has_tag_name("code")).and_then(|c| c.text()).map(str::to_owned))
        .collect();
    assert!(failures.contains(&"entries_hash".to_owned()) && failures.contains(&"ranking".to_owned()), "{failures:?}");
}

#[test]
fn a_first_come_first_served_sale_has_no_draw() {
    let sale = busy_sale().sale();
    let html = render(std::slice::from_ref(&sale), &about()).expect("renders");
    let document = parse(&html);
    assert!(!document.descendants().any(|n| n.attribute("data-section") == Some("draw")));
}
