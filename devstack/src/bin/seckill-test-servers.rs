//! Starts the servers a whole test run shares: one Apache Kafka broker and
//! one Apache Cassandra node (or those named after `--dir`), under `--dir`,
//! in parallel. Prints the
//! environment the tests read them from (`SECKILL_TEST_KAFKA=…`,
//! `SECKILL_TEST_CASSANDRA=…`) and exits, leaving both running in process
//! groups of their own with their pid files in `--dir`: `scripts/test`
//! stops them when the run ends, `bench/run` and `scripts/bench-replay`
//! start and stop their Kafka with it.
//!
//! `--fsync-every-batch` makes Kafka flush every appended batch to disk
//! before it acknowledges ([`KafkaDurability::FlushEveryBatch`]) instead of
//! leaving it to the page cache: the benchmark's durability diagnostic.
//!
//! ```text
//! seckill-test-servers --dir /tmp/seckill-test.X/shared > servers.env
//! seckill-test-servers --dir /tmp/bench/servers kafka > servers.env
//! seckill-test-servers --dir /tmp/bench/servers --fsync-every-batch kafka > servers.env
//! ```

use std::path::PathBuf;

use seckill_devstack::{Cassandra, Kafka, KafkaDurability, KafkaSettings, TEST_CASSANDRA_VAR, TEST_KAFKA_VAR};

const USAGE: &str = "usage: seckill-test-servers --dir DIR [--fsync-every-batch] [kafka] [cassandra]";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = match (args.next().as_deref(), args.next()) {
        (Some("--dir"), Some(dir)) => PathBuf::from(dir),
        _ => return Err(USAGE.into()),
    };
    let mut durability = KafkaDurability::PageCache;
    let mut wanted: Vec<String> = Vec::new();
    for arg in args {
        match arg.as_str() {
            "--fsync-every-batch" => durability = KafkaDurability::FlushEveryBatch,
            _ => wanted.push(arg),
        }
    }
    if wanted.is_empty() {
        wanted = vec!["kafka".into(), "cassandra".into()];
    }
    if let Some(unknown) = wanted.iter().find(|name| !["kafka", "cassandra"].contains(&name.as_str())) {
        return Err(format!("no server called {unknown}; {USAGE}").into());
    }
    let cassandra = wanted.iter().any(|name| name == "cassandra").then(|| {
        let cassandra_dir = dir.join("cassandra");
        std::thread::spawn(move || {
            std::fs::create_dir_all(&cassandra_dir)
                .map_err(|error| format!("creating {}: {error}", cassandra_dir.display()))?;
            Cassandra::start(&cassandra_dir).map_err(|error| format!("Cassandra did not start: {error}"))
        })
    });
    let kafka = wanted
        .iter()
        .any(|name| name == "kafka")
        .then(|| Kafka::start(&dir.join("kafka"), KafkaSettings { durability, ..KafkaSettings::SINGLE }))
        .transpose()
        .map_err(|error| format!("Kafka did not start: {error}"));
    let cassandra = cassandra.map(|thread| thread.join().unwrap_or_else(|_| Err("starting Cassandra panicked".into())));
    // Whichever started is killed when dropped by an early return.
    let kafka = kafka?;
    let cassandra = cassandra.transpose()?;
    if let Some(kafka) = &kafka {
        println!("{TEST_KAFKA_VAR}={}", kafka.brokers());
    }
    if let Some(cassandra) = &cassandra {
        println!("{TEST_CASSANDRA_VAR}={}", cassandra.addr());
    }
    // They outlive this process; the caller stops them by their pid files.
    std::mem::forget((kafka, cassandra));
    Ok(())
}
