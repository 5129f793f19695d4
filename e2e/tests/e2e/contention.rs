//! Many clients, one voucher, tiny stock: exactly the stock is sold.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::future::join_all;
use reqwest::StatusCode;
use tokio::sync::Semaphore;

use seckill_core::config::{StoreBackend, StoreConfig};

use crate::helpers::Platform;

/// Distinct users, each ordering once.
const USERS: usize = 5_000;
/// Users who also send a second, concurrent request.
const REPEATERS: usize = 500;
const STOCK: u64 = 10;
/// Requests in flight at once.
const CONCURRENCY: usize = 256;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_buyers_ten_units() {
    sell_out(Arc::new(Platform::start().await), USERS, REPEATERS).await;
}

/// The same sale with the stock and the view on a real CQL server and two
/// processors sharing the sales topic's partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processors_on_cql_sell_exactly_the_stock() {
    let cql = seckill_cqltest::TestCql::start().await.expect("Cassandra starts (run scripts/setup)");
    let store = StoreConfig {
        backend: StoreBackend::Scylla,
        nodes: vec![cql.nodes()],
        keyspace: seckill_cqltest::unique_keyspace(),
        ..StoreConfig::default()
    };
    let mut platform = Platform::start_with(Some(store)).await;
    platform.start_another_processor().await;
    sell_out(Arc::new(platform), 2_000, 200).await;
}

/// `users` distinct buyers plus `repeaters` of them again, all at once, on
/// one voucher of STOCK units: exactly the stock is sold, once per user.
pub(crate) async fn sell_out(platform: Arc<Platform>, users: usize, repeaters: usize) {
    let voucher = Arc::new(platform.create_voucher(STOCK, 1).await);
    let users: Vec<String> =
        (0..users).map(|i| format!("buyer-{i}")).chain((0..repeaters).map(|i| format!("buyer-{}", i * 7))).collect();
    let requests_sent = users.len();
    let gate = Arc::new(Semaphore::new(CONCURRENCY));
    let requests = users.into_iter().map(|user| {
        let (platform, voucher, gate) = (Arc::clone(&platform), Arc::clone(&voucher), Arc::clone(&gate));
        tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.expect("semaphore open");
            let (status, body) = platform.order(&voucher, &user).await;
            (user, status, body)
        })
    });
    let answers: Vec<_> = join_all(requests).await.into_iter().map(|r| r.expect("request task")).collect();
    assert_eq!(answers.len(), requests_sent);

    let mut admitted: HashMap<String, String> = HashMap::new();
    for (user, status, body) in &answers {
        if *status == StatusCode::ACCEPTED {
            let order = body["order_id"].as_str().expect("order_id").to_owned();
            assert!(admitted.insert(user.clone(), order).is_none(), "{user} was admitted twice");
        }
    }
    // A refused holder is told it holds, with its own order (whether Redis
    // or the sold-out memo answered); everyone else, that it is sold out.
    let mut codes: HashMap<String, usize> = HashMap::new();
    for (user, status, body) in answers.iter().filter(|(_, status, _)| *status != StatusCode::ACCEPTED) {
        assert_eq!(*status, StatusCode::CONFLICT, "{body}");
        let code = body["error"].as_str().expect("error code").to_owned();
        match admitted.get(user) {
            Some(order) => {
                assert_eq!(code, "duplicate_order", "{user} holds {order}: {body}");
                assert_eq!(body["order_id"].as_str(), Some(order.as_str()), "{user} is told its own order: {body}");
            }
            None => assert_eq!(code, "sold_out", "{user} holds nothing: {body}"),
        }
        *codes.entry(code).or_default() += 1;
    }
    println!("contention: {} admitted, rejections {codes:?}", admitted.len());
    assert_eq!(admitted.len() as u64, STOCK, "exactly the stock is admitted");

    let mut created = HashSet::new();
    for order in admitted.values() {
        let final_state = platform.wait_final(order).await;
        assert_eq!(final_state["status"], "CREATED", "{final_state}");
        assert!(created.insert(final_state["user_id"].as_str().expect("user").to_owned()), "one order per user");
    }
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == STOCK).await;
    assert_eq!(shown["remaining"], 0, "{shown}");
    assert_eq!(shown["admitted"], STOCK, "no order beyond the admitted ones reached the log");
    assert_eq!(platform.redis_remaining(&voucher).await, 0);
    assert_eq!(platform.persistent_remaining(&voucher).await, 0);
}
