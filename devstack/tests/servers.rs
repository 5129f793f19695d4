//! The local servers as the development run and the tests use them: a
//! Kafka node that keeps its cluster and ports across restarts, the test
//! run's shared broker, and servers left running by a killed run, found and
//! stopped by the next start.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use seckill_devstack::{Kafka, KafkaSettings, Leftover, Redis, RedisPersistence, TempDir, TestInfra};

/// Whether `pid` is a running process (an unreaped zombie is not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rfind(')').map(|end| stat[end + 1..].split_whitespace().next() != Some("Z")))
        .unwrap_or(false)
}

/// Redis answers PING on `url` (`redis://127.0.0.1:PORT/`).
fn redis_answers(url: &str) -> bool {
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    let Ok(mut stream) = TcpStream::connect(addr) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut answer = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
}

#[test]
fn kafka_keeps_its_cluster_and_ports_across_a_restart() {
    let dir = TempDir::new().expect("dir");
    let mut kafka = Kafka::start(dir.path(), KafkaSettings::SINGLE).expect("kafka starts (run scripts/setup)");
    let (brokers, id) = (kafka.brokers(), std::fs::read_to_string(dir.path().join("cluster.id")).expect("id"));
    assert_eq!(id.trim().len(), 22, "a cluster id of 16 bytes in base64url: {id}");
    assert!(kafka.stop(), "a clean shutdown on SIGTERM");
    kafka.start_again().expect("kafka starts again");
    assert_eq!(kafka.brokers(), brokers);
    let log = std::fs::read_to_string(kafka.node_log(0)).expect("log");
    assert!(log.contains(id.trim()) || log.contains("Kafka Server started"), "{log}");
    assert!(TcpStream::connect(kafka.brokers()).is_ok());
    // A second handle on the same directory keeps the same ports and id.
    let pid = kafka.pid().expect("running");
    std::mem::forget(kafka);
    let mut again = Kafka::start(dir.path(), KafkaSettings::SINGLE).expect("kafka starts on the same data");
    assert!(!running(pid), "the first node was stopped as a leftover");
    assert_eq!(again.brokers(), brokers);
    assert_eq!(std::fs::read_to_string(dir.path().join("cluster.id")).expect("id"), id);
    again.stop();
}

#[test]
fn tests_share_the_runs_broker_and_keep_apart_by_name() {
    let infra = TestInfra::start().expect("infra starts");
    let other = TestInfra::start().expect("a second infra starts");
    assert_eq!(infra.brokers, other.brokers, "one broker per run");
    assert_ne!(infra.namespace, other.namespace);
    assert_ne!(infra.redis.url(), other.redis.url(), "a Redis each");
    assert!(TcpStream::connect(&infra.brokers).is_ok());
}

/// Item 13: `seckill dev` killed with SIGKILL leaves its servers running,
/// each in its own process group. The next start must find them by their
/// pid files, stop them, and run servers of its own on the same data.
#[test]
fn servers_left_by_a_killed_run_are_stopped_by_the_next_start() {
    let dir = TempDir::new().expect("dir");
    let (redis_dir, kafka_dir) = (dir.path().join("redis"), dir.path().join("kafka"));
    let start = || {
        let redis = Redis::start(&redis_dir, 0, RedisPersistence::AppendOnly).expect("redis starts");
        let kafka = Kafka::start(&kafka_dir, KafkaSettings::SINGLE).expect("kafka starts");
        (redis, kafka)
    };
    let (redis, kafka) = start();
    let old = [redis.pid(), kafka.pid()].map(|pid| pid.expect("running"));
    // The parent dies without stopping anything: no handle is dropped.
    std::mem::forget((redis, kafka));
    assert!(old.iter().all(|&pid| running(pid)));

    assert_eq!(Kafka::stop_leftover(&kafka_dir).expect("kafka"), Leftover::Stopped { pid: old[1] });
    assert_eq!(Redis::stop_leftover(&redis_dir).expect("redis"), Leftover::Stopped { pid: old[0] });
    assert!(old.iter().all(|&pid| !running(pid)), "every leftover stopped");
    assert_eq!(Redis::stop_leftover(&redis_dir).expect("again"), Leftover::None, "pid files removed");
    assert_eq!(Kafka::stop_leftover(&kafka_dir).expect("again"), Leftover::None, "pid files removed");

    let (mut redis, mut kafka) = start();
    assert!(redis_answers(&redis.url()));
    assert!(TcpStream::connect(kafka.brokers()).is_ok());
    kafka.stop();
    redis.stop();
}

/// Starting stops a leftover by itself too, without a separate call.
#[test]
fn a_start_stops_the_leftover_in_its_directory() {
    let dir = TempDir::new().expect("dir");
    let redis = Redis::start(dir.path(), 0, RedisPersistence::None).expect("redis starts");
    let old = redis.pid().expect("running");
    std::mem::forget(redis);
    let mut again = Redis::start(dir.path(), 0, RedisPersistence::None).expect("redis starts again");
    assert!(!running(old));
    assert!(redis_answers(&again.url()));
    again.stop();
}

/// A pid file may name a pid the system has since given to another
/// process: that process is left alone.
#[test]
fn a_pid_file_naming_an_unrelated_process_is_left_alone() {
    let dir = TempDir::new().expect("dir");
    let mut unrelated = std::process::Command::new("sleep").arg("60").spawn().expect("sleep");
    std::fs::write(dir.path().join("redis.pid"), unrelated.id().to_string()).expect("pid file");
    assert_eq!(
        Redis::stop_leftover(dir.path()).expect("checked"),
        Leftover::StalePidFile { pid: Some(unrelated.id()) }
    );
    assert!(running(unrelated.id()), "not signalled");
    let mut redis = Redis::start(dir.path(), 0, RedisPersistence::None).expect("redis starts");
    assert!(running(unrelated.id()));
    redis.stop();
    let _ = unrelated.kill();
    let _ = unrelated.wait();
}
