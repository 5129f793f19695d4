//! Local Redis, PostgreSQL and Kafka-protocol broker processes.
//!
//! The development run (`seckill dev`) and the tests start real servers on
//! 127.0.0.1 through this crate: Debian's `redis-server` (alone, or as a
//! local Redis Cluster of several nodes: [`RedisCluster`]), a private
//! PostgreSQL cluster (Debian's PostgreSQL 15 programs) holding the broker's
//! log, and the Kafka-API-compatible broker `nisshi` (or its predecessor
//! `tansu`) installed from crates.io by `scripts/setup`. Each process writes
//! its pid next to its data, so a wrapper script can clean up after a killed
//! test run and the next run can stop what a killed one left running
//! ([`Leftover`]); each is stopped when its handle is dropped. Tests share
//! one PostgreSQL server per run with a database per broker
//! ([`test_postgres`], [`TestDatabase`]) and one set of published
//! credentials ([`TEST_ADMIN_TOKEN`], [`user_token`]).

mod broker;
mod credentials;
mod leftover;
mod pg_admin;
mod pg_install;
mod postgres;
mod process;
mod prometheus;
mod redis;
mod redis_cluster;
mod test_postgres;
mod testenv;
mod watchdog;

pub use broker::{Broker, BrokerStorage};
pub use credentials::{user_token, TEST_ADMIN_TOKEN, TEST_JWT_SECRET};
pub use leftover::Leftover;
pub use pg_admin::PgAdmin;
pub use pg_install::{POSTGRES_BIN_VAR, POSTGRES_USER};
pub use postgres::{PgDurability, PgSettings, Postgres};
pub use process::{free_port, DevstackError, Server, StopSignal};
pub use prometheus::Prometheus;
pub use redis::{Redis, RedisPersistence};
pub use redis_cluster::{shared_test_cluster, RedisCluster};
pub use test_postgres::{test_postgres, TestDatabase, TEST_POSTGRES_VAR};
pub use testenv::{unique_namespace, TempDir, TestInfra};
