//! How a local Kafka cluster is laid out: nodes, heap, durability, and the
//! replication that follows from the node count.

/// When a node writes what it acknowledged to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaDurability {
    /// Kafka's default: the operating system's page cache writes it back;
    /// an acknowledged record survives a broker crash (SIGKILL), not a
    /// machine crash, unless it is also on other replicas.
    PageCache,
    /// `fsync` after every appended batch (`log.flush.interval.messages=1`):
    /// an acknowledged record survives a machine crash on a single node.
    FlushEveryBatch,
}

/// How a cluster is laid out.
#[derive(Clone, Copy, Debug)]
pub struct KafkaSettings {
    /// Nodes, each a broker and a controller (1 or 3, typically).
    pub nodes: usize,
    /// The first node's broker port (0: a free one); the others take free ports.
    pub port: u16,
    /// Heap per node, in MB.
    pub heap_mb: u32,
    pub durability: KafkaDurability,
}

impl KafkaSettings {
    /// One node with a small heap, page-cache durability: the tests.
    pub const SINGLE: Self = Self { nodes: 1, port: 0, heap_mb: 512, durability: KafkaDurability::PageCache };

    /// Three nodes (replication factor 3, `min.insync.replicas=2`): the
    /// replication tests.
    pub const THREE: Self = Self { nodes: 3, port: 0, heap_mb: 256, durability: KafkaDurability::PageCache };

    /// The replication factor of every topic, and of Kafka's own.
    pub(super) fn replication(&self) -> usize {
        self.nodes.min(3)
    }

    /// Replicas a write with `acks=all` needs: 2 of 3 where there are three.
    pub(super) fn min_insync(&self) -> usize {
        if self.replication() >= 3 {
            2
        } else {
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_nodes_replicate_three_times_and_need_two_in_sync() {
        assert_eq!((KafkaSettings::THREE.replication(), KafkaSettings::THREE.min_insync()), (3, 2));
        assert_eq!((KafkaSettings::SINGLE.replication(), KafkaSettings::SINGLE.min_insync()), (1, 1));
    }
}
