//! A PostgreSQL server's databases, managed through `psql` as the
//! `postgres` superuser: one database per broker.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::pg_install::psql_path;
use crate::DevstackError;

/// Creates, checks and drops databases on one server.
#[derive(Clone, Debug)]
pub struct PgAdmin {
    /// `postgres://USER@HOST:PORT`, without a database.
    server: String,
    psql: PathBuf,
}

impl PgAdmin {
    /// The server at `server` (`postgres://USER@HOST:PORT`, trust or
    /// password in the URL; no database, no parameters).
    pub fn new(server: &str) -> Result<Self, DevstackError> {
        let server = server.trim_end_matches('/');
        let rest = server.strip_prefix("postgres://").or_else(|| server.strip_prefix("postgresql://"));
        if rest.is_none_or(|rest| rest.is_empty() || rest.contains(['/', '?'])) {
            return Err(DevstackError::Setup(format!(
                "`{server}` is not a PostgreSQL server URL: expected postgres://USER@HOST:PORT (no database)"
            )));
        }
        let psql = psql_path().ok_or_else(|| DevstackError::NotInstalled("psql (PostgreSQL's client)".into()))?;
        Ok(Self { server: server.to_owned(), psql })
    }

    /// The URL of `database` on this server, as the broker takes it.
    pub fn database_url(&self, database: &str) -> String {
        format!("{}/{database}", self.server)
    }

    /// The server's URL, without a database.
    pub fn server_url(&self) -> &str {
        &self.server
    }

    /// Runs `sql` in the `postgres` database; returns what it printed
    /// (unaligned, tuples only).
    pub fn query(&self, sql: &str) -> Result<String, DevstackError> {
        self.query_in("postgres", sql)
    }

    /// Runs `sql` in `database`; returns what it printed (unaligned, tuples
    /// only).
    pub fn query_in(&self, database: &str, sql: &str) -> Result<String, DevstackError> {
        let output = Command::new(&self.psql)
            // Settings of the caller's environment must not redirect or alter the session.
            .env_remove("PGOPTIONS")
            .env_remove("PGSERVICE")
            .env("PGCONNECT_TIMEOUT", "5")
            .args(["--no-psqlrc", "--no-align", "--tuples-only", "--quiet", "--set", "ON_ERROR_STOP=1"])
            .arg("--dbname")
            .arg(self.database_url(database))
            .arg("--command")
            .arg(sql)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| DevstackError::Spawn { what: "psql".into(), source })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(DevstackError::Psql {
                sql: sql.to_owned(),
                server: self.server.clone(),
                message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            })
        }
    }

    /// Waits until the server answers queries (it accepts connections
    /// before it finishes starting or recovering).
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), DevstackError> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.query("select 1") {
                Ok(_) => return Ok(()),
                Err(error) if Instant::now() >= deadline => return Err(error),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Creates `database` unless it exists; returns whether it created it.
    pub fn create_database(&self, database: &str) -> Result<bool, DevstackError> {
        check_name(database)?;
        let exists = self.query(&format!("select count(*) from pg_database where datname = '{database}'"))?;
        if exists == "1" {
            return Ok(false);
        }
        self.query(&format!("create database {database}"))?;
        Ok(true)
    }

    /// Drops `database`, closing its connections first.
    pub fn drop_database(&self, database: &str) -> Result<(), DevstackError> {
        check_name(database)?;
        self.query(&format!("drop database if exists {database} with (force)")).map(drop)
    }
}

/// Database names are put into SQL as they are, so only plain lowercase
/// identifiers are accepted.
fn check_name(database: &str) -> Result<(), DevstackError> {
    let plain = database.len() <= 63
        && database.starts_with(|c: char| c.is_ascii_lowercase())
        && database.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        Ok(())
    } else {
        Err(DevstackError::Setup(format!(
            "`{database}` is not a usable database name: 1 to 63 of a-z, 0-9 and _, starting with a letter"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_identifiers() {
        for good in ["seckill", "t0192f0c47a7e", "a_b_1"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let long = "a".repeat(64);
        for bad in ["", "1abc", "Seckill", "a-b", "a;drop database x", "a b", long.as_str()] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn server_urls_name_no_database() {
        for bad in ["127.0.0.1:5432", "postgres://", "postgres://postgres@127.0.0.1:5432/db", "postgres://h?sslmode=x"]
        {
            assert!(matches!(PgAdmin::new(bad), Err(DevstackError::Setup(_))), "{bad}");
        }
    }
}
