//! The test hosts themselves: a server on a host answers from the root
//! namespace and from other hosts; a cut and an isolation do what they say
//! and heal; nothing is left once the net is dropped, and
//! what a killed run left is removed by the next.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use seckill_devstack::{Host, Redis, RedisPersistence, TempDir};

use crate::test_net;

/// `PING` to the Redis at `ip`, from `from` (None: the root namespace),
/// waiting at most 2 s: its round trip, or None if no answer came.
fn ping(from: Option<&Host>, ip: Ipv4Addr) -> Option<Duration> {
    let args = ["-h", &ip.to_string(), "-p", "6379", "PING"];
    // `timeout` bounds a connect or a reply that never comes.
    let mut command = Command::new("timeout");
    command.arg("2");
    if let Some(host) = from {
        command.args(["ip", "netns", "exec", host.netns()]);
    }
    let started = Instant::now();
    let output = command.arg("redis-cli").args(args).output();
    let answered = output.is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "PONG");
    answered.then(|| started.elapsed())
}

#[test]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
fn cuts_and_isolation_do_what_they_say_and_heal() {
    let dir = TempDir::new().expect("dir");
    let mut net = test_net();
    let (server, client) = (net.host("redis").expect("host"), net.host("client").expect("host"));
    let redis = Redis::start_on(&server, &dir.path().join("redis"), RedisPersistence::None).expect("redis on a host");
    assert!(redis.url().contains(&server.ip().to_string()), "{}", redis.url());
    let root = net.root_ip();
    assert!(ping(None, server.ip()).is_some(), "the root namespace reaches a host");
    assert!(ping(Some(&client), server.ip()).is_some(), "one host reaches another");

    server.isolate().expect("isolate");
    assert_eq!(ping(None, server.ip()), None, "an isolated host is cut from the root namespace");
    assert_eq!(ping(Some(&client), server.ip()), None, "and from the other hosts");
    server.heal().expect("heal");
    assert!(ping(None, server.ip()).is_some(), "a healed host answers again");

    server.cut_from(root).expect("cut");
    assert_eq!(ping(None, server.ip()), None, "cut from the root namespace");
    assert!(ping(Some(&client), server.ip()).is_some(), "a cut takes only the link it names");
    server.heal().expect("heal");

    let took = ping(None, server.ip()).expect("answers");
    println!("[test hosts] a PING from the root namespace to a healed host: {took:?}");

    let names: Vec<String> = net.hosts().iter().map(|host| host.netns().to_owned()).collect();
    drop(redis);
    drop(net);
    let left = netns_list();
    assert!(names.iter().all(|name| !left.contains(name)), "the hosts are removed with the net: {left}");
}

/// What `ip netns list` says.
fn netns_list() -> String {
    let output = Command::new("ip").args(["netns", "list"]).output().expect("ip runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
fn what_a_killed_run_left_is_removed_by_the_next() {
    // A process that has exited: the names it made are leftovers.
    let mut gone = Command::new("true").spawn().expect("true runs");
    gone.wait().expect("exits");
    let pid = gone.id();
    let mut base36 = String::new();
    let mut n = pid;
    loop {
        base36.insert(0, char::from_digit(n % 36, 36).expect("digit"));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    let (netns, bridge) = (format!("skn{base36}_0-h1"), format!("skn{base36}_0b"));
    let run = |args: &[&str]| assert!(Command::new("ip").args(args).status().expect("ip").success(), "{args:?}");
    run(&["netns", "add", &netns]);
    run(&["link", "add", &bridge, "type", "bridge"]);

    let net = test_net();
    assert!(!netns_list().lines().any(|line| line.starts_with(&netns)), "the leftover host is removed");
    let links = Command::new("ip").args(["-o", "link", "show"]).output().expect("ip runs");
    assert!(!String::from_utf8_lossy(&links.stdout).contains(&bridge), "the leftover bridge is removed");
    drop(net);
}
