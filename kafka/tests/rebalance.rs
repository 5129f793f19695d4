//! A consumer group across rebalances, against the real broker: a member
//! whose batch is stuck on a dependency longer than `max.poll.interval.ms`
//! never works on it beside the member that took its partition (librdkafka
//! left the group under it, and it went on working: a zombie); and records
//! of a partition revoked while a batch fills are left to the new owner.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::message::OwnedHeaders;
use seckill_devstack::test_kafka;
use seckill_kafka::{
    ensure_topics, retry, BatchConsumer, BatchHandler, ConsumerSettings, EventProducer, Interrupted, Message,
    OwnedMessage, ProducerSettings, Retention, TopicSpec,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A topic of its own with `partitions`, and a producer.
async fn topic(partitions: i32) -> (String, EventProducer) {
    let brokers = test_kafka().expect("the run's broker (run scripts/setup)");
    let topic = format!("r{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    ensure_topics(brokers, &[TopicSpec { name: &topic, retention: Retention::Forever }], partitions, 1)
        .await
        .expect("the topic is created");
    let producer = EventProducer::new(&ProducerSettings {
        brokers: brokers.to_owned(),
        timeout: Duration::from_secs(10),
        linger_ms: 0,
    })
    .expect("a producer");
    (topic, producer)
}

/// A member's settings: a session and a poll interval as short as the
/// broker allows (6 s), so a batch stuck 15 s outlives both.
fn member(topic: &str) -> ConsumerSettings {
    ConsumerSettings {
        session_timeout: Duration::from_secs(6),
        max_poll_interval: Duration::from_secs(6),
        ..ConsumerSettings::reader(test_kafka().expect("the run's broker"), format!("{topic}-group"))
    }
}

/// A handler whose dependency is down until `until` (as a Redis is, for
/// every member): it retries, as the processor does, until then.
struct Stuck {
    name: &'static str,
    until: Instant,
    /// The member handling a batch now, if any.
    working: Arc<Mutex<Option<&'static str>>>,
    /// Two members seen handling at once: (the one already in, the other).
    overlaps: Arc<Mutex<Vec<(&'static str, &'static str)>>>,
    /// Members that finished a batch.
    done: Arc<Mutex<Vec<&'static str>>>,
}

impl BatchHandler for Stuck {
    async fn handle(&self, _batch: &[OwnedMessage], shutdown: &CancellationToken) -> Result<(), Interrupted> {
        if let Some(other) = self.working.lock().expect("lock").replace(self.name) {
            self.overlaps.lock().expect("lock").push((other, self.name));
        }
        let until = self.until;
        let result = retry(shutdown, "a dependency that is down", || async move {
            if Instant::now() < until {
                Err("down")
            } else {
                Ok(())
            }
        })
        .await;
        *self.working.lock().expect("lock") = None;
        if result.is_ok() {
            self.done.lock().expect("lock").push(self.name);
        }
        result
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stuck_past_the_poll_interval_is_never_worked_on_by_two_members() {
    let (topic, producer) = topic(1).await;
    producer.send_raw(&topic, None, b"the record", OwnedHeaders::new()).await.expect("produced");
    let (working, overlaps, done) = Default::default();
    let stuck = |name| Stuck {
        name,
        until: Instant::now() + Duration::from_secs(20),
        working: Arc::clone(&working),
        overlaps: Arc::clone(&overlaps),
        done: Arc::clone(&done),
    };
    let shutdown = CancellationToken::new();
    let first = BatchConsumer::subscribe(&member(&topic), &[&topic]).expect("subscribes");
    let a = tokio::spawn({
        let (handler, shutdown) = (stuck("a"), shutdown.clone());
        async move { first.run(&handler, &shutdown).await }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while working.lock().expect("lock").is_none() {
        assert!(Instant::now() < deadline, "member a never got the record");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A second member joins while a is stuck on the record: the record is
    // either still a's or given up by a first, never worked on by both.
    let second = BatchConsumer::subscribe(&member(&topic), &[&topic]).expect("subscribes");
    let b = tokio::spawn({
        let (handler, shutdown) = (stuck("b"), shutdown.clone());
        async move { second.run(&handler, &shutdown).await }
    });
    while done.lock().expect("lock").is_empty() {
        assert!(Instant::now() < deadline + Duration::from_secs(30), "the record was never handled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    let _ = tokio::join!(a, b);
    let overlaps = overlaps.lock().expect("lock").clone();
    assert!(overlaps.is_empty(), "two members worked on the record at once (in, then joining): {overlaps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_a_partition_revoked_while_a_batch_fills_are_left_to_its_new_owner() {
    let (topic, producer) = topic(2).await;
    let a = BatchConsumer::subscribe(
        &ConsumerSettings { max_wait: Duration::from_secs(8), max_batch: 100_000, ..member(&topic) },
        &[&topic],
    )
    .expect("subscribes");
    // Records on both partitions (keys spread them) all along.
    let writing = CancellationToken::new();
    let writer = tokio::spawn({
        let (topic, writing) = (topic.clone(), writing.clone());
        async move {
            let mut n = 0u32;
            while !writing.is_cancelled() {
                let key = n.to_string();
                producer.send_raw(&topic, Some(key.as_bytes()), key.as_bytes(), OwnedHeaders::new()).await.ok();
                n += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let never = CancellationToken::new();
    // a's first batch holds whatever came within 8 s of its first record;
    // b joins meanwhile, and the rebalance gives it one of the partitions.
    let filling = tokio::spawn(async move {
        let batch = a.next_batch(&never).await.expect("reads");
        (a, batch)
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Polled only now and then while a's batch fills: the default poll
    // interval.
    let b = BatchConsumer::subscribe(
        &ConsumerSettings { max_poll_interval: seckill_kafka::DEFAULT_MAX_POLL_INTERVAL, ..member(&topic) },
        &[&topic],
    )
    .expect("subscribes");
    let never = CancellationToken::new();
    let mut read_by_b: HashSet<(i32, i64)> = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while read_by_b.is_empty() {
        assert!(Instant::now() < deadline, "b never got a partition");
        let batch = b.next_batch_or_idle(Duration::from_millis(500), &never).await.expect("reads");
        read_by_b.extend(batch.iter().map(|m| (m.partition(), m.offset())));
    }
    let (_a, batch) = filling.await.expect("a's batch");
    writing.cancel();
    writer.await.expect("the writer stops");
    // b reads its partition from the start (nothing was committed): all
    // of it, up to the end.
    loop {
        let batch = b.next_batch_or_idle(Duration::from_secs(2), &never).await.expect("reads");
        if batch.is_empty() {
            break;
        }
        read_by_b.extend(batch.iter().map(|m| (m.partition(), m.offset())));
    }
    let both: Vec<(i32, i64)> =
        batch.iter().map(|m| (m.partition(), m.offset())).filter(|record| read_by_b.contains(record)).collect();
    assert!(!batch.is_empty(), "a read records");
    assert!(both.is_empty(), "records of b's partition in a's batch, which b read too: {both:?}");
}
