//! A draw's or a waiting room's secret seed, sealed into its logged
//! commitment (`DrawSeedCommitted`, `QueueSeedCommitted`) so that a draw or
//! a room without a beacon that Redis lost before its reveal can be rebuilt
//! from the log with the very seed it committed to.
//!
//! The seed is 32 bytes (64 hex digits, [`crate::queue::new_seed`]); sealed,
//! it is those bytes XOR HMAC-SHA256(key, `seckill-draw-seed:<voucher>:<seed
//! hash>`), in hex. The pad is a pseudorandom function of the commitment,
//! which is unique to the seed, so no two seeds share a pad; without the
//! key the sealed value says nothing about the seed, and with it the seed
//! is checked against the commitment before it is trusted. Whoever holds
//! the key could read a seed before its reveal, but only the operator does,
//! who holds the seed in Redis anyway: sealing gives nobody a power over the
//! draw or the room they did not have. The pad's label says "draw" for both
//! (one voucher has a draw or a room, never both; the label is kept as it
//! was, so that draws' seeds sealed before still open).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::ids::VoucherId;
use crate::queue::{is_seed, seed_commitment};

/// `seed` sealed for `voucher` under `key`; None when `seed` is not a seed.
pub fn seal(key: &[u8], voucher: VoucherId, seed: &str) -> Option<String> {
    let bytes = from_hex(seed).filter(|_| is_seed(seed))?;
    Some(hex(&xor(&bytes, &pad(key, voucher, &seed_commitment(seed)))))
}

/// The seed `sealed` holds, if `key` opens it and it matches `seed_hash`
/// (the commitment it was logged with).
pub fn unseal(key: &[u8], voucher: VoucherId, seed_hash: &str, sealed: &str) -> Option<String> {
    let bytes = from_hex(sealed).filter(|bytes| bytes.len() == 32)?;
    let seed = hex(&xor(&bytes, &pad(key, voucher, seed_hash)));
    (seed_commitment(&seed) == seed_hash).then_some(seed)
}

fn pad(key: &[u8], voucher: VoucherId, seed_hash: &str) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(format!("seckill-draw-seed:{voucher}:{seed_hash}").as_bytes());
    mac.finalize().into_bytes().into()
}

fn xor(bytes: &[u8], pad: &[u8; 32]) -> Vec<u8> {
    bytes.iter().zip(pad).map(|(byte, pad)| byte ^ pad).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::new_seed;

    #[test]
    fn a_sealed_seed_opens_only_with_its_key_voucher_and_commitment() {
        let (key, voucher, seed) = (b"the operator's key".as_slice(), VoucherId::generate(), new_seed());
        let sealed = seal(key, voucher, &seed).expect("a seed");
        assert_eq!(sealed.len(), 64);
        assert_ne!(sealed, seed);
        let hash = seed_commitment(&seed);
        assert_eq!(unseal(key, voucher, &hash, &sealed), Some(seed.clone()));
        assert_eq!(unseal(b"another key", voucher, &hash, &sealed), None, "another key");
        assert_eq!(unseal(key, VoucherId::generate(), &hash, &sealed), None, "another voucher");
        assert_eq!(unseal(key, voucher, &seed_commitment(&new_seed()), &sealed), None, "another commitment");
        assert_eq!(unseal(key, voucher, &hash, "zz"), None, "not hex");
        assert_eq!(seal(key, voucher, "not a seed"), None);
    }

    #[test]
    fn two_seeds_never_share_a_pad() {
        let (key, voucher) = (b"k".as_slice(), VoucherId::generate());
        let (a, b) = (new_seed(), new_seed());
        let (sealed_a, sealed_b) = (seal(key, voucher, &a).expect("a"), seal(key, voucher, &b).expect("b"));
        let pad_of = |seed: &str, sealed: &str| {
            xor(&from_hex(seed).expect("hex"), &from_hex(sealed).expect("hex").try_into().expect("32 bytes"))
        };
        assert_ne!(pad_of(&a, &sealed_a), pad_of(&b, &sealed_b));
    }
}
