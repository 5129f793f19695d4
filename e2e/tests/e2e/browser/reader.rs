//! The reader's own draw state in the voucher read and on the sale page:
//! `GET /api/v1/vouchers/{id}` with a user's token carries `me` (entered,
//! then won or not selected, then used, and a win's window end), without
//! one it carries none, and with a token that does not check out it is
//! refused. The page, signed in, shows it (`#draw-mine`) from that read.
//!
//! One unit, two entrants: one wins at the draw, the other is not selected.

use chrono::{Duration, Utc};
use fantoccini::{Client, Locator};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::driver::Browser;
use super::{open_as, screenshot};
use crate::helpers::{eventually, Platform, DEADLINE};

const ENTRANTS: [&str; 2] = ["mine-1", "mine-2"];

/// The voucher read with `authorization` (None: anonymous).
async fn read_as(platform: &Platform, voucher: &str, authorization: Option<String>) -> (StatusCode, Value) {
    let mut request = platform.http.get(format!("{}/api/v1/vouchers/{voucher}", platform.base));
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    let response = request.send().await.expect("answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `user`'s `me` in the voucher read.
async fn me(platform: &Platform, voucher: &str, user: &str) -> Value {
    let (status, body) = read_as(platform, voucher, Some(Platform::as_user(user))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["me"].clone()
}

/// `#draw-mine`'s state, window end and text, read at once.
async fn shown_mine(client: &Client) -> (String, String, String) {
    let script =
        "const m = document.getElementById('draw-mine'); return [m.dataset.state, m.dataset.until, m.textContent];";
    let read = client.execute(script, Vec::new()).await.expect("#draw-mine");
    let field = |i: usize| read[i].as_str().unwrap_or_default().to_owned();
    (field(0), field(1), field(2))
}

async fn until_mine(client: &Client, wanted: &str) -> (String, String) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (state, until, text) = shown_mine(client).await;
        if state == wanted {
            return (until, text);
        }
        assert!(tokio::time::Instant::now() < deadline, "the page still shows {state:?}: {text:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_voucher_read_and_the_page_show_the_readers_own_draw_state_in_a_browser() {
    let platform = Platform::start().await;
    let browser = Browser::start().await;
    let now = Utc::now();
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 1, "per_user_limit": 1, "begins_at": now, "ends_at": now + Duration::hours(1),
            "mode": "draw", "draw_at": now + Duration::seconds(6), "purchase_seconds": 300,
        }))
        .await;
    for user in ENTRANTS {
        let path = format!("/api/v1/vouchers/{voucher}/entries");
        let (status, body) = eventually(|| async {
            let (status, body) = platform.post(&path, Some(user), None).await;
            (body["error"] != "draw_not_open").then_some((status, body))
        })
        .await;
        assert_eq!(status, StatusCode::CREATED, "{user}: {body}");
    }
    let (status, anonymous) = read_as(&platform, &voucher, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(anonymous.get("me").is_none(), "nobody's state without credentials: {anonymous}");
    let (status, refused) = read_as(&platform, &voucher, Some("Bearer not.a.token".to_owned())).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    let before = me(&platform, &voucher, ENTRANTS[0]).await;
    assert_eq!((before["state"].as_str(), before["user_id"].as_str()), (Some("entered"), Some(ENTRANTS[0])));
    assert!(before.get("purchase_until").is_none(), "{before}");
    assert_eq!(me(&platform, &voucher, "mine-never-entered").await["state"], "not_entered");

    // The draw: one of the two wins.
    let (winner, other) = eventually(|| async {
        let (first, second) = (me(&platform, &voucher, ENTRANTS[0]).await, me(&platform, &voucher, ENTRANTS[1]).await);
        match (first["state"].as_str(), second["state"].as_str()) {
            (Some("won"), Some("not_selected")) => Some((ENTRANTS[0], ENTRANTS[1])),
            (Some("not_selected"), Some("won")) => Some((ENTRANTS[1], ENTRANTS[0])),
            _ => None,
        }
    })
    .await;
    let won = me(&platform, &voucher, winner).await;
    let (status, entry) = {
        let response = platform
            .http
            .get(format!("{}/api/v1/vouchers/{voucher}/entries/me", platform.base))
            .header("authorization", Platform::as_user(winner))
            .send()
            .await
            .expect("answers");
        (response.status(), response.json::<Value>().await.expect("an entry"))
    };
    assert_eq!(status, StatusCode::OK);
    assert_eq!(won["purchase_until"], entry["purchase_until"], "the window's end, as the entry tells it");
    assert_eq!(won["rank"].as_u64(), Some(1), "{won}");

    // The page, signed in as each.
    let client = &browser.client;
    open_as(client, &platform, &voucher, other).await;
    let (until, text) = until_mine(client, "not_selected").await;
    assert_eq!((until.as_str(), text.as_str()), ("", "Your draw: not selected"));
    open_as(client, &platform, &voucher, winner).await;
    let (until, text) = until_mine(client, "won").await;
    assert_eq!(Some(until.as_str()), won["purchase_until"].as_str(), "the window's end: {text}");
    assert!(text.starts_with("Your draw: won until "), "{text}");
    screenshot(client, "draw-mine-won.png").await;

    // The win spent: used, with its order.
    let (status, order) = platform.order(&voucher, winner).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{order}");
    let (until, text) = until_mine(client, "used").await;
    assert_eq!((until.as_str(), text.as_str()), ("", "Your draw: won, order placed"));
    let used = me(&platform, &voucher, winner).await;
    assert_eq!(used["order_id"], order["order_id"], "{used}");
    assert!(client.find(Locator::Id("draw-mine")).await.expect("#draw-mine").is_displayed().await.expect("shown"));
    browser.close().await;
}
