//! Topic creation at startup, and the check that the log is kept.

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::types::RDKafkaErrorCode;
use seckill_core::config::KafkaConfig;
use seckill_core::topics::Topics;

use crate::retention::{check_kept, Kept, Retention};
use crate::KafkaError;

const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

/// The replicas a write with `acks=all` must reach before it is
/// acknowledged: two of three (or more), so one broker lost or restarted
/// loses nothing acknowledged and writes go on; one where there are fewer.
pub fn min_insync_replicas(replication: i32) -> i32 {
    if replication >= 3 {
        2
    } else {
        1
    }
}

/// A topic to create, and how long it keeps its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopicSpec<'a> {
    pub name: &'a str,
    pub retention: Retention,
}

/// The platform's topics as `config` wants them: the sales and orders
/// topics keep every record, dead letters expire after
/// `dead_letter_retention_ms`.
pub fn platform_topics<'a>(config: &KafkaConfig, topics: &'a Topics) -> [TopicSpec<'a>; 3] {
    [
        TopicSpec { name: &topics.sales, retention: Retention::Forever },
        TopicSpec { name: &topics.orders, retention: Retention::Forever },
        TopicSpec { name: &topics.dead_letters, retention: Retention::from_millis(config.dead_letter_retention_ms) },
    ]
}

/// A topic that must keep every record whose settings the broker did not
/// (all) report, so the check could not confirm it; and what it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unconfirmed {
    pub topic: String,
    /// The broker's answer, for the log.
    pub answer: String,
}

/// Creates each topic with `partitions` partitions and its retention unless
/// it exists, then checks that every topic that must keep its records does,
/// as far as the broker reports its configuration (what it cannot tell is
/// logged as a warning).
///
/// Partition counts are final: a voucher's partition is its key's hash modulo
/// the count, so growing a topic would split a voucher's history. Existing
/// topics are not changed; one whose settings would delete records is
/// refused ([`KafkaError::LogNotKept`]), naming the topic and the setting.
pub async fn ensure_topics(
    brokers: &str,
    topics: &[TopicSpec<'_>],
    partitions: i32,
    replication: i32,
) -> Result<(), KafkaError> {
    let admin = admin_client(brokers)?;
    let configs: Vec<[(&str, String); 3]> = topics.iter().map(|topic| topic.retention.topic_configs()).collect();
    let min_insync = min_insync_replicas(replication).to_string();
    let new_topics: Vec<NewTopic<'_>> = topics
        .iter()
        .zip(&configs)
        .map(|(topic, configs)| {
            configs.iter().fold(
                NewTopic::new(topic.name, partitions, TopicReplication::Fixed(replication))
                    .set(MIN_INSYNC_REPLICAS, &min_insync),
                |new_topic, (name, value)| new_topic.set(name, value),
            )
        })
        .collect();
    let results = admin.create_topics(&new_topics, &options()).await.map_err(KafkaError::Client)?;
    for result in results {
        match result {
            Ok(topic) => tracing::info!(%topic, partitions, "Created topic."),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => return Err(KafkaError::CreateTopic { topic, reason: code.to_string() }),
        }
    }
    // One DescribeConfigs for both checks.
    let names: Vec<&str> = topics.iter().map(|topic| topic.name).collect();
    let described = describe_topics(&admin, &names).await;
    check_min_insync(&names, &described, replication);
    let mut unconfirmed = Vec::new();
    for ((topic, spec), reported) in names.iter().zip(topics).zip(&described) {
        if spec.retention == Retention::Forever {
            unconfirmed.extend(judge_kept(topic, reported)?);
        }
    }
    for unconfirmed in unconfirmed {
        tracing::warn!(
            topic = unconfirmed.topic,
            answer = unconfirmed.answer,
            "Cannot check that the topic keeps every record: the broker did not report its retention. Set \
             retention.ms=-1, retention.bytes=-1 and cleanup.policy=delete on it if it may have others."
        );
    }
    Ok(())
}

/// Asks the broker at `brokers` how `topics` are configured: refuses any
/// whose settings would delete records, and returns those it could not
/// confirm.
pub async fn check_topics_kept(brokers: &str, topics: &[&str]) -> Result<Vec<Unconfirmed>, KafkaError> {
    let described = describe_topics(&admin_client(brokers)?, topics).await;
    let mut unconfirmed = Vec::new();
    for (topic, reported) in topics.iter().zip(&described) {
        unconfirmed.extend(judge_kept(topic, reported)?);
    }
    Ok(unconfirmed)
}

/// A topic's settings as the broker reported them (name → value, None when
/// reported without one), or what it answered instead.
type Reported = Result<HashMap<String, Option<String>>, String>;

/// Asks the broker for `topics`' settings in one DescribeConfigs.
async fn describe_topics(admin: &AdminClient<DefaultClientContext>, topics: &[&str]) -> Vec<Reported> {
    if topics.is_empty() {
        return Vec::new();
    }
    let resources: Vec<ResourceSpecifier<'_>> = topics.iter().map(|topic| ResourceSpecifier::Topic(topic)).collect();
    match admin.describe_configs(&resources, &options()).await {
        Ok(described) => described
            .into_iter()
            .map(|result| match result {
                Ok(resource) => Ok(resource.entries.into_iter().map(|entry| (entry.name, entry.value)).collect()),
                Err(code) => Err(format!("DescribeConfigs answered {code}")),
            })
            .collect(),
        Err(error) => topics.iter().map(|_| Err(format!("DescribeConfigs failed: {error}"))).collect(),
    }
}

/// Warns about a topic whose `min.insync.replicas` is below what its
/// replication wants (a topic created by hand or by an older build): an
/// acknowledged write could then live on one broker only.
fn check_min_insync(topics: &[&str], described: &[Reported], replication: i32) {
    let wanted = min_insync_replicas(replication);
    if wanted <= 1 {
        return;
    }
    for (topic, reported) in topics.iter().zip(described) {
        let value = reported.as_ref().ok().and_then(|reported| reported.get(MIN_INSYNC_REPLICAS).cloned().flatten());
        match value.as_deref().map(str::parse::<i32>) {
            Some(Ok(found)) if found >= wanted => {}
            _ => tracing::warn!(
                topic,
                found = value.as_deref().unwrap_or("unreported"),
                wanted,
                "The topic's min.insync.replicas is below what its replication wants: an acknowledged record may be \
                 on one broker only. Set it with kafka-configs.sh --alter --add-config min.insync.replicas=2."
            ),
        }
    }
}

fn admin_client(brokers: &str) -> Result<AdminClient<DefaultClientContext>, KafkaError> {
    ClientConfig::new().set("bootstrap.servers", brokers).create().map_err(KafkaError::Client)
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))).request_timeout(Some(Duration::from_secs(10)))
}

/// Refuses `topic` if its reported settings would delete records; returns
/// it as unconfirmed if the broker did not report them all.
fn judge_kept(topic: &str, reported: &Reported) -> Result<Option<Unconfirmed>, KafkaError> {
    let unconfirmed = |answer: String| Some(Unconfirmed { topic: topic.to_owned(), answer });
    let reported = match reported {
        Ok(reported) => reported,
        Err(answer) => return Ok(unconfirmed(answer.clone())),
    };
    Ok(match check_kept(topic, reported)? {
        Kept::Everything => {
            tracing::debug!(topic, "The topic keeps every record.");
            None
        }
        Kept::Unreported(settings) => {
            let mut answered: Vec<String> =
                reported.iter().map(|(name, value)| format!("{name}={}", value.as_deref().unwrap_or("?"))).collect();
            answered.sort();
            let answered = if answered.is_empty() { "nothing".to_owned() } else { answered.join(", ") };
            unconfirmed(format!("no {} reported; reported: {answered}", settings.join(", ")))
        }
    })
}
