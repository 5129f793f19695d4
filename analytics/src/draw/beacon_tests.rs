//! A beacon draw that passes, and each way of rigging its round failing
//! the `beacon` check: a tampered signature, another round than the plan,
//! a round published before entries closed. The rounds are signed by the
//! beacon sandbox's signer, verified as drand's are.

use seckill_beacon::sandbox::Signer;
use seckill_core::beacon::{BeaconChain, BeaconPlan, BeaconRound};
use seckill_core::draw::{self, DrawSettings};
use seckill_core::event::{DrawSeedRevealed, Event};
use seckill_core::ids::UserId;
use seckill_core::queue;

use crate::draw::{verify, DrawVerification};
use crate::sale::draw_script::{entrant, DRAW_MS, PURCHASE_SECONDS};
use crate::sale::script::{at, Mode, Script};

const ENTRIES: u64 = 600;
const STOCK: u64 = 10;

fn chain(signer: &Signer) -> BeaconChain {
    // Genesis an hour before the script's clock: rounds every 3 s.
    signer.chain(at(-3_600_000).timestamp(), 3)
}

/// A draw ranked by `round` (signed by `signer`) under `plan`.
fn beacon_draw(signer: &Signer, plan: BeaconPlan, round: BeaconRound) -> Script {
    let settings = DrawSettings {
        entries_open_at: at(-200_000),
        draw_at: at(DRAW_MS),
        purchase_seconds: PURCHASE_SECONDS,
        beacon: Some(Box::new(plan.clone())),
    };
    let mut script = Script::defined(STOCK, 1, 0, 0, None, Mode::Draw(settings));
    // The operator's seed is still committed (the room takes entries once
    // it is); the beacon draw does not reveal it.
    script.draw_commit(&queue::new_seed(), -210_000);
    let entrants: Vec<UserId> = (1..=ENTRIES).map(entrant).collect();
    for (user, seq) in entrants.iter().zip(1u64..) {
        script.enter(user, seq, -190_000 + seq as i64 * 50);
    }
    let signed = signer.sign(round.round);
    let bytes: Vec<u8> = (0..signed.signature.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&signed.signature[i..i + 2], 16).expect("hex"))
        .collect();
    let randomness = seckill_beacon::randomness(&bytes);
    let reveal = DrawSeedRevealed {
        voucher_id: script.voucher,
        seed: randomness.clone(),
        entries: ENTRIES,
        entries_hash: draw::entries_hash(&entrants),
        beacon: Some(round),
    };
    let reveal_ms = (plan.chain.round_time(plan.round) - at(0)).num_milliseconds().max(DRAW_MS);
    script.sales_at(Event::DrawSeedRevealed(reveal), reveal_ms);
    let ranking = draw::ranking(&randomness, &entrants);
    script.rank(&ranking, reveal_ms + 10);
    script.select(STOCK, reveal_ms + 20);
    script
}

fn failing(verification: &DrawVerification) -> Vec<&'static str> {
    verification.failed().map(|check| check.check).collect()
}

fn detail<'a>(verification: &'a DrawVerification, check: &str) -> &'a str {
    verification.checks.iter().find(|c| c.check == check).map(|c| c.detail.as_str()).expect("the check")
}

#[test]
fn a_draw_ranked_by_its_planned_round_passes() {
    let signer = Signer::from_seed(b"beacon tests");
    let plan = BeaconPlan::after(chain(&signer), at(DRAW_MS));
    let round = signer.sign(plan.round);
    let verification = verify(&beacon_draw(&signer, plan, round).log).expect("a draw");
    assert!(verification.pass, "{}", verification.text());
    assert!(
        detail(&verification, "beacon").ends_with("signature verifies; the revealed seed is its randomness"),
        "{}",
        verification.text()
    );
    assert!(detail(&verification, "commitment")
        .ends_with("the revealed seed is the beacon round's randomness (see beacon)"));
}

#[test]
fn a_tampered_signature_fails_the_beacon_check() {
    let signer = Signer::from_seed(b"beacon tests");
    let plan = BeaconPlan::after(chain(&signer), at(DRAW_MS));
    let script = beacon_draw(&signer, plan.clone(), signer.sign(plan.round));
    // Another valid point: the signature of the next round, logged as the planned one's.
    let forged = signer.sign(plan.round + 1).signature;
    let log = script.edited(|event| {
        if let Event::DrawSeedRevealed(reveal) = event {
            if let Some(round) = &mut reveal.beacon {
                round.signature = forged.clone();
            }
        }
    });
    let verification = verify(&log).expect("a draw");
    assert_eq!(failing(&verification), ["beacon"], "{}", verification.text());
    assert!(detail(&verification, "beacon").contains("does not verify under the chain's public key"));
}

#[test]
fn a_round_signed_by_another_key_fails_the_beacon_check() {
    let (signer, operator) = (Signer::from_seed(b"beacon tests"), Signer::from_seed(b"the operator's own"));
    let plan = BeaconPlan::after(chain(&signer), at(DRAW_MS));
    // The operator signs the planned round with a key of their own and
    // ranks by its randomness: the chain's public key refuses it.
    let verification = verify(&beacon_draw(&operator, plan.clone(), operator.sign(plan.round)).log).expect("a draw");
    assert_eq!(failing(&verification), ["beacon"], "{}", verification.text());
}

#[test]
fn another_round_than_the_plan_fails_the_beacon_check() {
    let signer = Signer::from_seed(b"beacon tests");
    let plan = BeaconPlan::after(chain(&signer), at(DRAW_MS));
    // A later round, validly signed, picked because its ranking suits.
    let verification = verify(&beacon_draw(&signer, plan.clone(), signer.sign(plan.round + 5)).log).expect("a draw");
    assert_eq!(failing(&verification), ["beacon"], "{}", verification.text());
    assert!(
        detail(&verification, "beacon").contains(&format!("the reveal logs round {}, not the planned", plan.round + 5))
    );
}

#[test]
fn a_round_published_before_entries_closed_fails_the_beacon_check() {
    let signer = Signer::from_seed(b"beacon tests");
    let chain = chain(&signer);
    // Planned on a round already public while entries were open: a last
    // entrant could grind against it.
    let early = BeaconPlan { round: chain.first_round_after(at(DRAW_MS)) - 10, chain };
    let verification = verify(&beacon_draw(&signer, early.clone(), signer.sign(early.round)).log).expect("a draw");
    assert_eq!(failing(&verification), ["beacon"], "{}", verification.text());
    assert!(detail(&verification, "beacon").contains(" ≤ draw_at "), "{}", verification.text());
}

#[test]
fn a_draw_without_a_plan_says_its_seed_trusts_the_operator() {
    let verification = verify(&crate::sale::draw_script::draw_sale().script.log).expect("a draw");
    assert!(verification.pass, "{}", verification.text());
    assert!(detail(&verification, "beacon").contains("this trusts the operator"));
}
