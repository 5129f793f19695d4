//! Fault injection against the platform as real processes: SIGKILLed
//! services, a broker outage and crash, a broker of three killed and its
//! leaderships moved, a Redis restart and poison records, each under continuous
//! order traffic, each followed by the same invariant check and a graceful
//! SIGTERM shutdown of every service; and the local run (`seckill dev`)
//! killed, then started again.
//!
//! At most two platforms run at once ([`turn`]): a platform of five
//! processes mostly waits on the fault and the recovery, and two cores
//! carry two.

#![allow(unreachable_pub)]

// Shared with the partitions lane, which alone awaits `resolve`.
#[allow(dead_code)]
mod alerts;
mod brokers;
mod check;
mod checkout;
mod clock_skew;
mod cluster;
mod dev_run;
mod load;
mod paid;
mod payments;
mod rooms;
mod sale;
mod settle;

use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::{user_token, KafkaSettings};
use seckill_kafka::{EventProducer, Headers, Message, OwnedHeaders, ProducerSettings};
use tokio::sync::{Semaphore, SemaphorePermit};

use check::{check, Voucher};
use cluster::{Cluster, Service};
use load::Load;
use sale::{create_priced_voucher, create_voucher, open_sales};
use settle::settle_tally;

/// Platforms running at once, whatever `--test-threads` says: two, each
/// mostly waiting on restarts, recoveries and the pipeline settling.
static TURN: Semaphore = Semaphore::const_new(2);

/// The right to run a platform; released when dropped.
async fn turn() -> SemaphorePermit<'static> {
    TURN.acquire().await.expect("the semaphore is never closed")
}

const CLIENTS: usize = 8;
const PAUSE: Duration = Duration::from_millis(20);
/// The longest a fault's aftermath may take to clear before the test says
/// the platform did not recover (generous: a liveness bound, not a figure).
const RECOVERY_BOUND: Duration = Duration::from_secs(90);

/// A platform with three open vouchers, and mixed traffic on all (see
/// `load`): one too big to sell out (limit 3, unclaimed orders expire
/// after 2 s, paused and resumed by the admin), one small that sells out and
/// gets stock added (limit 2), and one priced (EUR 2.50, limit 2), whose
/// orders are paid through the provider's sandbox or expire unpaid after
/// 3 s, one queue-mode (limit 2, unclaimed orders expire after 2 s)
/// whose buyers come through its waiting room, and one draw (stock 10,
/// limit 1, unclaimed orders expire after 2 s) whose users enter in the
/// first seconds and whose winners buy, cancel, or let their windows lapse,
/// promoting the next ranks.
async fn under_load() -> (Cluster, Vec<Voucher>, Load) {
    under_load_on(tokio::task::block_in_place(Cluster::start)).await
}

/// [`under_load`] on a platform already started.
async fn under_load_on(cluster: Cluster) -> (Cluster, Vec<Voucher>, Load) {
    let vouchers = open_sales(&cluster).await;
    let load = Load::start(&cluster.http, cluster.entry(), "a", &vouchers, CLIENTS, PAUSE);
    (cluster, vouchers, load)
}

/// Stops the traffic, checks the invariants, then stops every service with
/// SIGTERM and requires a clean exit.
async fn settle(cluster: &mut Cluster, vouchers: &[Voucher], load: Load, fault: &str) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    load.until_rooms_served(crate::RECOVERY_BOUND).await;
    let tally = load.finish().await;
    settle_tally(cluster, vouchers, tally, fault).await;
}

async fn pause(millis: u64) {
    tokio::time::sleep(Duration::from_millis(millis)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_killed_repeatedly_loses_no_promised_order() {
    let _turn = turn().await;
    let (mut cluster, vouchers, load) = under_load().await;
    for _ in 0..3 {
        pause(2_000).await;
        tokio::task::block_in_place(|| {
            cluster.kill(Service::Ingress);
            cluster.start_service(Service::Ingress);
        });
    }
    pause(2_000).await;
    settle(&mut cluster, &vouchers, load, "ingress SIGKILL x3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_second_broker_outage_loses_no_promised_order() {
    let _turn = turn().await;
    let cluster = tokio::task::block_in_place(|| Cluster::start_on_own_kafka(KafkaSettings::SINGLE));
    let (mut cluster, vouchers, load) = under_load_on(cluster).await;
    let fault = "broker down 10 s";
    pause(2_000).await;
    let before = load.promised_so_far();
    // Buyers who come only while the broker is down, on a sale of their own
    // (the load's users soon hold their limits, and nothing is decided while
    // the log is down, so no hold expires for them).
    let newcomers = create_voucher(&cluster, 1_000, 1, 0).await;
    tokio::task::block_in_place(|| cluster.own_kafka().stop());
    let (stopped, refused_before) = (load.promised_so_far(), load.unavailable_so_far());
    let mut admitted_in_outage = Vec::new();
    for i in 0..10 {
        let user = format!("outage-{i}");
        let order = place_one(&cluster, &newcomers, &user, "the ingress admits while the log is down", fault).await;
        admitted_in_outage.push(load::Promised { order, voucher: newcomers.clone(), user, quantity: 1 });
        pause(500).await;
    }
    pause(5_000).await;
    let during = load.promised_so_far() - stopped;
    let refused_during = load.unavailable_so_far() - refused_before;
    assert_eq!(refused_during, 0, "[{fault}] no 503 while the outbox has room");
    tokio::task::block_in_place(|| cluster.own_kafka().start_again()).expect("broker restarts");
    let recovery = recovered(&cluster, fault).await;
    pause(3_000).await;
    load.until_rooms_served(crate::RECOVERY_BOUND).await;
    let mut tally = load.finish().await;
    let after = tally.promised.len() - (stopped + during);
    println!(
        "[{fault}] promised before {before}, during the outage {} ({} newcomers), after {after}; outbox drained \
         {recovery:?} after the restart",
        during + admitted_in_outage.len(),
        admitted_in_outage.len()
    );
    assert_eq!(tally.no_answer, 0, "[{fault}] the ingress never died: every request was answered");
    // The newcomers' orders, admitted while the log was down, are decided
    // once it is back, like every promised order (`check`).
    tally.promised.extend(admitted_in_outage);
    settle_tally(&mut cluster, &vouchers, tally, fault).await;
}

/// How long after a fault ends the relay takes to drain the outbox the
/// fault let grow; bounded, so a platform that does not recover fails here,
/// naming the fault.
async fn recovered(cluster: &Cluster, fault: &str) -> Duration {
    let started = tokio::time::Instant::now();
    loop {
        let entries = check::outbox_len(cluster).await;
        if entries == Some(0) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < RECOVERY_BOUND,
            "[{fault}] the outbox still holds {entries:?} after {RECOVERY_BOUND:?}; the ingress's log: {}",
            cluster.log_warnings(Service::Ingress, 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processor_and_projector_killed_repeatedly_decide_everything_once() {
    let _turn = turn().await;
    let (mut cluster, vouchers, load) = under_load().await;
    let fault = "processor+projector SIGKILL x3";
    let canaries = create_voucher(&cluster, 1_000, 1, 0).await;
    let mut decided_after = Vec::new();
    let mut canary_orders = Vec::new();
    for round in 0..3 {
        for service in [Service::Processor, Service::Projector] {
            pause(1_500).await;
            tokio::task::block_in_place(|| {
                cluster.kill(service);
                cluster.start_service(service);
            });
            if service == Service::Processor {
                // How long the restarted processor takes to decide again: a
                // new buyer's order, from the restart to its decision.
                let user = format!("canary-{round}");
                let (order, took) = canary(&cluster, &canaries, &user, fault).await;
                decided_after.push(took);
                canary_orders.push(load::Promised { order, voucher: canaries.clone(), user, quantity: 1 });
            }
        }
    }
    println!("[{fault}] a restarted processor decided a new order after {decided_after:?}");
    pause(2_000).await;
    load.until_rooms_served(crate::RECOVERY_BOUND).await;
    let mut tally = load.finish().await;
    tally.promised.extend(canary_orders);
    settle_tally(&mut cluster, &vouchers, tally, fault).await;
}

/// Orders one unit of `voucher` as `user`, which must be admitted (`what`
/// says why); the order's id.
async fn place_one(cluster: &Cluster, voucher: &str, user: &str, what: &str, fault: &str) -> String {
    let answer = cluster
        .http
        .post(format!("{}/api/v1/vouchers/{voucher}/orders", cluster.url(Service::Ingress)))
        .header("authorization", format!("Bearer {}", user_token(user)))
        .send()
        .await
        .expect("the ingress answers");
    assert_eq!(answer.status(), StatusCode::ACCEPTED, "[{fault}] {what}");
    let body: serde_json::Value = answer.json().await.expect("json");
    body["order_id"].as_str().expect("a 202 names its order").to_owned()
}

/// Orders one unit of `voucher` as `user` and waits until the order is
/// decided; its id and how long that took, bounded by `RECOVERY_BOUND`.
async fn canary(cluster: &Cluster, voucher: &str, user: &str, fault: &str) -> (String, Duration) {
    let started = tokio::time::Instant::now();
    let token = format!("Bearer {}", user_token(user));
    let order = place_one(cluster, voucher, user, "the canary is admitted", fault).await;
    loop {
        let read = cluster
            .http
            .get(format!("{}/api/v1/orders/{order}", cluster.url(Service::Ingress)))
            .header("authorization", &token)
            .send()
            .await;
        if let Ok(read) = read {
            let row: serde_json::Value = read.json().await.unwrap_or_default();
            if row["status"].as_str().is_some_and(|status| status != "PENDING") {
                return (order, started.elapsed());
            }
        }
        assert!(started.elapsed() < RECOVERY_BOUND, "[{fault}] the canary {order} undecided after {RECOVERY_BOUND:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_with_aof_loses_no_admitted_order() {
    let _turn = turn().await;
    let (mut cluster, vouchers, load) = under_load().await;
    pause(2_000).await;
    tokio::task::block_in_place(|| {
        cluster.redis.stop();
        std::thread::sleep(Duration::from_secs(1));
        cluster.redis.start_again()
    })
    .expect("redis restarts");
    pause(3_000).await;
    settle(&mut cluster, &vouchers, load, "Redis restart (AOF)").await;
}

/// Redis killed outright (SIGKILL, `appendfsync everysec`), started again
/// on its append-only file, then `reconcile` run while the ingress and the
/// processor keep going: nothing promised is lost, nothing oversold, and
/// what reconcile writes agrees with what the running processor does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_then_reconciled_while_the_platform_runs_loses_nothing() {
    let _turn = turn().await;
    let (mut cluster, vouchers, load) = under_load().await;
    pause(2_000).await;
    tokio::task::block_in_place(|| {
        cluster.redis.kill();
        cluster.redis.start_again()
    })
    .expect("redis restarts on its append-only file");
    pause(1_500).await;
    let output = tokio::task::block_in_place(|| cluster.command(Service::Ingress, &["reconcile"]).output())
        .expect("reconcile runs");
    let report = String::from_utf8_lossy(&output.stdout);
    println!("[Redis SIGKILL + reconcile under load] reconcile:\n{report}");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    pause(2_000).await;
    settle(&mut cluster, &vouchers, load, "Redis SIGKILL + reconcile under load").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_records_are_dead_lettered_and_partitions_keep_moving() {
    let _turn = turn().await;
    let (mut cluster, vouchers, load) = under_load().await;
    pause(1_500).await;
    let producer = EventProducer::new(&ProducerSettings {
        brokers: cluster.brokers.clone(),
        ..ProducerSettings::from(&seckill_core::config::KafkaConfig::default())
    })
    .expect("producer");
    let poison: [&[u8]; 3] = [
        b"\x00\xffnot json",
        br#"{"schema":99,"event_id":"0192f0c4-7a7e-7cc1-8000-000000000000","emitted_at":"2026-01-01T00:00:00Z","type":"OrderAccepted"}"#,
        br#"{"schema":1,"event_id":"0192f0c4-7a7e-7cc1-8000-000000000001","emitted_at":"2026-01-01T00:00:00Z","type":"OrderAccepted","order_id":"0192f0c4-7a7e-7cc1-8000-000000000002","voucher_id":"0192f0c4-7a7e-7cc1-8000-000000000003","user_id":"x","quantity":0,"accepted_at":"2026-01-01T00:00:00Z"}"#,
    ];
    let topics = [format!("{}.sales", cluster.namespace), format!("{}.orders", cluster.namespace)];
    for topic in &topics {
        for voucher in &vouchers {
            for record in poison {
                producer
                    .send_raw(topic, Some(voucher.id.as_bytes()), record, OwnedHeaders::new())
                    .await
                    .expect("poison produced");
            }
        }
    }
    pause(2_000).await;
    settle(&mut cluster, &vouchers, load, "poison records").await;

    // The processor parks the sales topic's poison; the projector both topics'.
    let per_topic = vouchers.len() * poison.len();
    let expected = [("processor".to_owned(), per_topic), ("projector".to_owned(), 2 * per_topic)];
    let parked = read_dead_letters(&cluster, per_topic * 3).await;
    println!("[poison records] injected {per_topic} per topic; dead letters by service: {parked:?}");
    assert_eq!(parked, expected.into_iter().collect());

    // Operators see each one with its reason and origin, and can put them back once.
    let run = |args: &[&str]| {
        let output = tokio::task::block_in_place(|| cluster.command(Service::Ingress, args).output()).expect("runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let listed = run(&["dead-letters", "list"]);
    let letters: Vec<serde_json::Value> =
        listed.lines().map(|line| serde_json::from_str(line).expect("one JSON object per line")).collect();
    assert_eq!(letters.len(), per_topic * 3, "{listed}");
    assert!(letters.iter().all(|l| l["reason"].is_string() && l["source"]["offset"].is_i64()), "{listed}");
    println!("[poison records] a dead letter as listed: {}", letters[0]);
    assert!(run(&["dead-letters", "redrive"]).contains(&format!("Redrove {} dead letters", per_topic * 3)));
    assert!(run(&["dead-letters", "redrive"]).contains("Redrove 0 dead letters"), "each goes back once");
}

/// Dead letters by the service that parked them, once `expected` are there.
async fn read_dead_letters(cluster: &Cluster, expected: usize) -> std::collections::HashMap<String, usize> {
    let reader = seckill_kafka::BatchConsumer::subscribe(
        &seckill_kafka::ConsumerSettings {
            max_batch: 100,
            ..seckill_kafka::ConsumerSettings::reader(&cluster.brokers, format!("{}-dlq-reader", cluster.namespace))
        },
        &[&format!("{}.dead-letters", cluster.namespace)],
    )
    .expect("reader subscribes");
    let never = tokio_util::sync::CancellationToken::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut parked = std::collections::HashMap::new();
    let mut read = 0;
    while read < expected && tokio::time::Instant::now() < deadline {
        let Ok(batch) = reader.next_batch_or_idle(Duration::from_secs(1), &never).await else {
            continue;
        };
        for message in batch {
            read += 1;
            let service = message
                .headers()
                .and_then(|headers| headers.iter().find(|h| h.key == "dlq.service").and_then(|h| h.value))
                .map(|value| String::from_utf8_lossy(value).into_owned())
                .unwrap_or_default();
            *parked.entry(service).or_default() += 1;
        }
    }
    parked
}

/// A user holding `voucher`'s whole limit, as the view shows it, and their
/// latest holding order (the one the gate names to them).
async fn full_holder(cluster: &Cluster, voucher: &Voucher) -> (String, String) {
    let users: std::collections::BTreeSet<String> =
        (0..CLIENTS).flat_map(|c| (0..4).flat_map(move |g| (0..4).map(move |u| format!("a{c}-{g}-{u}")))).collect();
    for user in users {
        let url = format!("{}/api/v1/users/{user}/orders?limit=100", cluster.url(Service::Projector));
        let listed: serde_json::Value = cluster.http.get(url).send().await.expect("view").json().await.expect("json");
        let holding: Vec<&serde_json::Value> = listed["orders"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| {
                o["voucher_id"] == voucher.id.as_str() && matches!(o["status"].as_str(), Some("CREATED" | "PAID"))
            })
            .collect();
        let units: u64 = holding.iter().filter_map(|o| o["quantity"].as_u64()).sum();
        if units == u64::from(voucher.limit) {
            let latest = holding.iter().filter_map(|o| o["order_id"].as_str()).max().expect("an order");
            return (user, latest.to_owned());
        }
    }
    panic!("nobody holds the whole limit of the small voucher");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_redis_data_loss_reconcile_rebuilds_the_gate_from_the_log() {
    let _turn = turn().await;
    let (mut cluster, vouchers, load) = under_load().await;
    pause(3_000).await;
    load.until_rooms_served(crate::RECOVERY_BOUND).await;
    let mut tally = load.finish().await;
    // Everything admitted is in the log and decided, the draw made (so all
    // of it is in the log too); then Redis loses it all.
    check::drained(&cluster, &tally).await;
    for voucher in vouchers.iter().filter(|voucher| voucher.drawn) {
        check::until_drawn(&cluster, voucher).await;
    }
    assert!(tokio::task::block_in_place(|| cluster.stop(Service::Ingress)), "ingress stops cleanly");
    cluster.flush_redis().await;

    let output = tokio::task::block_in_place(|| cluster.command(Service::Ingress, &["reconcile"]).output())
        .expect("reconcile runs");
    let report = String::from_utf8_lossy(&output.stdout);
    println!("[Redis data loss] reconcile:\n{report}");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let all = vouchers.len();
    assert!(report.contains(&format!("{all} vouchers in the log; {all} changed.")), "{report}");
    assert_eq!(report.matches("restored (was missing)").count(), all, "{report}");
    let draws = vouchers.iter().filter(|voucher| voucher.drawn).count();
    assert_eq!(report.matches("draw rebuilt from the log at stage drawn").count(), draws, "{report}");

    tokio::task::block_in_place(|| cluster.start_service(Service::Ingress));
    // Someone who held the whole limit before the loss still holds it: told
    // so, with their latest holding order.
    let (holder, latest) = full_holder(&cluster, &vouchers[1]).await;
    let response = cluster
        .http
        .post(format!("{}/api/v1/vouchers/{}/orders", cluster.url(Service::Ingress), vouchers[1].id))
        .header("authorization", format!("Bearer {}", user_token(&holder)))
        .send()
        .await
        .expect("ingress answers");
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let body: serde_json::Value = response.json().await.expect("json");
    assert_eq!((body["error"].as_str(), body["order_id"].as_str()), (Some("duplicate_order"), Some(latest.as_str())));

    // The sale goes on from where the log says it was.
    let more = Load::start(&cluster.http, cluster.entry(), "b", &vouchers, CLIENTS, PAUSE);
    pause(2_000).await;
    tally.absorb(more.finish().await);
    settle_tally(&mut cluster, &vouchers, tally, "Redis data loss + reconcile").await;
}
