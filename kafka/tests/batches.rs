//! Reading batches against the real broker: a reader that stops at a quiet
//! topic gets every record, however the idle wait and the batch fill
//! overlap (a timeout wrapped around a batch being filled dropped the
//! records it had received, and `seckill dead-letters redrive` committed
//! past them).

use std::collections::BTreeSet;
use std::time::Duration;

use rdkafka::message::OwnedHeaders;
use seckill_devstack::test_kafka;
use seckill_kafka::{
    ensure_topics, BatchConsumer, ConsumerSettings, EventProducer, ProducerSettings, Retention, TopicSpec,
};
use tokio_util::sync::CancellationToken;

const RECORDS: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_bound_shorter_than_the_batch_fill_loses_no_record() {
    let brokers = test_kafka().expect("the run's broker (run scripts/setup)");
    let topic = format!("b{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    ensure_topics(brokers, &[TopicSpec { name: &topic, retention: Retention::Forever }], 2, 1)
        .await
        .expect("the topic is created");
    let producer = EventProducer::new(&ProducerSettings {
        brokers: brokers.to_owned(),
        timeout: Duration::from_secs(10),
        linger_ms: 0,
    })
    .expect("a producer");
    // Records keep arriving while the reader works, in bursts, so some of
    // its idle waits end while a batch is being filled.
    let writer = tokio::spawn({
        let topic = topic.clone();
        async move {
            for burst in 0..20 {
                for n in 0..RECORDS / 20 {
                    let payload = format!("{}", burst * (RECORDS / 20) + n);
                    producer.send_raw(&topic, None, payload.as_bytes(), OwnedHeaders::new()).await.expect("produced");
                }
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        }
    });
    let reader = BatchConsumer::subscribe(
        &ConsumerSettings {
            // Far longer than the idle bound below.
            max_wait: Duration::from_millis(200),
            ..ConsumerSettings::reader(brokers, format!("{topic}-reader"))
        },
        &[&topic],
    )
    .expect("the reader subscribes");

    let never = CancellationToken::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut read = BTreeSet::new();
    while read.len() < RECORDS {
        assert!(tokio::time::Instant::now() < deadline, "read {} of {RECORDS} records", read.len());
        let batch = reader.next_batch_or_idle(Duration::from_millis(5), &never).await.expect("reads");
        for message in batch {
            let payload = rdkafka::Message::payload(&message).expect("a payload");
            let n: usize = std::str::from_utf8(payload).expect("utf-8").parse().expect("a number");
            assert!(read.insert(n), "record {n} read twice");
        }
    }
    writer.await.expect("the writer finishes");
    assert_eq!(read, (0..RECORDS).collect::<BTreeSet<_>>());
}
