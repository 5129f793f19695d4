//! Checking a round: its signature is a BLS signature on G1 of SHA-256(the
//! round as a big-endian u64) under the chain's public key on G2, hashed to
//! the curve by RFC 9380 with [`DST`] (drand's `bls-unchained-g1-rfc9380`
//! scheme, `quicknet`'s); its randomness is SHA-256 of the signature.

use drand_verify::{G2PubkeyRfc, Pubkey};
use seckill_core::beacon::{BeaconChain, BeaconRound};
use sha2::{Digest, Sha256};

use crate::hex;

/// The hash-to-curve domain separation tag of the scheme.
pub const DST: &[u8] = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_";

/// Why a round does not check.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BeaconError {
    #[error("the chain's public key is not a compressed G2 point")]
    PublicKey,
    #[error("the signature is not a compressed G1 point")]
    SignatureShape,
    #[error("the signature of round {0} does not verify under the chain's public key")]
    Signature(u64),
}

/// Checks `round` against `chain`; its randomness (64 hex digits) if the
/// signature verifies.
pub fn verify(chain: &BeaconChain, round: &BeaconRound) -> Result<String, BeaconError> {
    let key: [u8; 96] =
        hex::decode(&chain.public_key).and_then(|bytes| bytes.try_into().ok()).ok_or(BeaconError::PublicKey)?;
    let key = G2PubkeyRfc::from_fixed(key).map_err(|_| BeaconError::PublicKey)?;
    let signature =
        hex::decode(&round.signature).filter(|bytes| bytes.len() == 48).ok_or(BeaconError::SignatureShape)?;
    match key.verify(round.round, b"", &signature) {
        Ok(true) => Ok(randomness(&signature)),
        Ok(false) => Err(BeaconError::Signature(round.round)),
        Err(_) => Err(BeaconError::SignatureShape),
    }
}

/// A round's randomness from its signature's bytes: SHA-256, in hex.
pub fn randomness(signature: &[u8]) -> String {
    hex::encode(&Sha256::digest(signature))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published `quicknet` rounds (`/52db9ba7…/public/{round}` on drand's
    /// relays), as drand-verify's and ChainSafe Forest's tests quote them.
    const QUICKNET_ROUNDS: [(u64, &str); 3] = [
        (2, "b6b6a585449b66eb12e875b64fcbab3799861a00e4dbf092d99e969a5eac57dd3f798acf61e705fe4f093db926626807"),
        (3, "b3fab6df720b68cc47175f2c777e86d84187caab5770906f515ff1099cb01e4deaa027075d860823e49477b93c72bd64"),
        (123, "b75c69d0b72a5d906e854e808ba7e2accb1542ac355ae486d591aa9d43765482e26cd02df835d3546d23c4b13e0dfc92"),
    ];

    fn round(round: u64, signature: &str) -> BeaconRound {
        BeaconRound { round, signature: signature.to_owned() }
    }

    #[test]
    fn published_quicknet_rounds_verify_under_the_real_key() {
        let chain = BeaconChain::quicknet();
        for (number, signature) in QUICKNET_ROUNDS {
            assert!(verify(&chain, &round(number, signature)).is_ok(), "round {number}");
        }
        // The randomness drand publishes for round 123.
        assert_eq!(
            verify(&chain, &round(123, QUICKNET_ROUNDS[2].1)),
            Ok("fb8f7bc29bf24db51871ec8c79f3a1e4bd0557bc0dfcee9ed1d924e69d1c60dc".to_owned())
        );
    }

    #[test]
    fn a_wrong_round_a_tampered_signature_or_another_key_fails() {
        let chain = BeaconChain::quicknet();
        let (number, signature) = QUICKNET_ROUNDS[2];
        assert_eq!(verify(&chain, &round(number + 1, signature)), Err(BeaconError::Signature(number + 1)));
        assert_eq!(
            verify(&chain, &round(3, QUICKNET_ROUNDS[0].1)),
            Err(BeaconError::Signature(3)),
            "round 2's signature for round 3"
        );
        let mut tampered = signature.to_owned();
        tampered.replace_range(90..92, if &signature[90..92] == "00" { "01" } else { "00" });
        assert!(verify(&chain, &round(number, &tampered)).is_err());
        let other = crate::sandbox::Signer::from_seed(b"another group").chain(QUICKNET_GENESIS_FOR_TESTS, 3);
        assert_eq!(verify(&other, &round(number, signature)), Err(BeaconError::Signature(number)));
        assert_eq!(verify(&chain, &round(number, "zz")), Err(BeaconError::SignatureShape));
    }

    const QUICKNET_GENESIS_FOR_TESTS: i64 = seckill_core::beacon::QUICKNET_GENESIS;
}
