//! Connecting and the versioned schema.
//!
//! The schema is the `.cql` files in `store/cql/`, applied in order at
//! start-up. Each file is applied once per keyspace and recorded in
//! `schema_migrations`; every statement is idempotent (`IF NOT EXISTS`), so
//! two services starting together, or a start that died half-way, are safe.

use chrono::Utc;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use seckill_core::config::StoreConfig;

use super::unreadable;
use crate::StoreError;

/// The schema files, in order: (version, name, text).
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "001_stock.cql", include_str!("../../cql/001_stock.cql")),
    (2, "002_view.cql", include_str!("../../cql/002_view.cql")),
    (3, "003_pending_refunds.cql", include_str!("../../cql/003_pending_refunds.cql")),
    (4, "004_epochs.cql", include_str!("../../cql/004_epochs.cql")),
];

/// Opens a session on `config.nodes`, creates the keyspace if missing, and
/// applies the migrations not yet applied.
pub async fn connect(config: &StoreConfig) -> Result<Session, StoreError> {
    let session = SessionBuilder::new()
        .known_nodes(&config.nodes)
        // Routing needs the light metadata only; older servers have none.
        .fetch_schema_metadata(config.schema_metadata)
        .fetch_full_schema_metadata(false)
        .build()
        .await?;
    let keyspace = &config.keyspace;
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': {}}}",
                config.replication_factor
            ),
            (),
        )
        .await?;
    session.use_keyspace(keyspace, false).await.map_err(|e| StoreError::Backend(format!("USE {keyspace}: {e}")))?;
    migrate(&session).await?;
    Ok(session)
}

async fn migrate(session: &Session) -> Result<(), StoreError> {
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, name text, applied_at timestamp)",
            (),
        )
        .await?;
    let applied: Vec<i32> = session
        .query_unpaged("SELECT version FROM schema_migrations", ())
        .await?
        .into_rows_result()
        .map_err(unreadable)?
        .rows::<(i32,)>()
        .map_err(unreadable)?
        .map(|row| row.map(|(version,)| version).map_err(unreadable))
        .collect::<Result<_, _>>()?;
    for (version, name, text) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        for statement in statements(text) {
            session.query_unpaged(statement, ()).await?;
        }
        session
            .query_unpaged(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, Utc::now()),
            )
            .await?;
        tracing::info!(version, name, "Applied a schema migration.");
    }
    Ok(())
}

/// The statements of a schema file: `;`-separated, `--` comments dropped.
fn statements(text: &str) -> Vec<String> {
    let without_comments: String =
        text.lines().map(|line| line.split("--").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
    without_comments.split(';').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_files_split_into_statements() {
        for (_, name, text) in MIGRATIONS {
            let statements = statements(text);
            assert!(!statements.is_empty(), "{name}");
            assert!(statements.iter().all(|s| s.starts_with("CREATE TABLE IF NOT EXISTS")), "{name}: {statements:?}");
        }
    }
}
