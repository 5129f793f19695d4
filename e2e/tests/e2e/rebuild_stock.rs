//! The stock store rebuilt from the sales topic decides as the processor
//! did: every order's outcome and every voucher's stock equal; a corrupted
//! live row (or an outcome the log lacks) is reported, and only it; and a
//! processor started on the rebuilt store goes on deciding.

use std::sync::Arc;

use reqwest::StatusCode;
use seckill_analytics::rebuild_stock::{self, ProcessorStock};
use seckill_analytics::AnalyticsError;
use seckill_core::config::{StoreBackend, StoreConfig};
use seckill_core::event::{Event, OrderAccepted, VoucherUpdated};
use seckill_core::{Envelope, UserId, VoucherId};
use seckill_devstack::TempDir;
use seckill_store::embedded::EmbeddedStockStore;
use seckill_store::{StockInput, StockStore};
use serde_json::json;

use crate::helpers::{eventually, Platform};

/// Places an order as `user` and returns its id, once admitted.
async fn admitted(platform: &Platform, voucher: &str, user: &str, quantity: u32) -> String {
    let (status, body) = platform.order_units(voucher, user, quantity).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    body["order_id"].as_str().expect("order_id").to_owned()
}

/// Publishes an acceptance Redis would not have made (it forgot a sale):
/// the processor decides it against its own stock.
async fn published(platform: &Platform, voucher: &str, user: &str) -> String {
    let voucher_id: VoucherId = voucher.parse().expect("voucher id");
    let order = OrderAccepted::now(voucher_id, UserId::parse(user).expect("user"), 1);
    let id = order.order_id.to_string();
    let topic = platform.kafka.topics().sales;
    platform.producer().send(&topic, &Envelope::new(Event::OrderAccepted(order))).await.expect("published");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_store_rebuilt_from_the_log_decides_as_the_processor_did_and_takes_over() {
    let mut platform = Platform::start().await;
    let now = chrono::Utc::now();
    let free = json!({"stock": 3, "per_user_limit": 1, "payment_seconds": 600,
        "begins_at": now - chrono::Duration::seconds(1), "ends_at": now + chrono::Duration::hours(1)});
    let held = platform.create_voucher_from(free).await;
    let (a1, a2, a3) = (
        admitted(&platform, &held, "s1", 1).await,
        admitted(&platform, &held, "s2", 1).await,
        admitted(&platform, &held, "s3", 1).await,
    );
    // Redis forgot: one order past the stock, one past a user's limit.
    let sold_out = published(&platform, &held, "s4").await;
    let over_limit = published(&platform, &held, "s2").await;
    for order in [&a1, &a2, &a3] {
        assert_eq!(platform.wait_final(order).await["status"], "CREATED");
    }
    for (order, reason) in [(&sold_out, "sold_out"), (&over_limit, "limit_exceeded")] {
        let failed = platform.wait_final(order).await;
        assert_eq!((failed["status"].as_str(), failed["reason"].as_str()), (Some("FAILED"), Some(reason)), "{failed}");
    }
    let (status, body) = platform.post(&format!("/api/v1/orders/{a1}/cancel"), Some("s1"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, body) = platform.post(&format!("/api/v1/orders/{a2}/confirm"), Some("s2"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, body) = platform.update_voucher(&held, json!({"add_stock": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let plain = platform.create_voucher(10, 2).await;
    let b1 = admitted(&platform, &plain, "s5", 2).await;
    platform.wait_order(&a1, |o| o["status"] == "CANCELLED").await;
    platform.wait_order(&a2, |o| o["status"] == "PAID").await;
    assert_eq!(platform.wait_final(&b1).await["status"], "CREATED");
    let settled = || async {
        let figures = (platform.persistent_remaining(&held).await, platform.persistent_remaining(&plain).await);
        (figures == (3, 8)).then_some(())
    };
    eventually(settled).await;

    let dir = TempDir::new().expect("dir");
    let rebuilt_file = dir.path().join("rebuilt.redb");
    let rebuilt: Arc<dyn StockStore> = Arc::new(EmbeddedStockStore::open(&rebuilt_file).expect("opens"));
    let report = rebuild_stock::rebuild_stock(&platform.kafka, Arc::clone(&rebuilt)).await.expect("rebuilds");
    assert_eq!((report.orders.len(), report.vouchers.len()), (6, 2), "{report:?}");
    let live = ProcessorStock::new(&format!("http://{}", platform.processor_addr)).expect("client");
    let mut logged = rebuild_stock::logged_outcomes(&platform.kafka).await.expect("reads the outcomes");
    let differences =
        rebuild_stock::verify(&report, &logged, rebuilt.as_ref(), |v| live.stock(v)).await.expect("compares");
    assert!(differences.is_empty(), "{differences:#?}");

    // An outcome the log lacks (the claim's) is reported, and only it.
    let a2_id = a2.parse().expect("order id");
    logged.get_mut(&a2_id).expect("logged").outcomes.retain(|o| o.kind != "paid");
    let differences =
        rebuild_stock::verify(&report, &logged, rebuilt.as_ref(), |v| live.stock(v)).await.expect("compares");
    assert_eq!(differences.len(), 1, "{differences:#?}");
    assert_eq!((differences[0].row, differences[0].id.as_str()), ("order", a2.as_str()));
    let logged = rebuild_stock::logged_outcomes(&platform.kafka).await.expect("reads the outcomes");

    // Corrupt one voucher's row of the live store behind the processor's back.
    platform.processor.take().expect("running").stop().await;
    let live_file = platform.infra.dir.path().join("processor.redb");
    {
        let store = eventually(|| async { EmbeddedStockStore::open(&live_file).ok() }).await;
        let voucher_id: VoucherId = plain.parse().expect("id");
        let stray = VoucherUpdated { voucher_id, paused: None, ends_at: None, add_stock: 5 };
        let update = StockInput::Update { update_id: uuid::Uuid::now_v7(), update: stray };
        store.apply(vec![update]).await.expect("applies");
    }
    platform.start_processor().await;
    let differences = eventually(|| async {
        rebuild_stock::verify(&report, &logged, rebuilt.as_ref(), |v| live.stock(v)).await.ok()
    })
    .await;
    println!(
        "rebuild-stock: {} records, {} orders, {} vouchers; after corruption: {differences:?}",
        report.records,
        report.orders.len(),
        report.vouchers.len()
    );
    assert_eq!(differences.len(), 1, "{differences:#?}");
    assert_eq!((differences[0].row, differences[0].id.as_str()), ("voucher", plain.as_str()));
    assert_eq!(differences[0].live, Some(json!({"stock": 15, "remaining": 13})));
    assert_eq!(differences[0].rebuilt, Some(json!({"stock": 10, "remaining": 8})));

    // The processor takes over on the rebuilt store, from its committed
    // offsets, and decides the next order against the right stock.
    platform.processor.take().expect("running").stop().await;
    drop(rebuilt);
    std::fs::rename(&rebuilt_file, &live_file).expect("the rebuilt store takes the live one's place");
    platform.start_processor().await;
    assert_eq!(platform.persistent_remaining(&plain).await, 8, "the rebuilt row, not the corrupted one");
    let next = admitted(&platform, &held, "s6", 1).await;
    let created = platform.wait_final(&next).await;
    assert_eq!(created["status"], "CREATED", "{created}");
    eventually(|| async { (platform.persistent_remaining(&held).await == 2).then_some(()) }).await;

    // A sales topic missing its first records is refused, not rebuilt.
    let sales = platform.kafka.topics().sales;
    delete_first_record(&platform.kafka.brokers, &sales).await;
    let fresh: Arc<dyn StockStore> = Arc::new(EmbeddedStockStore::open(&dir.path().join("cut.redb")).expect("opens"));
    let refused = rebuild_stock::rebuild_stock(&platform.kafka, fresh).await.expect_err("refused");
    let message = refused.to_string();
    assert!(matches!(refused, AnalyticsError::LogIncomplete { earliest: 1, .. }), "{message}");
    assert!(message.contains(&sales) && message.contains("not 0"), "{message}");
}

/// Deletes the first record of the first partition of `topic` that has
/// one, as `kafka-delete-records.sh` or a retention limit would.
async fn delete_first_record(brokers: &str, topic: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers).set("group.id", "seckill-test-unused");
    let consumer: BaseConsumer = config.create().expect("consumer");
    let timeout = std::time::Duration::from_secs(10);
    let partition = (0..3)
        .find(|p| consumer.fetch_watermarks(topic, *p, timeout).expect("watermarks").1 > 0)
        .expect("a partition with records");
    let admin: AdminClient<DefaultClientContext> = config.create().expect("admin");
    let mut before = TopicPartitionList::new();
    before.add_partition_offset(topic, partition, Offset::Offset(1)).expect("offset");
    admin.delete_records(&before, &AdminOptions::new()).await.expect("records deleted");
}

/// The one decision a deciding clock fixes: an order's `pay_by` is its
/// `decided_at` plus the voucher's `payment_seconds`. A claim asked for
/// just after the processor's `pay_by` was refused; the rebuild, running
/// later, decides the order as of the processor's logged decision, so its
/// `pay_by` is the same and it refuses the claim too: no difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_just_after_pay_by_is_refused_by_the_rebuild_too() {
    let platform = Platform::start().await;
    let now = chrono::Utc::now();
    let free = json!({"stock": 5, "per_user_limit": 1, "payment_seconds": 600,
        "begins_at": now - chrono::Duration::seconds(1), "ends_at": now + chrono::Duration::hours(1)});
    let voucher = platform.create_voucher_from(free).await;
    let order = admitted(&platform, &voucher, "c1", 1).await;
    assert_eq!(platform.wait_final(&order).await["status"], "CREATED");
    let order_id = order.parse().expect("order id");
    let logged = rebuild_stock::logged_outcomes(&platform.kafka).await.expect("reads the outcomes");
    let pay_by = logged.get(&order_id).and_then(|o| o.pay_by).expect("a created order with a pay_by");

    let late = seckill_core::event::OrderRequest {
        order_id,
        voucher_id: voucher.parse().expect("voucher id"),
        reason: None,
        requested_at: pay_by + chrono::Duration::milliseconds(1),
        settled_checkouts: None,
    };
    let sales = platform.kafka.topics().sales;
    platform.producer().send(&sales, &Envelope::new(Event::ConfirmRequested(late))).await.expect("published");
    // Decided after the late claim, on the same partition.
    let after = admitted(&platform, &voucher, "c2", 1).await;
    assert_eq!(platform.wait_final(&after).await["status"], "CREATED");
    assert_eq!(platform.wait_final(&order).await["status"], "CREATED", "the processor refused the late claim");
    // The rebuild runs at least a second later: its own clock would give a
    // later pay_by, and pay the claim.
    let later = pay_by - chrono::Duration::seconds(599);
    eventually(|| async { (chrono::Utc::now() > later).then_some(()) }).await;

    let dir = TempDir::new().expect("dir");
    let rebuilt: Arc<dyn StockStore> = Arc::new(EmbeddedStockStore::open(&dir.path().join("r.redb")).expect("opens"));
    let report = rebuild_stock::rebuild_stock(&platform.kafka, Arc::clone(&rebuilt)).await.expect("rebuilds");
    let logged = rebuild_stock::logged_outcomes(&platform.kafka).await.expect("reads the outcomes");
    let live = ProcessorStock::new(&format!("http://{}", platform.processor_addr)).expect("client");
    let differences =
        rebuild_stock::verify(&report, &logged, rebuilt.as_ref(), |v| live.stock(v)).await.expect("compares");
    println!("rebuild-stock, a late claim: {differences:?}");
    assert!(differences.is_empty(), "{differences:#?}");
    let rebuilt_order = report.orders.get(&order_id).expect("the order was rebuilt");
    assert_eq!(rebuilt_order.pay_by, Some(pay_by), "the pay_by the buyer was told");
    assert_eq!(rebuilt_order.outcomes, vec![rebuild_stock::Outcome { kind: "created", detail: "remaining=4".into() }]);
}

/// The same on CQL: the stock rebuilt into a fresh keyspace equals the
/// processor's, and a processor started on that keyspace goes on deciding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_keyspace_rebuilt_from_the_log_equals_the_live_one_on_cql() {
    let cql = seckill_cqltest::TestCql::start().await.expect("Cassandra starts (run scripts/setup)");
    let store = |keyspace| StoreConfig {
        backend: StoreBackend::Scylla,
        nodes: vec![cql.nodes()],
        keyspace,
        ..StoreConfig::default()
    };
    let mut platform = Platform::start_with(Some(store(seckill_cqltest::unique_keyspace()))).await;
    let voucher = platform.create_voucher(2, 1).await;
    let (first, second) = (admitted(&platform, &voucher, "q1", 1).await, admitted(&platform, &voucher, "q2", 1).await);
    let sold_out = published(&platform, &voucher, "q3").await;
    for order in [&first, &second] {
        assert_eq!(platform.wait_final(order).await["status"], "CREATED");
    }
    assert_eq!(platform.wait_final(&sold_out).await["reason"], "sold_out");
    let (status, body) = platform.post(&format!("/api/v1/orders/{first}/cancel"), Some("q1"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    platform.wait_order(&first, |o| o["status"] == "CANCELLED").await;
    eventually(|| async { (platform.persistent_remaining(&voucher).await == 1).then_some(()) }).await;

    let rebuilt_store = store(seckill_cqltest::unique_keyspace());
    let rebuilt = seckill_store::open_stock_store(&rebuilt_store).await.expect("opens the keyspace");
    let report = rebuild_stock::rebuild_stock(&platform.kafka, Arc::clone(&rebuilt)).await.expect("rebuilds");
    assert_eq!((report.orders.len(), report.vouchers.len()), (3, 1), "{report:?}");
    let logged = rebuild_stock::logged_outcomes(&platform.kafka).await.expect("reads the outcomes");
    let live = ProcessorStock::new(&format!("http://{}", platform.processor_addr)).expect("client");
    let differences =
        rebuild_stock::verify(&report, &logged, rebuilt.as_ref(), |v| live.stock(v)).await.expect("compares");
    assert!(differences.is_empty(), "{differences:#?}");

    platform.processor.take().expect("running").stop().await;
    platform.shared_store = Some(rebuilt_store);
    platform.start_processor().await;
    let next = admitted(&platform, &voucher, "q4", 1).await;
    assert_eq!(platform.wait_final(&next).await["status"], "CREATED");
    eventually(|| async { (platform.persistent_remaining(&voucher).await == 0).then_some(()) }).await;
}
