//! The waiting room's rules on a clean queue-mode sale (shuffled by the
//! operator's seed, or by a beacon round), and each doctored log breaking
//! exactly the rule it should.

use seckill_core::event::{Event, QueueEntryUsed};
use seckill_core::queue;
use seckill_core::Envelope;

use super::{detail, failing, text};
use crate::audit::audit_voucher;
use crate::sale::queue_script::{beacon_queue_sale, beacon_queue_sale_by, queue_sale, PRE_QUEUE};
use crate::sale::script::Script;

const QUEUE_RULES: [&str; 5] = [
    "queue_seed_committed",
    "queue_served_in_shuffle",
    "queue_entries_single_use",
    "queue_entries_in_time",
    "queue_beacon",
];

/// The user served place `place`.
fn served_at(sale: &Script, place: u64) -> seckill_core::ids::UserId {
    let found = sale.records.iter().find_map(|(envelope, _)| match &envelope.event {
        Event::QueueEntryIssued(issued) if issued.place == place => Some(issued.user_id.clone()),
        _ => None,
    });
    found.unwrap_or_else(|| panic!("place {place} served"))
}

#[test]
fn a_clean_queue_sale_passes_every_rule() {
    let sale = queue_sale();
    let audit = audit_voucher(&sale.log, None);
    assert!(audit.pass, "{}", text(&audit));
    let names: Vec<&str> = audit.rules.iter().map(|rule| rule.rule).collect();
    assert_eq!(names[5..], QUEUE_RULES, "after the five rules every sale has (a free sale: no payment rules)");
    let commitment = queue::seed_commitment(&sale.log.queue.reveal().expect("revealed").record.seed);
    assert_eq!(
        detail(&audit, "queue_seed_committed"),
        format!(
            "1 commitment (1 distinct); all 23 joins after it; the revealed seed's SHA-256 = the committed {}…",
            &commitment[..12]
        )
    );
    assert_eq!(
        detail(&audit, "queue_served_in_shuffle"),
        "20 pre-queue joins (the reveal says 20), 3 after the start; 23 places passed in the room's order (21 served, 2 \
         expired): 0 out of sequence, 0 to another user than the shuffle's"
    );
    assert_eq!(
        detail(&audit, "queue_entries_single_use"),
        "21 entries issued, 19 spent: 0 on two or more orders, 0 not issued to the user who spent it; 19 orders \
         accepted, 0 without an entry spent"
    );
    let figures = &audit.rules[6].figures;
    assert_eq!((figures["passed"].as_u64(), figures["wrong_holder"].as_u64()), (Some(23), Some(0)));
}

#[test]
fn first_come_first_served_sales_get_no_queue_rules() {
    let audit = audit_voucher(&super::busy_sale().log, None);
    assert!(audit.rules.iter().all(|rule| !rule.rule.starts_with("queue_")), "{}", text(&audit));
    assert!(!super::busy_sale().log.queue_mode());
}

#[test]
fn redelivered_queue_records_change_nothing() {
    let mut sale = queue_sale();
    let before = audit_voucher(&sale.log, None);
    // Every record read again at a later offset, as a redelivery does.
    for (envelope, orders_topic) in sale.records.clone() {
        sale.put(&envelope, orders_topic);
    }
    let after = audit_voucher(&sale.log, None);
    assert!(after.pass, "{}", text(&after));
    assert_eq!(after.rules, before.rules);
}

#[test]
fn two_served_users_swapped_break_only_the_shuffle_rule() {
    let sale = queue_sale();
    let (first, second) = (served_at(&sale, 1), served_at(&sale, 2));
    let swap = |user: &mut seckill_core::ids::UserId| {
        if *user == first {
            *user = second.clone();
        } else if *user == second {
            *user = first.clone();
        }
    };
    // Each got the other's place: entries and their spending follow the
    // users, so only the order of service is wrong.
    let log = sale.edited(|event| match event {
        Event::QueueEntryIssued(issued) if issued.place <= 2 => swap(&mut issued.user_id),
        Event::QueueEntryUsed(used) if used.entry <= 2 => swap(&mut used.user_id),
        _ => {}
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["queue_served_in_shuffle"], "{}", text(&audit));
    let detail = detail(&audit, "queue_served_in_shuffle");
    assert!(detail.contains("0 out of sequence, 2 to another user than the shuffle's"), "{detail}");
    assert!(detail.ends_with(&format!("(e.g. place 1 went to {second}, not {first})")), "{detail}");
}

#[test]
fn places_passed_out_of_order_or_twice_break_only_the_shuffle_rule() {
    let sale = queue_sale();
    // Places 2 and 3 passed the other way round (by the Redis clock: the
    // order the log holds them in is the relays', not the room's).
    let mut records = sale.records.clone();
    let position = |records: &[(Envelope, bool)], place: u64| {
        records.iter().position(|(envelope, _)| match &envelope.event {
            Event::QueueEntryIssued(issued) => issued.place == place,
            Event::QueuePlaceExpired(expired) => expired.place == place,
            _ => false,
        })
    };
    let (two, three) = (position(&records, 2).expect("place 2"), position(&records, 3).expect("place 3"));
    let (at_two, at_three) = (records[two].0.emitted_at, records[three].0.emitted_at);
    assert!(at_two < at_three, "the script passes places at increasing times");
    records[two].0.emitted_at = at_three;
    records[three].0.emitted_at = at_two;
    // Each token's expiry moved with its issue, as a careful forger would.
    for (index, at) in [(two, at_three), (three, at_two)] {
        if let Event::QueueEntryIssued(issued) = &mut records[index].0.event {
            issued.expires_at = at + chrono::Duration::seconds(120);
        }
    }
    let audit = audit_voucher(&sale.refolded(&records), None);
    assert_eq!(failing(&audit), ["queue_served_in_shuffle"], "{}", text(&audit));
    assert!(detail(&audit, "queue_served_in_shuffle").contains(": 2 out of sequence, 0 to another"));
    // Published the other way round by two relays, passed in order: fine.
    let mut records = sale.records.clone();
    records.swap(two, three);
    let audit = audit_voucher(&sale.refolded(&records), None);
    assert!(audit.failed().next().is_none(), "{}", text(&audit));

    // Place 5 passed a second time (a new record, not a redelivery).
    let mut records = sale.records.clone();
    let again = records[position(&records, 5).expect("place 5")].0.event.clone();
    records.push((Envelope::new(again), false));
    let audit = audit_voucher(&sale.refolded(&records), None);
    assert!(failing(&audit).contains(&"queue_served_in_shuffle"), "{}", text(&audit));
    assert!(detail(&audit, "queue_served_in_shuffle").contains("24 places passed"));
}

#[test]
fn an_entry_spent_on_two_orders_breaks_only_the_single_use_rule() {
    let mut sale = queue_sale();
    let user = served_at(&sale, 1);
    // The first holder's entry (1) admits a second order of theirs.
    let order = sale.accept(user.as_str(), 1, 10_000);
    sale.spend(&order, 1);
    sale.decide(&order, 10_010);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["queue_entries_single_use"], "{}", text(&audit));
    assert_eq!(
        detail(&audit, "queue_entries_single_use"),
        "21 entries issued, 19 spent: 1 on two or more orders, 0 not issued to the user who spent it; 20 orders \
         accepted, 0 without an entry spent"
    );
}

#[test]
fn an_order_without_an_entry_or_with_another_users_entry_breaks_only_the_single_use_rule() {
    let base = queue_sale();
    let mut sale = queue_sale();
    let order = sale.accept("gatecrasher", 1, 10_000);
    sale.decide(&order, 10_010);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["queue_entries_single_use"], "{}", text(&audit));
    assert!(detail(&audit, "queue_entries_single_use").ends_with("20 orders accepted, 1 without an entry spent"));

    // The gatecrasher presents an entry issued to someone else.
    let mut sale = base;
    let order = sale.accept("gatecrasher", 1, 10_000);
    let stolen =
        QueueEntryUsed { voucher_id: sale.voucher, user_id: order.user_id.clone(), entry: 2, order_id: order.order_id };
    sale.sales_at(Event::QueueEntryUsed(stolen), 10_000);
    sale.decide(&order, 10_010);
    let audit = audit_voucher(&sale.log, None);
    assert_eq!(failing(&audit), ["queue_entries_single_use"], "{}", text(&audit));
    let detail = detail(&audit, "queue_entries_single_use");
    assert!(detail.contains("1 on two or more orders, 1 not issued to the user who spent it"), "{detail}");
}

#[test]
fn a_seed_that_does_not_match_its_commitment_fails() {
    let sale = queue_sale();
    // Another seed committed: the reveal's is not the one the log promised.
    let other = queue::seed_commitment(&queue::new_seed());
    let log = sale.edited(|event| {
        if let Event::QueueSeedCommitted(commitment) = event {
            commitment.seed_hash = other.clone();
        }
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["queue_seed_committed"], "{}", text(&audit));
    assert!(detail(&audit, "queue_seed_committed").ends_with("the revealed seed's SHA-256 ≠ any committed hash"));

    // Another seed revealed: the order served is not its shuffle either.
    let log = sale.edited(|event| {
        if let Event::QueueSeedRevealed(reveal) = event {
            reveal.seed = queue::new_seed();
        }
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["queue_seed_committed", "queue_served_in_shuffle"], "{}", text(&audit));
}

#[test]
fn a_commitment_after_the_first_join_fails() {
    let sale = queue_sale();
    let mut records = sale.records.clone();
    let committed = records
        .iter()
        .position(|(envelope, _)| matches!(envelope.event, Event::QueueSeedCommitted(_)))
        .expect("a commitment");
    let record = records.remove(committed);
    records.insert(committed + 2, record); // after two joins
    let audit = audit_voucher(&sale.refolded(&records), None);
    assert_eq!(failing(&audit), ["queue_seed_committed"], "{}", text(&audit));
    assert!(detail(&audit, "queue_seed_committed").contains("2 of 23 joins not after it"));
}

#[test]
fn a_wrong_pre_queue_count_or_a_missing_reveal_fails() {
    let sale = queue_sale();
    let log = sale.edited(|event| {
        if let Event::QueueSeedRevealed(reveal) = event {
            reveal.pre_queued = PRE_QUEUE - 1;
        }
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["queue_served_in_shuffle"], "{}", text(&audit));
    assert!(detail(&audit, "queue_served_in_shuffle").starts_with("20 pre-queue joins (the reveal says 19)"));

    let records: Vec<(Envelope, bool)> = sale
        .records
        .iter()
        .filter(|(envelope, _)| !matches!(envelope.event, Event::QueueSeedRevealed(_)))
        .cloned()
        .collect();
    let audit = audit_voucher(&sale.refolded(&records), None);
    assert_eq!(failing(&audit), ["queue_seed_committed", "queue_served_in_shuffle"], "{}", text(&audit));
    assert_eq!(
        detail(&audit, "queue_served_in_shuffle"),
        "23 places passed and no reveal in the log to check them against"
    );
}

#[test]
fn a_room_before_its_sale_passes() {
    // Committed, two joins, not revealed: nothing to check yet.
    let mut sale = Script::queued(5, 1);
    let seed = queue::new_seed();
    sale.commit(&seed, -60_000);
    sale.join("ann", -50_000, None);
    sale.join("ben", -40_000, None);
    let audit = audit_voucher(&sale.log, None);
    assert!(audit.pass, "{}", text(&audit));
    assert_eq!(
        detail(&audit, "queue_seed_committed"),
        "1 commitment (1 distinct); all 2 joins after it; seed not revealed yet"
    );
    assert_eq!(detail(&audit, "queue_served_in_shuffle"), "seed not revealed yet: no place passed");
}

#[test]
fn a_beacon_room_passes_every_rule_and_an_unplanned_one_says_it_trusts_the_operator() {
    let signer = seckill_beacon::sandbox::Signer::from_seed(b"queue beacon audit");
    let sale = beacon_queue_sale(&signer);
    let audit = audit_voucher(&sale.log, None);
    assert!(audit.pass, "{}", text(&audit));
    let beacon = detail(&audit, "queue_beacon");
    assert!(beacon.contains("after the pre-queue closed"), "{beacon}");
    assert!(beacon.ends_with("signature verifies; the revealed seed is its randomness"), "{beacon}");
    assert_eq!(
        detail(&audit, "queue_seed_committed"),
        "1 commitment (1 distinct); all 23 joins after it; the revealed seed is the beacon round's randomness (see \
         queue_beacon)"
    );
    let plain = audit_voucher(&queue_sale().log, None);
    assert!(detail(&plain, "queue_beacon").contains("this trusts the operator"));
}

#[test]
fn a_forged_round_signature_fails_only_the_beacon_rule() {
    let signer = seckill_beacon::sandbox::Signer::from_seed(b"queue beacon audit");
    let sale = beacon_queue_sale(&signer);
    let log = sale.edited(|event| {
        if let Event::QueueSeedRevealed(reveal) = event {
            let round = reveal.beacon.as_mut().expect("a round");
            // Another round's signature: well formed, not this round's.
            round.signature = signer.sign(round.round + 1).signature;
        }
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["queue_beacon"], "{}", text(&audit));
    let figures = &audit.rules.iter().find(|rule| rule.rule == "queue_beacon").expect("the rule").figures;
    assert_eq!(figures["signature_verifies"], false, "{figures}");
}

#[test]
fn a_round_published_before_the_pre_queue_closed_fails_the_beacon_rule() {
    let signer = seckill_beacon::sandbox::Signer::from_seed(b"queue beacon audit");
    // Planned, signed and keyed by the round before: consistent otherwise.
    let audit = audit_voucher(&beacon_queue_sale_by(&signer, -1).log, None);
    assert_eq!(failing(&audit), ["queue_beacon"], "{}", text(&audit));
    let figures = &audit.rules.iter().find(|rule| rule.rule == "queue_beacon").expect("the rule").figures;
    assert_eq!(figures["round_after_pre_queue_closed"], false, "{figures}");
    assert!(detail(&audit, "queue_beacon").contains("not after the pre-queue closed"));
}

#[test]
fn another_pre_queue_hash_or_a_reveal_without_its_round_fails() {
    let signer = seckill_beacon::sandbox::Signer::from_seed(b"queue beacon audit");
    let sale = beacon_queue_sale(&signer);
    let log = sale.edited(|event| {
        if let Event::QueueSeedRevealed(reveal) = event {
            reveal.entries_hash = Some(queue::pre_queue_hash(&[]));
        }
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["queue_beacon"], "{}", text(&audit));
    assert!(detail(&audit, "queue_beacon").contains("the revealed pre-queue hash is not the logged pre-queue's"));
    // The round left out: the seed must then be a committed one, and the
    // served order is no longer the operator's shuffle of it either.
    let log = sale.edited(|event| {
        if let Event::QueueSeedRevealed(reveal) = event {
            reveal.beacon = None;
        }
    });
    let audit = audit_voucher(&log, None);
    assert_eq!(failing(&audit), ["queue_served_in_shuffle", "queue_beacon"], "{}", text(&audit));
    assert!(detail(&audit, "queue_beacon").contains("the reveal logs no beacon round"));
}
