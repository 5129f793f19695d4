//! Kafka under faults: a single broker SIGKILLed mid-sale and restarted on
//! its log, and a KRaft cluster of three (replication factor 3,
//! `min.insync.replicas=2`, `acks=all`) that loses a broker to SIGKILL and
//! has partition leaderships moved while the sale goes on. Nothing promised
//! may be lost, nothing decided twice, and on three brokers admissions
//! must go on through the fault. And a broker down long enough to fill
//! the outbox: past its bound, orders are answered `503` over HTTP and
//! nothing is admitted for them.

use std::time::Duration;

use seckill_devstack::KafkaSettings;

use reqwest::StatusCode;

use crate::check::Voucher;
use crate::cluster::{Cluster, Service};
use crate::load::{Promised, Tally};
use crate::{check, create_voucher, pause, place_one, recovered, settle, settle_tally, turn, under_load_on};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_mid_sale_loses_no_promised_order() {
    let _turn = turn().await;
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
    load.until_rooms_served(crate::RECOVERY_BOUND).await;
    let tally = load.finish().await;
    assert_eq!(tally.no_answer, 0, "[{fault}] the ingress never died: every request was answered");
    crate::settle_tally(&mut cluster, &vouchers, tally, fault).await;
}

/// Waits until at least `more` orders beyond `before` were promised, or
/// fails after `within` naming the fault. A liveness bound, as generous as
/// the recovery's: alone the test sees its 20 within seconds, but beside the
/// rest of the suite each leader move (a JVM tool run per partition) and
/// the brokers share two cores with a 10,000-entry draw.
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
    let _turn = turn().await;
    let cluster = tokio::task::block_in_place(|| Cluster::start_on_own_kafka(KafkaSettings::THREE));
    let (mut cluster, vouchers, load) = under_load_on(cluster).await;
    pause(2_000).await;

    // Broker 2 crashes: its leaderships move to the others, writes go on
    // with two replicas in sync, and come back to three when it returns.
    let fault = "three brokers: broker 2 SIGKILL";
    tokio::task::block_in_place(|| cluster.own_kafka().kill_node(1));
    let before = load.promised_so_far();
    admissions_go_on(&load, before, 20, crate::RECOVERY_BOUND, fault).await;
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
        admissions_go_on(&load, before, 20, crate::RECOVERY_BOUND, fault).await;
    }
    pause(2_000).await;
    settle(&mut cluster, &vouchers, load, "three brokers: one killed, leaders moved").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_outbox_is_answered_503_over_http_and_orders_are_admitted_again_once_the_log_is_back() {
    const BOUND: usize = 5;
    let _turn = turn().await;
    let fault = "outbox full (broker down)";
    let mut cluster = tokio::task::block_in_place(|| {
        let mut cluster = Cluster::start_on_own_kafka(KafkaSettings::SINGLE);
        cluster.ingress_env.push(("SECKILL_MAX_OUTBOX_ENTRIES".to_owned(), BOUND.to_string()));
        assert!(cluster.stop(Service::Ingress), "the ingress stops cleanly");
        cluster.start_service(Service::Ingress);
        cluster
    });
    let voucher = create_voucher(&cluster, 100, 1, 0).await;
    tokio::task::block_in_place(|| cluster.own_kafka().stop());

    // The outbox takes BOUND orders while the log is down, then is full.
    let mut tally = Tally::default();
    for i in 0..BOUND {
        let user = format!("early-{i}");
        let order = place_one(&cluster, &voucher, &user, "admitted while the outbox has room", fault).await;
        tally.promised.push(Promised { order, voucher: voucher.clone(), user, quantity: 1 });
    }
    let refused: Vec<String> = (0..3).map(|i| format!("refused-{i}")).collect();
    for user in &refused {
        let answer = cluster
            .http
            .post(format!("{}/api/v1/vouchers/{voucher}/orders", cluster.url(Service::Ingress)))
            .header("authorization", format!("Bearer {}", seckill_devstack::user_token(user)))
            .send()
            .await
            .expect("the ingress answers");
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE, "[{fault}] {user} refused");
        let body: serde_json::Value = answer.json().await.expect("a JSON error");
        assert_eq!(body["error"], "unavailable", "{body}");
        assert!(body["message"].as_str().is_some_and(|m| m.contains("nothing was admitted")), "{body}");
        assert!(body.get("order_id").is_none(), "a full outbox admitted nothing to name: {body}");
        tally.unavailable += 1;
    }
    assert_eq!(check::outbox_len(&cluster).await, Some(BOUND as u64), "[{fault}] nothing past the bound");

    // The log back, the outbox drains and the refused buyers are admitted:
    // their refusal held nothing for them.
    tokio::task::block_in_place(|| cluster.own_kafka().start_again()).expect("broker restarts");
    let drained = recovered(&cluster, fault).await;
    println!(
        "[{fault}] {BOUND} admitted, {} refused with 503; outbox drained {drained:?} after the restart",
        refused.len()
    );
    for user in refused {
        let order = place_one(&cluster, &voucher, &user, "admitted once the outbox drained", fault).await;
        tally.promised.push(Promised { order, voucher: voucher.clone(), user, quantity: 1 });
    }
    tally.requests = (tally.promised.len() as u64) + tally.unavailable;
    let vouchers = [Voucher { id: voucher, limit: 1, holds: false, priced: false, queued: false, drawn: false }];
    settle_tally(&mut cluster, &vouchers, tally, fault).await;
}
