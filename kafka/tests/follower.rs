//! The live follower's health against the real broker: a follower that has
//! not read what the partitions hold is not current, however far its fetch
//! position ran ahead, and is current again once it has read them.

use std::time::Duration;

use rdkafka::message::OwnedHeaders;
use seckill_devstack::test_kafka;
use seckill_kafka::{ensure_topics, EventProducer, Follower, ProducerSettings, Retention, TopicSpec};

const RECORDS: i64 = 300;
/// Reports come every second; a report is fresh for a few of them.
const FRESH: Duration = Duration::from_secs(3);

/// Reads (the follower's health is reported while it reads) until its
/// reported lag satisfies `ok`, up to a minute; returns the lag and the
/// records read meanwhile, each read `pause` apart.
async fn read_until(follower: &Follower, pause: Duration, ok: impl Fn(i64) -> bool) -> (i64, usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut read = 0;
    loop {
        let lag = follower.health().lag();
        if ok(lag) {
            return (lag, read);
        }
        assert!(tokio::time::Instant::now() < deadline, "lag {lag} after {read} records");
        if let Ok(record) = tokio::time::timeout(Duration::from_millis(200), follower.recv()).await {
            record.expect("a record");
            read += 1;
            tokio::time::sleep(pause).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_has_not_read_the_records_is_behind_until_it_reads_them() {
    let brokers = test_kafka().expect("the run's broker (run scripts/setup)");
    let topic = format!("f{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    ensure_topics(brokers, &[TopicSpec { name: &topic, retention: Retention::Forever }], 2, 1)
        .await
        .expect("the topic is created");
    let follower = Follower::start_at_end(brokers, &[&topic], Duration::from_millis(50)).await.expect("follows");
    read_until(&follower, Duration::ZERO, |lag| lag == 0).await;
    assert!(follower.health().is_current(FRESH, 10));

    // Records arrive faster than a slow reader (a slow decode, a busy
    // runtime) reads them: librdkafka has prefetched them, but they are not
    // read yet.
    let producer = EventProducer::new(&ProducerSettings {
        brokers: brokers.to_owned(),
        timeout: Duration::from_secs(10),
        linger_ms: 0,
    })
    .expect("a producer");
    for n in 0..RECORDS {
        let key = (n % 2).to_string();
        producer
            .send_raw(&topic, Some(key.as_bytes()), n.to_string().as_bytes(), OwnedHeaders::new())
            .await
            .expect("produced");
    }
    let (behind, read) = read_until(&follower, Duration::from_millis(20), |lag| lag >= RECORDS / 4).await;
    assert!(!follower.health().is_current(FRESH, 10), "{behind} records unread after {read} is not current");

    // Reading them through brings it back.
    read_until(&follower, Duration::ZERO, |lag| lag == 0).await;
    assert!(follower.health().is_current(FRESH, 10));
}
