//! Redis cut off from the platform mid-sale, then healed. Redis runs on a
//! test host of its own; the services and the clients stay in the root namespace,
//! so the cut takes the ingress's admissions and relay and the processor's
//! compensations at once, silently (no reset: TCP waits on its timeouts).

use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::{Redis, RedisPersistence, TempDir};
use tokio::time::Instant;

use crate::alerts::Alerts;
use crate::buyers::{draw_made, recovered, Buyers};
use crate::check::Voucher;
use crate::cluster::Cluster;
use crate::load::Load;
use crate::settle::settle_tally;
use crate::{test_net, turn, CLIENTS, PAUSE};

/// The fault suite's platform on a Redis on a test host, under the mixed
/// load; with the net and Redis's host, which must outlive the platform.
async fn under_load_on_a_redis_host(
) -> (seckill_devstack::TestNet, seckill_devstack::Host, Cluster, Vec<Voucher>, Load, TempDir) {
    let dir = TempDir::new().expect("dir");
    let mut net = test_net();
    let host = net.host("redis").expect("a host for Redis");
    let redis = Redis::start_on(&host, &dir.path().join("redis"), RedisPersistence::AppendOnly).expect("redis starts");
    let cluster = tokio::task::block_in_place(|| Cluster::start_on_redis(redis));
    let vouchers = crate::sale::open_sales(&cluster).await;
    let load = Load::start(&cluster.http, cluster.entry(), "a", &vouchers, CLIENTS, PAUSE);
    (net, host, cluster, vouchers, load, dir)
}

/// How long Redis stays cut off.
const CUT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
async fn redis_cut_off_from_the_platform_loses_no_promised_order() {
    let _turn = turn().await;
    let fault = "Redis cut off 10 s";
    let (_net, host, mut cluster, vouchers, load, _dir) = under_load_on_a_redis_host().await;
    let newcomers = crate::sale::create_voucher(&cluster, 1_000, 1, 0).await;
    draw_made(&cluster, &vouchers).await;
    let (promised_before, refused_before) = (load.promised_so_far(), load.unavailable_so_far());

    let alerts = Alerts::watch(&cluster).await;
    let redis_down = [("dependency", "redis"), ("service", "ingress")];

    host.isolate().expect("cut");
    let cut_at = Instant::now();
    // Buyers during the cut: answered (503), not left hanging. The
    // operators' alert fires while it lasts.
    let mut buyers = Buyers::default();
    let during = async {
        for i in 0..5 {
            buyers.order(&cluster, &newcomers, &format!("during-{i}")).await;
        }
        tokio::time::sleep(CUT.saturating_sub(cut_at.elapsed())).await;
    };
    tokio::join!(alerts.fires(fault, "SeckillDependencyDown", &redis_down, CUT), during);
    let answers = buyers.answers.clone();
    let (promised_during, refused_during) =
        (load.promised_so_far() - promised_before, load.unavailable_so_far() - refused_before);
    host.heal().expect("heal");
    let (admitting, drained) = recovered(&cluster, &mut buyers, &newcomers, fault).await;
    alerts.resolve(fault, "SeckillDependencyDown", &redis_down).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    load.until_rooms_served(crate::RECOVERY_BOUND).await;
    let mut tally = load.finish().await;
    println!(
        "[{fault}] during the cut: {promised_during} promised, {refused_during} answered 503 by the load; a \
         newcomer's answers: {answers:?}; after the heal: admitting again in {admitting:?}, outbox drained in \
         {drained:?}; no answer: {}",
        tally.no_answer
    );
    for (status, took) in &answers {
        assert_eq!(*status, Some(StatusCode::SERVICE_UNAVAILABLE), "[{fault}] a buyer during the cut is told 503");
        // One admission call and at most three settle asks, each up to the
        // 2-s Redis timeout: under the client's 10 s.
        assert!(*took < Duration::from_millis(9_000), "[{fault}] and soon: {took:?}");
    }
    tally.absorb(buyers.tally);
    settle_tally(&mut cluster, &vouchers, tally, fault).await;
}
