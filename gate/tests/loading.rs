//! A service starting while its Redis is still loading a big append-only
//! file (a local run started again after a large sale): the gate waits for
//! Redis to be ready instead of failing the start with `LOADING`.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use seckill_core::config::RedisConfig;
use seckill_devstack::{Redis, RedisPersistence, TempDir};
use seckill_gate::Gate;

/// Keys written before the restart: enough for Redis 7 to take a while
/// replaying them from an append-only file of plain commands.
const KEYS: u64 = 3_000_000;

/// A plain connection, patient enough for the chunks of the fill below.
async fn connection(redis: &Redis) -> MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(30)));
    redis::Client::open(redis.url())
        .expect("url")
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connects")
}

/// Writes `KEYS` keys and rewrites the append-only file as plain commands
/// (no RDB preamble, which would load at once), so the next start replays
/// millions of commands.
async fn fill_the_append_only_file(redis: &Redis) {
    let mut connection = connection(redis).await;
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("aof-use-rdb-preamble")
        .arg("no")
        .query_async::<()>(&mut connection)
        .await
        .expect("config set");
    // In chunks, each call well within the client's response timeout.
    let fill = redis::Script::new(
        "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do redis.call('SET', KEYS[1] .. i, 'a value of some length') end",
    );
    for first in (0..KEYS).step_by(100_000) {
        fill.key("filler:")
            .arg(first)
            .arg((first + 100_000).min(KEYS) - 1)
            .invoke_async::<()>(&mut connection)
            .await
            .expect("filled");
    }
    // Redis may have started a rewrite of its own while the keys went in
    // (its automatic one); either way the file ends as plain commands.
    if let Err(error) = redis::cmd("BGREWRITEAOF").query_async::<()>(&mut connection).await {
        assert!(error.to_string().contains("already in progress"), "rewrite not started: {error}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query_async(&mut connection).await.expect("info");
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the AOF rewrite did not finish: {info}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_waits_for_a_redis_that_is_loading_its_data() {
    let dir = TempDir::new().expect("temp dir");
    let mut redis =
        Redis::start(dir.path(), 0, RedisPersistence::AppendOnly).expect("redis starts (run scripts/setup)");
    fill_the_append_only_file(&redis).await;
    redis.stop();
    redis.start_again().expect("redis starts again on its append-only file");

    // Redis opened its port and answers, but only that it is loading.
    let mut probe = connection(&redis).await;
    let refused = redis::cmd("PING").query_async::<String>(&mut probe).await.expect_err("still loading");
    assert_eq!(refused.code(), Some("LOADING"), "{refused}");

    let config = RedisConfig::new(redis.url(), "loading".to_owned());
    let gate = Gate::connect(&config).await.expect("the gate waits until Redis has loaded");
    let mut connection = gate.connection().clone();
    let keys: u64 = redis::cmd("DBSIZE").query_async(&mut connection).await.expect("answers once loaded");
    assert_eq!(keys, KEYS, "every key came back from the append-only file");
}
