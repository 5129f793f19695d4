//! A master killed and its replica promoted under a running gate: what the
//! promoted replica never received is gone (the replication loss every
//! Redis write has, see docs/CLUSTER.md), and the same gate, without being
//! told, admits against the new master after a few failed attempts.

use std::time::Duration;

use seckill_core::config::RedisConfig;
use seckill_core::OrderId;
use seckill_devstack::{RedisCluster, TempDir};
use seckill_gate::{Admission, Gate, GateConnection};

use crate::{unique_prefix, user, voucher};

/// How long the gate's calls may take, as a service configures it.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Failed calls one buyer may see after the failover before the gate finds
/// the new master (a call to the dead address times out; the connection is
/// rebuilt after it).
const MAX_FAILED_ATTEMPTS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_forgets_unreplicated_admissions_and_the_same_gate_goes_on() {
    let dir = TempDir::new().expect("temp dir");
    let mut cluster = RedisCluster::start(dir.path(), 3, 1).expect("the Redis Cluster starts");
    let config = RedisConfig::cluster(cluster.seed_urls(), unique_prefix());
    let connection = GateConnection::open(&config, RESPONSE_TIMEOUT).await.expect("connects");
    let gate = Gate::new(connection, &config.key_prefix).await.expect("scripts load");
    let v = voucher(&gate, 10, 1).await;
    let slot = gate.layout(v).await.expect("reads").expect("loaded").slot(0);
    let master = cluster.master_of(slot).expect("served");
    let replica = cluster.replica_of(master).expect("reads").expect("a replica");
    let admit = |name: String| {
        let gate = gate.clone();
        async move { gate.admit(v, &user(&name), 1, OrderId::generate(), None).await }
    };

    // Replicated: two buyers, then the replica catches up (WAIT).
    for i in 0..2 {
        assert!(matches!(admit(format!("kept-{i}")).await.expect("admits"), Admission::Admitted { .. }));
    }
    tokio::task::block_in_place(|| cluster.wait_replicated(master, replica)).expect("the replica has the first two");
    // Not replicated: the replica is cut off, three more buyers, the master dies.
    cluster.cut_off_replica(master, replica).expect("cuts the replica off");
    for i in 0..3 {
        assert!(matches!(admit(format!("lost-{i}")).await.expect("admits"), Admission::Admitted { .. }));
    }
    assert_eq!(gate.remaining(v).await.expect("reads"), Some(5));
    cluster.kill(master);
    cluster.resume(replica);
    tokio::task::block_in_place(|| cluster.take_over(replica)).expect("the replica takes over");

    // The same gate, a burst of calls right after the failover. Calls sent
    // to the dead master's address time out, and the gate rebuilds its
    // connection; each buyer's call is sent again with the same order id
    // until answered (admit.lua answers an id it admitted before as
    // admitted, so a call that timed out after running is not counted
    // twice), and every buyer is answered after a few failed attempts: the
    // bound is on attempts, not on how long a loaded machine takes.
    let burst = (0..40).map(|i| {
        let gate = gate.clone();
        async move {
            let (buyer, order) = (user(&format!("after-{i}")), OrderId::generate());
            let mut failures = Vec::new();
            loop {
                match gate.admit(v, &buyer, 1, order, None).await {
                    Ok(answer) => return answer,
                    Err(error) => {
                        assert!(error.is_timeout() || error.is_io_error(), "{error}");
                        failures.push(error.to_string());
                        assert!(failures.len() <= MAX_FAILED_ATTEMPTS, "still failing: {failures:?}");
                    }
                }
            }
        }
    });
    let answers = futures::future::join_all(burst).await;
    let admitted = answers.iter().filter(|a| matches!(a, Admission::Admitted { .. })).count();
    assert_eq!(admitted, 8, "the three unreplicated admissions are gone: 8 units left, {answers:?}");
    let snapshot = gate.admission_snapshot(v).await.expect("reads").expect("there");
    assert!(snapshot.bought.keys().all(|buyer| !buyer.starts_with("lost-")), "{:?}", snapshot.bought);
    assert_eq!(snapshot.bought.len(), 10);
}
