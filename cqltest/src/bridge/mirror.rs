//! The `cqlbridge` keyspace: tables shaped like what the driver reads.
//!
//! Created (if missing) when a bridge starts, with plain protocol v3:
//!
//! - `cqlbridge.local`: one row, `key = 'local'`, with the node's real
//!   `host_id`, `data_center`, `rack`, `tokens` and `cluster_name` copied
//!   from `system.local`, plus the `rpc_address` 2.1 lacks (the address the bridge
//!   reaches Cassandra on; the driver replaces the local node's address with
//!   the one it connected to, the bridge's, anyway);
//! - `cqlbridge.peers`: empty, so the driver knows one node and connects to
//!   it only through the bridge;
//! - `cqlbridge.keyspaces`: empty, so the driver has no replication strategy
//!   for any keyspace and routes without it, which with one node changes
//!   nothing.

use std::io;
use std::net::{IpAddr, SocketAddr};

use crate::client::Client;

const SCHEMA: &[&str] = &[
    "CREATE KEYSPACE IF NOT EXISTS cqlbridge WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE TABLE IF NOT EXISTS cqlbridge.local (key text PRIMARY KEY, host_id uuid, rpc_address inet, \
     data_center text, rack text, tokens set<text>, cluster_name text)",
    "CREATE TABLE IF NOT EXISTS cqlbridge.peers (peer inet PRIMARY KEY, host_id uuid, rpc_address inet, \
     data_center text, rack text, tokens set<text>)",
    "CREATE TABLE IF NOT EXISTS cqlbridge.keyspaces (keyspace_name text PRIMARY KEY, replication map<text, text>, \
     durable_writes boolean)",
];

/// Creates the mirror tables on `upstream` and copies the local node into them.
pub(super) async fn prepare(upstream: SocketAddr) -> io::Result<()> {
    let mut client = Client::connect(upstream).await?;
    for statement in SCHEMA {
        client.query(statement, &[]).await?;
    }
    let rows = client
        .query("SELECT host_id, data_center, rack, tokens, cluster_name FROM system.local WHERE key = 'local'", &[])
        .await?;
    let [host_id, data_center, rack, tokens, cluster_name] = rows
        .into_iter()
        .next()
        .and_then(|row| <[Option<Vec<u8>>; 5]>::try_from(row).ok())
        .ok_or_else(|| io::Error::other("Cassandra's system.local has no row for the local node"))?;
    let rpc_address = match upstream.ip() {
        IpAddr::V4(ip) => ip.octets().to_vec(),
        IpAddr::V6(ip) => ip.octets().to_vec(),
    };
    client
        .query(
            "INSERT INTO cqlbridge.local (key, host_id, rpc_address, data_center, rack, tokens, cluster_name) \
             VALUES ('local', ?, ?, ?, ?, ?, ?)",
            &[
                host_id.as_deref(),
                Some(&rpc_address),
                data_center.as_deref(),
                rack.as_deref(),
                tokens.as_deref(),
                cluster_name.as_deref(),
            ],
        )
        .await?;
    Ok(())
}
