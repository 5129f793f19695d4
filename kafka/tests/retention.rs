//! Topic creation and the retention check against the real broker: what
//! the services create, what the broker reports back, and a start refused
//! on a topic that would delete records.

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use seckill_core::config::KafkaConfig;
use seckill_devstack::test_kafka;
use seckill_kafka::{check_kept, KafkaError, Kept};

/// The run's broker; each test names topics no other test uses.
struct Harness {
    brokers: &'static str,
}

fn broker() -> Harness {
    Harness { brokers: test_kafka().expect("the run's broker (run scripts/setup)") }
}

impl Harness {
    /// A platform config on a topic prefix no other test uses.
    fn config(&self) -> KafkaConfig {
        KafkaConfig {
            brokers: self.brokers.to_owned(),
            topic_prefix: format!("r{}", &uuid::Uuid::now_v7().simple().to_string()[20..]),
            partitions: 2,
            ..KafkaConfig::default()
        }
    }

    fn admin(&self) -> AdminClient<DefaultClientContext> {
        ClientConfig::new().set("bootstrap.servers", self.brokers).create().expect("an admin client")
    }

    /// Creates `topic` as another tool would, with `settings`.
    async fn create_by_hand(&self, topic: &str, settings: &[(&str, &str)]) {
        let new_topic =
            settings.iter().fold(NewTopic::new(topic, 2, TopicReplication::Fixed(1)), |new_topic, (name, value)| {
                new_topic.set(name, value)
            });
        let results = self.admin().create_topics([&new_topic], &options()).await.expect("create_topics answers");
        for result in results {
            result.unwrap_or_else(|(topic, code)| panic!("{topic} not created: {code}"));
        }
        // The controller answers once the topic is committed; the broker
        // that answers DescribeConfigs may learn its settings a moment later
        // and meanwhile reports its own defaults (seen: a size limit read as
        // `-1`). Wait until it reports what was set, as a tool would.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let reported = self.describe(topic).await;
            let applied =
                settings.iter().all(|(name, value)| reported.get(*name).and_then(Option::as_deref) == Some(*value));
            if applied {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{topic}'s settings {settings:?} never reported: {reported:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What the broker reports of `topic`'s settings.
    async fn describe(&self, topic: &str) -> HashMap<String, Option<String>> {
        let described = self
            .admin()
            .describe_configs([&ResourceSpecifier::Topic(topic)], &options())
            .await
            .expect("the broker answers DescribeConfigs");
        let resource = described.into_iter().next().expect("one result").expect("the topic is described");
        resource.entries.into_iter().map(|entry| (entry.name, entry.value)).collect()
    }
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))
}

fn setting<'a>(reported: &'a HashMap<String, Option<String>>, name: &str) -> Option<&'a str> {
    reported.get(name).and_then(|value| value.as_deref())
}

#[tokio::test]
async fn the_platform_topics_are_created_keeping_the_log_and_the_broker_reports_it() {
    let h = broker();
    let config = KafkaConfig { dead_letter_retention_ms: 86_400_000, ..h.config() };
    let (topics, _producer) = seckill_kafka::connect(&config).await.expect("the topics are created");

    for kept in [&topics.sales, &topics.orders] {
        let reported = h.describe(kept).await;
        assert_eq!(setting(&reported, "retention.ms"), Some("-1"), "{kept}: {reported:?}");
        assert_eq!(setting(&reported, "retention.bytes"), Some("-1"), "{kept}: {reported:?}");
        assert_eq!(setting(&reported, "cleanup.policy"), Some("delete"), "{kept}: {reported:?}");
        assert_eq!(check_kept(kept, &reported), Ok(Kept::Everything));
    }
    let dead_letters = h.describe(&topics.dead_letters).await;
    assert_eq!(setting(&dead_letters, "retention.ms"), Some("86400000"), "{dead_letters:?}");
    assert_eq!(setting(&dead_letters, "cleanup.policy"), Some("delete"), "{dead_letters:?}");

    // Starting again on the existing topics passes the check.
    seckill_kafka::connect(&config).await.expect("a second start finds the topics kept");
}

#[tokio::test]
async fn a_start_on_a_topic_that_would_delete_records_is_refused_naming_topic_and_setting() {
    let h = broker();

    let week = h.config();
    let sales = week.topics().sales;
    h.create_by_hand(&sales, &[("retention.ms", "604800000")]).await;
    let refused = seckill_kafka::connect(&week).await.expect_err("a week of retention is refused");
    let KafkaError::LogNotKept(loses) = &refused else { panic!("refused for another reason: {refused}") };
    assert_eq!(
        (loses.topic.as_str(), loses.setting, loses.value.as_str()),
        (sales.as_str(), "retention.ms", "604800000")
    );
    assert!(refused.to_string().contains(&format!("{sales} would lose records")), "{refused}");

    let compacted = h.config();
    let orders = compacted.topics().orders;
    h.create_by_hand(&orders, &[("cleanup.policy", "compact"), ("retention.ms", "-1"), ("retention.bytes", "-1")])
        .await;
    let refused = seckill_kafka::connect(&compacted).await.expect_err("compaction is refused");
    let KafkaError::LogNotKept(loses) = &refused else { panic!("refused for another reason: {refused}") };
    assert_eq!(
        (loses.topic.as_str(), loses.setting, loses.value.as_str()),
        (orders.as_str(), "cleanup.policy", "compact")
    );

    let sized = h.config();
    let sales = sized.topics().sales;
    h.create_by_hand(&sales, &[("retention.ms", "-1"), ("retention.bytes", "1048576")]).await;
    let refused = seckill_kafka::connect(&sized).await.expect_err("a size limit is refused");
    let KafkaError::LogNotKept(loses) = &refused else { panic!("refused for another reason: {refused}") };
    assert_eq!((loses.setting, loses.value.as_str()), ("retention.bytes", "1048576"));
}

/// A topic created by hand without settings has Kafka's defaults, which
/// delete records after seven days: the broker reports them (with their
/// source) and the start is refused, naming the setting.
#[tokio::test]
async fn a_topic_left_at_the_brokers_defaults_is_refused() {
    let h = broker();
    let config = h.config();
    let sales = config.topics().sales;
    h.create_by_hand(&sales, &[]).await;
    let reported = h.describe(&sales).await;
    assert_eq!(setting(&reported, "retention.ms"), Some("604800000"), "Kafka's default: {reported:?}");

    let refused = seckill_kafka::connect(&config).await.expect_err("the default week is refused");
    let KafkaError::LogNotKept(loses) = &refused else { panic!("refused for another reason: {refused}") };
    assert_eq!((loses.topic.as_str(), loses.setting), (sales.as_str(), "retention.ms"));

    // The topics the services created are confirmed, with the replicas an
    // acknowledged write needs set on the topic.
    let created = h.config();
    let topics = seckill_kafka::connect(&created).await.expect("created").0;
    let kept = [topics.sales.as_str(), topics.orders.as_str()];
    assert_eq!(seckill_kafka::check_topics_kept(&created.brokers, &kept).await.expect("checked"), Vec::new());
    let reported = h.describe(&topics.orders).await;
    assert_eq!(setting(&reported, "min.insync.replicas"), Some("1"), "one broker: {reported:?}");
}
