//! The cost for bots end to end: a voucher with `challenge_bits` asks every
//! order (and queue join, and draw entry) for a solved challenge, accepts
//! each solution once across ingresses, refuses wrong, forged, borrowed
//! and expired ones with their own codes; the difficulty rises with the
//! rate of proofs spent (asking for challenges raises nothing, and each
//! user may ask only so fast), the rate of every ingress together, and is
//! judged when a proof is spent; the per-user and per-address admission
//! buckets hold across two ingresses.

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

    // Asking for challenges, however fast, raises nobody's bits: 20 users
    // ask at once, four times the 5 a second that raises them.
    let askers: Vec<String> = (0..20).map(|i| format!("asker-{i}")).collect();
    let asked =
        futures::future::join_all(askers.iter().map(|asker| get_challenge(&platform, &paced, &voucher, asker))).await;
    assert!(asked.iter().all(|issued| issued["bits"] == 8), "{asked:?}");

    // Proofs spent do: a challenge fetched before the rush, at the floor,
    // is judged by the bits of when it is spent, and refused.
    let early = solved(&platform, &paced, &voucher, "early-bird").await;
    let rush = (0..12).map(|i| format!("rusher-{i}"));
    let mut bits = Vec::new();
    for rusher in rush {
        let (text, solution) = solved(&platform, &paced, &voucher, &rusher).await;
        bits.push(text.split('.').nth(3).and_then(|b| b.parse::<u32>().ok()).expect("bits"));
        let (status, body) = post_with(&platform, &paced, &orders, &rusher, Some((&text, &solution))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    assert!(bits.iter().any(|b| *b > 8) && bits.iter().all(|b| *b <= 8 + 6), "{bits:?}");
    let (status, body) = post_with(&platform, &paced, &orders, "early-bird", Some((&early.0, &early.1))).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::FORBIDDEN, Some("challenge_too_easy")), "{body}");
    assert!(body["bits"].as_u64().expect("the bits asked") > 8, "{body}");

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

    // The rate is the platform's: proofs spent through one ingress every
    // 300 ms (at most 4 a second, under 5) raise nothing; through two, each
    // under 5 a second (one every 200 ms and the spending's own time), they
    // do, through the count they share in Redis.
    let (paced_too, _paced_too_ingress) = platform.another_ingress().await;
    let shared = platform
        .create_voucher_from(json!({
            "stock": 1000, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1), "challenge_bits": 8,
        }))
        .await;
    let shared_orders = format!("/api/v1/vouchers/{shared}/orders");
    // One order through `base` as a new user; the bits it was judged by:
    // its challenge's when admitted, or those a `challenge_too_easy` names
    // when the rate rose between fetching the challenge and spending it
    // (what a client is told to meet with a new challenge).
    let spend = |base: String, buyer: String| {
        let (platform, shared, shared_orders) = (&platform, &shared, &shared_orders);
        async move {
            let (text, solution) = solved(platform, &base, shared, &buyer).await;
            let (status, body) = post_with(platform, &base, shared_orders, &buyer, Some((&text, &solution))).await;
            if (status, body["error"].as_str()) == (StatusCode::FORBIDDEN, Some("challenge_too_easy")) {
                return body["bits"].as_u64().expect("the bits asked");
            }
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
            text.split('.').nth(3).and_then(|b| b.parse::<u64>().ok()).expect("bits")
        }
    };
    for i in 0..8 {
        assert_eq!(spend(paced.clone(), format!("alone-{i}")).await, 8, "one ingress alone");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let (mut raised_here, mut raised_there) = (false, false);
    for i in 0..40 {
        raised_here |= spend(paced.clone(), format!("here-{i}")).await > 8;
        raised_there |= spend(paced_too.clone(), format!("there-{i}")).await > 8;
        if raised_here && raised_there {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(raised_here && raised_there, "both ingresses raise the bits at the rate they spend together");
}

/// Each user may ask for challenges only so fast: past the burst, a `429`
/// that says so and when to come back; other users are not held by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn challenge_requests_are_limited_per_user() {
    let mut platform = Platform::start().await;
    platform.ingress_config.challenge.per_user_per_second = 1;
    platform.ingress_config.challenge.per_user_burst = 3;
    let (limited, _limited_ingress) = platform.another_ingress().await;
    let begins = Utc::now() - chrono::Duration::seconds(1);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 5, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1), "challenge_bits": 8,
        }))
        .await;
    let ask = |user: &'static str| {
        let request = platform
            .http
            .get(format!("{limited}/api/v1/vouchers/{voucher}/challenge"))
            .header("authorization", Platform::as_user(user));
        async move { request.send().await.expect("answers") }
    };
    for _ in 0..3 {
        assert_eq!(ask("heidi").await.status(), StatusCode::OK);
    }
    let refused = ask("heidi").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"), "{:?}", refused.headers());
    let body: Value = refused.json().await.expect("an error");
    assert_eq!(body["error"], "rate_limited", "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("challenges")), "{body}");
    assert_eq!(ask("ivan").await.status(), StatusCode::OK, "another user is not held");
}

/// The per-address admission bucket is kept in Redis, shared by every
/// ingress: orders of several users from one address, alternating between
/// two ingresses, get one burst between them, not one each (each ingress's
/// own per-address limiter would let a burst through each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_address_bucket_holds_across_two_ingresses() {
    const BURST: u32 = 3;
    let mut platform = Platform::start().await;
    platform.ingress_config.rate_limit.per_ip_per_second = 1;
    platform.ingress_config.rate_limit.per_ip_burst = BURST;
    let (one, _one_ingress) = platform.another_ingress().await;
    let (two, _two_ingress) = platform.another_ingress().await;
    let begins = Utc::now() - chrono::Duration::seconds(1);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 100, "begins_at": begins, "ends_at": begins + chrono::Duration::hours(1),
        }))
        .await;
    let orders = format!("/api/v1/vouchers/{voucher}/orders");
    let started = std::time::Instant::now();
    let mut answers = Vec::new();
    for i in 0..8 {
        let base = if i % 2 == 0 { &one } else { &two };
        answers.push(post_with(&platform, base, &orders, &format!("neighbour-{i}"), None).await);
    }
    // A token comes back each second: at most that many more than the burst.
    let refills = u32::try_from(started.elapsed().as_secs()).expect("seconds") + 1;
    let accepted = answers.iter().filter(|(status, _)| *status == StatusCode::ACCEPTED).count();
    assert!(
        (BURST as usize..=(BURST + refills) as usize).contains(&accepted),
        "one burst for both ingresses, {accepted} accepted: {answers:?}"
    );
    // The rest refused for their pace: by the shared bucket (the sale's),
    // and, past each ingress's own burst, by that ingress.
    let by_the_sale = |(status, body): &&(StatusCode, Value)| {
        *status == StatusCode::TOO_MANY_REQUESTS
            && body["message"].as_str().is_some_and(|m| m.contains("this address for this sale"))
    };
    assert!(answers.iter().any(|answer| by_the_sale(&answer)), "the shared bucket refused: {answers:?}");
    assert!(
        answers.iter().all(|(status, _)| [StatusCode::ACCEPTED, StatusCode::TOO_MANY_REQUESTS].contains(status)),
        "{answers:?}"
    );
    assert_eq!(platform.redis_remaining(&voucher).await, 100 - accepted as u64, "a refused order took nothing");
}
