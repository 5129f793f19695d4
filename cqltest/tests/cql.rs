//! The scylla driver (protocol v4) on the run's Apache Cassandra 5.0, and the
//! fault proxy in front of it. Each test works in a keyspace of its own.

use chrono::{NaiveDate, NaiveTime};
use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchType};
use seckill_cqltest::{FaultProxy, TestCql};

/// The run's node, and a session on it in this test's (new) keyspace.
async fn start() -> (TestCql, Session) {
    // The driver's warnings (and, with RUST_LOG, more) in the test's output.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,seckill_cqltest=info,seckill_devstack=info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    let cql = TestCql::start().await.expect("Cassandra starts (run scripts/setup if it is missing)");
    let session = cql.session().await.expect("the driver connects");
    create_keyspace(&session, cql.keyspace()).await;
    session.use_keyspace(cql.keyspace(), false).await.expect("the keyspace is usable");
    (cql, session)
}

async fn create_keyspace(session: &Session, keyspace: &str) {
    ddl(
        session,
        &format!(
            "CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        ),
    )
    .await;
}

async fn ddl(session: &Session, statement: &str) {
    session.query_unpaged(statement, ()).await.unwrap_or_else(|error| panic!("`{statement}` fails: {error}"));
}

#[tokio::test]
async fn a_v4_session_serves_the_types_cassandra_2_1_could_not() {
    let (_cql, session) = start().await;
    let (release,): (String,) = session
        .query_unpaged("SELECT release_version FROM system.local WHERE key = 'local'", ())
        .await
        .expect("system.local is readable")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("the local node");
    assert!(release.starts_with("5.0."), "{release}");

    ddl(&session, "CREATE TABLE typed (id int PRIMARY KEY, day date, at time, small smallint, tiny tinyint)").await;
    let insert =
        session.prepare("INSERT INTO typed (id, day, at, small, tiny) VALUES (?, ?, ?, ?, ?)").await.expect("prepares");
    let day = NaiveDate::from_ymd_opt(2026, 11, 24).expect("a date");
    let at = NaiveTime::from_hms_milli_opt(6, 37, 52, 125).expect("a time");
    session.execute_unpaged(&insert, (1, day, at, -300i16, 7i8)).await.expect("inserts");
    let row: (NaiveDate, NaiveTime, i16, i8) = session
        .query_unpaged("SELECT day, at, small, tiny FROM typed WHERE id = 1", ())
        .await
        .expect("selects")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("one row");
    assert_eq!(row, (day, at, -300, 7));
}

#[tokio::test]
async fn two_handles_share_the_node_with_keyspaces_of_their_own() {
    let (first, session) = start().await;
    let second = TestCql::start().await.expect("the same node");
    assert_eq!(first.nodes(), second.nodes(), "one node per run");
    assert_ne!(first.keyspace(), second.keyspace());

    create_keyspace(&session, second.keyspace()).await;
    let other = second.session().await.expect("connects");
    other.use_keyspace(second.keyspace(), false).await.expect("usable");
    ddl(&session, "CREATE TABLE mine (id int PRIMARY KEY)").await;
    ddl(&other, "CREATE TABLE mine (id int PRIMARY KEY, note text)").await;
    session.query_unpaged("INSERT INTO mine (id) VALUES (1)", ()).await.expect("inserts");
    let theirs = other.query_unpaged("SELECT id FROM mine", ()).await.expect("selects");
    assert_eq!(theirs.into_rows_result().expect("rows").rows_num(), 0, "the keyspaces are apart");
}

#[tokio::test]
async fn a_session_through_the_fault_proxy_sees_the_injected_failure() {
    let (cql, direct) = start().await;
    ddl(&direct, "CREATE TABLE written (id int PRIMARY KEY)").await;
    let proxy = FaultProxy::start(cql.addr()).await.expect("the proxy listens");
    let session = seckill_cqltest::session_builder(&proxy.nodes())
        .use_keyspace(cql.keyspace(), false)
        .build()
        .await
        .expect("the driver connects through the proxy");
    // The node's row in system.local names 127.0.0.1 and the driver keeps
    // the contact point's port: every connection goes through the proxy.
    let state = session.get_cluster_state();
    let nodes = state.get_nodes_info();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].address.to_string(), proxy.nodes(), "the driver does not bypass the proxy");

    let insert = session.prepare("INSERT INTO written (id) VALUES (?)").await.expect("prepares");
    let mut batch = Batch::new(BatchType::Logged);
    batch.append_statement(insert);
    let write = |id: i32| {
        let (session, batch) = (&session, &batch);
        async move { session.batch(batch, ((id,),)).await }
    };
    proxy.fail_batches_after(2);
    write(1).await.expect("the first batch passes");
    write(2).await.expect("the second batch passes");
    let error = write(3).await.expect_err("the third batch fails");
    assert!(error.to_string().contains("failed this batch on purpose"), "{error}");
    write(4).await.expect_err("and every later one");
    proxy.heal();
    write(5).await.expect("healed");
    // The failed batches never reached the node.
    let mut ids: Vec<i32> = direct
        .query_unpaged("SELECT id FROM written", ())
        .await
        .expect("selects")
        .into_rows_result()
        .expect("rows")
        .rows::<(i32,)>()
        .expect("ints")
        .map(|row| row.expect("an int").0)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 5]);
}

/// The node's commit log segments are 1 MiB: a mutation over half of one is
/// refused, as one over 16 MiB is in production (the stores' bounded
/// batches are tested against that limit).
#[tokio::test]
async fn a_mutation_over_half_a_commit_log_segment_is_refused() {
    let (_cql, session) = start().await;
    ddl(&session, "CREATE TABLE blobs (id int PRIMARY KEY, value blob)").await;
    let insert = session.prepare("INSERT INTO blobs (id, value) VALUES (?, ?)").await.expect("prepares");
    session.execute_unpaged(&insert, (1, vec![7u8; 400 * 1024])).await.expect("400 KiB is accepted");
    let error = session.execute_unpaged(&insert, (2, vec![7u8; 600 * 1024])).await.expect_err("600 KiB is refused");
    let message = error.to_string();
    assert!(message.contains("oversized mutation") && message.contains("/524288)"), "{message}");
}
