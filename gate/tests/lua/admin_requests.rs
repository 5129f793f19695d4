//! What admin requests with an `Idempotency-Key` remember: one claim wins,
//! the first answer is the one kept, both expire.

use std::time::Duration;

use futures::future::join_all;
use seckill_gate::AdminRetryKey;

use crate::Harness;

const TTL: Duration = Duration::from_secs(60);

async fn one_claim_wins_and_the_first_answer_is_kept(h: &Harness) {
    let key = AdminRetryKey::new(h.gate.prefix(), "restock-{42}").expect("valid");
    assert_eq!(h.gate.admin_request(&key).await.expect("reads"), None);

    let claims = (0..50).map(|i| {
        let (gate, key) = (h.gate.clone(), key.clone());
        async move { gate.claim_admin_request(&key, format!("change {i}").as_bytes(), TTL).await.expect("claims") }
    });
    let claims = join_all(claims).await;
    assert_eq!(claims.iter().filter(|claim| claim.is_none()).count(), 1, "one request claims the key");
    let first = h.gate.admin_request(&key).await.expect("reads").expect("claimed");
    assert!(claims.iter().flatten().all(|other| *other == first), "the others see the first one's change");
    assert_eq!(first.answer, None);

    assert_eq!(h.gate.answer_admin_request(&key, b"first", TTL).await.expect("kept"), b"first");
    assert_eq!(h.gate.answer_admin_request(&key, b"second", TTL).await.expect("kept"), b"first", "first wins");
    let remembered = h.gate.admin_request(&key).await.expect("reads").expect("there");
    assert_eq!(remembered.answer.as_deref(), Some(&b"first"[..]));

    let mut ttls = Vec::new();
    for suffix in ["request", "answer"] {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:{{admin:*}}:{suffix}", h.gate.prefix()))
            .query_async(&mut h.connection.clone())
            .await
            .expect("KEYS");
        let [name] = keys.try_into().expect("one key");
        let ttl: i64 = redis::cmd("PTTL").arg(&name).query_async(&mut h.connection.clone()).await.expect("PTTL");
        ttls.push(ttl);
    }
    assert!(ttls.iter().all(|ttl| *ttl > 0 && *ttl <= 60_000), "both expire: {ttls:?}");
}

#[test]
fn admin_keys_follow_the_idempotency_key_rules_and_keep_one_hash_tag() {
    assert!(AdminRetryKey::new("p", "").is_err());
    assert!(AdminRetryKey::new("p", "has space").is_err());
    assert!(AdminRetryKey::new("p", &"k".repeat(129)).is_err());
    let braces = format!("{:?}", AdminRetryKey::new("p", "a}{b").expect("valid"));
    assert_eq!(braces.matches('{').count(), 3, "the key's braces are hex-encoded: {braces}");
}

crate::on_single_and_cluster! {
    single_only: [],
    both: [
        one_claim_wins_and_the_first_answer_is_kept,
    ],
}
