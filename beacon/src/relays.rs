//! Fetching a round from drand HTTP relays (`[beacon] relays`): each is
//! asked `GET {relay}/{chain hash}/public/{round}` within a bounded time,
//! in order, and the first answer whose signature verifies is taken. A
//! relay that answers `404` or `425` has not published the round yet.

use std::time::Duration;

use seckill_core::beacon::{BeaconChain, BeaconConfig, BeaconRound};
use serde::Deserialize;

/// Why no round came back.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Every relay said the round is not published yet.
    #[error("round {0} is not published yet")]
    TooEarly(u64),
    /// No relay gave a round that verifies; the last problem.
    #[error("no relay gave round {round}: {last}")]
    Unavailable { round: u64, last: String },
}

/// The configured relays of one chain.
#[derive(Clone, Debug)]
pub struct Relays {
    client: reqwest::Client,
    relays: Vec<String>,
    chain: BeaconChain,
    retry: Duration,
}

#[derive(Deserialize)]
struct Published {
    round: u64,
    signature: String,
}

impl Relays {
    /// The relays `config` names, or None when it names none.
    pub fn from_config(config: &BeaconConfig) -> Option<Self> {
        let chain = config.chain()?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .connect_timeout(Duration::from_millis(config.timeout_ms))
            .build()
            .ok()?;
        Some(Self {
            client,
            relays: config.relays.iter().map(|relay| relay.trim_end_matches('/').to_owned()).collect(),
            chain,
            retry: Duration::from_millis(config.retry_ms),
        })
    }

    pub fn chain(&self) -> &BeaconChain {
        &self.chain
    }

    /// How long to wait before asking again after a failed fetch.
    pub fn retry(&self) -> Duration {
        self.retry
    }

    /// `round` of `chain` (the chain a sale's plan names: the relays serve
    /// it under its hash), its signature checked.
    pub async fn fetch(&self, chain: &BeaconChain, round: u64) -> Result<BeaconRound, FetchError> {
        let mut early = 0;
        let mut last = String::from("no relays");
        for relay in &self.relays {
            let url = format!("{relay}/{}/public/{round}", chain.hash);
            match self.fetch_one(&url, chain, round).await {
                Ok(Some(found)) => return Ok(found),
                Ok(None) => early += 1,
                Err(problem) => {
                    tracing::warn!(%url, %problem, "A beacon relay did not give the round.");
                    last = problem;
                }
            }
        }
        if early > 0 && early == self.relays.len() {
            return Err(FetchError::TooEarly(round));
        }
        Err(FetchError::Unavailable { round, last })
    }

    async fn fetch_one(&self, url: &str, chain: &BeaconChain, round: u64) -> Result<Option<BeaconRound>, String> {
        let response = self.client.get(url).send().await.map_err(|error| error.to_string())?;
        let status = response.status().as_u16();
        if status == 404 || status == 425 {
            return Ok(None);
        }
        if status != 200 {
            return Err(format!("answered {status}"));
        }
        let published: Published = response.json().await.map_err(|error| error.to_string())?;
        if published.round != round {
            return Err(format!("answered round {} for {round}", published.round));
        }
        let found = BeaconRound { round, signature: published.signature };
        crate::verify(chain, &found).map_err(|error| error.to_string())?;
        Ok(Some(found))
    }
}
