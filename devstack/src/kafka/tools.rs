//! What an operator does to a running cluster with Kafka's own command-line
//! tools (the main classes of the distribution's jars): a partition's
//! leadership moved.

use std::time::{Duration, Instant};

use super::Kafka;
use crate::jvm::{self, Distribution};
use crate::DevstackError;

impl Kafka {
    /// Makes node id `leader` the leader of `topic`'s `partition`, as an
    /// operator would with Kafka's tools: a reassignment that puts it first
    /// in the replica list (the same replicas, so no data moves), then a
    /// preferred-leader election.
    pub fn move_leader(&self, topic: &str, partition: i32, leader: u32) -> Result<(), DevstackError> {
        let mut replicas: Vec<u32> = self.nodes.iter().map(|node| node.id).collect();
        replicas.retain(|&id| id != leader);
        replicas.truncate(self.settings.replication().saturating_sub(1));
        replicas.insert(0, leader);
        let plan = format!(
            r#"{{"version":1,"partitions":[{{"topic":"{topic}","partition":{partition},"replicas":[{}]}}]}}"#,
            replicas.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        );
        let plan_file = self.dir.join(format!("reassign-{}.json", uuid::Uuid::now_v7().simple()));
        std::fs::write(&plan_file, plan)
            .map_err(|source| DevstackError::Spawn { what: "kafka tools".into(), source })?;
        let bootstrap = self.running_brokers();
        self.tool(&[
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            "--bootstrap-server",
            &bootstrap,
            "--reassignment-json-file",
            &plan_file.to_string_lossy(),
            "--execute",
        ])?;
        // The reassignment completes at once (no new replica), but the
        // election is refused until it has: try for a while.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let elected = self.tool(&[
                "org.apache.kafka.tools.LeaderElectionCommand",
                "--bootstrap-server",
                &bootstrap,
                "--election-type",
                "PREFERRED",
                "--topic",
                topic,
                "--partition",
                &partition.to_string(),
            ]);
            match elected {
                Ok(output) if !output.contains("Error") && !output.contains("failed") => return Ok(()),
                Ok(output) if output.contains("already the preferred leader") => return Ok(()),
                _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(500)),
                Ok(output) => {
                    return Err(DevstackError::Setup(format!("moving the leader of {topic}-{partition}: {output}")))
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The bootstrap servers of the nodes running now.
    fn running_brokers(&self) -> String {
        self.nodes
            .iter()
            .filter(|node| node.server.is_some())
            .map(|node| node.addr().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Runs one of Kafka's command-line tools (a main class of the
    /// distribution's jars); returns what it printed.
    fn tool(&self, args: &[&str]) -> Result<String, DevstackError> {
        let mut command = jvm::command(&Distribution::KAFKA, 128)?;
        let log4j = self.nodes[0].dir.join("log4j2.properties");
        command.arg(format!("-Dlog4j2.configurationFile={}", log4j.display())).args(args);
        let output = command.output().map_err(|source| DevstackError::Spawn { what: args[0].to_owned(), source })?;
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        if output.status.success() {
            Ok(text)
        } else {
            Err(DevstackError::Setup(format!("{} failed: {}", args[0], text.trim())))
        }
    }
}
