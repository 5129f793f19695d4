//! Scripted waiting rooms for unit tests: the room's records, stamped with
//! the script's clock, and a clean queue-mode sale to doctor.

use seckill_beacon::sandbox::Signer;
use seckill_core::beacon::BeaconPlan;
use seckill_core::event::{
    OrderAccepted, QueueEntryIssued, QueueEntryUsed, QueueJoined, QueuePlaceExpired, QueueSeedCommitted,
    QueueSeedRevealed, StallReason, WindowsExtended,
};
use seckill_core::ids::UserId;
use seckill_core::queue::{self, QueueSettings};
use seckill_core::{Envelope, Event};

use super::script::{at, Mode, Script};

/// Users who join before the start in [`queue_sale`].
pub(crate) const PRE_QUEUE: u64 = 20;
/// Users who join after it.
pub(crate) const AFTER_START: u64 = 3;
/// Places whose holders stopped watching: skipped.
pub(crate) const SKIPPED: [u64; 2] = [4, 9];
/// Places served whose holders never bought.
pub(crate) const UNSPENT: [u64; 2] = [6, 15];
/// How long [`queue_sale`] is paused, from 10 s into the script.
pub(crate) const PAUSED_MS: i64 = 5_000;
/// When place `place` is passed, in ms into the script.
pub(crate) fn passed_ms(place: u64) -> i64 {
    500 + place as i64 * 100
}

impl Script {
    /// A free queue-mode voucher: the room opens two minutes before the
    /// sale, which begins at -1 s.
    pub(crate) fn queued(stock: u64, limit: u32) -> Self {
        let settings = QueueSettings {
            opens_at: at(-120_000),
            factor_percent: QueueSettings::DEFAULT_FACTOR_PERCENT,
            entry_rate: QueueSettings::DEFAULT_ENTRY_RATE,
            idle_seconds: QueueSettings::DEFAULT_IDLE_SECONDS,
            token_seconds: QueueSettings::DEFAULT_TOKEN_SECONDS,
            beacon: None,
        };
        Self::defined(stock, limit, 0, 0, None, Mode::Queue(settings))
    }

    /// `event` on the sales topic, emitted at `ms`.
    pub(crate) fn sales_at(&mut self, event: Event, ms: i64) -> Envelope {
        let mut envelope = Envelope::new(event);
        envelope.emitted_at = at(ms);
        self.put(&envelope, false);
        envelope
    }

    pub(crate) fn commit(&mut self, seed: &str, ms: i64) -> Envelope {
        let seed_hash = queue::seed_commitment(seed);
        self.sales_at(
            Event::QueueSeedCommitted(QueueSeedCommitted { voucher_id: self.voucher, seed_hash, sealed_seed: None }),
            ms,
        )
    }

    /// A first place: in the pre-queue without `seq`, else after the start.
    pub(crate) fn join(&mut self, user: &str, ms: i64, seq: Option<u64>) -> Envelope {
        self.sales_at(
            Event::QueueJoined(QueueJoined {
                voucher_id: self.voucher,
                user_id: UserId::parse(user).expect("valid user"),
                joined_at: at(ms),
                pre_queue: seq.is_none(),
                seq,
                attempt: 1,
            }),
            ms,
        )
    }

    pub(crate) fn reveal(&mut self, seed: &str, pre_queued: u64, ms: i64) -> Envelope {
        let seed = seed.to_owned();
        self.sales_at(
            Event::QueueSeedRevealed(QueueSeedRevealed {
                voucher_id: self.voucher,
                seed,
                pre_queued,
                beacon: None,
                entries_hash: None,
            }),
            ms,
        )
    }

    /// A stall from `from` to `until` (ms into the script), logged at its end.
    pub(crate) fn stall(&mut self, from: i64, until: i64, reason: StallReason) -> Envelope {
        let stall = WindowsExtended { voucher_id: self.voucher, from: at(from), until: at(until), reason };
        self.sales_at(Event::WindowsExtended(stall), until)
    }

    pub(crate) fn issue(&mut self, user: &UserId, place: u64, entry: u64, ms: i64) -> Envelope {
        let issued = QueueEntryIssued {
            voucher_id: self.voucher,
            user_id: user.clone(),
            place,
            entry,
            expires_at: at(ms + 120_000),
        };
        self.sales_at(Event::QueueEntryIssued(issued), ms)
    }

    pub(crate) fn skip(&mut self, user: &UserId, place: u64, ms: i64) -> Envelope {
        let expired = QueuePlaceExpired { voucher_id: self.voucher, user_id: user.clone(), place };
        self.sales_at(Event::QueuePlaceExpired(expired), ms)
    }

    /// `entry` spent on `order` (admitted with it, in the same script).
    pub(crate) fn spend(&mut self, order: &OrderAccepted, entry: u64) -> Envelope {
        let used = QueueEntryUsed {
            voucher_id: self.voucher,
            user_id: order.user_id.clone(),
            entry,
            order_id: order.order_id,
        };
        self.sales_at(Event::QueueEntryUsed(used), (order.accepted_at - at(0)).num_milliseconds())
    }
}

/// A clean queue-mode sale: 20 units, two per user. The seed is committed
/// at -120 s; 20 users join the pre-queue from -100 s, one a second; the
/// seed is revealed at the start (-1 s); 3 more join at 0.1, 0.2 and 0.3 s.
/// Every place is then passed in the shuffle's order, place p at
/// [`passed_ms`]`(p)`: places [`SKIPPED`] expire, the others get entries
/// 1, 2, … (21 in all), and each holder but those of places [`UNSPENT`]
/// buys one unit with it 20 ms later (19 orders, all created). Then the
/// sale is paused for [`PAUSED_MS`] from 10 s, a stall the room logs: the
/// unspent tokens run that much longer.
pub(crate) fn queue_sale() -> Script {
    let mut sale = Script::queued(20, 2);
    let seed = queue::new_seed();
    sale.commit(&seed, -120_000);
    let early = join_early(&mut sale);
    sale.reveal(&seed, PRE_QUEUE, -1_000);
    serve(&mut sale, queue::pre_queue_order(&seed, &early));
    sale
}

/// [`queue_sale`] with a beacon: the creation record plans the first
/// round of `signer`'s chain (genesis an hour before the script's clock,
/// a round every 3 s) after the start, and the reveal, at the round's
/// time, logs it, its randomness as the seed and the pre-queue's hash.
pub(crate) fn beacon_queue_sale(signer: &Signer) -> Script {
    beacon_queue_sale_by(signer, 0)
}

/// [`beacon_queue_sale`] planning, and keyed by, the round `offset` from
/// the first after the start: a consistent log of a rigged plan.
pub(crate) fn beacon_queue_sale_by(signer: &Signer, offset: i64) -> Script {
    let chain = signer.chain(at(-3_600_000).timestamp(), 3);
    let mut settings = Script::queued(20, 2).log.definition.and_then(|d| d.queue).expect("a room");
    let first = chain.first_round_after(at(-1_000));
    let plan = BeaconPlan { round: first.saturating_add_signed(offset), chain };
    settings.beacon = Some(Box::new(plan.clone()));
    let mut sale = Script::defined(20, 2, 0, 0, None, Mode::Queue(*settings));
    // The operator's seed is still committed (the room takes joins once it
    // is); the beacon's room does not reveal it.
    sale.commit(&queue::new_seed(), -120_000);
    let early = join_early(&mut sale);
    let round = signer.sign(plan.round);
    let randomness = seckill_beacon::verify(&plan.chain, &round).expect("the signer's rounds verify");
    let reveal = QueueSeedRevealed {
        voucher_id: sale.voucher,
        seed: randomness.clone(),
        pre_queued: PRE_QUEUE,
        beacon: Some(round),
        entries_hash: Some(queue::pre_queue_hash(&early)),
    };
    sale.sales_at(Event::QueueSeedRevealed(reveal), (plan.round_time() - at(0)).num_milliseconds());
    serve(&mut sale, queue::beacon_pre_queue_order(&randomness, &early));
    sale
}

/// The pre-queue of [`queue_sale`]: 20 users from -100 s, one a second.
fn join_early(sale: &mut Script) -> Vec<UserId> {
    let early: Vec<UserId> =
        (0..PRE_QUEUE).map(|i| UserId::parse(&format!("early{i:02}")).expect("valid user")).collect();
    for (i, user) in early.iter().enumerate() {
        sale.join(user.as_str(), -100_000 + i as i64 * 1_000, None);
    }
    early
}

/// The rest of [`queue_sale`] from the reveal on, the pre-queue in
/// `shuffled` order.
fn serve(sale: &mut Script, shuffled: Vec<UserId>) {
    let late: Vec<UserId> =
        (1..=AFTER_START).map(|seq| UserId::parse(&format!("late{seq}")).expect("valid user")).collect();
    for (user, seq) in late.iter().zip(1..) {
        sale.join(user.as_str(), seq as i64 * 100, Some(seq));
    }
    let order = shuffled.into_iter().chain(late);
    let mut entry = 0;
    for (user, place) in order.zip(1u64..) {
        let ms = passed_ms(place);
        if SKIPPED.contains(&place) {
            sale.skip(&user, place, ms);
            continue;
        }
        entry += 1;
        sale.issue(&user, place, entry, ms);
        if !UNSPENT.contains(&place) {
            let order = sale.accept(user.as_str(), 1, ms + 20);
            sale.spend(&order, entry);
            sale.decide(&order, ms + 30);
        }
    }
    sale.stall(10_000, 10_000 + PAUSED_MS, StallReason::Paused);
}
