//! The scylla driver against a real Cassandra 2.1 through the bridge: the
//! CQL features the seckill stores rely on. Each test starts its own node and
//! works in its own keyspace.

use chrono::{DateTime, TimeZone, Utc};
use futures::TryStreamExt;
use scylla::client::session::Session;
use scylla::client::Compression;
use scylla::response::query_result::QueryResult;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::batch::{Batch, BatchType};
use scylla::value::{CqlValue, Row};
use seckill_cqltest::{unique_keyspace, TestCql};
use uuid::Uuid;

/// A node, a session through the bridge, and a fresh keyspace in use.
async fn start() -> (TestCql, Session) {
    // The driver's warnings (and, with RUST_LOG, more) in the test's output.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,seckill_cqltest=info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    let cql = TestCql::start().await.expect("Cassandra starts (run scripts/setup if it is missing)");
    let session = cql.session().await.expect("the driver connects through the bridge");
    let keyspace = unique_keyspace();
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            ),
            (),
        )
        .await
        .expect("the keyspace is created");
    session.use_keyspace(&keyspace, false).await.expect("the keyspace is usable");
    (cql, session)
}

async fn ddl(session: &Session, statement: &str) {
    session.query_unpaged(statement, ()).await.unwrap_or_else(|error| panic!("`{statement}` fails: {error}"));
}

/// The `[applied]` column of a lightweight transaction's result.
fn applied(result: QueryResult) -> bool {
    let rows = result.into_rows_result().expect("an LWT returns a row");
    let row: Row = rows.first_row().expect("one row");
    match row.columns.first() {
        Some(Some(CqlValue::Boolean(applied))) => *applied,
        other => panic!("[applied] is {other:?}"),
    }
}

#[tokio::test]
async fn the_driver_sees_one_node_behind_the_bridge() {
    let (cql, session) = start().await;
    let state = session.get_cluster_state();
    let nodes = state.get_nodes_info();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].address.to_string(), cql.nodes());
    // `release_version` is not mirrored, so this reads Cassandra's own row.
    let (host_id, release): (Uuid, String) = session
        .query_unpaged("SELECT host_id, release_version FROM system.local WHERE key = 'local'", ())
        .await
        .expect("system.local is readable")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("the local node");
    assert_eq!(nodes[0].host_id, host_id);
    assert_eq!(release, "2.1.0");

    // Compression would hide the frames from the bridge: refused, with a reason.
    let error = cql
        .session_builder()
        .compression(Some(Compression::Lz4))
        .build()
        .await
        .expect_err("a compressed session is refused");
    assert!(format!("{error:?}").contains("does not support compression"), "{error:?}");
}

#[tokio::test]
async fn prepared_insert_and_select_round_trip_v3_types() {
    let (_cql, session) = start().await;
    ddl(
        &session,
        "CREATE TABLE items (id uuid PRIMARY KEY, name text, qty int, total bigint, at timestamp, \
         paid boolean, payload blob, tags set<text>)",
    )
    .await;
    let insert = session
        .prepare("INSERT INTO items (id, name, qty, total, at, paid, payload, tags) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        .await
        .expect("the insert prepares");
    let select = session
        .prepare("SELECT name, qty, total, at, paid, payload, tags FROM items WHERE id = ?")
        .await
        .expect("the select prepares");

    let id = Uuid::now_v7();
    let at: DateTime<Utc> = Utc.timestamp_millis_opt(1_700_000_000_123).single().expect("a valid instant");
    let tags = vec!["a".to_owned(), "b".to_owned()];
    session
        .execute_unpaged(&insert, (id, "voucher", 3i32, 9_000_000_000i64, at, true, vec![0u8, 255], &tags))
        .await
        .expect("the insert runs");

    type Item = (String, i32, i64, DateTime<Utc>, bool, Vec<u8>, Vec<String>);
    let item: Item = session
        .execute_unpaged(&select, (id,))
        .await
        .expect("the select runs")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("the item");
    assert_eq!(item, ("voucher".to_owned(), 3, 9_000_000_000, at, true, vec![0, 255], tags));

    let missing = session.execute_unpaged(&select, (Uuid::now_v7(),)).await.expect("the select runs");
    assert_eq!(missing.into_rows_result().expect("rows").rows_num(), 0);
}

#[tokio::test]
async fn insert_if_not_exists_applies_once() {
    let (_cql, session) = start().await;
    ddl(
        &session,
        "CREATE TABLE orders (user_id text, voucher_id uuid, order_id uuid, PRIMARY KEY (user_id, voucher_id))",
    )
    .await;
    let insert = session
        .prepare("INSERT INTO orders (user_id, voucher_id, order_id) VALUES (?, ?, ?) IF NOT EXISTS")
        .await
        .expect("the LWT prepares");
    let voucher = Uuid::now_v7();
    let (first, second) = (Uuid::now_v7(), Uuid::now_v7());

    let result = session.execute_unpaged(&insert, ("alice", voucher, first)).await.expect("the LWT runs");
    assert!(applied(result));
    let result = session.execute_unpaged(&insert, ("alice", voucher, second)).await.expect("the LWT runs");
    // Not applied: the row returned is the one already there.
    let rows = result.into_rows_result().expect("rows");
    let (was_applied, _, _, order): (bool, String, Uuid, Uuid) = rows.single_row().expect("the existing row");
    assert!(!was_applied);
    assert_eq!(order, first);

    let result = session.execute_unpaged(&insert, ("bob", voucher, second)).await.expect("the LWT runs");
    assert!(applied(result));
}

#[tokio::test]
async fn conditional_update_applies_only_when_the_condition_holds() {
    let (_cql, session) = start().await;
    ddl(&session, "CREATE TABLE stock (voucher_id uuid PRIMARY KEY, remaining int)").await;
    let voucher = Uuid::now_v7();
    session
        .query_unpaged("INSERT INTO stock (voucher_id, remaining) VALUES (?, ?)", (voucher, 5i32))
        .await
        .expect("the stock is set");
    let take = session
        .prepare("UPDATE stock SET remaining = ? WHERE voucher_id = ? IF remaining = ?")
        .await
        .expect("the conditional update prepares");

    assert!(applied(session.execute_unpaged(&take, (4i32, voucher, 5i32)).await.expect("the update runs")));
    // A stale reader expecting 5 loses.
    assert!(!applied(session.execute_unpaged(&take, (4i32, voucher, 5i32)).await.expect("the update runs")));
    assert!(applied(session.execute_unpaged(&take, (3i32, voucher, 4i32)).await.expect("the update runs")));

    let (remaining,): (i32,) = session
        .query_unpaged("SELECT remaining FROM stock WHERE voucher_id = ?", (voucher,))
        .await
        .expect("the select runs")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("the stock row");
    assert_eq!(remaining, 3);
}

#[tokio::test]
async fn using_timestamp_keeps_the_newest_write() {
    let (_cql, session) = start().await;
    ddl(&session, "CREATE TABLE status (order_id uuid PRIMARY KEY, status text)").await;
    let write = session
        .prepare("INSERT INTO status (order_id, status) VALUES (?, ?) USING TIMESTAMP ?")
        .await
        .expect("the insert prepares");
    let order = Uuid::now_v7();
    session.execute_unpaged(&write, (order, "CREATED", 2_000i64)).await.expect("the newer write runs");
    // An older event replayed late must not win.
    session.execute_unpaged(&write, (order, "PENDING", 1_000i64)).await.expect("the older write runs");

    let (status, written): (String, i64) = session
        .query_unpaged("SELECT status, WRITETIME(status) FROM status WHERE order_id = ?", (order,))
        .await
        .expect("the select runs")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("the status row");
    assert_eq!((status.as_str(), written), ("CREATED", 2_000));
}

#[tokio::test]
async fn clustering_order_and_range_queries() {
    let (_cql, session) = start().await;
    ddl(
        &session,
        "CREATE TABLE events (voucher_id uuid, seq int, kind text, PRIMARY KEY (voucher_id, seq)) \
         WITH CLUSTERING ORDER BY (seq DESC)",
    )
    .await;
    let insert =
        session.prepare("INSERT INTO events (voucher_id, seq, kind) VALUES (?, ?, ?)").await.expect("prepares");
    let (voucher, other) = (Uuid::now_v7(), Uuid::now_v7());
    for seq in 0..10i32 {
        session.execute_unpaged(&insert, (voucher, seq, format!("e{seq}"))).await.expect("the insert runs");
        session.execute_unpaged(&insert, (other, seq, "other")).await.expect("the insert runs");
    }
    let range = session
        .prepare("SELECT seq, kind FROM events WHERE voucher_id = ? AND seq >= ? AND seq < ?")
        .await
        .expect("the range query prepares");
    let rows: Vec<(i32, String)> = session
        .execute_unpaged(&range, (voucher, 3i32, 7i32))
        .await
        .expect("the range query runs")
        .into_rows_result()
        .expect("rows")
        .rows()
        .expect("typed rows")
        .collect::<Result<_, _>>()
        .expect("every row deserializes");
    let expected: Vec<(i32, String)> = [6, 5, 4, 3].into_iter().map(|seq| (seq, format!("e{seq}"))).collect();
    assert_eq!(rows, expected);

    let ascending = session
        .prepare("SELECT seq FROM events WHERE voucher_id = ? AND seq > ? ORDER BY seq ASC LIMIT 2")
        .await
        .expect("the ascending query prepares");
    let rows: Vec<(i32,)> = session
        .execute_unpaged(&ascending, (voucher, 7i32))
        .await
        .expect("the ascending query runs")
        .into_rows_result()
        .expect("rows")
        .rows()
        .expect("typed rows")
        .collect::<Result<_, _>>()
        .expect("every row deserializes");
    assert_eq!(rows, vec![(8,), (9,)]);
}

#[tokio::test]
async fn paging_reads_every_row_across_pages() {
    let (_cql, session) = start().await;
    ddl(&session, "CREATE TABLE sold (voucher_id uuid, seq int, user_id text, PRIMARY KEY (voucher_id, seq))").await;
    let insert =
        session.prepare("INSERT INTO sold (voucher_id, seq, user_id) VALUES (?, ?, ?)").await.expect("prepares");
    let voucher = Uuid::now_v7();
    let total = 250i32;
    for seq in 0..total {
        session.execute_unpaged(&insert, (voucher, seq, format!("u{seq}"))).await.expect("the insert runs");
    }
    let mut select =
        session.prepare("SELECT seq, user_id FROM sold WHERE voucher_id = ?").await.expect("the select prepares");
    select.set_page_size(40);

    // Page by page, by hand: 40-row pages and a paging state between them.
    let mut pages = Vec::new();
    let mut paging_state = PagingState::start();
    loop {
        let (result, response) =
            session.execute_single_page(&select, (voucher,), paging_state).await.expect("a page is read");
        pages.push(result.into_rows_result().expect("rows").rows_num());
        match response {
            PagingStateResponse::HasMorePages { state } => paging_state = state,
            PagingStateResponse::NoMorePages => break,
        }
    }
    assert_eq!(pages.iter().sum::<usize>(), 250);
    assert!(pages.len() >= 7, "pages: {pages:?}");
    assert!(pages.iter().all(|rows| *rows <= 40), "pages: {pages:?}");

    // And through the driver's row stream.
    let rows: Vec<(i32, String)> = session
        .execute_iter(select, (voucher,))
        .await
        .expect("the pager starts")
        .rows_stream::<(i32, String)>()
        .expect("typed rows")
        .try_collect()
        .await
        .expect("every page is read");
    let expected: Vec<(i32, String)> = (0..total).map(|seq| (seq, format!("u{seq}"))).collect();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn logged_batch_of_prepared_statements_writes_all_tables() {
    let (_cql, session) = start().await;
    ddl(&session, "CREATE TABLE orders_by_id (order_id uuid PRIMARY KEY, user_id text, status text)").await;
    ddl(
        &session,
        "CREATE TABLE orders_by_user (user_id text, order_id uuid, status text, PRIMARY KEY (user_id, order_id))",
    )
    .await;
    let by_id = session
        .prepare("INSERT INTO orders_by_id (order_id, user_id, status) VALUES (?, ?, ?)")
        .await
        .expect("prepares");
    let by_user = session
        .prepare("INSERT INTO orders_by_user (user_id, order_id, status) VALUES (?, ?, ?)")
        .await
        .expect("prepares");
    let mut batch = Batch::new(BatchType::Logged);
    batch.append_statement(by_id);
    batch.append_statement(by_user);

    let order = Uuid::now_v7();
    session
        .batch(&batch, ((order, "alice", "CREATED"), ("alice", order, "CREATED")))
        .await
        .expect("the logged batch runs");

    let (user, status): (String, String) = session
        .query_unpaged("SELECT user_id, status FROM orders_by_id WHERE order_id = ?", (order,))
        .await
        .expect("the select runs")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("the order by id");
    assert_eq!((user.as_str(), status.as_str()), ("alice", "CREATED"));
    let (found, status): (Uuid, String) = session
        .query_unpaged("SELECT order_id, status FROM orders_by_user WHERE user_id = ?", ("alice",))
        .await
        .expect("the select runs")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("the order by user");
    assert_eq!((found, status.as_str()), (order, "CREATED"));
}
