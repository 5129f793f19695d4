//! Deciding needs no Redis: with the gate's Redis frozen, the processor
//! still decides every order and cancellation the log brings, and the units
//! of a cancelled order reach Redis once it answers again. The gate
//! follower's backlog meanwhile shows on the processor's `/metrics`
//! (`seckill_gate_follower_lag`), and is gone once Redis answers.

use std::time::Duration;

use chrono::Utc;
use reqwest::StatusCode;
use seckill_core::event::{CancelReason, Event, OrderAccepted, OrderRequest};
use seckill_core::topics::Topics;
use seckill_core::{Envelope, OrderId, UserId, VoucherId};
use seckill_kafka::{Message, OwnedMessage};

use crate::helpers::{eventually, eventually_seen, Platform};

/// Far below the 30 s a batch may spend on a dependency before it is given
/// up and read again: a decision held behind Redis arrives after that.
const DECIDED_WITHIN: Duration = Duration::from_secs(15);

/// The outcomes of `order` among `messages`, in log order.
fn outcomes_of(messages: &[OwnedMessage], order: OrderId) -> Vec<Event> {
    messages
        .iter()
        .filter_map(|message| Envelope::decode(message.payload()?).ok())
        .map(|envelope| envelope.event)
        .filter(|event| event.order().is_some_and(|o| o.order_id == order))
        .collect()
}

fn cancelled(messages: &[OwnedMessage], order: OrderId) -> bool {
    outcomes_of(messages, order).iter().any(|event| matches!(event, Event::OrderCancelled(_)))
}

fn created(messages: &[OwnedMessage], order: OrderId) -> bool {
    outcomes_of(messages, order).iter().any(|event| matches!(event, Event::OrderCreated(_)))
}

/// The values of `seckill_gate_follower_lag`, one per assigned partition,
/// as the processor's `/metrics` shows them now.
async fn gate_follower_lag(platform: &Platform) -> Result<Vec<i64>, String> {
    let url = format!("http://{}/metrics", platform.processor_addr);
    let text =
        platform.http.get(url).send().await.map_err(|e| e.to_string())?.text().await.map_err(|e| e.to_string())?;
    Ok(text
        .lines()
        .filter(|line| line.starts_with("seckill_gate_follower_lag{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse().ok())
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn decisions_go_on_while_redis_is_frozen() {
    let platform = Platform::start().await;
    let topics = Topics::with_prefix(&platform.infra.namespace);
    let voucher = platform.create_voucher(2, 1).await;
    let voucher_id: VoucherId = voucher.parse().expect("voucher id");
    let (status, body) = platform.order(&voucher, "alice").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let alice: OrderId = body["order_id"].as_str().expect("order id").parse().expect("order id");
    let first = platform.wait_final(&alice.to_string()).await;
    assert_eq!(first["status"], "CREATED", "{first}");
    assert_eq!(platform.redis_remaining(&voucher).await, 1);

    let mut redis = platform.redis_connection().await;
    platform.infra.redis.pause();
    let ping = redis::cmd("PING");
    let answer = tokio::time::timeout(Duration::from_secs(1), ping.query_async::<String>(&mut redis)).await;
    assert!(!matches!(answer, Ok(Ok(_))), "Redis answers nobody while frozen: {answer:?}");
    // Alice's cancellation, and an order admitted by a Redis the platform
    // lost (it reached the log, this Redis never saw it).
    let producer = platform.producer();
    let cancel = Envelope::new(Event::CancelRequested(OrderRequest {
        order_id: alice,
        voucher_id,
        reason: Some(CancelReason::Requested),
        requested_at: Utc::now(),
        settled_checkouts: None,
    }));
    producer.send(&topics.sales, &cancel).await.expect("produced");
    tokio::time::timeout(DECIDED_WITHIN, platform.read_topic(&topics.orders, |read| cancelled(read, alice)))
        .await
        .expect("the cancellation is decided while Redis is frozen");
    let bob = OrderAccepted::now(voucher_id, UserId::parse("bob").expect("valid"), 1);
    let sent = std::time::Instant::now();
    producer.send(&topics.sales, &Envelope::new(Event::OrderAccepted(bob.clone()))).await.expect("produced");
    // Bob's order is decided (it holds alice's unit), though the
    // cancellation before it waits to give the unit back to Redis.
    tokio::time::timeout(DECIDED_WITHIN, platform.read_topic(&topics.orders, |read| created(read, bob.order_id)))
        .await
        .expect("an order after the cancellation is decided while Redis is frozen");
    println!("With Redis frozen, an order was decided and read back {:?} after it was sent.", sent.elapsed());
    // The follower holds alice's cancellation (its offset unstored) until
    // Redis answers. Its lag is refreshed when it polls, so while stuck it
    // shows once the batch's budget (30 s) is spent and the batch is read again.
    let frozen = std::time::Instant::now();
    let behind = eventually_seen("the gate follower's lag while Redis is frozen", || async {
        let lag = gate_follower_lag(&platform).await?;
        if lag.iter().sum::<i64>() > 0 {
            Ok(lag)
        } else {
            Err(format!("{lag:?}"))
        }
    })
    .await;
    println!("With Redis frozen, the gate follower's lag read {behind:?} after {:?}.", frozen.elapsed());

    // Redis answers again: alice's unit goes back; bob's was never taken
    // there, so nothing is given for it.
    platform.infra.redis.resume();
    eventually(|| async { (platform.redis_remaining(&voucher).await == 2).then_some(()) }).await;
    assert_eq!(platform.persistent_remaining(&voucher).await, 1);
    eventually_seen("the gate follower's lag once Redis answers", || async {
        let lag = gate_follower_lag(&platform).await?;
        if !lag.is_empty() && lag.iter().all(|&records| records == 0) {
            Ok(())
        } else {
            Err(format!("{lag:?}"))
        }
    })
    .await;
}
