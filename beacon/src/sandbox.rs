//! The beacon sandbox: a drand chain of one signer, serving drand's HTTP
//! API, because no drand network runs where the tests do. It signs as
//! `quicknet` does (BLS on G1, public key on G2, RFC 9380 hash-to-curve
//! with [`crate::DST`], message SHA-256(round as big-endian u64)) under a
//! key of its own, one round every `period` seconds from `genesis_time`.
//!
//! | Route | What |
//! |---|---|
//! | `GET /{chain hash}/info`, `GET /info` | the chain: `public_key`, `period`, `genesis_time`, `hash`, `groupHash`, `schemeID`, `metadata.beaconID` |
//! | `GET /{chain hash}/public/{round}`, `GET /public/{round}` | `{round, randomness, signature}`; a round not yet published: `404` "too early" |
//! | `GET /{chain hash}/public/latest`, `GET /public/latest` | the latest published round |
//! | `GET /healthz` | `200` |
//!
//! Its chain hash is SHA-256 of the public key, the period and the genesis
//! (drand hashes its group file; the sandbox has none). Another hash in a
//! path answers `404`.

use std::net::SocketAddr;
use std::sync::Arc;

use bls12_381::hash_to_curve::{ExpandMsgXmd, HashToCurve};
use bls12_381::{G1Affine, G1Projective, G2Affine, Scalar};
use chrono::Utc;
use seckill_core::beacon::{BeaconChain, BeaconRound};
use serde_json::json;
use sha2::{Digest, Sha256, Sha512};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use warp::http::StatusCode;
use warp::Filter;

use crate::hex;

/// The key seed a sandbox signs with unless told another: every sandbox
/// of one genesis and period is then the same chain.
pub const DEFAULT_KEY_SEED: &str = "seckill beacon sandbox";

/// A secret key and its public key.
#[derive(Clone)]
pub struct Signer {
    secret: Scalar,
    public_key: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("public_key", &self.public_key).finish_non_exhaustive()
    }
}

impl Signer {
    /// The key derived from `seed` (SHA-512 of it, reduced mod the group
    /// order): the same seed, the same chain.
    pub fn from_seed(seed: &[u8]) -> Self {
        let wide: [u8; 64] = Sha512::digest(seed).into();
        let secret = Scalar::from_bytes_wide(&wide);
        let public_key = hex::encode(&G2Affine::from(G2Affine::generator() * secret).to_compressed());
        Self { secret, public_key }
    }

    /// The chain this key signs, from `genesis_time` every `period` seconds.
    pub fn chain(&self, genesis_time: i64, period: u32) -> BeaconChain {
        let mut hash = Sha256::new();
        hash.update(self.public_key.as_bytes());
        hash.update(period.to_be_bytes());
        hash.update(genesis_time.to_be_bytes());
        BeaconChain { hash: hex::encode(&hash.finalize()), public_key: self.public_key.clone(), genesis_time, period }
    }

    /// `round`, signed.
    pub fn sign(&self, round: u64) -> BeaconRound {
        let message = Sha256::digest(round.to_be_bytes());
        let point: G1Projective =
            <G1Projective as HashToCurve<ExpandMsgXmd<sha2_09::Sha256>>>::hash_to_curve(message.as_slice(), crate::DST);
        let signature = G1Affine::from(point * self.secret).to_compressed();
        BeaconRound { round, signature: hex::encode(&signature) }
    }
}

/// The sandbox's chain and signer.
#[derive(Clone, Debug)]
pub struct Beacon {
    signer: Signer,
    chain: BeaconChain,
}

impl Beacon {
    pub fn new(signer: Signer, genesis_time: i64, period: u32) -> Self {
        let chain = signer.chain(genesis_time, period);
        Self { signer, chain }
    }

    pub fn chain(&self) -> &BeaconChain {
        &self.chain
    }

    /// The latest round published by now (0 before genesis).
    pub fn latest(&self) -> u64 {
        let elapsed = Utc::now().timestamp_millis() - self.chain.genesis_time * 1000;
        if elapsed < 0 {
            return 0;
        }
        u64::try_from(elapsed / (i64::from(self.chain.period.max(1)) * 1000)).unwrap_or(0) + 1
    }

    fn info(&self) -> serde_json::Value {
        json!({
            "public_key": self.chain.public_key,
            "period": self.chain.period,
            "genesis_time": self.chain.genesis_time,
            "hash": self.chain.hash,
            "groupHash": self.chain.hash,
            "schemeID": "bls-unchained-g1-rfc9380",
            "metadata": {"beaconID": "sandbox"},
        })
    }

    fn public(&self, round: Option<u64>) -> warp::reply::WithStatus<warp::reply::Json> {
        let latest = self.latest();
        let round = round.unwrap_or(latest);
        if round == 0 || round > latest {
            let body = json!({"error": format!("too early: round {round} is published at {}", self.chain.round_time(round.max(1)))});
            return warp::reply::with_status(warp::reply::json(&body), StatusCode::NOT_FOUND);
        }
        let signed = self.signer.sign(round);
        let randomness = hex::decode(&signed.signature).map(|bytes| crate::randomness(&bytes)).unwrap_or_default();
        let body = json!({"round": round, "randomness": randomness, "signature": signed.signature});
        warp::reply::with_status(warp::reply::json(&body), StatusCode::OK)
    }
}

/// Serves `beacon` on `listener` until `shutdown`.
pub async fn serve(beacon: Beacon, listener: TcpListener, shutdown: CancellationToken) {
    let beacon = Arc::new(beacon);
    let with = {
        let beacon = beacon.clone();
        warp::any().map(move || beacon.clone())
    };
    // An optional leading segment naming the chain: drand's default-chain
    // forms have none.
    let chain = warp::path::param::<String>()
        .and(with.clone())
        .and_then(|hash: String, beacon: Arc<Beacon>| async move {
            if hash == beacon.chain.hash {
                Ok(beacon)
            } else {
                Err(warp::reject::not_found())
            }
        })
        .or(with.clone())
        .unify();
    let info = chain.clone().and(warp::path!("info")).map(|beacon: Arc<Beacon>| warp::reply::json(&beacon.info()));
    let latest = chain.clone().and(warp::path!("public" / "latest")).map(|beacon: Arc<Beacon>| beacon.public(None));
    let round =
        chain.and(warp::path!("public" / u64)).map(|beacon: Arc<Beacon>, round: u64| beacon.public(Some(round)));
    let health = warp::path!("healthz").map(|| "ok");
    let routes = warp::get().and(health.or(info).or(latest).or(round));
    warp::serve(routes).incoming(listener).graceful(shutdown.cancelled_owned()).run().await;
}

/// Binds `addr`; the bound address and the listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(SocketAddr, TcpListener)> {
    let listener = TcpListener::bind(addr).await?;
    Ok((listener.local_addr()?, listener))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_signs_rounds_that_verify_under_its_chain_only() {
        let signer = Signer::from_seed(b"test");
        let chain = signer.chain(1_700_000_000, 3);
        let round = signer.sign(42);
        let randomness = crate::verify(&chain, &round).expect("its own rounds verify");
        assert_eq!(randomness.len(), 64);
        assert!(crate::verify(&chain, &BeaconRound { round: 43, ..round.clone() }).is_err());
        assert!(crate::verify(&BeaconChain::quicknet(), &round).is_err(), "not drand's");
        assert_eq!(signer.sign(42), round, "deterministic, as BLS is");
    }
}
