//! Where a rebuild from the log builds (`rebuild-view`, `rebuild-stock`):
//! a new redb file, or a new keyspace of the configured ScyllaDB, never the
//! store the service runs on.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use seckill_core::config::{self, StoreBackend, StoreConfig};

#[derive(Args, Debug)]
pub(crate) struct RebuildTarget {
    /// Build an embedded (redb) store in this new file.
    #[arg(long, conflicts_with = "into_keyspace")]
    into: Option<PathBuf>,
    /// Build the store in this new keyspace of the configured ScyllaDB.
    #[arg(long)]
    into_keyspace: Option<String>,
}

impl RebuildTarget {
    /// The store to build, beside `own` (the service's): a file that does
    /// not exist yet, or a keyspace other than `own`'s.
    pub(crate) fn store(&self, own: &StoreConfig) -> anyhow::Result<StoreConfig> {
        match (&self.into, &self.into_keyspace) {
            (Some(path), None) => {
                if path.exists() {
                    bail!("{} exists; the rebuild needs a fresh store", path.display());
                }
                Ok(StoreConfig::embedded(path.clone()))
            }
            (None, Some(keyspace)) => {
                if own.backend != StoreBackend::Scylla {
                    bail!("--into-keyspace needs store.backend = \"scylla\" in the config");
                }
                if *keyspace == own.keyspace {
                    bail!("{keyspace} is the service's own keyspace; the rebuild needs a fresh one");
                }
                let target = StoreConfig { keyspace: keyspace.clone(), ..own.clone() };
                config::Validate::validate(&target).context("the target keyspace")?;
                Ok(target)
            }
            _ => bail!("say where to build: --into FILE (embedded) or --into-keyspace NAME (ScyllaDB)"),
        }
    }
}
