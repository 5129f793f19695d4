//! The cost for bots end to end: a voucher with `challenge_bits` asks every
//! order (and queue join, and draw entry) for a solved challenge, accepts
//! each solution once across ingresses, refuses wrong, forged, borrowed
//! and expired ones with their own codes; the difficulty rises with the
//! request rate, the rate of every ingress together; the per-user and
//! per-address admission buckets hold across two ingresses.

use chrono::Utc;
use reqwest::StatusCode;
use seckill_core::{challenge, UserId};
use serde_json::{json, Value};

use crate::helpers::{eventually, Platform};

/// `GET …/challenge` as `user` through `base`.
async fn get_challenge(platform: &Platform, base: &str, voucher: &str, user: &str) -> Value {
    let response = platform
        .http
        .get(format!("{base}/api/v1/vouchers/{voucher}/challenge"))
        .header("authorization", Platform::as_user(user))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("a challenge")
}

/// `POST {path}` as `user` through `base` with a proof (challenge, solution).
async fn post_with(
    platform: &Platform,
    base: &str,
    path: &str,
    user: &str,
    proof: Option<(&str, &str)>,
) -> (StatusCode, Value) {
    let mut request = platform.http.post(format!("{base}{path}")).header("authorization", Platform::as_user(user));
    if let Some((challenge, solution)) = proof {
        request = request.header("seckill-challenge", challenge).header("seckill-solution", solution);
    }
    let response = request.send().await.expect("answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A fresh challenge for `user`, solved.
async fn solved(platform: &Platform, base: &str, voucher: &str, user: &str) -> (String, String) {
    let issued = get_challenge(platform, base, voucher, user).await;
    let text = issued["challenge"].as_str().expect("a challenge").to_owned();
    let bits = u32::try_from(issued["bits"].as_u64().expect("bits")).expect("small");
    let solution = challenge::solve(&text, bits);
    (text, solution)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_challenge_pays_for_one_request_and_bad_ones_are_refused_by_name() {
    let mut platform = Platform::start().await;
    // A second ingress raises the difficulty past 5 challenges a second
    // and holds users and addresses to a pace.
    platform.ingress_config.challenge.raise_above_per_second = 5;
    platform.ingress_config.rate_limit.per_user_per_second = 1;
    platform.ingress_config.rate_limit.per_user_burst = 2;
    let (paced, _paced_ingress) = platform.another_ingress().await;
    let begins = Utc::now() - chrono::Duration::seconds(1);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 50, "per_user_limit": 5, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1),
            "challenge_bits": 8,
        }))
        .await;
    let (_, body) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    assert_eq!(body["challenge_bits"], 8, "{body}");
    let orders = format!("/api/v1/vouchers/{voucher}/orders");
    let base = platform.base.clone();

    let (status, body) = post_with(&platform, &base, &orders, "alice", None).await;
    assert_eq!(
        (status, body["error"].as_str(), body["bits"].as_u64()),
        (StatusCode::FORBIDDEN, Some("challenge_required"), Some(8))
    );
    let issued = get_challenge(&platform, &base, &voucher, "alice").await;
    assert_eq!((issued["required"].as_bool(), issued["bits"].as_u64()), (Some(true), Some(8)), "{issued}");
    assert_eq!(issued["algorithm"], "sha256-leading-zero-bits");

    // Solved: accepted once, through either ingress.
    let (text, solution) = solved(&platform, &base, &voucher, "alice").await;
    let (status, body) = post_with(&platform, &base, &orders, "alice", Some((&text, &solution))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, body) = post_with(&platform, &paced, &orders, "alice", Some((&text, &solution))).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::CONFLICT, Some("challenge_used")), "{body}");

    // Wrong, borrowed, forged, expired: each refused by name, nothing taken.
    let (text, solution) = solved(&platform, &base, &voucher, "alice").await;
    let wrong = (0u64..).map(|n| n.to_string()).find(|s| challenge::work(&text, s) < 8).expect("most fail");
    let (status, body) = post_with(&platform, &base, &orders, "alice", Some((&text, &wrong))).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("challenge_wrong_solution")), "{body}");
    let (status, body) = post_with(&platform, &base, &orders, "alice", Some((&text, "12ab"))).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("challenge_wrong_solution")), "{body}");
    let (status, body) = post_with(&platform, &base, &orders, "bob", Some((&text, &solution))).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("challenge_invalid")), "{body}");
    let easier = text.replacen(".8.", ".1.", 1);
    let (status, body) = post_with(&platform, &base, &orders, "alice", Some((&easier, "0"))).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("challenge_invalid")), "{body}");
    let (status, body) = post_with(&platform, &base, &orders, "alice", Some((&text, ""))).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("challenge_wrong_solution")), "{body}");
    let mut connection = platform.redis_connection().await;
    let key: Vec<u8> = redis::cmd("GET")
        .arg(format!("{}:challenge_key", platform.redis.key_prefix))
        .query_async(&mut connection)
        .await
        .expect("the shared key");
    let alice = UserId::parse("alice").expect("valid");
    let past = Utc::now().timestamp_millis() - 1_000;
    let stale = challenge::issue(&key, voucher.parse().expect("voucher id"), &alice, past, 8);
    let stale_solution = challenge::solve(&stale, 8);
    let (status, body) = post_with(&platform, &base, &orders, "alice", Some((&stale, &stale_solution))).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("challenge_expired")), "{body}");
    let (status, body) = post_with(&platform, &base, &orders, "alice", Some((&text, &solution))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "the unspent challenge still pays: {body}");
    assert_eq!(platform.redis_remaining(&voucher).await, 48, "two orders, nothing else taken");

    // The rate raises the difficulty (at once on the ingress that counts it).
    let mut bits = Vec::new();
    for _ in 0..30 {
        bits.push(get_challenge(&platform, &paced, &voucher, "carol").await["bits"].as_u64().expect("bits"));
    }
    assert_eq!(bits[0], 8);
    assert!(bits.iter().any(|b| *b > 8) && bits.iter().all(|b| *b <= 8 + 6), "{bits:?}");

    // The pace: two orders of one user at once pass, the third waits.
    let (a, b) = (solved(&platform, &paced, &voucher, "dave").await, solved(&platform, &paced, &voucher, "dave").await);
    let c = solved(&platform, &paced, &voucher, "dave").await;
    for (i, (text, solution)) in [a, b, c].iter().enumerate() {
        let (status, body) = post_with(&platform, &paced, &orders, "dave", Some((text, solution))).await;
        if i < 2 {
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        } else {
            assert_eq!(
                (status, body["error"].as_str()),
                (StatusCode::TOO_MANY_REQUESTS, Some("rate_limited")),
                "{body}"
            );
        }
    }

    // A queue join asks for one too; a repeated join of the place held does not.
    let queued = platform
        .create_voucher_from(json!({
            "stock": 1, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1),
            "mode": "queue", "challenge_bits": 4,
        }))
        .await;
    let join = format!("/api/v1/vouchers/{queued}/queue");
    let (status, body) = eventually(|| async {
        let (status, body) = post_with(&platform, &base, &join, "erin", None).await;
        (body["error"] != "queue_not_open").then_some((status, body))
    })
    .await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("challenge_required")), "{body}");
    let (text, solution) = solved(&platform, &base, &queued, "erin").await;
    let (status, body) = post_with(&platform, &base, &join, "erin", Some((&text, &solution))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _) = post_with(&platform, &base, &join, "erin", None).await;
    assert_eq!(status, StatusCode::OK);

    // The rate is the platform's: one ingress asked every 300 ms (at most 4
    // a second, under 5) raises nothing; two asked at that pace each do,
    // through the count they share in Redis.
    let (paced_too, _paced_too_ingress) = platform.another_ingress().await;
    let shared = platform
        .create_voucher_from(json!({
            "stock": 1, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1), "challenge_bits": 8,
        }))
        .await;
    let bits_of = |issued: Value| issued["bits"].as_u64().expect("bits");
    for _ in 0..8 {
        assert_eq!(bits_of(get_challenge(&platform, &paced, &shared, "frank").await), 8, "one ingress alone");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let (mut raised_here, mut raised_there) = (false, false);
    for _ in 0..40 {
        raised_here |= bits_of(get_challenge(&platform, &paced, &shared, "frank").await) > 8;
        raised_there |= bits_of(get_challenge(&platform, &paced_too, &shared, "grace").await) > 8;
        if raised_here && raised_there {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    assert!(raised_here && raised_there, "both ingresses raise the bits at the rate they make together");
}
