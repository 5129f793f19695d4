//! The sale page shows a draw's and a waiting room's own timeline, from the
//! voucher read, to every reader (signed in or not): when entries close,
//! the beacon round the draw waits for, when it was drawn and how many won;
//! when the room opens and how many wait. The beacon draw runs against the
//! beacon sandbox as its own process, which goes away at the draw and comes
//! back: meanwhile the read and the page say the draw waits for the round.

use chrono::{DateTime, Duration, Utc};
use fantoccini::{Client, Locator};
use reqwest::StatusCode;
use seckill_devstack::{BeaconSandbox, TempDir};
use serde_json::{json, Value};

use super::driver::Browser;
use super::{screenshot, text, until_text};
use crate::beacon_draw::{beacon_config, chain_of};
use crate::helpers::{eventually, Platform};

async fn read(platform: &Platform, voucher: &str) -> Value {
    let (status, body) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn at(value: &Value) -> DateTime<Utc> {
    value.as_str().and_then(|text| text.parse().ok()).unwrap_or_else(|| panic!("a time: {value}"))
}

async fn shown(client: &Client, id: &str) -> bool {
    client.find(Locator::Id(id)).await.expect("the element").is_displayed().await.expect("shown")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_a_beacon_draws_timeline_waiting_for_its_round_in_a_browser() {
    let dir = TempDir::new().expect("dir");
    // The chain, then no relay: the sandbox comes back at the draw.
    let genesis = Utc::now().timestamp() - 5;
    let first = BeaconSandbox::start_at(&dir.path().join("a"), 1, genesis, None).expect("the beacon sandbox starts");
    let http = reqwest::Client::new();
    let chain = chain_of(&http, &first.url()).await;
    let port = first.port();
    let relay = first.url();
    drop(first);
    let platform = Platform::start_configured(None, |config| config.beacon = beacon_config(&chain, &relay)).await;
    let browser = Browser::start().await;
    let now = Utc::now();
    let draw_at = now + Duration::seconds(8);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 2, "per_user_limit": 1, "begins_at": now, "ends_at": now + Duration::hours(1),
            "title": "Beacon sneakers", "mode": "draw", "draw_at": draw_at, "purchase_seconds": 120,
        }))
        .await;
    for user in ["timeline-1", "timeline-2", "timeline-3"] {
        let path = format!("/api/v1/vouchers/{voucher}/entries");
        let (status, body) = eventually(|| async {
            let (status, body) = platform.post(&path, Some(user), None).await;
            (body["error"] != "draw_not_open").then_some((status, body))
        })
        .await;
        assert_eq!(status, StatusCode::CREATED, "{user}: {body}");
    }
    let round = chain.first_round_after(draw_at);
    let before = read(&platform, &voucher).await;
    let draw = &before["draw"];
    assert_eq!(at(&draw["entries_open_until"]).timestamp_millis(), draw_at.timestamp_millis(), "{before}");
    assert_eq!((draw["beacon_round"].as_u64(), draw["awaiting_beacon"].as_bool()), (Some(round), Some(false)));
    assert!(at(&draw["beacon_round_at"]) > draw_at, "{before}");
    assert!(draw["drawn_at"].is_null() && draw["winners"].is_null(), "{before}");

    // A reader who has not said who they are: the draw's timeline, not the
    // sale window's; the box saying who is buying is above.
    let client = &browser.client;
    client.goto(&format!("{}/sale/{voucher}", platform.base)).await.expect("the page loads");
    assert_eq!(
        until_text(client, "countdown-label", |label| !label.is_empty() && label != "Opens in").await,
        "Entries close in"
    );
    assert_eq!(text(client, "draw-status").await, "Say who is buying (above) to enter the draw.");
    let timeline = until_text(client, "draw-timeline", |line| line.ends_with("3 entries")).await;
    assert!(timeline.starts_with("Entries open until "), "{timeline}");
    assert!(timeline.contains(&format!("ranked by beacon round {round} (")), "{timeline}");
    screenshot(client, "timeline-entering.png").await;

    // Entries closed, the relay gone: the draw waits, and says so.
    let waiting = eventually(|| async {
        let body = read(&platform, &voucher).await;
        body["draw"]["awaiting_beacon"].as_bool().filter(|awaiting| *awaiting).map(|_| body)
    })
    .await;
    assert!(waiting["draw"]["winners"].is_null(), "{waiting}");
    assert_eq!(
        until_text(client, "countdown-label", |label| label == "Waiting for beacon round").await,
        "Waiting for beacon round"
    );
    assert_eq!(text(client, "countdown").await, format!("#{round}"));
    let timeline = until_text(client, "draw-timeline", |line| line.contains("waiting for beacon round")).await;
    assert!(timeline.contains(&format!("waiting for beacon round {round} (due ")), "{timeline}");
    assert_eq!(text(client, "draw-status").await, "Entries are closed: the draw is being made");
    assert!(!shown(client, "draw-enter").await, "no Enter button once entries closed");
    screenshot(client, "timeline-awaiting-beacon.png").await;

    // The relay is back: the draw is made by the round.
    let _second = BeaconSandbox::start_at(&dir.path().join("b"), 1, genesis, Some(port)).expect("the sandbox again");
    let drawn = eventually(|| async {
        let body = read(&platform, &voucher).await;
        body["draw"]["drawn_at"].is_string().then_some(body)
    })
    .await;
    let draw = &drawn["draw"];
    assert_eq!(
        (draw["winners"].as_u64(), draw["promoted"].as_u64(), draw["awaiting_beacon"].as_bool()),
        (Some(2), Some(0), Some(false))
    );
    assert!(at(&draw["drawn_at"]) >= at(&draw["beacon_round_at"]), "drawn after the round: {drawn}");
    assert_eq!(until_text(client, "countdown-label", |label| label == "Drawn at").await, "Drawn at");
    let timeline = until_text(client, "draw-timeline", |line| line.contains("drawn at")).await;
    assert!(timeline.contains(&format!("ranked by beacon round {round} (")), "{timeline}");
    assert!(timeline.ends_with("2 winners, 0 promoted so far"), "{timeline}");
    assert_eq!(text(client, "draw-status").await, "Entries are closed: the draw was made");
    assert!(!shown(client, "draw-enter").await);
    screenshot(client, "timeline-drawn.png").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_when_a_waiting_room_opens_and_how_many_wait_in_a_browser() {
    let platform = Platform::start().await;
    let browser = Browser::start().await;
    let now = Utc::now();
    let begins = now + Duration::minutes(5);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 5, "per_user_limit": 1, "begins_at": begins, "ends_at": begins + Duration::hours(1),
            "mode": "queue", "queue_opens_at": now,
        }))
        .await;
    for user in ["room-1", "room-2"] {
        let path = format!("/api/v1/vouchers/{voucher}/queue");
        let (status, body) = eventually(|| async {
            let (status, body) = platform.post(&path, Some(user), None).await;
            (status != StatusCode::CONFLICT).then_some((status, body))
        })
        .await;
        assert_eq!(status, StatusCode::CREATED, "{user}: {body}");
    }
    let body = eventually(|| async {
        let body = read(&platform, &voucher).await;
        (body["queue"]["waiting"].as_u64() == Some(2)).then_some(body)
    })
    .await;
    assert_eq!(at(&body["queue"]["opens_at"]).timestamp_millis(), now.timestamp_millis(), "{body}");
    assert!(body.get("draw").is_none(), "{body}");
    let client = &browser.client;
    client.goto(&format!("{}/sale/{voucher}", platform.base)).await.expect("the page loads");
    let line = until_text(client, "queue-timeline", |line| line.ends_with("2 places waiting")).await;
    assert!(line.starts_with("The room opens at "), "{line}");
    screenshot(client, "timeline-room.png").await;
    browser.close().await;
}
