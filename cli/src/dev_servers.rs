//! The local run's servers: Redis (append-only file) and one Apache Kafka
//! node (KRaft, broker and controller), each with its data in its own
//! directory under the data directory.
//!
//! Servers that a killed earlier run left running (`kill -9`, a closed
//! terminal) are found by their pid files and stopped before anything
//! starts. A data directory from the Kafka-protocol stand-in the local run
//! used before (its log in PostgreSQL or SQLite) is refused with what to do:
//! Redis and the stores there describe a log this broker cannot read.

use std::path::Path;

use anyhow::{bail, Context};
use seckill_devstack::{Kafka, KafkaDurability, KafkaSettings, Leftover, Redis, RedisPersistence};

/// The ports the local servers listen on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServerPorts {
    pub(crate) redis: u16,
    pub(crate) kafka: u16,
}

/// The running local servers.
#[derive(Debug)]
pub(crate) struct LocalServers {
    redis: Redis,
    kafka: Kafka,
}

/// The local broker's heap: the measured working set of a sale on one node
/// is well under it.
const KAFKA_HEAP_MB: u32 = 512;

impl LocalServers {
    /// Stops what an earlier run left running, then starts Redis and Kafka
    /// on `data`.
    pub(crate) fn start(data: &Path, ports: ServerPorts, durability: KafkaDurability) -> anyhow::Result<Self> {
        refuse_stand_in_data(data)?;
        stop_leftovers(data)?;
        let mut redis =
            Redis::start(&data.join("redis"), ports.redis, RedisPersistence::AppendOnly).context("starting Redis")?;
        let settings = KafkaSettings { port: ports.kafka, heap_mb: KAFKA_HEAP_MB, durability, ..KafkaSettings::SINGLE };
        let kafka = match Kafka::start(&data.join("kafka"), settings).context("starting Kafka") {
            Ok(kafka) => kafka,
            Err(error) => {
                redis.stop();
                return Err(error);
            }
        };
        tracing::info!(
            redis = %redis.url(),
            kafka = %kafka.brokers(),
            ?durability,
            data = %data.display(),
            "The local servers are up."
        );
        Ok(Self { redis, kafka })
    }

    /// Kafka's bootstrap servers.
    pub(crate) fn brokers(&self) -> String {
        self.kafka.brokers()
    }

    /// Redis's URL.
    pub(crate) fn redis_url(&self) -> String {
        self.redis.url()
    }

    /// Stops Kafka, then Redis, each cleanly.
    pub(crate) fn stop(mut self) {
        self.kafka.stop();
        self.redis.stop();
    }
}

/// Stops the servers a killed earlier run left running: Kafka first, then
/// Redis.
fn stop_leftovers(data: &Path) -> anyhow::Result<()> {
    let found =
        [("kafka", Kafka::stop_leftover(&data.join("kafka"))?), ("redis", Redis::stop_leftover(&data.join("redis"))?)];
    let stopped: Vec<String> = found
        .iter()
        .filter_map(|(what, leftover)| match leftover {
            Leftover::Stopped { pid } => Some(format!("{what} (pid {pid})")),
            _ => None,
        })
        .collect();
    if !stopped.is_empty() {
        tracing::warn!(
            stopped = stopped.join(", "),
            "An earlier run was killed without stopping its servers; stopped them, and starting afresh on the same \
             data."
        );
    }
    Ok(())
}

/// Refuses a data directory whose log was kept by the stand-in broker of
/// earlier versions (`broker/`, `postgres/`): starting Kafka beside it would
/// give Redis and the stores an empty log that disagrees with them.
fn refuse_stand_in_data(data: &Path) -> anyhow::Result<()> {
    let old = ["broker", "postgres"].into_iter().map(|dir| data.join(dir)).find(|dir| dir.is_dir());
    match old {
        Some(dir) if !data.join("kafka").is_dir() => bail!(
            "{} holds a log of the broker earlier versions ran ({}); this version runs Apache Kafka. Keep that \
             directory for an older build, or remove {} (or choose another --data-dir) to start afresh",
            data.display(),
            dir.display(),
            data.display()
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_directory_is_accepted() {
        let data = seckill_devstack::TempDir::new().expect("temp dir");
        refuse_stand_in_data(data.path()).expect("fresh");
    }

    #[test]
    fn a_directory_of_the_stand_in_broker_is_refused_with_what_to_do() {
        let data = seckill_devstack::TempDir::new().expect("temp dir");
        std::fs::create_dir_all(data.path().join("postgres")).expect("dir");
        let error = refuse_stand_in_data(data.path()).expect_err("refused");
        let message = error.to_string();
        assert!(message.contains("runs Apache Kafka") && message.contains("--data-dir"), "{message}");
        std::fs::create_dir_all(data.path().join("kafka")).expect("dir");
        refuse_stand_in_data(data.path()).expect("a directory Kafka already uses is accepted");
    }
}
