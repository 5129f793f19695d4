//! The local run's randomness beacon: the beacon sandbox
//! (`seckill-beacon-sandbox`, drand's HTTP API and signature scheme under a
//! key of its own) as a process of its own on `--beacon-port`, and the
//! ingress's `[beacon]` pointing at it, so draws and waiting rooms created
//! in the local run rank by a beacon round as in production.
//!
//! The chain's genesis is kept in the data directory: a restarted run
//! serves the same chain, so draws made before the restart still verify
//! (`seckill draw verify` checks their rounds against it).

use std::path::Path;

use anyhow::Context;
use seckill_beacon::sandbox::{Signer, DEFAULT_KEY_SEED};
use seckill_core::beacon::BeaconConfig;
use seckill_devstack::BeaconSandbox;

/// Seconds between rounds: drand's quicknet's.
const PERIOD: u32 = 3;
/// The file under the data directory that keeps the chain's genesis.
const GENESIS_FILE: &str = "genesis";

/// The running sandbox and the ingress's configuration for it; the
/// sandbox stops when this is dropped.
#[derive(Debug)]
pub(crate) struct DevBeacon {
    _sandbox: BeaconSandbox,
    config: BeaconConfig,
}

impl DevBeacon {
    /// The ingress's `[beacon]`: the sandbox as its one relay.
    pub(crate) fn config(&self) -> BeaconConfig {
        self.config.clone()
    }
}

/// Starts the sandbox on `port` with its data in `data/beacon`; None, with
/// a warning, when its binary is not built (draws then rank by the
/// operator's committed seed, as the docs say of a platform without a
/// beacon).
pub(crate) async fn start(data: &Path, port: u16) -> anyhow::Result<Option<DevBeacon>> {
    if !BeaconSandbox::installed() {
        tracing::warn!(
            "The beacon sandbox is not built (cargo build -p seckill-beacon): draws and waiting rooms rank by the \
             operator's committed seed."
        );
        return Ok(None);
    }
    let dir = data.join("beacon");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let genesis = genesis(&dir)?;
    let sandbox = tokio::task::block_in_place(|| BeaconSandbox::start_at(&dir, PERIOD, genesis, Some(port)))
        .context("starting the beacon sandbox (--beacon-port)")?;
    let chain = Signer::from_seed(DEFAULT_KEY_SEED.as_bytes()).chain(genesis, PERIOD);
    let config = BeaconConfig {
        relays: vec![sandbox.url()],
        chain_hash: chain.hash,
        public_key: chain.public_key,
        genesis_time: chain.genesis_time,
        period: chain.period,
        ..BeaconConfig::default()
    };
    Ok(Some(DevBeacon { _sandbox: sandbox, config }))
}

/// The chain's genesis (Unix seconds): the one kept in `dir`, or now,
/// kept for the next run.
fn genesis(dir: &Path) -> anyhow::Result<i64> {
    let file = dir.join(GENESIS_FILE);
    match std::fs::read_to_string(&file) {
        Ok(kept) => kept.trim().parse().with_context(|| format!("{} holds no Unix time", file.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let now = chrono::Utc::now().timestamp();
            std::fs::write(&file, format!("{now}\n")).with_context(|| format!("writing {}", file.display()))?;
            Ok(now)
        }
        Err(error) => Err(error).with_context(|| format!("reading {}", file.display())),
    }
}
