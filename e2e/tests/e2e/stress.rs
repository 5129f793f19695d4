//! A mixed flash sale: limits, random quantities and cancellations racing
//! new orders, then the invariants that must hold whatever the interleaving.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::{self, StreamExt};
use reqwest::StatusCode;
use tokio::task::JoinSet;

use crate::helpers::Platform;

const STOCK: u64 = 1_000;
const REQUESTS: usize = 20_000;
const USERS: u64 = 5_000;
const LIMIT: u32 = 2;
/// Every CANCEL_EVERY-th admitted order is cancelled by its owner once created.
const CANCEL_EVERY: usize = 10;
const CONCURRENCY: usize = 128;

/// A fixed-seed xorshift, so a failure reproduces with the same requests.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides
    }
}

struct Admitted {
    order: String,
    user: String,
    quantity: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_sale_with_limits_quantities_and_cancellations_keeps_every_invariant() {
    let platform = Arc::new(Platform::start().await);
    let voucher = Arc::new(platform.create_voucher(STOCK, LIMIT).await);
    let mut dice = Dice(0x5EC_C111);
    let requests: Vec<(String, u32)> =
        (0..REQUESTS).map(|_| (format!("user-{}", dice.roll(USERS)), 1 + dice.roll(2) as u32)).collect();

    let mut answers = stream::iter(requests)
        .map(|(user, quantity)| {
            let (platform, voucher) = (Arc::clone(&platform), Arc::clone(&voucher));
            async move {
                let (status, body) = platform.order_units(&voucher, &user, quantity).await;
                (user, quantity, status, body)
            }
        })
        .buffer_unordered(CONCURRENCY);
    let mut admitted = Vec::new();
    let mut codes: HashMap<String, usize> = HashMap::new();
    let mut cancels = JoinSet::new();
    while let Some((user, quantity, status, body)) = answers.next().await {
        if status != StatusCode::ACCEPTED {
            assert_eq!(status, StatusCode::CONFLICT, "{body}");
            *codes.entry(body["error"].as_str().expect("error code").to_owned()).or_default() += 1;
            continue;
        }
        let order = body["order_id"].as_str().expect("order_id").to_owned();
        if admitted.len() % CANCEL_EVERY == 0 {
            // Cancelled while the sale goes on: its units sell again.
            let (platform, order, user) = (Arc::clone(&platform), order.clone(), user.clone());
            cancels.spawn(async move {
                let decided = platform.wait_final(&order).await;
                if decided["status"] != "CREATED" {
                    return None;
                }
                let (status, body) = platform.post(&format!("/api/v1/orders/{order}/cancel"), Some(&user), None).await;
                assert_eq!(status, StatusCode::ACCEPTED, "{body}");
                Some(order)
            });
        }
        admitted.push(Admitted { order, user, quantity });
    }
    let cancelled: Vec<String> = cancels.join_all().await.into_iter().flatten().collect();

    let mut live_units_by_user: HashMap<String, u32> = HashMap::new();
    let (mut created, mut failed, mut live_units) = (0u64, 0u64, 0u64);
    for order in &admitted {
        let wanted = if cancelled.contains(&order.order) { "CANCELLED" } else { "CREATED" };
        let state = platform.wait_order(&order.order, |o| o["status"] == wanted || o["status"] == "FAILED").await;
        match state["status"].as_str() {
            Some("FAILED") => failed += 1,
            Some("CREATED") => {
                created += 1;
                live_units += u64::from(order.quantity);
                *live_units_by_user.entry(order.user.clone()).or_default() += order.quantity;
            }
            _ => created += 1,
        }
    }
    let cancelled_count = cancelled.len() as u64;
    println!(
        "stress: {} requests, {} admitted, {created} created, {cancelled_count} cancelled, {failed} failed, \
         {live_units} units held, rejections {codes:?}",
        REQUESTS,
        admitted.len()
    );

    assert!(live_units <= STOCK, "created − cancelled = {live_units} units > stock {STOCK}");
    assert!(cancelled_count >= (admitted.len() / CANCEL_EVERY) as u64 * 9 / 10, "the cancellations happened");
    assert!(live_units_by_user.values().all(|units| *units <= LIMIT), "a user holds more than {LIMIT}");
    let persistent = platform.persistent_remaining(&voucher).await;
    assert_eq!(persistent, STOCK - live_units, "the persistent stock accounts for every held unit");
    crate::helpers::eventually(|| async { (platform.redis_remaining(&voucher).await == persistent).then_some(()) })
        .await;
    let shown = platform
        .wait_voucher(&voucher, |v| {
            v["created"] == created && v["cancelled"] == cancelled_count && v["failed"] == failed
        })
        .await;
    assert_eq!(shown["remaining"].as_u64(), Some(persistent), "{shown}");
    assert_eq!(shown["admitted"].as_u64(), Some(admitted.len() as u64), "{shown}");
}
