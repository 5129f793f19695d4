//! A waiting room shuffled by a beacon round, on the sale page: the buyer
//! is in the pre-queue when the sale begins, the beacon sandbox (its own
//! process) has gone away, so the round cannot be fetched: the page says
//! the room waits for that round and the buyer stays in the pre-queue,
//! served by nobody, past the round's time. The sandbox comes back on the
//! same port, the ingress fetches the round, and the page moves on: the
//! places drawn by the round, the buyer's turn, an order placed with it.

use chrono::{Duration, Utc};
use fantoccini::Locator;
use reqwest::StatusCode;
use seckill_devstack::{BeaconSandbox, TempDir};
use serde_json::{json, Value};

use super::driver::Browser;
use super::queue::{join, me, shown_place, until_place};
use super::{open_as, screenshot, text, until_enabled, until_text};
use crate::beacon_draw::{beacon_config, chain_of};
use crate::helpers::Platform;

const BUYER: &str = "room-beacon-page";
const OTHER: &str = "room-beacon-api";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_waits_for_the_rooms_beacon_round_then_serves_by_it_in_a_browser() {
    let dir = TempDir::new().expect("dir");
    // The chain is read from a sandbox that then goes: no relay answers
    // until the second one starts on its port.
    let genesis = Utc::now().timestamp() - 5;
    let first = BeaconSandbox::start_at(&dir.path().join("a"), 1, genesis, None).expect("the beacon sandbox starts");
    let chain = chain_of(&reqwest::Client::new(), &first.url()).await;
    let (port, relay) = (first.port(), first.url());
    drop(first);
    let platform = Platform::start_configured(None, |config| config.beacon = beacon_config(&chain, &relay)).await;
    // The browser first (the slow part): the pre-queue must still be open
    // when the buyer joins it, on a loaded machine too.
    let browser = Browser::start().await;
    // Joining, loading the page and signing in took over 8 s on a loaded
    // run (the suite's other lanes beside it), after the start.
    let begins = Utc::now() + Duration::seconds(15);
    let voucher = platform
        .create_voucher_from(json!({
            "stock": 2, "per_user_limit": 1, "begins_at": begins, "ends_at": begins + Duration::hours(1),
            "title": "Beacon room sneakers", "mode": "queue", "queue_factor": 1.0, "queue_entry_rate": 1000,
            "queue_idle_seconds": 60, "queue_token_seconds": 120,
        }))
        .await;
    let round = chain.first_round_after(begins);
    for user in [OTHER, BUYER] {
        join(&platform, &voucher, user).await;
    }
    assert!(Utc::now() < begins, "the pre-queue was joined before the start (raise the start's margin)");

    let client = &browser.client;
    open_as(client, &platform, &voucher, BUYER).await;
    let (_, before) = until_place(client, "pre_queue").await;
    assert_eq!(before, "You are in the pre-queue: places are drawn at the start");
    // Before the start the round is only named: nothing is drawn yet.
    let named = text(client, "queue-timeline").await;
    assert!(named.contains(&format!("places to be drawn by beacon round {round} (due ")), "{named}");

    // The sale began and the relay is gone: the room waits, and says so.
    let line = until_text(client, "queue-timeline", |line| line.contains("waiting for beacon round")).await;
    assert!(line.contains(&format!("waiting for beacon round {round} (due ")), "{line}");
    assert!(line.ends_with(") to draw the places"), "{line}");
    assert!(Utc::now() >= begins, "the page said the room waits before the start: {line}");
    screenshot(client, "room-beacon-waiting.png").await;
    // Past the round's time, still unpublished here: nobody is served,
    // the page keeps the buyer in the pre-queue and the Buy button away.
    let round_at = chain.round_time(round);
    while Utc::now() < round_at + Duration::seconds(2) {
        let (state, position, shown) = shown_place(client).await;
        assert_eq!((state.as_str(), position), ("pre_queue", None), "served before the round: {shown}");
        assert!(text(client, "queue-timeline").await.contains("waiting for beacon round"));
        assert!(!client.find(Locator::Id("buy")).await.expect("#buy").is_displayed().await.expect("shown"));
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let (status, read) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    assert_eq!((status, read["queue"]["awaiting_beacon"].as_bool()), (StatusCode::OK, Some(true)), "{read}");
    let other = me(&platform, &voucher, OTHER).await;
    assert_eq!((other["state"].as_str(), &other["place"]), (Some("waiting"), &Value::Null), "{other}");

    // The relay is back: the round is fetched, the places drawn by it,
    // and the page's buyer is served (two units, two places).
    let _second = BeaconSandbox::start_at(&dir.path().join("b"), 1, genesis, Some(port)).expect("the sandbox again");
    let line = until_text(client, "queue-timeline", |line| line.contains("places drawn by beacon round")).await;
    assert!(line.contains(&format!("places drawn by beacon round {round} (")), "{line}");
    let (_, turn) = until_place(client, "your_turn").await;
    assert_eq!(turn, "Your turn: buy before your entry expires");
    until_enabled(client, "buy").await.click().await.expect("bought");
    until_text(client, "order-status", |status| status == "CREATED").await;
    until_place(client, "ordered").await;
    screenshot(client, "room-beacon-served.png").await;
    let (_, read) = platform.get(&format!("{}/api/v1/vouchers/{voucher}", platform.base)).await;
    assert_eq!(read["queue"]["awaiting_beacon"], false, "{read}");
    browser.close().await;
}
