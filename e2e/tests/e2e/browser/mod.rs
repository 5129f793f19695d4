//! The sale page in a real browser: the reference client, driven in
//! headless Chromium from the countdown to a confirmed order.

mod driver;

use chrono::{Duration, Utc};
use fantoccini::{Client, Locator};
use reqwest::StatusCode;
use seckill_devstack::user_token;

use self::driver::{artifacts, Browser};
use crate::helpers::{Platform, DEADLINE};

/// An element's text.
async fn text(client: &Client, id: &str) -> String {
    client.find(Locator::Id(id)).await.unwrap_or_else(|e| panic!("#{id}: {e}")).text().await.expect("text")
}

/// The sale's phase as the page holds it (its badge's `data-phase`; the
/// badge's text is styled in capitals).
async fn phase(client: &Client) -> String {
    let badge = client.find(Locator::Id("phase")).await.expect("#phase");
    badge.attr("data-phase").await.expect("an attribute").unwrap_or_default()
}

/// Waits until the page shows the sale in `wanted`.
async fn until_phase(client: &Client, wanted: &str) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let shown = phase(client).await;
        if shown == wanted {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "the page still shows the sale {shown:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Waits until `ready` accepts the text of `#id`; returns it.
async fn until_text(client: &Client, id: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let shown = text(client, id).await;
        if ready(&shown) {
            return shown;
        }
        assert!(tokio::time::Instant::now() < deadline, "#{id} still shows {shown:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_counts_down_buys_and_sees_the_order_created_and_confirmed_in_a_browser() {
    let platform = Platform::start().await;
    // The browser first: it is the slow part, and the sale must still be
    // upcoming when the page first shows it, on a loaded machine too.
    let browser = Browser::start().await;
    let begins = Utc::now() + Duration::seconds(10);
    let voucher = platform.create_voucher_between(3, 1, begins, begins + Duration::hours(1)).await;
    let client = &browser.client;
    client.goto(&format!("{}/sale/{voucher}", platform.base)).await.expect("the page loads");

    // The buyer pastes a token, as a login service would have issued it.
    let token = user_token("browser-buyer");
    client.find(Locator::Id("token")).await.expect("#token").send_keys(&token).await.expect("typed");
    client.find(Locator::Id("save-identity")).await.expect("#save-identity").click().await.expect("clicked");
    assert_eq!(until_text(client, "who", |who| who == "browser-buyer").await, "browser-buyer");

    // Before the sale: upcoming, counting down on the server's clock.
    until_phase(client, "upcoming").await;
    let countdown = text(client, "countdown").await;
    assert!(countdown.starts_with("00:00:"), "seconds left: {countdown}");
    assert!(!client.find(Locator::Id("buy")).await.expect("#buy").is_enabled().await.expect("state"));

    // The countdown reaches zero and the sale opens.
    until_phase(client, "open").await;
    assert_eq!(text(client, "countdown-label").await, "Closes in");
    let buy = client.find(Locator::Id("buy")).await.expect("#buy");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !buy.is_enabled().await.expect("state") {
        assert!(tokio::time::Instant::now() < deadline, "the buy button never enabled");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    buy.click().await.expect("bought");

    // The order's status is pushed to the page as it changes.
    until_text(client, "order-status", |status| status == "CREATED").await;
    let order = text(client, "order-id").await;
    let (status, shown) = platform.get(&format!("{}/api/v1/orders/{order}", platform.base)).await;
    assert_eq!((status, shown["user_id"].as_str()), (StatusCode::OK, Some("browser-buyer")));
    let screenshot = artifacts().join("sale-page.png");
    std::fs::write(&screenshot, client.screenshot().await.expect("a screenshot")).expect("saved");
    println!("screenshot: {}", screenshot.display());

    client.find(Locator::Id("confirm")).await.expect("#confirm").click().await.expect("clicked");
    until_text(client, "order-status", |status| status == "CONFIRMED").await;
    until_text(client, "available", |available| available == "2").await;
    let confirmed = artifacts().join("sale-page-confirmed.png");
    std::fs::write(&confirmed, client.screenshot().await.expect("a screenshot")).expect("saved");
    browser.close().await;
}
