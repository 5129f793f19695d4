//! The entry tokens' lifetimes on the clean scripted waiting room, and one
//! doctored record each: a token used after it expired, a shortened token;
//! and the logged pause lengthening the tokens open across it.

use chrono::Duration;
use seckill_core::event::Event;
use seckill_core::Envelope;

use super::{detail, failing, text};
use crate::audit::audit_voucher;
use crate::sale::queue_script::{queue_sale, PAUSED_MS};

fn index_of(records: &[(Envelope, bool)], wanted: impl Fn(&Event) -> bool) -> usize {
    records.iter().position(|(envelope, _)| wanted(&envelope.event)).expect("a matching record")
}

#[test]
fn a_clean_room_spends_every_token_in_time() {
    let audit = audit_voucher(&queue_sale().log, None);
    assert!(audit.pass, "{}", text(&audit));
    assert_eq!(
        detail(&audit, "queue_entries_in_time"),
        "21 tokens of 120 s each: 0 of another lifetime; 19 spent: 0 outside the lifetime (±2 s of clock); 1 stall \
         logged (5000 ms in all)"
    );
}

#[test]
fn a_token_used_after_it_expired_fails_the_lifetime_rule_alone() {
    let sale = queue_sale();
    let mut records = sale.records.clone();
    let issued = index_of(&records, |event| matches!(event, Event::QueueEntryIssued(i) if i.entry == 3));
    let used = index_of(&records, |event| matches!(event, Event::QueueEntryUsed(u) if u.entry == 3));
    let Event::QueueEntryIssued(token) = records[issued].0.event.clone() else { unreachable!() };
    // Past its expiry, the 5 s pause and the clock allowance.
    let late = token.expires_at + Duration::milliseconds(PAUSED_MS) + Duration::seconds(3);
    records[used].0.emitted_at = late;
    let audit = audit_voucher(&sale.refolded(&records), None);
    assert_eq!(failing(&audit), ["queue_entries_in_time"], "{}", text(&audit));
    let detail = detail(&audit, "queue_entries_in_time");
    assert!(detail.contains("19 spent: 1 outside the lifetime"), "{detail}");
    assert!(detail.contains("spent entry 3 at "), "{detail}");

    // Within the pause's 5 s it is in time; without the pause logged, not.
    records[used].0.emitted_at = token.expires_at + Duration::seconds(4);
    let audit = audit_voucher(&sale.refolded(&records), None);
    assert!(audit.pass, "{}", text(&audit));
    let stall = index_of(&records, |event| matches!(event, Event::WindowsExtended(_)));
    records.remove(stall);
    let audit = audit_voucher(&sale.refolded(&records), None);
    assert_eq!(failing(&audit), ["queue_entries_in_time"], "{}", text(&audit));
}

#[test]
fn a_shortened_token_fails_the_lifetime_rule_alone() {
    let sale = queue_sale();
    let log = sale.edited(|event| {
        if let Event::QueueEntryIssued(issued) = event {
            if issued.entry == 7 {
                issued.expires_at -= Duration::seconds(60);
            }
        }
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["queue_entries_in_time"], "{}", text(&audit));
    let detail = detail(&audit, "queue_entries_in_time");
    assert!(detail.contains(": 1 of another lifetime;"), "{detail}");
    assert!(detail.contains("(e.g. entry 7 issued at "), "{detail}");
}
