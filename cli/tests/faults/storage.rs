//! The broker's log under faults, on its PostgreSQL engine: the broker
//! killed mid-sale, and the PostgreSQL server under it restarted and then
//! crashed mid-sale. Nothing promised may be lost.

use std::time::Duration;

use crate::cluster::Cluster;
use crate::{pause, settle, under_load, under_load_on, TURN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_mid_sale_loses_no_promised_order() {
    let _turn = TURN.lock().await;
    let (mut cluster, vouchers, load) = under_load().await;
    for _ in 0..2 {
        pause(2_000).await;
        tokio::task::block_in_place(|| {
            cluster.broker.kill();
            cluster.broker.start_again()
        })
        .expect("broker restarts on its log");
    }
    pause(3_000).await;
    settle(&mut cluster, &vouchers, load, "broker SIGKILL x2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_and_crashed_mid_sale_loses_no_promised_order() {
    let _turn = TURN.lock().await;
    let cluster = tokio::task::block_in_place(Cluster::start_on_own_postgres);
    let (mut cluster, vouchers, load) = under_load_on(cluster).await;
    pause(2_000).await;
    // A clean restart (fast shutdown), down for 3 s.
    tokio::task::block_in_place(|| {
        let postgres = cluster.postgres.as_mut().expect("the cluster's own server");
        postgres.stop();
        std::thread::sleep(Duration::from_secs(3));
        postgres.start_again()
    })
    .expect("postgres restarts");
    pause(3_000).await;
    // A crash: immediate shutdown, no checkpoint; the next start replays the WAL.
    tokio::task::block_in_place(|| {
        let postgres = cluster.postgres.as_mut().expect("the cluster's own server");
        postgres.crash();
        postgres.start_again()
    })
    .expect("postgres recovers");
    pause(3_000).await;
    settle(&mut cluster, &vouchers, load, "PostgreSQL restart + crash").await;
}
