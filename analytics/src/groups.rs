//! The services' consumer groups as Kafka's group coordinator describes
//! them: state, members (id, client, host) and the partitions each holds,
//! with the committed offset, log end and lag of every partition: what
//! `kafka-consumer-groups.sh --describe` prints, for operators who have
//! only the `seckill` binary.
//!
//! Describing a group (DescribeGroups) and reading its commits (OffsetFetch)
//! do not join it: the services are not rebalanced by looking.

use std::fmt::Write as _;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::groups::GroupInfo;
use rdkafka::ClientConfig;
use seckill_core::config::KafkaConfig;
use serde::Serialize;

use crate::replay::{ReplayError, REQUEST_TIMEOUT};
use crate::topics::{overview, Overview};

/// One consumer group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupDescription {
    pub group: String,
    /// The coordinator's state: `Stable`, `PreparingRebalance`,
    /// `CompletingRebalance`, `Empty` or `Dead` (never created, or gone).
    pub state: String,
    /// The assignment strategy the members agreed on (`range`, …).
    pub protocol: String,
    pub members: Vec<Member>,
    /// Every partition of the platform's topics the group committed in or
    /// a member holds.
    pub partitions: Vec<GroupPartition>,
}

/// A member of the group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Member {
    pub id: String,
    pub client_id: String,
    pub host: String,
    /// `topic/partition` of each assigned partition.
    pub assigned: Vec<String>,
}

/// The group's position in one partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupPartition {
    pub topic: String,
    pub partition: i32,
    /// The next offset the group will read; `None`: never committed.
    pub committed: Option<i64>,
    /// The log end offset (high watermark).
    pub log_end: i64,
    pub lag: Option<i64>,
    /// The member holding it now, if any.
    pub member: Option<String>,
}

/// Describes `groups` on `kafka`'s brokers. Blocking.
pub fn describe(kafka: &KafkaConfig, groups: &[String]) -> Result<Vec<GroupDescription>, ReplayError> {
    let positions = overview(kafka, groups)?;
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &kafka.brokers)
        .set("group.id", "seckill-groups-unused")
        .set("enable.auto.commit", "false")
        .create()
        .map_err(ReplayError::kafka("creating the Kafka client"))?;
    let mut described = Vec::new();
    for group in groups {
        let list = client
            .fetch_group_list(Some(group), REQUEST_TIMEOUT)
            .map_err(ReplayError::kafka(format!("describing group {group}")))?;
        let info = list.groups().iter().find(|info| info.name() == group);
        described.push(describe_one(group, info, &positions));
    }
    Ok(described)
}

fn describe_one(group: &str, info: Option<&GroupInfo>, positions: &Overview) -> GroupDescription {
    let members: Vec<Member> = info
        .map(|info| {
            info.members()
                .iter()
                .map(|member| Member {
                    id: member.id().to_owned(),
                    client_id: member.client_id().to_owned(),
                    host: member.client_host().to_owned(),
                    assigned: member
                        .assignment()
                        .map(parse_assignment)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(topic, partition)| format!("{topic}/{partition}"))
                        .collect(),
                })
                .collect()
        })
        .unwrap_or_default();
    let mut partitions = Vec::new();
    for topic in positions.topics.iter().filter(|topic| topic.exists) {
        for row in &topic.partitions {
            let position = row.groups.iter().find(|position| position.group == group);
            let key = format!("{}/{}", topic.name, row.partition);
            let member = members.iter().find(|member| member.assigned.contains(&key)).map(|member| member.id.clone());
            let committed = position.and_then(|position| position.committed);
            if committed.is_none() && member.is_none() {
                continue;
            }
            partitions.push(GroupPartition {
                topic: topic.name.clone(),
                partition: row.partition,
                committed,
                log_end: row.high,
                lag: position.and_then(|position| position.lag),
                member,
            });
        }
    }
    GroupDescription {
        group: group.to_owned(),
        state: info.map_or_else(|| "Dead".to_owned(), |info| info.state().to_owned()),
        protocol: info.map(|info| info.protocol().to_owned()).unwrap_or_default(),
        members,
        partitions,
    }
}

/// The partitions in a member's assignment, as the classic consumer
/// protocol encodes it: version (i16), then an array (i32 count) of topics,
/// each a string (i16 length) and an array of partitions (i32 each), then
/// user data. A short or garbled assignment yields what could be read.
fn parse_assignment(bytes: &[u8]) -> Vec<(String, i32)> {
    let mut reader = Reader(bytes);
    let mut out = Vec::new();
    let (Some(_version), Some(topics)) = (reader.i16(), reader.i32()) else { return out };
    for _ in 0..topics.max(0) {
        let Some(name) = reader.string() else { break };
        let Some(count) = reader.i32() else { break };
        for _ in 0..count.max(0) {
            let Some(partition) = reader.i32() else { return out };
            out.push((name.clone(), partition));
        }
    }
    out
}

/// Big-endian reads off the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Option<i32> {
        self.take().map(i32::from_be_bytes)
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16()?).ok()?;
        let bytes = self.0.get(..len)?;
        self.0 = &self.0[len..];
        Some(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// A table for people, like `kafka-consumer-groups.sh --describe`.
pub fn table(groups: &[GroupDescription]) -> String {
    let mut out = String::new();
    for group in groups {
        let _ = writeln!(
            out,
            "{}  state {}{}, {} members",
            group.group,
            group.state,
            if group.protocol.is_empty() { String::new() } else { format!(" ({})", group.protocol) },
            group.members.len()
        );
        let mut rows =
            vec![["TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER"].map(str::to_owned).to_vec()];
        for partition in &group.partitions {
            let client = partition.member.as_ref().map_or_else(
                || "-".to_owned(),
                |id| {
                    let member = group.members.iter().find(|member| &member.id == id);
                    member.map_or_else(
                        || id.clone(),
                        |member| format!("{} {} {}", member.id, member.host, member.client_id),
                    )
                },
            );
            rows.push(vec![
                partition.topic.clone(),
                partition.partition.to_string(),
                partition.committed.map_or("-".to_owned(), |offset| offset.to_string()),
                partition.log_end.to_string(),
                partition.lag.map_or("-".to_owned(), |lag| lag.to_string()),
                client,
            ]);
        }
        crate::table::write_aligned(&mut out, &rows);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(topics: &[(&str, &[i32])]) -> Vec<u8> {
        let mut bytes = 0i16.to_be_bytes().to_vec();
        bytes.extend(i32::try_from(topics.len()).expect("few").to_be_bytes());
        for (name, partitions) in topics {
            bytes.extend(i16::try_from(name.len()).expect("short").to_be_bytes());
            bytes.extend(name.as_bytes());
            bytes.extend(i32::try_from(partitions.len()).expect("few").to_be_bytes());
            for partition in *partitions {
                bytes.extend(partition.to_be_bytes());
            }
        }
        bytes.extend((-1i32).to_be_bytes());
        bytes
    }

    #[test]
    fn an_assignment_lists_its_topics_partitions() {
        let bytes = assignment(&[("s.sales", &[0, 2]), ("s.orders", &[1])]);
        assert_eq!(
            parse_assignment(&bytes),
            vec![("s.sales".to_owned(), 0), ("s.sales".to_owned(), 2), ("s.orders".to_owned(), 1)]
        );
    }

    #[test]
    fn a_cut_assignment_yields_what_could_be_read() {
        let bytes = assignment(&[("s.sales", &[0, 2])]);
        assert_eq!(parse_assignment(&bytes[..bytes.len() - 8]), vec![("s.sales".to_owned(), 0)]);
        assert_eq!(parse_assignment(&[]), Vec::new());
    }
}
