//! How long each topic keeps its records, and the check that the log is
//! kept.
//!
//! The sales and orders topics are the platform's source of truth:
//! `reconcile`, `rebuild-view`, `rebuild-stock`, `stats` and a new
//! processor or projector read them from the beginning. They are created
//! with no time limit, no size limit and no compaction (`retention.ms=-1`,
//! `retention.bytes=-1`, `cleanup.policy=delete`). Compaction is no way to keep them: it keeps
//! only the latest record of each key, and every event of a voucher has the
//! voucher's id as its key. Dead letters may expire
//! (`kafka.dead_letter_retention_ms`).
//!
//! At start-up every service asks the broker how the kept topics are
//! configured and refuses to start, naming the topic and the setting, when
//! one would delete records (a topic created by an older build or by hand
//! has the broker's defaults: seven days on Kafka). A broker that does not
//! report a setting cannot be checked; that is logged, not refused.

use std::collections::HashMap;
use std::time::Duration;

/// How long a topic keeps its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Every record, for good: no time or size limit, no compaction.
    Forever,
    /// Records older than this are deleted.
    For(Duration),
}

impl Retention {
    /// From a `retention.ms` setting: -1 is forever.
    pub fn from_millis(ms: i64) -> Self {
        match u64::try_from(ms) {
            Ok(ms) => Self::For(Duration::from_millis(ms)),
            Err(_) => Self::Forever,
        }
    }

    /// The topic settings that give this retention, for topic creation.
    pub(crate) fn topic_configs(self) -> [(&'static str, String); 3] {
        let ms = match self {
            Self::Forever => NO_LIMIT.to_owned(),
            Self::For(age) => age.as_millis().to_string(),
        };
        [(RETENTION_MS, ms), (RETENTION_BYTES, NO_LIMIT.to_owned()), (CLEANUP_POLICY, DELETE.to_owned())]
    }
}

const RETENTION_MS: &str = "retention.ms";
const RETENTION_BYTES: &str = "retention.bytes";
const CLEANUP_POLICY: &str = "cleanup.policy";
/// Kafka's value for "no limit" of `retention.ms` and `retention.bytes`.
const NO_LIMIT: &str = "-1";
const DELETE: &str = "delete";
const COMPACT: &str = "compact";

/// A setting of a topic that must keep every record, which would delete
/// some. The message names the topic, the setting, its value and the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "topic {topic} would lose records: {setting} is {value:?}, {why}. The sales and orders topics are the source of \
     truth and must keep every record: set {setting}={wanted} on the topic (e.g. kafka-configs.sh --alter \
     --entity-type topics --entity-name {topic} --add-config {setting}={wanted})"
)]
pub struct LosesRecords {
    pub topic: String,
    pub setting: &'static str,
    pub value: String,
    pub why: &'static str,
    pub wanted: &'static str,
}

/// What a broker's description of a topic tells about keeping its records,
/// when nothing it reported would delete any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kept {
    /// Every setting that could delete records was reported, and none does.
    Everything,
    /// These settings were not reported (or reported without a value), so
    /// the broker cannot tell; the others keep everything.
    Unreported(Vec<&'static str>),
}

/// Judges a topic that must keep every record by its reported settings
/// (name → value; a value of None was reported without one).
pub fn check_kept(topic: &str, reported: &HashMap<String, Option<String>>) -> Result<Kept, LosesRecords> {
    let mut unreported = Vec::new();
    let mut value_of = |setting: &'static str| match reported.get(setting) {
        Some(Some(value)) => Some(value.trim().to_owned()),
        _ => {
            unreported.push(setting);
            None
        }
    };
    let policy = value_of(CLEANUP_POLICY);
    let ms = value_of(RETENTION_MS);
    let bytes = value_of(RETENTION_BYTES);
    let loses = |setting, value: &str, why, wanted| LosesRecords {
        topic: topic.to_owned(),
        setting,
        value: value.to_owned(),
        why,
        wanted,
    };

    if let Some(policy) = &policy {
        let policies: Vec<&str> = policy.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
        if policies.contains(&COMPACT) {
            return Err(loses(
                CLEANUP_POLICY,
                policy,
                "and compaction keeps only the latest record of each key while all of a voucher's events share its key",
                DELETE,
            ));
        }
        if policies.iter().any(|p| *p != DELETE) {
            return Err(loses(CLEANUP_POLICY, policy, "a policy this check does not know to keep records", DELETE));
        }
    }
    for (setting, value, why) in [
        (RETENTION_MS, &ms, "so records older than that many milliseconds are deleted"),
        (RETENTION_BYTES, &bytes, "so a partition's oldest records are deleted past that many bytes"),
    ] {
        if let Some(value) = value {
            if value != NO_LIMIT {
                let why = if value.parse::<i64>().is_ok() { why } else { "which is not a number" };
                return Err(loses(setting, value, why, NO_LIMIT));
            }
        }
    }
    Ok(if unreported.is_empty() { Kept::Everything } else { Kept::Unreported(unreported) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported(settings: &[(&str, Option<&str>)]) -> HashMap<String, Option<String>> {
        settings.iter().map(|(name, value)| ((*name).to_owned(), value.map(str::to_owned))).collect()
    }

    fn kept_forever() -> Vec<(&'static str, Option<&'static str>)> {
        vec![("cleanup.policy", Some("delete")), ("retention.ms", Some("-1")), ("retention.bytes", Some("-1"))]
    }

    fn refusal(settings: &[(&str, Option<&str>)]) -> LosesRecords {
        check_kept("seckill.sales", &reported(settings)).expect_err("refused")
    }

    #[test]
    fn unlimited_retention_without_compaction_keeps_everything() {
        assert_eq!(check_kept("seckill.sales", &reported(&kept_forever())), Ok(Kept::Everything));
        let mut with_others = kept_forever();
        with_others.extend([("segment.ms", Some("604800000")), ("cleanup.policy", Some(" delete "))]);
        assert_eq!(check_kept("seckill.sales", &reported(&with_others)), Ok(Kept::Everything));
    }

    #[test]
    fn a_time_or_size_limit_is_refused_naming_topic_setting_and_value() {
        let week = [("cleanup.policy", Some("delete")), ("retention.ms", Some("604800000")), ("retention.bytes", None)];
        let error = refusal(&week);
        assert_eq!((error.setting, error.value.as_str(), error.wanted), ("retention.ms", "604800000", "-1"));
        let message = error.to_string();
        for needle in ["seckill.sales", "retention.ms", "604800000", "retention.ms=-1"] {
            assert!(message.contains(needle), "{needle} in {message}");
        }

        let mut sized = kept_forever();
        sized[2] = ("retention.bytes", Some("1073741824"));
        let error = refusal(&sized);
        assert_eq!((error.setting, error.value.as_str()), ("retention.bytes", "1073741824"));

        for odd in ["0", "-2", "forever", ""] {
            let mut odd_ms = kept_forever();
            odd_ms[1] = ("retention.ms", Some(odd));
            assert_eq!(refusal(&odd_ms).setting, "retention.ms", "{odd:?}");
        }
    }

    #[test]
    fn compaction_is_refused_even_with_unlimited_retention() {
        for policy in ["compact", "delete,compact", "compact, delete"] {
            let mut compacted = kept_forever();
            compacted[0] = ("cleanup.policy", Some(policy));
            let error = refusal(&compacted);
            assert_eq!((error.setting, error.value.as_str(), error.wanted), ("cleanup.policy", policy, "delete"));
            assert!(error.to_string().contains("compaction"), "{error}");
        }
        let mut unknown = kept_forever();
        unknown[0] = ("cleanup.policy", Some("tiered"));
        assert_eq!(refusal(&unknown).setting, "cleanup.policy");
    }

    #[test]
    fn settings_the_broker_does_not_report_are_unknown_not_refused() {
        assert_eq!(
            check_kept("seckill.sales", &reported(&[])),
            Ok(Kept::Unreported(vec!["cleanup.policy", "retention.ms", "retention.bytes"]))
        );
        let partial = [("retention.ms", Some("-1")), ("retention.bytes", None)];
        assert_eq!(
            check_kept("seckill.sales", &reported(&partial)),
            Ok(Kept::Unreported(vec!["cleanup.policy", "retention.bytes"]))
        );
        // What is reported is still judged.
        let partial = [("retention.ms", Some("86400000"))];
        assert_eq!(refusal(&partial).setting, "retention.ms");
    }

    #[test]
    fn creation_settings_say_the_same_as_the_check_wants() {
        let created: HashMap<String, Option<String>> = Retention::Forever
            .topic_configs()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), Some(value)))
            .collect();
        assert_eq!(check_kept("seckill.orders", &created), Ok(Kept::Everything));
        let month = Retention::from_millis(2_592_000_000).topic_configs();
        assert_eq!(month[0], ("retention.ms", "2592000000".to_owned()));
        assert_eq!(Retention::from_millis(-1), Retention::Forever);
    }
}
