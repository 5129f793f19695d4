//! Jepsen's Redis scenario: a Redis Cluster master partitioned mid-sale, a
//! replica promoted, the old master healed. Every node runs on a test host
//! of its own; the services and the clients stay in the root namespace. The
//! ingress answers `202` only once a replica has the admission
//! (`replica_acks = "on"`), so the promise is what is under test: every
//! `202` must survive the promotion, and the checker must find Redis, the
//! log and the view agreeing afterwards.
//!
//! Two cuts: the master isolated from everything (its replicas, the other
//! masters, the clients), and the master cut from the other nodes only, the
//! services still reaching it, as Jepsen's clients reached the minority
//! master. In the second, the master acknowledges writes alone until it
//! sees itself in the minority (the node timeout): admissions are then
//! `503`s (no replica acknowledged), but the processor's releases are not
//! waited for, and the promotion loses them (docs/CLUSTER.md, "What the
//! wait does not cover"). That test fails until they are.
//!
//! Each master has two replicas: when one is promoted the other follows it,
//! so the promoted master has a replica to acknowledge at once and the slot
//! admits again during the partition, as on the majority side of a real one.
//! (With one replica each, the promoted master would answer `503` until the
//! old master rejoined.)

use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::{user_token, Host, RedisCluster, TempDir, TestNet};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::buyers::{draw_made, recovered, Buyers};
use crate::check::Voucher;
use crate::cluster::{Cluster, Service};
use crate::load::{Load, Promised, Tally};
use crate::settle::settle_tally;
use crate::{test_net, turn, CLIENTS, PAUSE, RECOVERY_BOUND};

const MASTERS: usize = 3;
const REPLICAS: usize = 2;
/// The least time the master stays cut off: past the node timeout (2 s)
/// and the election, and some time admitting on the promoted replica.
const PARTITION: Duration = Duration::from_secs(10);
/// How long the failover may take: the node timeout, the election (a
/// replica waits 0.5 to 1 s, more when behind the other), the clients'
/// next look at the slot map. A bound, not the figure: that is printed.
const FAILOVER_BOUND: Duration = Duration::from_secs(20);
/// How often a probe order is sent to the partitioned master's slot.
const PROBE_EVERY: Duration = Duration::from_millis(200);

/// The platform on a Redis Cluster of test hosts, under the mixed load;
/// with the net, which must outlive the platform.
async fn under_load_on_a_cluster_of_hosts() -> (TestNet, Cluster, Vec<Voucher>, Load, TempDir) {
    let dir = TempDir::new().expect("dir");
    let mut net = test_net();
    let hosts: Vec<Host> = (1..=MASTERS * (1 + REPLICAS))
        .map(|n| net.host(&format!("redis-{n}")).expect("a host for a Redis node"))
        .collect();
    let cluster = tokio::task::block_in_place(|| {
        let redis = RedisCluster::start_on(&hosts, &dir.path().join("redis"), MASTERS, REPLICAS)
            .expect("the Redis Cluster starts on its hosts");
        Cluster::start_on_redis_cluster(redis)
    });
    let vouchers = crate::sale::open_sales(&cluster).await;
    let load = Load::start(&cluster.http, cluster.entry(), "a", &vouchers, CLIENTS, PAUSE);
    (net, cluster, vouchers, load, dir)
}

fn nodes(cluster: &Cluster) -> &RedisCluster {
    cluster.redis.cluster().expect("the platform runs on a Redis Cluster")
}

/// The hash slot of `voucher`'s keys (one slot: the voucher is not split).
fn slot_of(voucher: &str) -> u16 {
    seckill_gate::slot(format!("v:{voucher}").as_bytes())
}

/// A new sale (1,000,000 units, one a user) whose keys are on the master
/// on `master`, answering `202`: where the test's probes buy.
async fn sale_on(cluster: &Cluster, master: u16, buyers: &mut Buyers) -> String {
    for _ in 0..40 {
        let voucher = crate::sale::create_voucher(cluster, 1_000_000, 1, 0).await;
        let on = tokio::task::block_in_place(|| nodes(cluster).master_of(slot_of(&voucher))).expect("slot map");
        if on != master {
            continue;
        }
        for attempt in 0..50 {
            if buyers.order(cluster, &voucher, &format!("before-{attempt}")).await == Some(StatusCode::ACCEPTED) {
                return voucher;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the sale {voucher} on port {master} never admitted before the partition");
    }
    panic!("no new sale landed on the master on port {master} in 40 tries");
}

/// One probe's answer, timed from the cut.
struct Probe {
    user: String,
    sent: Duration,
    answered: Duration,
    status: Option<StatusCode>,
    order: Option<String>,
}

/// Orders one unit of `voucher` as `user`; `cut` is when the partition
/// began.
async fn probe(http: reqwest::Client, ingress: String, voucher: String, user: String, cut: Instant) -> Probe {
    let sent = cut.elapsed();
    let answer =
        http.post(format!("{ingress}/api/v1/vouchers/{voucher}/orders")).bearer_auth(user_token(&user)).send().await;
    let (status, order) = match answer {
        Ok(answer) => {
            let status = answer.status();
            let body: serde_json::Value = answer.json().await.unwrap_or_default();
            (Some(status), body["order_id"].as_str().map(str::to_owned))
        }
        Err(_) => (None, None),
    };
    Probe { user, sent, answered: cut.elapsed(), status, order }
}

/// The probes' answers for the checker, as the load's are.
fn tally_of(probes: &[Probe], voucher: &str) -> Tally {
    let mut tally = Tally::default();
    for probe in probes {
        match (probe.status, &probe.order) {
            (None, _) => tally.no_answer += 1,
            (Some(StatusCode::ACCEPTED), Some(order)) => tally.promised.push(Promised {
                order: order.clone(),
                voucher: voucher.to_owned(),
                user: probe.user.clone(),
                quantity: 1,
            }),
            (Some(StatusCode::SERVICE_UNAVAILABLE), Some(order)) => {
                tally.named_in_503.insert(order.clone());
            }
            _ => {}
        }
    }
    tally
}

/// The replication offsets of `ports`, as each reports it (None: no answer,
/// as from a node cut off).
fn offsets(nodes: &RedisCluster, ports: &[u16]) -> Vec<(u16, Option<u64>)> {
    tokio::task::block_in_place(|| {
        ports.iter().map(|port| (*port, nodes.replication(*port).ok().map(|seen| seen.offset))).collect()
    })
}

/// The replica of `old` that a replica sees serving `slot` now, if one does.
fn promoted(nodes: &RedisCluster, old: u16, replicas: &[u16], slot: u16) -> Option<u16> {
    tokio::task::block_in_place(|| {
        replicas
            .iter()
            .find_map(|replica| nodes.master_of_seen_from(*replica, slot).ok().flatten())
            .filter(|port| *port != old)
    })
}

/// Whether the node on `old` is a replica of `master`, its link up.
fn follows(nodes: &RedisCluster, old: u16, master: u16) -> bool {
    tokio::task::block_in_place(|| {
        nodes.replication(old).is_ok_and(|seen| {
            !seen.master && seen.linked && seen.following.and_then(|(ip, port)| nodes.port_at(ip, port)) == Some(master)
        })
    })
}

/// How the master is cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// From everything: its replicas, the other masters, the clients.
    Isolated,
    /// From the other nodes only: the services still reach it, as
    /// Jepsen's clients reached the minority master.
    FromPeers,
}

/// What the partition saw.
struct Partition {
    probes: Vec<Probe>,
    promoted: u16,
    promoted_in: Duration,
    /// When a probe sent after the promotion was first answered `202`.
    admitting_in: Option<Duration>,
    lasted: Duration,
}

/// Probes `voucher` every [`PROBE_EVERY`] from the cut on, and watches the
/// replicas of `old` for a promotion, until a replica serves `slot` and
/// [`PARTITION`] has passed, and (the master isolated) a probe sent after
/// the promotion was answered `202`.
async fn through_the_partition(
    cluster: &Cluster,
    (old, replicas): (u16, &[u16]),
    voucher: &str,
    (how, cut): (Cut, Instant),
) -> Partition {
    let (slot, ingress) = (slot_of(voucher), cluster.url(Service::Ingress));
    let mut running = JoinSet::new();
    let mut probes = Vec::new();
    let mut promotion: Option<(u16, Duration)> = None;
    let mut next_probe = Instant::now();
    for n in 0_u64.. {
        assert!(cut.elapsed() < RECOVERY_BOUND, "no replica promoted and admitting within {RECOVERY_BOUND:?}");
        if Instant::now() >= next_probe {
            let user = format!("partition-{n}");
            running.spawn(probe(cluster.http.clone(), ingress.clone(), voucher.to_owned(), user, cut));
            next_probe += PROBE_EVERY;
        }
        if promotion.is_none() {
            promotion = promoted(nodes(cluster), old, replicas, slot).map(|port| (port, cut.elapsed()));
        }
        while let Some(done) = running.try_join_next() {
            probes.push(done.expect("a probe"));
        }
        let admitting = promotion.and_then(|(_, at)| {
            probes.iter().filter(|p| p.status == Some(StatusCode::ACCEPTED) && p.sent >= at).map(|p| p.answered).min()
        });
        if let Some((promoted, promoted_in)) = promotion {
            if cut.elapsed() >= PARTITION && (admitting.is_some() || how == Cut::FromPeers) {
                // The probes still out are answered before the heal.
                while let Some(done) = running.join_next().await {
                    probes.push(done.expect("a probe"));
                }
                let admitting_in = admitting;
                return Partition { probes, promoted, promoted_in, admitting_in, lasted: cut.elapsed() };
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unreachable!("2^64 probes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
async fn a_redis_cluster_master_partitioned_and_failed_over_loses_no_promised_order() {
    partitioned(Cut::Isolated, "Redis Cluster master partitioned, replica promoted, healed").await;
}

/// Fails today: the releases the minority master acknowledged alone are
/// lost with it, and Redis then counts units the log gave back (9 to 28
/// units of the largest sale in four runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
async fn a_redis_cluster_master_cut_from_its_peers_but_not_its_clients_loses_no_promised_order() {
    partitioned(Cut::FromPeers, "Redis Cluster master cut from its peers, clients still reach it").await;
}

/// The scenario: the master of the largest sale cut off as `how` says,
/// its replica promoted, the master healed; judged by the checker.
async fn partitioned(how: Cut, fault: &str) {
    let _turn = turn().await;
    let (_net, mut cluster, vouchers, load, _dir) = under_load_on_a_cluster_of_hosts().await;
    draw_made(&cluster, &vouchers).await;

    // The master of the largest sale (most of the load's orders, and the
    // one the admin pauses and resumes).
    let slot = slot_of(&vouchers[0].id);
    let old = tokio::task::block_in_place(|| nodes(&cluster).master_of(slot)).expect("slot map");
    let replicas = tokio::task::block_in_place(|| nodes(&cluster).replicas_of(old)).expect("slot map");
    assert_eq!(replicas.len(), REPLICAS, "the master on port {old} has its replicas");
    let on_it: Vec<usize> = (0..vouchers.len())
        .filter(|i| {
            tokio::task::block_in_place(|| nodes(&cluster).master_of(slot_of(&vouchers[*i].id))).ok() == Some(old)
        })
        .collect();
    let mut buyers = Buyers::default();
    let voucher = sale_on(&cluster, old, &mut buyers).await;
    let host = nodes(&cluster).host_of(old).expect("the master runs on a test host").clone();

    let (promised_before, refused_before) = (load.promised_so_far(), load.unavailable_so_far());
    let master_before = offsets(nodes(&cluster), &[old]);
    match how {
        Cut::Isolated => host.isolate().expect("isolate the master"),
        Cut::FromPeers => {
            for peer in nodes(&cluster).ports().into_iter().filter(|port| *port != old) {
                let peer = nodes(&cluster).host_of(peer).expect("every node on a host").ip();
                host.cut_from(peer).expect("cut the master from a peer");
            }
        }
    }
    let cut = Instant::now();
    let replicas_at_cut = offsets(nodes(&cluster), &replicas);
    let partition = through_the_partition(&cluster, (old, &replicas), &voucher, (how, cut)).await;
    let (promised_during, refused_during) =
        (load.promised_so_far() - promised_before, load.unavailable_so_far() - refused_before);

    host.heal().expect("heal the old master");
    let healed = Instant::now();
    while !follows(nodes(&cluster), old, partition.promoted) {
        assert!(healed.elapsed() < RECOVERY_BOUND, "[{fault}] the old master never rejoined as a replica");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rejoined_in = healed.elapsed();
    let (admitting, drained) = recovered(&cluster, &mut buyers, &voucher, fault).await;
    load.until_rooms_served(RECOVERY_BOUND).await;
    let mut tally = load.finish().await;

    let probes = &partition.probes;
    let count = |status: StatusCode| probes.iter().filter(|p| p.status == Some(status)).count();
    let first_503 = probes.iter().find(|p| p.status == Some(StatusCode::SERVICE_UNAVAILABLE)).map(|p| p.answered);
    let slowest = probes.iter().map(|p| p.answered - p.sent).max().unwrap_or_default();
    println!(
        "[{fault}] the master on port {old} (slot {slot}, sales {on_it:?} of the five and the probes' own) cut off \
         ({how:?}) for {:?}: replica on port {} promoted after {:?}, the slot admitting (202) again after {:?}; during the \
         partition the load had {promised_during} orders promised and {refused_during} answered 503; the probes \
         ({} sent, one each {PROBE_EVERY:?}): {} answered 202, {} answered 503 (the first after {first_503:?}), {} \
         unanswered, slowest answer {slowest:?}; after the heal: the old master a replica of the new one in \
         {rejoined_in:?}, admitting in {admitting:?}, outboxes drained in {drained:?}; replication offsets: the old \
         master {master_before:?} before the cut, its replicas {replicas_at_cut:?} at it; no answer: {}",
        partition.lasted,
        partition.promoted,
        partition.promoted_in,
        partition.admitting_in,
        probes.len(),
        count(StatusCode::ACCEPTED),
        count(StatusCode::SERVICE_UNAVAILABLE),
        probes.iter().filter(|p| p.status.is_none()).count(),
        tally.no_answer
    );
    assert!(partition.promoted_in < FAILOVER_BOUND, "[{fault}] a replica promoted within {FAILOVER_BOUND:?}");
    if how == Cut::Isolated {
        let admitting = partition.admitting_in.expect("the partition ends once admitting");
        assert!(admitting < FAILOVER_BOUND, "[{fault}] admitting again within {FAILOVER_BOUND:?}: {admitting:?}");
    }
    tally.absorb(tally_of(probes, &voucher));
    tally.absorb(buyers.tally);
    settle_tally(&mut cluster, &vouchers, tally, fault).await;
}
