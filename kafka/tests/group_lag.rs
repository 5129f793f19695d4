//! A consumer group's lag measured from outside it, against the real
//! broker: all of a topic before the group committed anything, nothing once
//! it committed everything, and what was written since while it is gone.

use std::time::Duration;

use rdkafka::message::OwnedHeaders;
use seckill_devstack::test_kafka;
use seckill_kafka::{
    ensure_topics, BatchConsumer, ConsumerSettings, EventProducer, GroupLag, GroupPosition, ProducerSettings,
    Retention, TopicSpec,
};
use tokio_util::sync::CancellationToken;

async fn produce(producer: &EventProducer, topic: &str, records: usize) {
    for n in 0..records {
        producer.send_raw(topic, None, n.to_string().as_bytes(), OwnedHeaders::new()).await.expect("produced");
    }
}

async fn measured(watcher: &std::sync::Arc<GroupLag>) -> GroupPosition {
    let watcher = std::sync::Arc::clone(watcher);
    let mut positions = tokio::task::spawn_blocking(move || watcher.measure().expect("the broker answers"))
        .await
        .expect("the measuring thread");
    assert_eq!(positions.len(), 1, "{positions:?}");
    positions.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_lag_is_what_it_has_not_committed_whether_or_not_it_runs() {
    let brokers = test_kafka().expect("the run's broker (run scripts/setup)");
    let topic = format!("g{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    let group = format!("{topic}-group");
    ensure_topics(brokers, &[TopicSpec { name: &topic, retention: Retention::Forever }], 3, 1)
        .await
        .expect("the topic is created");
    let producer = EventProducer::new(&ProducerSettings {
        brokers: brokers.to_owned(),
        timeout: Duration::from_secs(10),
        linger_ms: 0,
    })
    .expect("a producer");
    let watcher =
        std::sync::Arc::new(GroupLag::new(brokers, &[(group.clone(), vec![topic.clone()])]).expect("a watcher"));

    // Nothing committed yet: every record is ahead of the group.
    produce(&producer, &topic, 30).await;
    let before = measured(&watcher).await;
    assert_eq!((before.group.as_str(), before.lag, before.committed), (group.as_str(), 30, 0), "{before:?}");

    // The group reads and commits all of it: no lag.
    {
        let consumer = BatchConsumer::subscribe(&ConsumerSettings::reader(brokers, group.clone()), &[&topic])
            .expect("the group's consumer subscribes");
        let never = CancellationToken::new();
        let mut read = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while read < 30 {
            assert!(tokio::time::Instant::now() < deadline, "read {read} of 30");
            let batch = consumer.next_batch_or_idle(Duration::from_millis(200), &never).await.expect("reads");
            consumer.store(&batch);
            read += batch.len();
        }
        consumer.commit().expect("commits");
    }
    let caught_up = measured(&watcher).await;
    assert_eq!((caught_up.lag, caught_up.committed), (0, 30), "{caught_up:?}");

    // Its consumer gone, the lag is what was written since; the committed
    // position stands still.
    produce(&producer, &topic, 7).await;
    let stopped = measured(&watcher).await;
    assert_eq!((stopped.lag, stopped.committed), (7, 30), "{stopped:?}");
}
