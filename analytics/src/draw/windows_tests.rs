//! The window checks on the clean scripted draw, and one doctored record
//! each: a shortened window, an order after its window, a promotion without
//! need, an unsound stall; and a logged stall lengthening every window open
//! across it.

use chrono::Duration;
use seckill_core::event::{Event, StallReason, VoucherUpdated, WindowsExtended};
use seckill_core::Envelope;

use super::*;
use crate::sale::draw_script::{draw_sale, PROMOTED_UNUSED, PURCHASE_SECONDS, STOCK};
use crate::sale::script::at;

const WINDOW_CHECKS: [&str; 3] = ["window_lengths", "wins_in_window", "promotions_needed"];

fn failing(log: &VoucherLog) -> Vec<&'static str> {
    verify(log).expect("a draw").failed().map(|check| check.check).collect()
}

fn detail(log: &VoucherLog, check: &str) -> String {
    let verification = verify(log).expect("a draw");
    verification.checks.into_iter().find(|c| c.check == check).map(|c| c.detail).expect("the check")
}

fn index_of(records: &[(Envelope, bool)], wanted: impl Fn(&Event) -> bool) -> usize {
    records.iter().position(|(envelope, _)| wanted(&envelope.event)).expect("a matching record")
}

#[test]
fn a_clean_draw_passes_the_window_checks() {
    let log = draw_sale().script.log;
    let verification = verify(&log).expect("a draw");
    let names: Vec<&str> = verification.checks.iter().map(|check| check.check).collect();
    assert!(WINDOW_CHECKS.iter().all(|name| names.contains(name)), "{names:?}");
    assert!(verification.pass, "{}", verification.text());
    assert_eq!(
        detail(&log, "window_lengths"),
        "4 windows of 600 s each: 0 of another length; 0 stalls logged (0 ms in all)"
    );
    assert_eq!(
        detail(&log, "wins_in_window"),
        "19 wins spent: 0 outside the window (±2 s of clock), 0 of a rank without a window"
    );
    assert_eq!(
        detail(&log, "promotions_needed"),
        "3 promotions, 1 units a win: 0 while the open wins covered the units left"
    );
}

#[test]
fn a_shortened_window_fails_window_lengths_alone() {
    let script = draw_sale().script;
    let log = script.edited(|event| {
        if let Event::DrawWinnersSelected(selection) = event {
            selection.purchase_until -= Duration::seconds(60);
        }
    });
    assert_eq!(failing(&log), ["window_lengths"]);
    let lengths = detail(&log, "window_lengths");
    assert!(lengths.contains(": 1 of another length;"), "{lengths}");
    assert!(
        lengths.ends_with(
            "(e.g. the selection at 2027-01-15T07:59:59.020Z gives until 2027-01-15T08:08:59.020Z, not \
             2027-01-15T08:09:59.020Z)"
        ),
        "{lengths}"
    );
    // A promotion's window shortened.
    let log = script.edited(|event| {
        if let Event::DrawWinnerPromoted(promotion) = event {
            if promotion.rank == 22 {
                promotion.purchase_until -= Duration::seconds(1);
            }
        }
    });
    assert_eq!(failing(&log), ["window_lengths"]);
    assert!(detail(&log, "window_lengths").contains("(e.g. the promotion of rank 22 at "));
}

#[test]
fn an_order_after_its_window_fails_wins_in_window_alone() {
    let script = draw_sale().script;
    let mut records = script.records.clone();
    let used = index_of(&records, |event| matches!(event, Event::DrawWinUsed(u) if u.rank == 3));
    let window_end = at(-1_000 + 20 + i64::from(PURCHASE_SECONDS) * 1_000);
    records[used].0.emitted_at = window_end + Duration::seconds(5);
    let log = script.refolded(&records);
    assert_eq!(failing(&log), ["wins_in_window"]);
    let spent = detail(&log, "wins_in_window");
    assert!(spent.starts_with("19 wins spent: 1 outside the window"), "{spent}");
    assert!(
        spent.contains(
            "spent rank 3 at 2027-01-15T08:10:04.020Z, its window 2027-01-15T07:59:59.020Z..2027-01-15T08:09:59.020Z)"
        ),
        "{spent}"
    );
}

#[test]
fn a_promotion_without_need_fails_promotions_needed_alone() {
    // The operator promotes an insider (rank 23, who never orders) right
    // after the selection, while all 20 winners' windows are open.
    let script = draw_sale().script;
    let mut records = script.records.clone();
    let promoted =
        index_of(&records, |event| matches!(event, Event::DrawWinnerPromoted(p) if p.rank == PROMOTED_UNUSED));
    let early = at(-1_000 + 30);
    records[promoted].0.emitted_at = early;
    if let Event::DrawWinnerPromoted(promotion) = &mut records[promoted].0.event {
        promotion.purchase_until = early + Duration::seconds(i64::from(PURCHASE_SECONDS));
    }
    let log = script.refolded(&records);
    assert_eq!(failing(&log), ["promotions_needed"]);
    let needed = detail(&log, "promotions_needed");
    assert!(
        needed.starts_with("3 promotions, 1 units a win: 1 while the open wins covered the units left"),
        "{needed}"
    );
    assert!(
        needed.ends_with(&format!(
            "promoted at 2027-01-15T07:59:59.030Z while {STOCK} wins were open for {STOCK} units left)"
        )),
        "{needed}"
    );
}

#[test]
fn a_stall_lengthens_the_windows_open_across_it() {
    // A 120 s pause from 100 s: the winners' windows end 120 s later, so an
    // order 60 s past the unpaused end is in time, and the promotions made
    // at that end (the lapsed wins still open) were not needed.
    let script = draw_sale().script;
    let mut records = script.records.clone();
    let used = index_of(&records, |event| matches!(event, Event::DrawWinUsed(u) if u.rank == 3));
    records[used].0.emitted_at = at(-1_000 + 20 + i64::from(PURCHASE_SECONDS) * 1_000 + 60_000);
    let mut stall = Envelope::new(Event::WindowsExtended(WindowsExtended {
        voucher_id: script.voucher,
        from: at(100_000),
        until: at(220_000),
        reason: StallReason::Paused,
    }));
    stall.emitted_at = at(220_000);
    records.push((stall.clone(), false));
    let log = script.refolded(&records);
    assert_eq!(failing(&log), ["promotions_needed"]);
    assert!(detail(&log, "window_lengths").ends_with("; 1 stall logged (120000 ms in all)"));
    assert!(detail(&log, "wins_in_window").starts_with("19 wins spent: 0 outside the window"));
    assert!(detail(&log, "promotions_needed").contains(": 3 while the open wins covered the units left"));

    // Without the stall, the late order is out of its window.
    records.pop();
    assert_eq!(failing(&script.refolded(&records)), ["wins_in_window"]);

    // A stall logged before it ended is unsound.
    stall.emitted_at = at(200_000);
    let mut records = script.records.clone();
    records.push((stall, false));
    let log = script.refolded(&records);
    assert!(failing(&log).contains(&"window_lengths"), "{:?}", failing(&log));
    assert!(detail(&log, "window_lengths").contains("was logged at 2027-01-15T08:03:20.000Z, before it ended"));
}

#[test]
fn a_pause_with_windows_open_and_no_stall_logged_fails_window_lengths() {
    // Paused from 100 s to 220 s while ranks 5, 12 and 18 held open wins.
    let script = draw_sale().script;
    let mut records = script.records.clone();
    for (paused, ms) in [(true, 100_000), (false, 220_000)] {
        let update = VoucherUpdated { voucher_id: script.voucher, paused: Some(paused), ends_at: None, add_stock: 0 };
        let mut envelope = Envelope::new(Event::VoucherUpdated(update));
        envelope.emitted_at = at(ms);
        records.push((envelope, false));
    }
    let log = script.refolded(&records);
    assert_eq!(failing(&log), ["window_lengths"]);
    let lengths = detail(&log, "window_lengths");
    assert!(lengths.contains("; 1 pause with windows open not logged as a stall"), "{lengths}");
    assert!(
        lengths.ends_with(
            "(e.g. the sale was paused from 2027-01-15T08:01:40.000Z to 2027-01-15T08:03:40.000Z with windows open, \
             and no stall logged)"
        ),
        "{lengths}"
    );

    // Logged, the windows ran on after it: the promotions at their unpaused
    // end were not needed.
    let mut stall = Envelope::new(Event::WindowsExtended(WindowsExtended {
        voucher_id: script.voucher,
        from: at(100_050),
        until: at(220_050),
        reason: StallReason::Paused,
    }));
    stall.emitted_at = at(220_050);
    records.push((stall, false));
    assert_eq!(failing(&script.refolded(&records)), ["promotions_needed"]);
}
