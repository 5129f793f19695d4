//! Kafka on test hosts: the one broker cut off from the platform (the
//! ingress admits into its outbox up to its bound, then answers `503`, and
//! the relay drains it after the heal); and one broker of three, the leader
//! of some partitions, isolated with no one (a minority of one), then
//! healed. The services, Redis and the clients stay in the root namespace.

use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::{Host, Kafka, KafkaSettings, TempDir, TestNet};
use tokio::time::Instant;

use crate::alerts::Alerts;
use crate::buyers::{decided, draw_made, recovered, Buyers};
use crate::check::Voucher;
use crate::cluster::{Cluster, Service};
use crate::load::Load;
use crate::settle::settle_tally;
use crate::{test_net, turn, CLIENTS, PAUSE};

/// The outbox's bound in the cut test: small, so a 15-s cut reaches it
/// (the load's clients slow down once their orders go undecided: a 15-s
/// cut filled 85 entries), yet far above what the relay leaves behind.
const OUTBOX_BOUND: u64 = 30;
/// How long the log stays cut off from the platform.
const KAFKA_CUT: Duration = Duration::from_secs(15);

/// The platform on brokers on test hosts of their own (as `settings`
/// says), under the mixed load; the ingress with `ingress_env` on top.
async fn under_load_on_kafka_hosts(
    settings: KafkaSettings,
    ingress_env: &[(&str, String)],
) -> (TestNet, Vec<Host>, Cluster, Vec<Voucher>, Load, Buyers, TempDir) {
    let dir = TempDir::new().expect("dir");
    let mut net = test_net();
    let hosts: Vec<Host> = (1..=settings.nodes).map(|n| net.host(&format!("kafka-{n}")).expect("a host")).collect();
    let kafka = tokio::task::block_in_place(|| Kafka::start_on(&hosts, &dir.path().join("kafka"), settings))
        .expect("kafka starts on its hosts");
    let mut cluster = tokio::task::block_in_place(|| Cluster::start_on_kafka(kafka));
    if !ingress_env.is_empty() {
        cluster.ingress_env = ingress_env.iter().map(|(key, value)| ((*key).to_owned(), value.clone())).collect();
        tokio::task::block_in_place(|| {
            assert!(cluster.stop(Service::Ingress), "the ingress stops cleanly");
            cluster.start_service(Service::Ingress);
        });
    }
    // One order decided first: the log's topics and the consumers' groups
    // settled, so the draw's 4-s entry window sees the load's entrants
    // (three brokers on two cores are slow to get there).
    let mut buyers = Buyers::default();
    let warm = crate::sale::create_voucher(&cluster, 10, 1, 0).await;
    assert_eq!(buyers.order(&cluster, &warm, "warm-up").await, Some(StatusCode::ACCEPTED), "the platform admits");
    let order = buyers.tally.promised[0].order.clone();
    decided(cluster.http.clone(), cluster.url(Service::Ingress), "warm-up".to_owned(), order, "warm-up").await;
    // Its tally goes to the checker; its answer time is no figure.
    buyers.answers.clear();
    let vouchers = crate::sale::open_sales(&cluster).await;
    let load = Load::start(&cluster.http, cluster.entry(), "a", &vouchers, CLIENTS, PAUSE);
    (net, hosts, cluster, vouchers, load, buyers, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
async fn kafka_cut_off_fills_the_outbox_to_its_bound_then_drains() {
    let _turn = turn().await;
    let fault = "Kafka cut off 15 s";
    let bound = [("SECKILL_MAX_OUTBOX_ENTRIES", OUTBOX_BOUND.to_string())];
    let (_net, hosts, mut cluster, vouchers, load, mut buyers, _dir) =
        under_load_on_kafka_hosts(KafkaSettings::SINGLE, &bound).await;
    let newcomers = crate::sale::create_voucher(&cluster, 1_000, 1, 0).await;
    draw_made(&cluster, &vouchers).await;
    let (promised_before, refused_before) = (load.promised_so_far(), load.unavailable_so_far());
    let alerts = Alerts::watch(&cluster).await;
    let kafka_down = [("dependency", "kafka"), ("service", "ingress")];
    hosts[0].isolate().expect("cut");
    let cut_at = Instant::now();
    let mut first_503 = None;
    let during = async {
        let mut i = 0;
        while cut_at.elapsed() < KAFKA_CUT {
            let status = buyers.order(&cluster, &newcomers, &format!("during-{i}")).await;
            if status == Some(StatusCode::SERVICE_UNAVAILABLE) && first_503.is_none() {
                first_503 = Some(cut_at.elapsed());
            }
            i += 1;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    tokio::join!(alerts.fires(fault, "SeckillDependencyDown", &kafka_down, KAFKA_CUT), during);
    let (promised_during, refused_during) =
        (load.promised_so_far() - promised_before, load.unavailable_so_far() - refused_before);
    let outbox = crate::check::outbox_len(&cluster).await;
    hosts[0].heal().expect("heal");
    let (admitting, drained) = recovered(&cluster, &mut buyers, &newcomers, fault).await;
    alerts.resolve(fault, "SeckillDependencyDown", &kafka_down).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    load.until_rooms_served(crate::RECOVERY_BOUND).await;
    let mut tally = load.finish().await;
    let slowest = buyers.answers.iter().map(|(_, took)| *took).max().unwrap_or_default();
    println!(
        "[{fault}] during the cut: {promised_during} promised, {refused_during} answered 503 by the load; the \
         outbox held {outbox:?} (bound {OUTBOX_BOUND}); a newcomer's first 503 after {first_503:?}, slowest \
         answer {slowest:?}; after the heal: admitting in {admitting:?}, outbox drained in {drained:?}; no \
         answer: {}",
        tally.no_answer
    );
    assert!(promised_during > 0, "[{fault}] the ingress admits into its outbox while the log is cut off");
    assert!(first_503.is_some() && refused_during > 0, "[{fault}] a full outbox is answered 503");
    assert!(outbox.is_some_and(|entries| entries <= OUTBOX_BOUND + 16), "[{fault}] the outbox holds to its bound");
    assert!(slowest < Duration::from_secs(5), "[{fault}] nobody waits on the cut log: {slowest:?}");
    tally.absorb(buyers.tally);
    settle_tally(&mut cluster, &vouchers, tally, fault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
async fn a_broker_isolated_with_a_minority_loses_no_promised_order() {
    let _turn = turn().await;
    let fault = "one broker of three isolated 20 s";
    let (_net, hosts, mut cluster, vouchers, load, mut buyers, _dir) =
        under_load_on_kafka_hosts(KafkaSettings::THREE, &[]).await;
    let newcomers = crate::sale::create_voucher(&cluster, 1_000, 1, 0).await;
    draw_made(&cluster, &vouchers).await;
    let promised_before = load.promised_so_far();
    // Broker 1 leads a share of every topic's partitions (three partitions,
    // three replicas, leaders spread): isolated, it is a minority of one.
    hosts[0].isolate().expect("isolate");
    let isolated_at = Instant::now();
    // Each newcomer's order is watched from its 202 until decided, while
    // the isolation goes on (20 s, whatever the decisions do) and after.
    let isolation = Duration::from_secs(20);
    let mut decisions = tokio::task::JoinSet::new();
    let mut i = 0;
    while isolated_at.elapsed() < isolation {
        let user = format!("during-{i}");
        if buyers.order(&cluster, &newcomers, &user).await == Some(StatusCode::ACCEPTED) {
            let order = buyers.tally.promised.last().expect("a 202 is tallied").order.clone();
            let (http, ingress, ordered_at) =
                (cluster.http.clone(), cluster.url(Service::Ingress), isolated_at.elapsed());
            decisions.spawn(async move { (ordered_at, decided(http, ingress, user, order, fault).await) });
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let promised_during = load.promised_so_far() - promised_before;
    hosts[0].heal().expect("heal");
    let (admitting, drained) = recovered(&cluster, &mut buyers, &newcomers, fault).await;
    let mut decisions: Vec<(Duration, Duration)> = decisions.join_all().await;
    decisions.sort();
    let before_heal = decisions.iter().filter(|(at, took)| *at + *took < isolation).count();
    let slowest = decisions.iter().map(|(_, took)| *took).max().unwrap_or_default();
    tokio::time::sleep(Duration::from_secs(3)).await;
    load.until_rooms_served(crate::RECOVERY_BOUND).await;
    let mut tally = load.finish().await;
    println!(
        "[{fault}] during: {promised_during} promised by the load; {} newcomers admitted, {before_heal} of \
         them decided before the heal, the slowest after {slowest:?} (the first three, ordered at and decided \
         after: {:?}); after the heal: admitting in {admitting:?}, outbox drained in {drained:?}; no answer: {}",
        decisions.len(),
        &decisions[..decisions.len().min(3)],
        tally.no_answer
    );
    assert!(promised_during > 0, "[{fault}] admissions go on");
    assert!(!decisions.is_empty(), "[{fault}] newcomers are admitted while a broker is isolated");
    tally.absorb(buyers.tally);
    settle_tally(&mut cluster, &vouchers, tally, fault).await;
}
