//! The driver's topology queries, redirected to the bridge's mirror tables.
//!
//! On its control connection the scylla 1.x driver prepares and runs
//! (`scylla/src/cluster/metadata/fetching.rs`, 1.9):
//!
//! - `SELECT host_id, rpc_address, data_center, rack, tokens, cluster_name FROM system.local WHERE key='local'`
//!   (1.5 and older: without `cluster_name`): Cassandra 2.1's `system.local`
//!   has no `rpc_address`, so this fails;
//! - the same columns but `cluster_name` `FROM system.peers`: 2.1 has them,
//!   but a peer listed there would be connected to directly, around the
//!   bridge;
//! - `SELECT keyspace_name, replication[, durable_writes] FROM system_schema.keyspaces`
//!   (with `where keyspace_name in ?` when keyspaces are filtered): 2.1 has
//!   no `system_schema`; 1.9 skips this with `fetch_schema_metadata(false)`,
//!   older 1.x releases ran it regardless.
//!
//! When one of them fails the driver falls back to dummy metadata and keeps
//! reconnecting its control connection. So a SELECT of only these columns from
//! these tables is sent to the `cqlbridge` mirror of the table instead (see
//! `mirror.rs`); every other statement, such as the schema-agreement read of
//! `schema_version` from `system.local`, reaches the real table.

use std::io;

use crate::protocol::body::{self, Reader};

/// A table the driver reads and the mirror that answers instead.
struct Redirect {
    /// The table as the driver names it, in lower case.
    table: &'static str,
    /// The mirror table in the `cqlbridge` keyspace.
    mirror: &'static str,
    /// The columns the mirror has: a SELECT of anything else is not redirected.
    columns: &'static [&'static str],
}

const REDIRECTS: &[Redirect] = &[
    Redirect {
        table: "system.local",
        mirror: "cqlbridge.local",
        columns: &["host_id", "rpc_address", "data_center", "rack", "tokens", "cluster_name"],
    },
    Redirect {
        table: "system.peers",
        mirror: "cqlbridge.peers",
        columns: &["host_id", "rpc_address", "data_center", "rack", "tokens"],
    },
    Redirect {
        table: "system_schema.keyspaces",
        mirror: "cqlbridge.keyspaces",
        columns: &["keyspace_name", "replication", "durable_writes"],
    },
];

/// Rewrites the statement text that starts a QUERY or PREPARE body, if it
/// is one of the driver's topology queries.
pub(super) fn rewrite_statement(body: &mut Vec<u8>) -> io::Result<()> {
    let mut reader = Reader::new(body);
    let Some(redirected) = redirect(reader.long_string()?) else { return Ok(()) };
    let end = reader.position();
    let mut statement = Vec::with_capacity(redirected.len() + 4);
    body::put_long_string(&mut statement, &redirected)?;
    body.splice(..end, statement);
    Ok(())
}

/// `SELECT <columns> FROM <table><rest>` with a mirrored table and only
/// mirrored columns becomes the same SELECT from the mirror.
fn redirect(statement: &str) -> Option<String> {
    let statement = statement.trim_start();
    let lower = statement.to_ascii_lowercase();
    let after_select = lower.strip_prefix("select")?;
    if !after_select.starts_with(char::is_whitespace) {
        return None;
    }
    let from = find_word(&lower, "from")?;
    let columns = &statement["select".len()..from];
    let after_from = &lower[from + "from".len()..];
    let table_start = lower.len() - after_from.trim_start().len();
    let table_end = lower[table_start..]
        .find(|c: char| c.is_whitespace() || c == ';')
        .map_or(lower.len(), |offset| table_start + offset);
    let target = REDIRECTS.iter().find(|redirect| redirect.table == &lower[table_start..table_end])?;
    let only_mirrored =
        columns.split(',').all(|column| target.columns.contains(&column.trim().to_ascii_lowercase().as_str()));
    only_mirrored.then(|| format!("SELECT {} FROM {}{}", columns.trim(), target.mirror, &statement[table_end..]))
}

/// The byte offset of `word` standing alone (between whitespace) in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    text.match_indices(word).map(|(at, _)| at).find(|&at| {
        let before = text[..at].chars().next_back().is_some_and(char::is_whitespace);
        let after = text[at + word.len()..].chars().next().is_some_and(char::is_whitespace);
        before && after
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drivers_node_queries_read_the_mirrors() {
        assert_eq!(
            redirect(
                "SELECT host_id, rpc_address, data_center, rack, tokens, cluster_name FROM system.local WHERE key='local'"
            )
            .as_deref(),
            Some(
                "SELECT host_id, rpc_address, data_center, rack, tokens, cluster_name FROM cqlbridge.local WHERE key='local'"
            )
        );
        assert_eq!(
            redirect("select host_id, rpc_address, data_center, rack, tokens from system.local WHERE key='local'")
                .as_deref(),
            Some("SELECT host_id, rpc_address, data_center, rack, tokens FROM cqlbridge.local WHERE key='local'")
        );
        assert_eq!(
            redirect("SELECT host_id, rpc_address, data_center, rack, tokens FROM system.peers").as_deref(),
            Some("SELECT host_id, rpc_address, data_center, rack, tokens FROM cqlbridge.peers")
        );
    }

    #[test]
    fn the_drivers_keyspace_query_reads_the_mirror_with_its_filter() {
        assert_eq!(
            redirect("SELECT keyspace_name, replication, durable_writes FROM system_schema.keyspaces where keyspace_name in ?")
                .as_deref(),
            Some("SELECT keyspace_name, replication, durable_writes FROM cqlbridge.keyspaces where keyspace_name in ?")
        );
    }

    #[test]
    fn other_queries_reach_the_real_tables() {
        for statement in [
            "SELECT schema_version FROM system.local WHERE key='local'",
            "SELECT * FROM system.local",
            "SELECT host_id FROM system.local_extra",
            "SELECT host_id FROM app.local",
            "INSERT INTO system.local (key) VALUES ('x')",
            "selecthost_id from system.local",
        ] {
            assert_eq!(redirect(statement), None, "{statement}");
        }
    }

    #[test]
    fn the_statement_is_replaced_and_the_parameters_kept() {
        let mut body = Vec::new();
        body::put_long_string(&mut body, "select host_id, rpc_address from system.peers").expect("short string");
        body.extend_from_slice(&[0x00, 0x01, 0x00]);
        rewrite_statement(&mut body).expect("a valid body");
        let mut reader = Reader::new(&body);
        assert_eq!(reader.long_string().expect("the statement"), "SELECT host_id, rpc_address FROM cqlbridge.peers");
        assert_eq!(&body[reader.position()..], &[0x00, 0x01, 0x00]);
    }
}
