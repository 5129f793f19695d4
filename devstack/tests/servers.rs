//! The local servers as the development run and the tests use them: a
//! private PostgreSQL cluster that keeps its databases across restarts, a
//! broker whose log is on it, and servers left running by a killed run,
//! found and stopped by the next start.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use seckill_devstack::{
    Broker, BrokerStorage, Leftover, PgSettings, Postgres, Redis, RedisPersistence, TempDir, TestDatabase, TestInfra,
};

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

/// The tables the broker created in its database, as a sign it uses it.
fn broker_tables(postgres: &Postgres, database: &str) -> String {
    let tables = "select string_agg(tablename, ',' order by tablename) from pg_tables \
                  where tablename in ('cluster', 'record', 'topic')";
    postgres.admin().query_in(database, tables).expect("query")
}

#[test]
fn postgres_keeps_its_databases_across_a_restart() {
    let dir = TempDir::new().expect("dir");
    let mut postgres = Postgres::start(&dir.path().join("postgres"), 0, PgSettings::TEST).expect("postgres starts");
    assert!(postgres.admin().create_database("kept").expect("create"), "a new database");
    assert!(!postgres.admin().create_database("kept").expect("create again"), "created once");
    postgres.stop();
    postgres.start_again().expect("postgres starts again");
    assert_eq!(postgres.admin().query("select datname from pg_database where datname = 'kept'").expect("q"), "kept");
    postgres.admin().drop_database("kept").expect("drop");
    assert_eq!(postgres.admin().query("select count(*) from pg_database where datname = 'kept'").expect("q"), "0");
    postgres.stop();
}

#[test]
fn a_test_broker_keeps_its_log_in_a_database_of_its_own() {
    let infra = TestInfra::start().expect("infra starts");
    let other = TestInfra::start().expect("a second infra starts");
    let BrokerStorage::Postgres(url) = infra.broker.storage() else { panic!("not on PostgreSQL") };
    assert!(url.ends_with(&format!("/{}", infra.namespace)), "{url}");
    assert_ne!(infra.broker.storage(), other.broker.storage());
    let admin = seckill_devstack::test_postgres().expect("the run's server");
    let exists = format!("select count(*) from pg_database where datname = '{}'", infra.namespace);
    assert_eq!(admin.query(&exists).expect("query"), "1");
    drop(infra);
    assert_eq!(admin.query(&exists).expect("query"), "0", "dropped with its infra");
}

/// Item 13: `seckill dev` killed with SIGKILL leaves its servers running,
/// each in its own process group. The next start must find them by their
/// pid files, stop them, and run servers of its own on the same data.
#[test]
fn servers_left_by_a_killed_run_are_stopped_by_the_next_start() {
    let dir = TempDir::new().expect("dir");
    let (redis_dir, pg_dir, broker_dir) =
        (dir.path().join("redis"), dir.path().join("postgres"), dir.path().join("broker"));
    let start = || {
        let redis = Redis::start(&redis_dir, 0, RedisPersistence::AppendOnly).expect("redis starts");
        let postgres = Postgres::start(&pg_dir, 0, PgSettings::DURABLE).expect("postgres starts");
        postgres.admin().create_database("seckill").expect("database");
        let broker = Broker::start(&broker_dir, 0, BrokerStorage::Postgres(postgres.database_url("seckill")))
            .expect("broker starts");
        (redis, postgres, broker)
    };
    let (redis, postgres, broker) = start();
    let old = [redis.pid(), postgres.pid(), broker.pid()].map(|pid| pid.expect("running"));
    // The parent dies without stopping anything: no handle is dropped.
    std::mem::forget((redis, postgres, broker));
    assert!(old.iter().all(|&pid| running(pid)));

    // The next run stops them in order: the broker (a PostgreSQL client) first.
    assert_eq!(Broker::stop_leftover(&broker_dir).expect("broker"), Leftover::Stopped { pid: old[2] });
    assert_eq!(Postgres::stop_leftover(&pg_dir).expect("postgres"), Leftover::Stopped { pid: old[1] });
    assert_eq!(Redis::stop_leftover(&redis_dir).expect("redis"), Leftover::Stopped { pid: old[0] });
    assert!(old.iter().all(|&pid| !running(pid)), "every leftover stopped");
    assert_eq!(Redis::stop_leftover(&redis_dir).expect("again"), Leftover::None, "pid files removed");

    let (mut redis, mut postgres, mut broker) = start();
    assert!(redis_answers(&redis.url()));
    assert_eq!(broker_tables(&postgres, "seckill"), "cluster,record,topic", "the broker's schema, kept");
    assert!(TcpStream::connect(broker.brokers()).is_ok());
    broker.stop();
    postgres.stop();
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

#[test]
fn a_test_database_is_dropped_with_its_guard() {
    let name = seckill_devstack::unique_namespace("g");
    let database = TestDatabase::create(&name).expect("created");
    assert!(database.url().ends_with(&name));
    let admin = seckill_devstack::test_postgres().expect("server");
    drop(database);
    let count = admin.query(&format!("select count(*) from pg_database where datname = '{name}'")).expect("query");
    assert_eq!(count, "0");
}
