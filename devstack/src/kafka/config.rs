//! What a node is started with: its `server.properties`, the logging of
//! the nodes and the tools, and the cluster id's form.

use std::fmt::Write as _;

use super::{Kafka, KafkaDurability, Node};

impl Kafka {
    pub(super) fn server_properties(&self, node: &Node) -> String {
        let settings = &self.settings;
        let voters: Vec<String> =
            self.nodes.iter().map(|voter| format!("{}@{}:{}", voter.id, voter.ip(), voter.controller_port)).collect();
        let replication = settings.replication();
        let min_insync = settings.min_insync();
        let mut text = String::new();
        let mut set = |key: &str, value: &dyn std::fmt::Display| {
            let _ = writeln!(text, "{key}={value}");
        };
        set("process.roles", &"broker,controller");
        set("node.id", &node.id);
        set("controller.quorum.voters", &voters.join(","));
        set(
            "listeners",
            &format!("PLAINTEXT://{ip}:{},CONTROLLER://{ip}:{}", node.port, node.controller_port, ip = node.ip()),
        );
        // 127.0.0.1, not localhost: that may resolve to ::1.
        set("advertised.listeners", &format!("PLAINTEXT://{}", node.addr()));
        set("controller.listener.names", &"CONTROLLER");
        set("inter.broker.listener.name", &"PLAINTEXT");
        set("listener.security.protocol.map", &"CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT");
        set("log.dirs", &node.dir.join("data").display());
        // Kafka's own topics at the cluster's replication (their defaults of
        // 3 and 2 make group commits and transactions fail on one node), and
        // fewer partitions than the 50 default: a group's first commit
        // creates them all.
        set("offsets.topic.replication.factor", &replication);
        set("offsets.topic.num.partitions", &10);
        set("transaction.state.log.replication.factor", &replication);
        set("transaction.state.log.min.isr", &min_insync);
        set("transaction.state.log.num.partitions", &10);
        set("share.coordinator.state.topic.replication.factor", &replication);
        set("share.coordinator.state.topic.min.isr", &min_insync);
        set("default.replication.factor", &replication);
        set("min.insync.replicas", &min_insync);
        // The platform creates its topics with the partitions and configs it
        // wants; a topic appearing because a client named it would hide a bug.
        set("auto.create.topics.enable", &false);
        // A group's first member starts at once (the default waits 3 s).
        set("group.initial.rebalance.delay.ms", &0);
        // Small: nothing here is compacted at volume (the default takes 128 MB).
        set("log.cleaner.dedupe.buffer.size", &(2 * 1024 * 1024));
        // Fewer threads than a production broker's: two cores carry everything.
        set("num.network.threads", &2);
        set("num.io.threads", &4);
        set("num.recovery.threads.per.data.dir", &2);
        if settings.durability == KafkaDurability::FlushEveryBatch {
            set("log.flush.interval.messages", &1);
        }
        text
    }
}

/// Logging for the nodes and the tools: the console (a node's goes to its
/// `kafka.log`), warnings only for the chatty request and state loggers.
pub(super) const LOG4J2: &str = "\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.statechange.name = state.change.logger
logger.statechange.level = warn
";

/// RFC 4648 base64url without padding.
pub(super) fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let value = chunk.iter().enumerate().fold(0u32, |acc, (i, byte)| acc | (u32::from(*byte) << (16 - 8 * i)));
        let symbols = chunk.len() + 1;
        for i in 0..symbols {
            let index = usize::try_from((value >> (18 - 6 * i)) & 63).unwrap_or(0);
            out.push(char::from(ALPHABET[index]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_22_base64url_characters() {
        let id = base64url(&[0xfb; 16]);
        assert_eq!(id.len(), 22);
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{id}");
        assert_eq!(base64url(b"Man"), "TWFu");
        assert_eq!(base64url(b"Ma"), "TWE");
        assert_eq!(base64url(&[0xff, 0xff, 0xff]), "____");
    }
}
