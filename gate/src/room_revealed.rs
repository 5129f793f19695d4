//! A waiting room Redis lost after its reveal, as the log puts it back
//! ([`crate::Gate::restore`], through `lua/queue_restore.lua`).
//!
//! Once revealed, the room's order is in the log: the seed (a beacon room's:
//! its round's randomness) and the pre-queue, whose hash a beacon room's
//! reveal carries, give the pre-queue's places
//! (`seckill_core::queue::beacon_pre_queue_order`, or `pre_queue_order`
//! without a beacon); the joins after the start follow by seq, places
//! taken again after one was passed too. Each place the log says was
//! passed comes back as it was left: served (its entry's end where the log
//! says, moved by the logged stalls, as the window clock moved it), spent
//! on its order, or skipped; the room's cursor past the last of them. The
//! places not reached yet are waiting, in the same order, so the room goes
//! on serving them as it would have. The places are checked against the
//! log: a place served or skipped must be the one the rebuilt line has
//! there, and the pre-queue must be the one revealed; a log that does not
//! add up (records lost before they were logged) gives nothing, and the
//! room starts over empty.

use std::collections::HashMap;

use chrono::Duration;
use seckill_core::{queue, UserId};

use crate::draw_history::window_end;
use crate::room_history::RoomHistory;
use crate::room_rebuild::{Placed, RoomRebuild, AFTER_START};

/// `history`'s room as it stood when it was lost, when the log adds up;
/// its entries admit one order for `token_seconds` of ordering time.
pub(crate) fn revealed(history: &RoomHistory, token_seconds: u32) -> Option<RoomRebuild> {
    let reveal = history.reveal.as_ref()?;
    let pre: Vec<UserId> = history.pre_queue.iter().cloned().collect();
    if pre.len() as u64 != reveal.pre_queued {
        return None;
    }
    let order = match &reveal.entries_hash {
        Some(hash) if *hash != queue::pre_queue_hash(&pre) => return None,
        Some(_) => queue::beacon_pre_queue_order(&reveal.seed, &pre),
        None => queue::pre_queue_order(&reveal.seed, &pre),
    };
    // The line: the pre-queue in its order (scores below 2^52 keep it), then
    // every join after the start by seq.
    let mut joins: Vec<(u64, &UserId, u32)> = history.after_start.iter().map(|(seq, user)| (*seq, user, 1)).collect();
    joins.extend(history.retaken.iter().map(|(seq, (user, attempt))| (*seq, user, *attempt)));
    joins.sort_by_key(|(seq, _, _)| *seq);
    let line: Vec<(String, &UserId, u32)> = order
        .iter()
        .zip(0u64..)
        .map(|(user, index)| (index.to_string(), user, 1))
        .chain(joins.into_iter().map(|(seq, user, attempt)| ((AFTER_START + seq).to_string(), user, attempt)))
        .collect();

    // What the log says became of each place passed.
    let mut passed: HashMap<u64, Passed> = HashMap::new();
    for (entry, issued) in &history.issued {
        passed.insert(issued.place, Passed::Served { user: &issued.user_id, entry: *entry });
    }
    for (place, user) in &history.skipped {
        passed.insert(*place, Passed::Skipped { user });
    }
    let cursor = passed.keys().copied().max().unwrap_or(0);
    if cursor > line.len() as u64 {
        return None;
    }
    let latest: HashMap<&UserId, u32> = line.iter().fold(HashMap::new(), |mut latest, (_, user, attempt)| {
        let seen = latest.entry(*user).or_insert(*attempt);
        *seen = (*seen).max(*attempt);
        latest
    });
    let mut holds = Vec::new();
    let mut places = Vec::with_capacity(line.len());
    for ((score, user, attempt), place) in line.iter().zip(1u64..) {
        let value = match passed.get(&place) {
            Some(Passed::Served { user: to, .. } | Passed::Skipped { user: to }) if to != user => return None,
            _ if latest.get(user) != Some(attempt) => String::new(),
            None if place <= cursor => return None,
            None => format!("{attempt}|w||"),
            Some(Passed::Skipped { .. }) => format!("{attempt}|x||"),
            Some(Passed::Served { entry, .. }) => match history.used.get(entry) {
                Some(order) => format!("{attempt}|u|{entry}|{order}"),
                None => {
                    let due = history.issued[entry].expires_at;
                    let opened = due - Duration::seconds(i64::from(token_seconds));
                    let until = window_end(&history.stalls, opened, due).timestamp_millis();
                    holds.push((*entry, until));
                    format!("{attempt}|s|{entry}|{until}")
                }
            },
        };
        places.push(Placed { score: score.clone(), user: user.to_string(), attempt: *attempt, value });
    }
    let fields = vec![
        ("committed", "1".to_owned()),
        ("revealed", "1".to_owned()),
        ("beacon_wait", "0".to_owned()),
        ("closed", "1".to_owned()),
        ("pre_hashed", pre.len().to_string()),
        ("pre_chain", reveal.entries_hash.clone().unwrap_or_default()),
        ("cursor", cursor.to_string()),
        ("issued", history.issued.keys().next_back().copied().unwrap_or(0).to_string()),
        ("expired", history.skipped.len().to_string()),
    ];
    Some(RoomRebuild { places, holds, seed: reveal.seed.clone(), fields })
}

/// A place the log says the room passed.
enum Passed<'a> {
    Served { user: &'a UserId, entry: u64 },
    Skipped { user: &'a UserId },
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use seckill_core::event::{QueueEntryIssued, QueueSeedRevealed};
    use seckill_core::VoucherId;

    use super::*;

    /// A room without a beacon, three in its pre-queue, revealed; and its
    /// pre-queue in place order.
    fn revealed_room() -> (RoomHistory, Vec<UserId>) {
        let voucher = VoucherId::generate();
        let mut history = RoomHistory::default();
        history.pre_queue.extend(["a", "b", "c"].map(|u| UserId::parse(u).expect("valid")));
        let seed = "5".repeat(64);
        history.revealed = true;
        history.reveal = Some(QueueSeedRevealed {
            voucher_id: voucher,
            seed: seed.clone(),
            pre_queued: 3,
            beacon: None,
            entries_hash: None,
        });
        let pre: Vec<UserId> = history.pre_queue.iter().cloned().collect();
        (history, queue::pre_queue_order(&seed, &pre))
    }

    fn issue(history: &mut RoomHistory, place: u64, entry: u64, user: &UserId) {
        let voucher = history.reveal.as_ref().expect("revealed").voucher_id;
        let issued =
            QueueEntryIssued { voucher_id: voucher, user_id: user.clone(), place, entry, expires_at: Utc::now() };
        history.issued.insert(entry, issued);
    }

    #[test]
    fn the_places_passed_come_back_as_the_log_left_them() {
        let (mut history, order) = revealed_room();
        issue(&mut history, 1, 1, &order[0]);
        history.skipped.insert(2, order[1].clone());
        let rebuild = revealed(&history, 60).expect("the log adds up");
        let values: Vec<&str> = rebuild.places.iter().map(|p| p.value.as_str()).collect();
        assert!(values[0].starts_with("1|s|1|") && values[1..] == ["1|x||", "1|w||"], "{values:?}");
        assert_eq!(rebuild.holds.len(), 1);
        assert!(rebuild.fields.contains(&("cursor", "2".to_owned())));
    }

    #[test]
    fn a_log_that_does_not_add_up_gives_nothing() {
        let (mut history, order) = revealed_room();
        // Place 1 passed without a record, place 2 served.
        issue(&mut history, 2, 1, &order[1]);
        assert!(revealed(&history, 60).is_none(), "a gap before the cursor");
        let (mut history, order) = revealed_room();
        issue(&mut history, 1, 1, &order[1]);
        assert!(revealed(&history, 60).is_none(), "place 1 served to another than the line has there");
        let (mut history, _) = revealed_room();
        history.reveal.as_mut().expect("revealed").pre_queued = 4;
        assert!(revealed(&history, 60).is_none(), "a pre-queue member missing from the log");
        let (mut history, order) = revealed_room();
        history.skipped.insert(4, order[0].clone());
        assert!(revealed(&history, 60).is_none(), "a place passed beyond the line");
    }
}
