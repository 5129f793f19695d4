//! A draw sale with a proof of work on the sale page: the buyer enters the
//! draw (the page solves the sale's challenge in its Web Worker first),
//! follows the entry to the draw, wins, buys within the purchase window
//! (solving another challenge) and sees the order created. And the other
//! side of a draw: an entrant not selected watches the page until the
//! winner's window lapses, is promoted, and buys; the winner's page then
//! says the window closed unused.
//!
//! There are as many units as entrants, so every entry wins whatever ranks
//! the draw gives. The two other entrants enter through the API, solving
//! their challenges with `seckill_core::challenge::solve`. The worker is
//! also run on a fixed, harder challenge, to time it and to check its
//! SHA-256 against the Rust one (it must find the very first solution).

use chrono::{Duration, Utc};
use fantoccini::{Client, Locator};
use reqwest::StatusCode;
use seckill_core::challenge;
use serde_json::{json, Value};

use super::driver::Browser;
use super::{open_as, screenshot, sign_in, text, until_enabled, until_text};
use crate::helpers::{eventually, Platform, DEADLINE};

const BUYER: &str = "draw-browser";
/// The other entrants, through the API: one before the page's buyer, one after.
const OTHERS: [&str; 2] = ["draw-api-1", "draw-api-2"];
const STOCK: u64 = 3;
/// Small enough for a debug build's headless Chromium (about 2^10 hashes).
const BITS: u32 = 10;
const PURCHASE_SECONDS: u64 = 120;
/// A challenge of the real shape and length, for timing the worker: at
/// 2^18 hashes expected it runs long enough to be measured.
const BENCH_CHALLENGE: &str = "c1.01936f2e-5b7a-7c3d-9e4f-0a1b2c3d4e5f.1767225600000.18.\
                               6f1d0c9b8a7e4d3c2b1a09f8e7d6c5b4.kE3x9QmT2vLr7nYb4pWc8sHj1fGd6aZu0oIy5eRt3wX";
const BENCH_BITS: u32 = 18;

/// The headers of a challenge for `user` on `voucher`, solved here.
async fn proof(platform: &Platform, voucher: &str, user: &str) -> [(&'static str, String); 2] {
    let response = platform
        .http
        .get(format!("{}/api/v1/vouchers/{voucher}/challenge", platform.base))
        .header("authorization", Platform::as_user(user))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::OK, "{user}'s challenge");
    let issued: Value = response.json().await.expect("a challenge");
    assert_eq!((issued["required"].as_bool(), issued["bits"].as_u64()), (Some(true), Some(BITS.into())), "{issued}");
    let text = issued["challenge"].as_str().expect("a challenge").to_owned();
    let solution = challenge::solve(&text, BITS);
    [("seckill-challenge", text), ("seckill-solution", solution)]
}

/// Enters `user` with a solved challenge (retried while the draw's seed is
/// being committed); the new entry.
async fn enter(platform: &Platform, voucher: &str, user: &str) -> Value {
    eventually(|| async {
        let mut request = platform
            .http
            .post(format!("{}/api/v1/vouchers/{voucher}/entries", platform.base))
            .header("authorization", Platform::as_user(user));
        for (name, value) in proof(platform, voucher, user).await {
            request = request.header(name, value);
        }
        let response = request.send().await.expect("answers");
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status == StatusCode::CONFLICT && body["error"] == "draw_not_open" {
            return None;
        }
        assert_eq!(status, StatusCode::CREATED, "{user} enters: {body}");
        Some(body)
    })
    .await
}

/// `user`'s entry as `GET …/entries/me` tells it.
async fn entry_of(platform: &Platform, voucher: &str, user: &str) -> Value {
    let response = platform
        .http
        .get(format!("{}/api/v1/vouchers/{voucher}/entries/me", platform.base))
        .header("authorization", Platform::as_user(user))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::OK, "{user}'s entry");
    response.json().await.expect("an entry")
}

/// The entry as the page shows it: `#draw-status`'s state and text, read
/// at once (the page re-renders between separate reads).
async fn shown_entry(client: &Client) -> (String, String) {
    let script = "const s = document.getElementById('draw-status'); return [s.dataset.state, s.textContent];";
    let read = client.execute(script, Vec::new()).await.expect("#draw-status");
    let field = |i: usize| read[i].as_str().unwrap_or_default().to_owned();
    (field(0), field(1))
}

/// Waits until the page shows the entry in `wanted`; its text.
async fn until_entry(client: &Client, wanted: &str) -> String {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (state, shown) = shown_entry(client).await;
        if state == wanted {
            return shown;
        }
        assert!(tokio::time::Instant::now() < deadline, "the page still shows the entry {state:?}: {shown:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A proof of work the page finished: hashes tried and milliseconds taken.
struct Solved {
    hashes: u64,
    ms: f64,
}

impl Solved {
    fn rate(&self) -> f64 {
        self.hashes as f64 / (self.ms.max(0.1) / 1000.0)
    }
}

/// Waits until `#pow-progress` shows the page's `count`-th proof done.
async fn until_solved(client: &Client, count: u64) -> Solved {
    let script = "const p = document.getElementById('pow-progress'); \
                  return [p.dataset.state || '', p.dataset.solved || '0', p.dataset.hashes || '0', \
                          p.dataset.ms || '0', p.value, document.getElementById('pow-text').textContent];";
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let read = client.execute(script, Vec::new()).await.expect("#pow-progress");
        let field = |i: usize| read[i].as_str().unwrap_or_default().to_owned();
        if field(0) == "done" && field(1).parse::<u64>().ok() == Some(count) {
            assert_eq!(read[4].as_f64(), Some(1.0), "a full bar once done");
            let shown = field(5);
            assert!(shown.starts_with("Proof of work done: "), "{shown}");
            assert!(shown.contains(&format!("(2^{BITS})")), "hashes against 2^bits: {shown}");
            return Solved { hashes: field(2).parse().expect("hashes"), ms: field(3).parse().expect("ms") };
        }
        assert!(field(0) != "failed", "the proof of work failed: {}", field(5));
        assert!(tokio::time::Instant::now() < deadline, "proof {count} never done: {read:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Runs the page's worker (`/sale/assets/pow.js`) on `challenge` at
/// `bits`: its solution, the hashes it tried and the milliseconds it took.
async fn worker_solves(client: &Client, challenge: &str, bits: u32) -> (String, Solved) {
    let script = "const [challenge, bits, done] = arguments; \
                  const worker = new Worker('/sale/assets/pow.js'); \
                  worker.onmessage = (event) => { \
                    if (event.data.type === 'progress') return; \
                    worker.terminate(); done(event.data); }; \
                  worker.onerror = (event) => done({ type: 'error', message: String(event.message) }); \
                  worker.postMessage({ challenge, bits });";
    let answer = client.execute_async(script, vec![json!(challenge), json!(bits)]).await.expect("the worker answers");
    assert_eq!(answer["type"], "done", "{answer}");
    let solution = answer["solution"].as_str().expect("a solution").to_owned();
    let solved = Solved { hashes: answer["hashes"].as_u64().expect("hashes"), ms: answer["ms"].as_f64().expect("ms") };
    (solution, solved)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_enters_a_draw_with_a_proof_of_work_wins_and_buys_in_a_browser() {
    let platform = Platform::start().await;
    // The browser first (the slow part): the entries must still be open
    // when the page enters, on a loaded machine too.
    let browser = Browser::start().await;
    let now = Utc::now();
    let draw_at = now + Duration::seconds(15);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": STOCK, "per_user_limit": 1, "begins_at": now, "ends_at": now + Duration::hours(1),
            "title": "Raffled sneakers", "mode": "draw", "draw_at": draw_at,
            "purchase_seconds": PURCHASE_SECONDS, "challenge_bits": BITS,
        }))
        .await;
    let (status, shown) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    assert_eq!(
        (status, shown["mode"].as_str(), shown["challenge_bits"].as_u64()),
        (StatusCode::OK, Some("draw"), Some(BITS.into()))
    );

    // One other enters first (which also waits out the seed's commitment).
    let first = enter(&platform, &voucher, OTHERS[0]).await;
    assert_eq!(first["state"], "entered", "{first}");

    let client = &browser.client;
    open_as(client, &platform, &voucher, BUYER).await;

    // Entries are open: the Enter button, the countdown to the draw, and no
    // Buy button before a win.
    let enter_button = until_enabled(client, "draw-enter").await;
    assert_eq!(enter_button.text().await.expect("text"), "Enter the draw");
    assert_eq!(until_entry(client, "not_entered").await, "Entries are open: enter the draw for a chance to buy");
    assert_eq!(text(client, "draw-countdown-label").await, "Draw in");
    assert!(!client.find(Locator::Id("buy")).await.expect("#buy").is_displayed().await.expect("shown"));
    enter_button.click().await.expect("entered");

    // The page pays for the entry with a proof of work, then is in the draw.
    let entry_proof = until_solved(client, 1).await;
    screenshot(client, "draw-pow.png").await;
    let shown = until_entry(client, "entered").await;
    assert!(shown.starts_with("You are in the draw ("), "{shown}");
    let left = text(client, "draw-countdown").await;
    assert!(left.starts_with("00:00:"), "seconds to the draw: {left}");
    assert!(Utc::now() + Duration::seconds(1) < draw_at, "the page entered before the draw (raise its margin)");
    screenshot(client, "draw-entered.png").await;
    let mine = entry_of(&platform, &voucher, BUYER).await;
    assert_eq!(mine["state"], "entered", "the page's entry is in the draw: {mine}");
    assert!(mine["seq"].as_u64().is_some(), "{mine}");
    let last = enter(&platform, &voucher, OTHERS[1]).await;
    assert_eq!((last["state"].as_str(), last["entries"].as_u64()), (Some("entered"), Some(3)), "{last}");

    // The draw: three entries for three units, everyone wins.
    let shown = until_entry(client, "won").await;
    assert!(shown.starts_with("You won — buy before "), "{shown}");
    assert_eq!(text(client, "draw-countdown-label").await, "Buy within");
    let left = until_text(client, "draw-countdown", |left| left.starts_with("00:01:") || left == "00:02:00").await;
    assert!(left.as_str() <= "00:02:00", "at most purchase_seconds: {left}");
    for user in [BUYER, OTHERS[0], OTHERS[1]] {
        let entry = entry_of(&platform, &voucher, user).await;
        assert_eq!(
            (entry["state"].as_str(), entry["entries"].as_u64(), entry["winners"].as_u64()),
            (Some("won"), Some(3), Some(STOCK)),
            "{user}: {entry}"
        );
        assert!(entry["rank"].as_u64().is_some_and(|rank| (1..=3).contains(&rank)), "{entry}");
    }
    let buy = until_enabled(client, "buy").await;
    screenshot(client, "draw-won.png").await;
    buy.click().await.expect("bought");

    // The order pays with a second proof, then is pending, then created.
    let order_proof = until_solved(client, 2).await;
    until_text(client, "order-status", |status| status == "CREATED").await;
    let order = text(client, "order-id").await;
    let (status, shown) = platform.get(&format!("{}/api/v1/orders/{order}", platform.base)).await;
    assert_eq!((status, shown["user_id"].as_str()), (StatusCode::OK, Some(BUYER)), "{shown}");
    assert_eq!(until_entry(client, "won").await, "You won — your order is placed");
    let mine =
        eventually(|| async { Some(entry_of(&platform, &voucher, BUYER).await).filter(|e| e["order_id"].is_string()) });
    assert_eq!(mine.await["order_id"].as_str(), Some(order.as_str()));
    assert!(!client.find(Locator::Id("buy")).await.expect("#buy").is_displayed().await.expect("shown"));
    screenshot(client, "draw-ordered.png").await;

    // The worker's SHA-256 is Rust's: on a harder challenge it stops at the
    // very first solution counting up from 0, as `challenge::solve` does.
    let (solution, bench) = worker_solves(client, BENCH_CHALLENGE, BENCH_BITS).await;
    assert_eq!(solution, challenge::solve(BENCH_CHALLENGE, BENCH_BITS));
    assert_eq!(bench.hashes, solution.parse::<u64>().expect("decimal") + 1);
    println!(
        "proof of work in headless Chromium: entry {} hashes in {:.1} ms, order {} hashes in {:.1} ms; \
         2^{BENCH_BITS} bench {} hashes in {:.1} ms = {:.0} hashes/s",
        entry_proof.hashes,
        entry_proof.ms,
        order_proof.hashes,
        order_proof.ms,
        bench.hashes,
        bench.ms,
        bench.rate()
    );
    browser.close().await;
}

/// Enters `user` without a proof (retried while the draw's seed is being
/// committed).
async fn enter_plainly(platform: &Platform, voucher: &str, user: &str) {
    let path = format!("/api/v1/vouchers/{voucher}/entries");
    let (status, body) = eventually(|| async {
        let (status, body) = platform.post(&path, Some(user), None).await;
        (body["error"] != "draw_not_open").then_some((status, body))
    })
    .await;
    assert_eq!(status, StatusCode::CREATED, "{user} enters: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entrant_not_selected_is_promoted_when_the_win_lapses_and_buys_in_a_browser() {
    let platform = Platform::start().await;
    let browser = Browser::start().await;
    let now = Utc::now();
    let draw_at = now + Duration::seconds(6);
    // Long enough for the page, open since before the draw, to show "not
    // selected" before the winner's window lapses, on a loaded machine too.
    const WINDOW: i64 = 15;
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 1, "per_user_limit": 1, "begins_at": now, "ends_at": now + Duration::hours(1),
            "title": "The last pair", "mode": "draw", "draw_at": draw_at, "purchase_seconds": WINDOW,
        }))
        .await;
    let users = ["draw-pair-1", "draw-pair-2"];
    for user in users {
        enter_plainly(&platform, &voucher, user).await;
    }
    // The page is open before the winners are known, as a buyer's would be:
    // it hears the draw rather than loading after it (on a busy machine a
    // page loaded late met both windows over).
    let client = &browser.client;
    open_as(client, &platform, &voucher, users[0]).await;
    // One unit, one winner: which one is the seed's to say.
    let first = eventually(|| async {
        let entry = entry_of(&platform, &voucher, users[0]).await;
        entry["winners"].is_u64().then_some(entry)
    })
    .await;
    let (winner, second) = if first["state"] == "won" { (users[0], users[1]) } else { (users[1], users[0]) };
    if second != users[0] {
        sign_in(client, second).await;
    }
    assert_eq!(until_entry(client, "not_selected").await, "Not selected — you are next in line if a unit comes back");
    assert!(!client.find(Locator::Id("buy")).await.expect("#buy").is_displayed().await.expect("shown"));
    screenshot(client, "draw-not-selected.png").await;

    // The winner buys nothing: at the window's end the page hears the promotion.
    let shown = until_entry(client, "promoted").await;
    assert!(shown.starts_with("Promoted: a unit came back to you — buy before "), "{shown}");
    assert_eq!(text(client, "draw-countdown-label").await, "Buy within");
    let buy = until_enabled(client, "buy").await;
    screenshot(client, "draw-promoted.png").await;
    buy.click().await.expect("bought");
    until_text(client, "order-status", |status| status == "CREATED").await;
    let order = text(client, "order-id").await;
    let (status, shown) = platform.get(&format!("{}/api/v1/orders/{order}", platform.base)).await;
    assert_eq!((status, shown["user_id"].as_str()), (StatusCode::OK, Some(second)), "{shown}");
    assert_eq!(until_entry(client, "promoted").await, "Promoted: a unit came back to you — your order is placed");

    // The winner's page: the window closed unused.
    open_as(client, &platform, &voucher, winner).await;
    assert_eq!(until_entry(client, "lapsed").await, "Your purchase window closed unused");
    assert!(!client.find(Locator::Id("buy")).await.expect("#buy").is_displayed().await.expect("shown"));
    screenshot(client, "draw-lapsed.png").await;
    browser.close().await;
}
