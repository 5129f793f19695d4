//! Kafka under faults: a single broker SIGKILLed mid-sale and restarted on
//! its log, and a KRaft cluster of three (replication factor 3,
//! `min.insync.replicas=2`, `acks=all`) that loses a broker to SIGKILL and
//! has partition leaderships moved while the sale goes on. Nothing promised
//! may be lost, nothing decided twice, and on three brokers admissions
//! must go on through the fault.

use std::time::Duration;

use seckill_devstack::KafkaSettings;

use crate::cluster::Cluster;
use crate::{pause, settle, under_load_on, TURN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_mid_sale_loses_no_promised_order() {
    let _turn = TURN.lock().await;
    let cluster = tokio::task::block_in_place(|| Cluster::start_on_own_kafka(KafkaSettings::SINGLE));
    let (mut cluster, vouchers, load) = under_load_on(cluster).await;
    for _ in 0..2 {
        pause(2_000).await;
        tokio::task::block_in_place(|| {
            let kafka = cluster.own_kafka();
            kafka.kill();
            kafka.start_again()
        })
        .expect("broker restarts on its log");
    }
    let fault = "broker SIGKILL x2";
    let recovery = crate::recovered(&cluster, fault).await;
    println!("[{fault}] recovered in {recovery:?} after the second restart");
    pause(3_000).await;
    let tally = load.finish().await;
    assert_eq!(tally.no_answer, 0, "[{fault}] the ingress never died: every request was answered");
    crate::settle_tally(&mut cluster, &vouchers, tally, fault).await;
}

/// Waits until at least `more` orders beyond `before` were promised, or
/// fails after `within` naming the fault.
async fn admissions_go_on(load: &crate::load::Load, before: usize, more: usize, within: Duration, fault: &str) {
    let deadline = tokio::time::Instant::now() + within;
    while load.promised_so_far() < before + more {
        assert!(
            tokio::time::Instant::now() < deadline,
            "[{fault}] admissions stopped: {} promised in {within:?}, wanted {more}",
            load.promised_so_far() - before
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_brokers_one_killed_and_leaders_moved_mid_sale_lose_nothing() {
    let _turn = TURN.lock().await;
    let cluster = tokio::task::block_in_place(|| Cluster::start_on_own_kafka(KafkaSettings::THREE));
    let (mut cluster, vouchers, load) = under_load_on(cluster).await;
    pause(2_000).await;

    // Broker 2 crashes: its leaderships move to the others, writes go on
    // with two replicas in sync, and come back to three when it returns.
    let fault = "three brokers: broker 2 SIGKILL";
    tokio::task::block_in_place(|| cluster.own_kafka().kill_node(1));
    let before = load.promised_so_far();
    admissions_go_on(&load, before, 20, Duration::from_secs(30), fault).await;
    pause(3_000).await;
    tokio::task::block_in_place(|| cluster.own_kafka().start_node(1)).expect("broker 2 restarts on its log");
    pause(2_000).await;

    // An operator moves every partition's leadership of both topics to
    // broker 3, then back to broker 1, while orders flow.
    let fault = "three brokers: leaders moved";
    for leader in [3, 1] {
        let before = load.promised_so_far();
        for topic in ["sales", "orders"] {
            let name = cluster.topic(topic);
            for partition in 0..3 {
                tokio::task::block_in_place(|| cluster.own_kafka().move_leader(&name, partition, leader))
                    .unwrap_or_else(|error| panic!("[{fault}] moving {name}-{partition} to {leader}: {error}"));
            }
        }
        admissions_go_on(&load, before, 20, Duration::from_secs(30), fault).await;
    }
    pause(2_000).await;
    settle(&mut cluster, &vouchers, load, "three brokers: one killed, leaders moved").await;
}
