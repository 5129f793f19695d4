//! Local Redis, Apache Kafka, Apache Cassandra, Prometheus and Alertmanager
//! processes.
//!
//! The development run (`seckill dev`) and the tests start real servers on
//! 127.0.0.1 through this crate: Debian's `redis-server` (alone, or as a
//! local Redis Cluster of several nodes: [`RedisCluster`]), Apache Kafka in
//! KRaft mode (one node, or a quorum of three: [`Kafka`]) and Apache
//! Cassandra 5.0 ([`Cassandra`]), the last two from the jars Maven Central
//! publishes, fetched by `scripts/setup` ([`Distribution`]), and Debian's
//! Prometheus and Alertmanager for the dashboards and the alert rules
//! ([`Prometheus`], [`Alertmanager`]), and Stripe's `stripe-mock`
//! for the payment adapter's contract ([`StripeMock`]). Tests that cut the
//! network between servers run them on test hosts, network namespaces on a
//! bridge of their own ([`TestNet`]). Each process writes its pid next to
//! its data, so a wrapper script can clean up after a killed test run and
//! the next run can stop what a killed one left running ([`Leftover`]);
//! each is stopped when its handle is dropped. Tests share one broker and
//! one Cassandra per run ([`test_kafka`], [`test_cassandra`]), apart by
//! name, and one set of published credentials ([`TEST_ADMIN_TOKEN`],
//! [`user_token`]).

mod alert_rules;
mod alert_watch;
mod alertmanager;
mod beacon_sandbox;
mod cassandra;
mod clock_offset;
mod credentials;
mod jvm;
mod kafka;
mod leftover;
mod listener;
mod netns;
mod process;
mod prometheus;
mod redis;
mod redis_cluster;
mod stripe_mock;
mod test_cassandra;
mod test_dir;
mod test_kafka;
mod testenv;
mod watchdog;

pub use alert_rules::{compress_line, compressed_rules};
pub use alert_watch::AlertWatch;
pub use alertmanager::Alertmanager;
pub use beacon_sandbox::{BeaconSandbox, BEACON_SANDBOX_VAR};
pub use cassandra::Cassandra;
pub use clock_offset::{ClockShim, CLOCK_OFFSET_VAR};
pub use credentials::{user_token, TEST_ADMIN_TOKEN, TEST_JWT_SECRET};
pub use jvm::{java, Distribution};
pub use kafka::{Kafka, KafkaDurability, KafkaSettings};
pub use leftover::{stop_leftover_program, Leftover};
pub use netns::{Host, Impairment, NetError, TestNet};
pub use process::{free_port, DevstackError, LogEnd, Server, StopSignal};
pub use prometheus::Prometheus;
pub use redis::{Redis, RedisPersistence};
pub use redis_cluster::{shared_test_cluster, RedisCluster};
pub use stripe_mock::{StripeMock, STRIPE_MOCK_VAR, STRIPE_MOCK_VERSION};
pub use test_cassandra::{test_cassandra, TEST_CASSANDRA_VAR};
pub use test_dir::{unique_namespace, TempDir};
pub use test_kafka::{test_kafka, TEST_KAFKA_VAR};
pub use testenv::TestInfra;
