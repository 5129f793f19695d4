//! A queue-mode sale on the sale page: the buyer joins the waiting room
//! before the start (the pre-queue), sees a position once the places are
//! drawn, follows it as the people ahead buy (and the sale sells out and
//! gets a unit back), and buys with the entry on their turn.
//!
//! The pre-queue is a shuffle whose seed nobody knows before the start, so
//! where the page's buyer lands among the four is up to the draw: the sale
//! is paused over the start so that every place shows a position first,
//! then the test serves whoever is ahead (API users buy with their entry
//! tokens; a sell-out gets one unit added) until it is the page's turn.
//!
//! The sale has one unit, so a page behind anyone sees it sell out; a page
//! drawn first buys that unit, and the page is then opened as one of those
//! still waiting, who sees the sell-out instead. Either way a browser shows
//! it, in every run.

use std::collections::HashSet;

use chrono::{Duration, Utc};
use fantoccini::{Client, Locator};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::driver::Browser;
use super::{open_as, screenshot, text, until_enabled, until_text};
use crate::helpers::{eventually, Platform, DEADLINE};

const BUYER: &str = "queue-browser";
/// The others in the room, through the API: two join before the page's
/// buyer, one after.
const OTHERS: [&str; 3] = ["queue-api-1", "queue-api-2", "queue-api-3"];
const STOCK: u64 = 1;

/// Joins the room as `user` (retried while the room's seed is being
/// committed); the new place.
pub(super) async fn join(platform: &Platform, voucher: &str, user: &str) -> Value {
    eventually(|| async {
        let (status, body) = platform.post(&format!("/api/v1/vouchers/{voucher}/queue"), Some(user), None).await;
        if status == StatusCode::CONFLICT && body["error"] == "queue_not_open" {
            return None;
        }
        assert_eq!(status, StatusCode::CREATED, "{user} joins: {body}");
        Some(body)
    })
    .await
}

/// `user`'s place as `GET …/queue/me` tells it (which keeps it watched).
pub(super) async fn me(platform: &Platform, voucher: &str, user: &str) -> Value {
    let response = platform
        .http
        .get(format!("{}/api/v1/vouchers/{voucher}/queue/me", platform.base))
        .header("authorization", Platform::as_user(user))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::OK, "{user}'s place");
    response.json().await.expect("a status")
}

/// The place as the page shows it: `#queue-status`'s state, position and
/// text, read at once (the page re-renders between separate reads).
pub(super) async fn shown_place(client: &Client) -> (String, Option<u64>, String) {
    let script = "const s = document.getElementById('queue-status'); \
                  return [s.dataset.state, s.dataset.position, s.textContent];";
    let read = client.execute(script, Vec::new()).await.expect("#queue-status");
    let field = |i: usize| read[i].as_str().unwrap_or_default().to_owned();
    (field(0), field(1).parse().ok(), field(2))
}

/// Waits until the page shows the place in `wanted`; its position and text.
pub(super) async fn until_place(client: &Client, wanted: &str) -> (Option<u64>, String) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (state, position, shown) = shown_place(client).await;
        if state == wanted {
            return (position, shown);
        }
        assert!(tokio::time::Instant::now() < deadline, "the page still shows the place {state:?}: {shown:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn set_paused(platform: &Platform, voucher: &str, paused: bool) {
    let (status, body) = platform.update_voucher(voucher, json!({ "paused": paused })).await;
    assert_eq!((status, body["paused"].as_bool()), (StatusCode::OK, Some(paused)), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_waits_in_the_queue_and_buys_on_their_turn_in_a_browser() {
    let platform = Platform::start().await;
    // The browser first (the slow part): the pre-queue must still be open
    // when the page joins it, on a loaded machine too.
    let browser = Browser::start().await;
    let begins = Utc::now() + Duration::seconds(10);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": STOCK, "per_user_limit": 1, "begins_at": begins, "ends_at": begins + Duration::hours(1),
            "title": "Waiting-room sneakers", "mode": "queue", "queue_factor": 1.0,
            "queue_idle_seconds": 60, "queue_token_seconds": 120,
        }))
        .await;

    // Two others take a place first: places are not numbered yet.
    for user in &OTHERS[..2] {
        let place = join(&platform, &voucher, user).await;
        assert_eq!((place["state"].as_str(), &place["place"]), (Some("waiting"), &Value::Null), "{place}");
    }

    let client = &browser.client;
    open_as(client, &platform, &voucher, BUYER).await;

    // A waiting room instead of the Buy button, the countdown as ever.
    let join_button = until_enabled(client, "join").await;
    assert_eq!(join_button.text().await.expect("text"), "Join the waiting room");
    assert!(!client.find(Locator::Id("buy")).await.expect("#buy").is_displayed().await.expect("shown"));
    let countdown = text(client, "countdown").await;
    assert!(countdown.starts_with("00:00:"), "seconds to the start: {countdown}");
    assert!(Utc::now() + Duration::seconds(1) < begins, "the page joins before the start (raise the start's margin)");
    join_button.click().await.expect("joined");
    let (_, shown) = until_place(client, "pre_queue").await;
    assert_eq!(shown, "You are in the pre-queue: places are drawn at the start");
    screenshot(client, "queue-pre-queue.png").await;

    // The third one joins; the sale is paused over the start, so that every
    // place first shows its position (at the start a running sale gives
    // the first places their turn at once).
    join(&platform, &voucher, OTHERS[2]).await;
    set_paused(&platform, &voucher, true).await;
    assert!(Utc::now() < begins, "the sale was paused before the start (raise the start's margin)");

    // The start: the seed is revealed, the pre-queue gets its places.
    let (position, shown) = until_place(client, "waiting").await;
    let position = position.expect("a position");
    assert!((1..=4).contains(&position), "{position}");
    assert!(shown.starts_with(&format!("Position {position} ({} ahead), serving 0", position - 1)), "{shown}");
    screenshot(client, "queue-position.png").await;
    for user in OTHERS {
        let place = eventually(|| async { Some(me(&platform, &voucher, user).await).filter(|p| p["place"].is_u64()) });
        assert_eq!(place.await["state"], "waiting");
    }

    // The sale resumes: those ahead are served and buy; a sell-out keeps
    // the page's buyer in line until a unit is added.
    set_paused(&platform, &voucher, false).await;
    let mut seen = vec![format!("waiting {position}")];
    let mut bought: HashSet<&str> = HashSet::new();
    let mut stock = STOCK;
    let mut seen_sold_out = false;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (state, at, shown) = shown_place(client).await;
        let now_shown = match at {
            Some(at) => format!("{state} {at}"),
            None => state.clone(),
        };
        if seen.last() != Some(&now_shown) {
            seen.push(now_shown);
        }
        if state == "your_turn" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never the page's turn; it shows {shown:?} ({seen:?})");
        if state == "sold_out" && !seen_sold_out {
            assert_eq!(shown, "Sold out — you keep your place in case units come back");
            screenshot(client, "queue-sold-out.png").await;
            seen_sold_out = true;
        }
        for user in OTHERS {
            if bought.contains(user) {
                continue;
            }
            let place = me(&platform, &voucher, user).await;
            if let (Some("your_turn"), Some(token)) = (place["state"].as_str(), place["entry_token"].as_str()) {
                let (status, body) = platform.order_with_entry(&platform.base, &voucher, user, token).await;
                assert_eq!(status, StatusCode::ACCEPTED, "{user} buys: {body}");
                bought.insert(user);
            }
        }
        // Every unit went to the others: once the page says so, one more.
        if bought.len() as u64 == stock && state == "sold_out" {
            let (status, body) = platform.update_voucher(&voucher, json!({ "add_stock": 1 })).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            stock += 1;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    println!("the page showed: {seen:?}");
    // Everyone ahead (a smaller place) was served first: with the entries
    // a unit allows, some in the same step as the page's own turn.
    for user in OTHERS {
        let place = me(&platform, &voucher, user).await;
        if place["place"].as_u64().is_some_and(|their| their < position) {
            assert_eq!(
                place["state"], "your_turn",
                "{user} was ahead of the page and served first: {place} ({seen:?})"
            );
        }
    }

    // The turn: the entry's time counting down, and the Buy button.
    let (_, shown) = until_place(client, "your_turn").await;
    assert_eq!(shown, "Your turn: buy before your entry expires");
    let left = until_text(client, "entry-expires", |left| left.starts_with("00:01:") || left == "00:02:00").await;
    assert!(left.as_str() <= "00:02:00", "at most queue_token_seconds: {left}");
    let buy = until_enabled(client, "buy").await;
    screenshot(client, "queue-your-turn.png").await;
    buy.click().await.expect("bought");

    // The order, as for any sale: pending, then created.
    until_text(client, "order-status", |status| status == "CREATED").await;
    let order = text(client, "order-id").await;
    let (status, shown) = platform.get(&format!("{}/api/v1/orders/{order}", platform.base)).await;
    assert_eq!((status, shown["user_id"].as_str()), (StatusCode::OK, Some(BUYER)), "{shown}");
    let (_, shown) = until_place(client, "ordered").await;
    assert_eq!(shown, "Your entry placed your order");
    assert_eq!(me(&platform, &voucher, BUYER).await["order_id"].as_str(), Some(order.as_str()));
    screenshot(client, "queue-ordered.png").await;

    // Drawn first, the page bought the only unit before anyone: those still
    // waiting keep their places in a sold-out room, as one of them sees.
    if !seen_sold_out {
        assert_eq!(position, 1, "a page behind anyone saw the sell-out ({seen:?})");
        let mut waiting = Vec::new();
        for user in OTHERS {
            // A place still in line reads `sold_out` once the room has
            // sold out (as it has once the page bought), `waiting` before.
            if matches!(me(&platform, &voucher, user).await["state"].as_str(), Some("waiting" | "sold_out")) {
                waiting.push(user);
            }
        }
        let user = waiting.first().expect("someone behind the page still waits");
        open_as(client, &platform, &voucher, user).await;
        let (_, shown) = until_place(client, "sold_out").await;
        assert_eq!(shown, "Sold out — you keep your place in case units come back");
        screenshot(client, "queue-sold-out.png").await;
        seen_sold_out = true;
    }
    assert!(seen_sold_out, "a browser showed the sell-out");
    browser.close().await;
}
