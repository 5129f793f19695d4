//! Local Redis and Kafka-protocol broker processes.
//!
//! The development run (`seckill dev`) and the tests start real servers on
//! 127.0.0.1 through this crate: Debian's `redis-server`, and the
//! Kafka-API-compatible broker `nisshi` (or its predecessor `tansu`)
//! installed from crates.io by `scripts/setup`. Each process writes its pid
//! next to its data, so a wrapper script can clean up after a killed test
//! run, and is stopped when its handle is dropped. Test platforms share one
//! set of published credentials ([`TEST_ADMIN_TOKEN`], [`user_token`]).

mod broker;
mod credentials;
mod process;
mod prometheus;
mod redis;
mod testenv;

pub use broker::{Broker, BrokerStorage};
pub use credentials::{user_token, TEST_ADMIN_TOKEN, TEST_JWT_SECRET};
pub use process::{free_port, DevstackError, Server};
pub use prometheus::Prometheus;
pub use redis::{Redis, RedisPersistence};
pub use testenv::{TempDir, TestInfra};
