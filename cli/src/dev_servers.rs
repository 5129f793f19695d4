//! The local run's servers: Redis (append-only file), the broker, and the
//! private PostgreSQL cluster holding the broker's log, each with its data
//! in its own directory under the data directory.
//!
//! Servers that a killed earlier run left running (`kill -9`, a closed
//! terminal) are found by their pid files and stopped before anything
//! starts. The log's storage engine is recorded in the data directory, so a
//! later run cannot silently switch to another, empty log while Redis and
//! the stores remember the old one.

use std::path::Path;

use anyhow::{bail, Context};
use clap::ValueEnum;
use seckill_devstack::{Broker, BrokerStorage, Leftover, PgSettings, Postgres, Redis, RedisPersistence};

/// The database holding the broker's log on the local PostgreSQL server.
const DATABASE: &str = "seckill";
/// The file under the broker's directory naming its storage engine.
const STORAGE_FILE: &str = "storage";

/// Where the local broker keeps the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum StorageChoice {
    /// A private PostgreSQL cluster under the data directory: the broker's
    /// production engine (a batch per COPY, bounded fetches).
    Postgres,
    /// A SQLite file: one insert per record, slower under load.
    Sqlite,
    /// Memory: nothing survives a restart; for a throwaway data directory.
    Memory,
}

impl StorageChoice {
    fn name(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::Sqlite => "sqlite",
            Self::Memory => "memory",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::Postgres, Self::Sqlite, Self::Memory].into_iter().find(|choice| choice.name() == name.trim())
    }
}

/// The ports the local servers listen on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServerPorts {
    pub(crate) redis: u16,
    pub(crate) broker: u16,
    pub(crate) postgres: u16,
}

/// The running local servers.
#[derive(Debug)]
pub(crate) struct LocalServers {
    redis: Redis,
    postgres: Option<Postgres>,
    broker: Broker,
}

impl LocalServers {
    /// Stops what an earlier run left running, then starts Redis,
    /// PostgreSQL (for that engine) and the broker on `data`.
    pub(crate) fn start(data: &Path, ports: ServerPorts, storage: StorageChoice) -> anyhow::Result<Self> {
        let broker_dir = data.join("broker");
        check_storage(data, &broker_dir, storage)?;
        stop_leftovers(data)?;

        let mut redis =
            Redis::start(&data.join("redis"), ports.redis, RedisPersistence::AppendOnly).context("starting Redis")?;
        let (postgres, broker_storage) = match storage {
            StorageChoice::Postgres => match start_postgres(data, ports.postgres) {
                Ok((postgres, url)) => (Some(postgres), BrokerStorage::Postgres(url)),
                Err(error) => {
                    redis.stop();
                    return Err(error);
                }
            },
            StorageChoice::Sqlite => (None, BrokerStorage::Sqlite),
            StorageChoice::Memory => (None, BrokerStorage::Memory),
        };
        let started = Broker::start(&broker_dir, ports.broker, broker_storage).context("starting the broker").and_then(
            |broker| {
                std::fs::write(broker_dir.join(STORAGE_FILE), storage.name())
                    .context("recording the broker's storage engine")?;
                Ok(broker)
            },
        );
        let broker = match started {
            Ok(broker) => broker,
            Err(error) => {
                Self::stop_servers(None, postgres, redis);
                return Err(error);
            }
        };
        tracing::info!(
            redis = %redis.url(),
            broker = %broker.brokers(),
            storage = storage.name(),
            postgres = postgres.as_ref().map(|pg| pg.database_url(DATABASE)),
            data = %data.display(),
            "The local servers are up."
        );
        Ok(Self { redis, postgres, broker })
    }

    /// The broker's bootstrap servers.
    pub(crate) fn brokers(&self) -> String {
        self.broker.brokers()
    }

    /// Redis's URL.
    pub(crate) fn redis_url(&self) -> String {
        self.redis.url()
    }

    /// Stops the broker, then PostgreSQL, then Redis, each cleanly.
    pub(crate) fn stop(self) {
        Self::stop_servers(Some(self.broker), self.postgres, self.redis);
    }

    fn stop_servers(broker: Option<Broker>, postgres: Option<Postgres>, mut redis: Redis) {
        if let Some(mut broker) = broker {
            broker.stop();
        }
        if let Some(mut postgres) = postgres {
            postgres.stop();
        }
        redis.stop();
    }
}

fn start_postgres(data: &Path, port: u16) -> anyhow::Result<(Postgres, String)> {
    let postgres = Postgres::start(&data.join("postgres"), port, PgSettings::DURABLE).context("starting PostgreSQL")?;
    match postgres.admin().create_database(DATABASE) {
        Ok(created) => {
            if created {
                tracing::info!(database = DATABASE, "Created the broker's database.");
            }
            let url = postgres.database_url(DATABASE);
            Ok((postgres, url))
        }
        Err(error) => {
            let mut postgres = postgres;
            postgres.stop();
            Err(error).context("creating the broker's database")
        }
    }
}

/// Stops the servers a killed earlier run left running: the broker first
/// (it uses PostgreSQL), then PostgreSQL, then Redis.
fn stop_leftovers(data: &Path) -> anyhow::Result<()> {
    let found = [
        ("broker", Broker::stop_leftover(&data.join("broker"))?),
        ("postgres", Postgres::stop_leftover(&data.join("postgres"))?),
        ("redis", Redis::stop_leftover(&data.join("redis"))?),
    ];
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

/// Refuses a storage engine other than the one this data directory's log
/// is on (Redis and the stores describe that log), and a memory log on a
/// directory with an earlier run's state.
fn check_storage(data: &Path, broker_dir: &Path, storage: StorageChoice) -> anyhow::Result<()> {
    let marker = broker_dir.join(STORAGE_FILE);
    let recorded = match std::fs::read_to_string(&marker) {
        Ok(text) => Some(
            StorageChoice::parse(&text)
                .with_context(|| format!("{} names no storage engine: {text:?}", marker.display()))?,
        ),
        // Data directories from before the engine was recorded were SQLite's.
        Err(_) if broker_dir.join("broker.db").exists() => Some(StorageChoice::Sqlite),
        Err(_) => None,
    };
    match recorded {
        None => Ok(()),
        Some(_) if storage == StorageChoice::Memory => bail!(
            "--broker-storage memory keeps no log across runs, and {} holds an earlier run's state (Redis, the \
             stores): remove it, or choose another --data-dir",
            data.display()
        ),
        Some(recorded) if recorded == storage => Ok(()),
        Some(recorded) => bail!(
            "{} holds a log on {}; run with --broker-storage {}, or choose another --data-dir (or remove this one) \
             to start on {}",
            data.display(),
            recorded.name(),
            recorded.name(),
            storage.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_dir() -> seckill_devstack::TempDir {
        seckill_devstack::TempDir::new().expect("temp dir")
    }

    #[test]
    fn a_fresh_directory_takes_any_engine() {
        let data = data_dir();
        for choice in [StorageChoice::Postgres, StorageChoice::Sqlite, StorageChoice::Memory] {
            check_storage(data.path(), &data.path().join("broker"), choice).expect("fresh");
        }
    }

    #[test]
    fn the_recorded_engine_is_kept_and_others_are_refused() {
        let data = data_dir();
        let broker = data.path().join("broker");
        std::fs::create_dir_all(&broker).expect("dir");
        std::fs::write(broker.join(STORAGE_FILE), "postgres").expect("write");
        check_storage(data.path(), &broker, StorageChoice::Postgres).expect("same engine");
        let error = check_storage(data.path(), &broker, StorageChoice::Sqlite).expect_err("switch refused");
        assert!(error.to_string().contains("--broker-storage postgres"), "{error}");
        let error = check_storage(data.path(), &broker, StorageChoice::Memory).expect_err("memory refused");
        assert!(error.to_string().contains("keeps no log"), "{error}");
    }

    #[test]
    fn a_directory_from_before_the_record_is_sqlite() {
        let data = data_dir();
        let broker = data.path().join("broker");
        std::fs::create_dir_all(&broker).expect("dir");
        std::fs::write(broker.join("broker.db"), "").expect("write");
        check_storage(data.path(), &broker, StorageChoice::Sqlite).expect("sqlite");
        let error = check_storage(data.path(), &broker, StorageChoice::Postgres).expect_err("refused");
        assert!(error.to_string().contains("--broker-storage sqlite"), "{error}");
    }

    #[test]
    fn a_garbled_record_is_an_error() {
        let data = data_dir();
        let broker = data.path().join("broker");
        std::fs::create_dir_all(&broker).expect("dir");
        std::fs::write(broker.join(STORAGE_FILE), "oracle").expect("write");
        assert!(check_storage(data.path(), &broker, StorageChoice::Postgres).is_err());
    }
}
