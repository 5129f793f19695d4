//! The test run's PostgreSQL server, shared by every broker of the run with
//! a database each: one server start per run instead of one per test.
//!
//! `scripts/test` starts it and names it in [`TEST_POSTGRES_VAR`]. Without
//! the variable (`cargo test` alone) the first test that needs it starts one
//! for its process, with a watchdog that shuts it down and removes its
//! directory when the process exits, however it exits: a test process never
//! drops its statics, so nothing else would.

use std::sync::OnceLock;

use crate::pg_admin::PgAdmin;
use crate::postgres::{PgSettings, Postgres};
use crate::watchdog::Watchdog;
use crate::DevstackError;

/// `postgres://postgres@127.0.0.1:PORT`: the server `scripts/test` started.
pub const TEST_POSTGRES_VAR: &str = "SECKILL_TEST_POSTGRES";

/// The test run's server: named by [`TEST_POSTGRES_VAR`], or started for
/// this process on first use.
pub fn test_postgres() -> Result<&'static PgAdmin, DevstackError> {
    static SHARED: OnceLock<Result<Shared, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| Shared::connect_or_start().map_err(|error| error.to_string()))
        .as_ref()
        .map(|shared| &shared.admin)
        .map_err(|error| DevstackError::Setup(format!("the tests' PostgreSQL server: {error}")))
}

/// The shared server, and what keeps one started here alive until exit.
#[derive(Debug)]
struct Shared {
    admin: PgAdmin,
    /// Never stopped by us; the watchdog stops it when the process exits.
    _own: Option<(Postgres, Watchdog)>,
}

impl Shared {
    fn connect_or_start() -> Result<Self, DevstackError> {
        if let Some(url) = std::env::var(TEST_POSTGRES_VAR).ok().filter(|url| !url.is_empty()) {
            let admin = PgAdmin::new(&url)?;
            admin.query("select 1")?;
            return Ok(Self { admin, _own: None });
        }
        let base =
            std::env::var_os("SECKILL_TEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let dir = base.join(format!("pg-{}", uuid::Uuid::now_v7().simple()));
        let postgres = Postgres::start(&dir, 0, PgSettings::TEST)?;
        // SIGINT: PostgreSQL's fast shutdown.
        let watchdog = Watchdog::spawn("PostgreSQL", "INT", &[postgres.pid().unwrap_or_default()], dir)?;
        tracing::info!(server = postgres.admin().server_url(), "Started the tests' PostgreSQL server.");
        Ok(Self { admin: postgres.admin().clone(), _own: Some((postgres, watchdog)) })
    }
}

/// A database of its own on the test run's server, for one broker; dropped
/// (connections closed first) when this is dropped.
#[derive(Debug)]
pub struct TestDatabase {
    admin: PgAdmin,
    name: String,
}

impl TestDatabase {
    /// Creates database `name` (plain lowercase: a test's namespace) on
    /// the test run's server.
    pub fn create(name: &str) -> Result<Self, DevstackError> {
        Self::create_on(test_postgres()?, name)
    }

    /// Creates database `name` on the server `admin` manages.
    pub fn create_on(admin: &PgAdmin, name: &str) -> Result<Self, DevstackError> {
        admin.create_database(name)?;
        Ok(Self { admin: admin.clone(), name: name.to_owned() })
    }

    /// Its URL, as the broker takes it.
    pub fn url(&self) -> String {
        self.admin.database_url(&self.name)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Err(error) = self.admin.drop_database(&self.name) {
            tracing::warn!(database = %self.name, %error, "Could not drop a test database.");
        }
    }
}
