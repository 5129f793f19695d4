//! What the processor's write step would cost as one Kafka transaction
//! (outcomes and the input offsets committed together, read-process-write)
//! against what it does now (idempotent `acks=all` sends, awaited, then
//! offsets stored and committed in the background).
//!
//! For each of `BATCHES` batches of `SIZE` records spread over the
//! partitions of a fresh topic, it times the step both ways and prints the
//! median and p99 per batch and the records per second. Not a test: run it
//! by hand against a running Kafka.
//!
//! ```text
//! cargo run --release -p seckill-kafka --example transaction_cost -- 127.0.0.1:19092 [BATCHES] [SIZE]
//! ```

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

const PARTITIONS: i32 = 6;
const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let brokers = args.next().ok_or("usage: transaction_cost BROKERS [BATCHES] [SIZE]")?;
    let batches: usize = args.next().map_or(Ok(300), |n| n.parse())?;
    let size: usize = args.next().map_or(Ok(100), |n| n.parse())?;
    let run = format!("txcost-{}", std::process::id());
    let (output, input) = (format!("{run}-out"), format!("{run}-in"));
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", &brokers).create()?;
    let topics = [
        NewTopic::new(&output, PARTITIONS, TopicReplication::Fixed(1)),
        NewTopic::new(&input, PARTITIONS, TopicReplication::Fixed(1)),
    ];
    for result in admin.create_topics(&topics, &AdminOptions::new()).await? {
        result.map_err(|(topic, code)| format!("creating {topic}: {code}"))?;
    }

    let plain: FutureProducer = producer(&brokers).create()?;
    let idempotent = time_batches(batches, |n| {
        let plain = plain.clone();
        let output = output.clone();
        async move {
            send_batch(&plain, &output, n, size).await;
        }
    })
    .await;

    // The consumer whose offsets the transaction commits: as the processor
    // would, a member of its group (here, only its group's name).
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", format!("{run}-group"))
        .set("enable.auto.commit", "false")
        .create()?;
    let transactional: FutureProducer =
        producer(&brokers).set("transactional.id", format!("{run}-processor")).create()?;
    transactional.init_transactions(TIMEOUT)?;
    let metadata = consumer.group_metadata().ok_or("no group metadata")?;
    let in_transactions = time_batches(batches, |n| {
        let transactional = transactional.clone();
        let output = output.clone();
        let input = input.clone();
        let metadata = &metadata;
        async move {
            transactional.begin_transaction().expect("begin");
            send_batch(&transactional, &output, n, size).await;
            let mut offsets = TopicPartitionList::new();
            let partition = i32::try_from(n % 6).unwrap_or(0);
            let offset = i64::try_from(n * size).unwrap_or(0);
            offsets.add_partition_offset(&input, partition, Offset::Offset(offset)).expect("offset");
            transactional.send_offsets_to_transaction(&offsets, metadata, TIMEOUT).expect("offsets");
            transactional.commit_transaction(TIMEOUT).expect("commit");
        }
    })
    .await;

    println!("{batches} batches of {size} records, {PARTITIONS} partitions, one broker:");
    for (name, times) in
        [("idempotent sends, offsets stored", idempotent), ("one transaction a batch", in_transactions)]
    {
        println!(
            "  {name:<34} p50 {:>6.2} ms  p99 {:>6.2} ms  {:>8.0} records/s",
            percentile(&times, 0.50),
            percentile(&times, 0.99),
            (batches * size) as f64 / times.iter().sum::<f64>() * 1_000.0
        );
    }
    let _ = admin.delete_topics(&[&output, &input], &AdminOptions::new()).await;
    Ok(())
}

fn producer(brokers: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "1")
        .set("partitioner", "murmur2_random");
    config
}

/// Sends `size` records keyed over the partitions and waits for every
/// acknowledgement.
async fn send_batch(producer: &FutureProducer, topic: &str, batch: usize, size: usize) {
    let payload = vec![b'x'; 200];
    let keys: Vec<String> = (0..size).map(|i| format!("voucher-{}", (batch * size + i) % 64)).collect();
    // Polled together, so every record is queued before the first is
    // acknowledged, as the processor's outcome waves are.
    let sends = keys
        .iter()
        .map(|key| producer.send(FutureRecord::to(topic).key(key).payload(&payload), Timeout::After(TIMEOUT)));
    for sent in futures::future::join_all(sends).await {
        sent.expect("acknowledged");
    }
}

/// Runs `step` for batches 0..`batches`, returning each one's milliseconds.
async fn time_batches<F, Fut>(batches: usize, mut step: F) -> Vec<f64>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(batches);
    for n in 0..batches {
        let started = Instant::now();
        step(n).await;
        times.push(started.elapsed().as_secs_f64() * 1_000.0);
    }
    times
}

fn percentile(times: &[f64], q: f64) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(index).copied().unwrap_or(0.0)
}
