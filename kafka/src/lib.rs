//! Kafka plumbing shared by the services.
//!
//! The delivery contract is at-least-once everywhere: producers are
//! idempotent with `acks=all` and callers wait for the acknowledgement;
//! consumers store an offset only after everything the record caused is
//! durable ([`BatchConsumer::store`]). Consumers are therefore written to be
//! idempotent. Kafka transactions are deliberately not used (see docs/GUARANTEES.md).

mod admin;
mod consumer;
mod dead_letter;
mod error;
mod follower;
mod group_lag;
mod lag;
mod producer;
mod reader;
mod retention;

pub use admin::{check_topics_kept, ensure_topics, min_insync_replicas, platform_topics, TopicSpec, Unconfirmed};
pub use consumer::{
    decode, record_kind, retry, retry_pause, BatchConsumer, BatchHandler, ConsumerSettings, Interrupted,
    DEFAULT_MAX_POLL_INTERVAL, READER_FETCH_WAIT,
};
pub use dead_letter::DeadLetter;
pub use error::KafkaError;
pub use follower::{Follower, FollowerHealth};
pub use group_lag::{GroupLag, GroupPosition};
pub use lag::LagContext;
pub use producer::{connect, EventProducer, ProducerSettings};
pub use rdkafka::message::{Headers, Message, OwnedHeaders, OwnedMessage};
pub use reader::read_to_end;
pub use retention::{check_kept, Kept, LosesRecords, Retention};
