//! A zombie processor: the processor deciding the sale (on a test host of
//! its own, one group and one Cassandra keyspace with a second processor)
//! loses the stock store mid-batch, then Kafka, long enough for the group
//! to expire it and give its partitions to the second, which joins then;
//! its store link comes back while it is still cut off from Kafka, so the
//! write it was making lands after the second took over. The store's fence
//! (the epoch each processor takes on an assignment, written in every
//! voucher's conditional batch) must refuse it: nothing is decided twice,
//! and no late outcome of the zombie's follows the new owner's.
//!
//! Kafka, Redis and Cassandra run on test hosts of their own, and the
//! zombie on a fourth: the drivers learn the servers' addresses from the
//! servers, so the servers listen where every host reaches them. The other
//! processor, the ingress, the projector and the payment sandbox stay in
//! the root namespace; the zombie reaches the sandbox through a forwarder
//! on the root namespace's bridge address.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::{
    unique_namespace, Cassandra, Host, Kafka, KafkaSettings, Redis, RedisPersistence, Server, TempDir,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::buyers::{decided, draw_made, Buyers};
use crate::cluster::{Cluster, Service};
use crate::load::Load;
use crate::settle::settle_tally;
use crate::{test_net, turn, CLIENTS, PAUSE};

/// The zombie's HTTP port, on its host's address.
const ZOMBIE_PORT: u16 = 18081;
/// How long the zombie stays cut off from the store: past the group's
/// session (6 s) and the rebalance that gives its partitions away.
const STORE_CUT: Duration = Duration::from_secs(15);
/// The longest it stays cut off from Kafka after that, waiting for its
/// write to land: TCP resends a segment the cut dropped only after its
/// doubled timeout (about 13 s after a 15-s cut), so the write arrives
/// some seconds after the heal.
const FENCED_WITHIN: Duration = Duration::from_secs(45);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
async fn a_processor_expired_from_its_group_while_writing_decides_nothing_twice() {
    let _turn = turn().await;
    let fault = "zombie processor";
    let dir = TempDir::new().expect("dir");
    let mut net = test_net();
    let [kafka_host, redis_host, store_host, zombie_host]: [Host; 4] =
        ["kafka-1", "redis", "cassandra", "zombie"].map(|label| net.host(label).expect("a host"));
    let (kafka, redis, cassandra) = tokio::task::block_in_place(|| {
        let kafka =
            Kafka::start_on(std::slice::from_ref(&kafka_host), &dir.path().join("kafka"), KafkaSettings::SINGLE)
                .expect("kafka starts on its host");
        let redis = Redis::start_on(&redis_host, &dir.path().join("redis"), RedisPersistence::AppendOnly)
            .expect("redis starts on its host");
        let cassandra = Cassandra::start_on(&store_host, &dir.path().join("cassandra")).expect("cassandra starts");
        (kafka, redis, cassandra)
    });
    let store = vec![
        ("SECKILL_STORE__BACKEND".to_owned(), "scylla".to_owned()),
        ("SECKILL_STORE__NODES".to_owned(), format!("[{}]", cassandra.addr())),
        ("SECKILL_STORE__KEYSPACE".to_owned(), unique_namespace("z")),
    ];
    let mut cluster = tokio::task::block_in_place(|| Cluster::start_on_hosts(kafka, redis, store));
    // The zombie-to-be decides everything until the fault: the second
    // processor joins only as it is cut off.
    assert!(tokio::task::block_in_place(|| cluster.stop(Service::Processor)), "the processor stops cleanly");

    // The second processor, on its host; the sandbox reached through the
    // root namespace's bridge address.
    let sandbox: SocketAddr =
        cluster.url(Service::Payments).trim_start_matches("http://").parse().expect("the sandbox's address");
    let forwarder = forward(SocketAddr::from((net.root_ip(), 0)), sandbox).await;
    let mut zombie = tokio::task::block_in_place(|| {
        start_zombie(&cluster, &zombie_host, &format!("http://{forwarder}"), cluster.dir.path())
    });
    let zombie_log = cluster.dir.path().join("zombie.log");
    until_logged(&zombie_log, "Partitions assigned", Duration::from_secs(60))
        .await
        .expect("the zombie-to-be joins the processors' group");
    // One order decided first: the topics and both groups settled, so the
    // draw's 4-s entry window sees the load's entrants.
    let mut buyers = Buyers::default();
    let warm = crate::sale::create_voucher(&cluster, 10, 1, 0).await;
    assert_eq!(buyers.order(&cluster, &warm, "warm-up").await, Some(StatusCode::ACCEPTED), "the platform admits");
    let order = buyers.tally.promised[0].order.clone();
    decided(cluster.http.clone(), cluster.url(Service::Ingress), "warm-up".to_owned(), order, fault).await;

    let vouchers = crate::sale::open_sales(&cluster).await;
    let load = Load::start(&cluster.http, cluster.entry(), "a", &vouchers, CLIENTS, PAUSE);
    draw_made(&cluster, &vouchers).await;
    let zombie_metrics = format!("http://{}:{ZOMBIE_PORT}/metrics", zombie_host.ip());
    let decided_by_zombie = counter(&cluster.http, &zombie_metrics, "seckill_events_total", "OrderAccepted").await;
    assert!(decided_by_zombie > 0.0, "[{fault}] the zombie-to-be decides the orders first");

    // Mid-batch: the store stops answering it, then the log.
    store_host.cut_from(zombie_host.ip()).expect("cut from the store");
    let cut_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    kafka_host.cut_from(zombie_host.ip()).expect("cut from kafka");
    let promised_before = load.promised_so_far();
    // The other processor joins; the group gives it everything once the
    // zombie's session (6 s) has run out.
    tokio::task::block_in_place(|| cluster.start_service(Service::Processor));
    let processor_log = cluster.dir.path().join("processor.log");
    let took_over = until_logged(&processor_log, "Took a fencing epoch", STORE_CUT).await;
    tokio::time::sleep(STORE_CUT.saturating_sub(cut_at.elapsed())).await;
    // The store is back for the zombie alone: whatever it was writing
    // lands now, after the other processor took its partitions over.
    store_host.heal().expect("heal the store's link");
    let fenced = until_logged(&zombie_log, "Fenced", FENCED_WITHIN).await;
    let promised_during = load.promised_so_far() - promised_before;
    kafka_host.heal().expect("heal kafka's link");
    let healed_at = cut_at.elapsed();

    tokio::time::sleep(Duration::from_secs(3)).await;
    load.until_rooms_served(crate::RECOVERY_BOUND).await;
    let mut tally = load.finish().await;
    let after = counter(&cluster.http, &zombie_metrics, "seckill_events_total", "OrderAccepted").await;
    println!(
        "[{fault}] decided {decided_by_zombie} orders before the cuts; {promised_during} promised by the load \
         while it was cut off; the other processor took its epoch {took_over:?} after it joined; the zombie's \
         store write refused as fenced {fenced:?} after the store's heal; both links healed {healed_at:?} \
         after the first cut; it decided {} orders after rejoining; no answer: {}",
        after - decided_by_zombie,
        tally.no_answer
    );
    assert!(promised_during > 0, "[{fault}] admissions go on");
    assert!(
        fenced.is_some(),
        "[{fault}] the zombie's write after the takeover is refused as fenced (its log: {})",
        zombie_log.display()
    );
    tally.absorb(buyers.tally);
    settle_tally(&mut cluster, &vouchers, tally, fault).await;
    zombie.kill();
    drop(cassandra);
}

/// The second processor, as the cluster configures its own (group, store,
/// Redis, Kafka), on `host`, its sandbox at `payments`.
fn start_zombie(cluster: &Cluster, host: &Host, payments: &str, dir: &std::path::Path) -> Server {
    let mut command: Command = cluster.command(Service::Processor, &["serve", "processor"]);
    command
        .env("SECKILL_HTTP__LISTEN", format!("{}:{ZOMBIE_PORT}", host.ip()))
        .env("SECKILL_PAYMENTS__BASE_URL", payments)
        .env("RUST_LOG", "info");
    // Only the cluster's settings: a host's command would otherwise take
    // this process's environment too (the test run's variables).
    let mut wrapped = host.wrap(&command);
    wrapped.env_clear();
    wrapped.envs(command.get_envs().filter_map(|(key, value)| Some((key, value?))));
    let mut server = Server::spawn("zombie processor", wrapped, dir, "zombie").expect("it starts");
    host.wait_listening(&mut server, ZOMBIE_PORT, Duration::from_secs(60)).expect("it listens");
    server
}

/// Copies TCP connections made to `listen` (port 0: a free one) through to
/// `upstream`, until the runtime ends; the address it listens on.
async fn forward(listen: SocketAddr, upstream: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind(listen).await.expect("the forwarder binds");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    addr
}

/// How long until `log` holds `line`, None after `within`.
async fn until_logged(log: &std::path::Path, line: &str, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < within {
        if std::fs::read_to_string(log).is_ok_and(|text| text.contains(line)) {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The sum of the series of counter `name` whose labels contain `label`.
async fn counter(http: &reqwest::Client, url: &str, name: &str, label: &str) -> f64 {
    let text = http.get(url).send().await.expect("metrics answer").text().await.expect("text");
    text.lines()
        .filter(|line| line.starts_with(name) && line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
