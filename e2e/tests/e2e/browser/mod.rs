//! The sale page in a real browser: the reference client, driven in
//! headless Chromium from the countdown to a claimed order, and a priced
//! one paid at the payment provider's checkout (its sandbox).

mod draw;
mod driver;
mod queue;
mod reader;
mod room_beacon;
mod timeline;

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

/// Waits until the button `#id` is displayed and enabled.
async fn until_enabled(client: &Client, id: &str) -> fantoccini::elements::Element {
    let button = client.find(Locator::Id(id)).await.unwrap_or_else(|e| panic!("#{id}: {e}"));
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !(button.is_displayed().await.expect("shown") && button.is_enabled().await.expect("state")) {
        assert!(tokio::time::Instant::now() < deadline, "#{id} never enabled");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    button
}

/// Signs the page in as `user` (in place of whoever was signed in): their
/// token pasted, as a login service would have issued it, until the page
/// says who is buying.
async fn sign_in(client: &Client, user: &str) {
    let field = client.find(Locator::Id("token")).await.expect("#token");
    field.clear().await.expect("cleared");
    field.send_keys(&user_token(user)).await.expect("typed");
    client.find(Locator::Id("save-identity")).await.expect("#save-identity").click().await.expect("clicked");
    assert_eq!(until_text(client, "who", |who| who == user).await, user);
}

/// Opens `voucher`'s sale page as `user`.
async fn open_as(client: &Client, platform: &Platform, voucher: &str, user: &str) {
    client.goto(&format!("{}/sale/{voucher}", platform.base)).await.expect("the page loads");
    sign_in(client, user).await;
}

/// Saves the page as `target/test-artifacts/{name}`.
async fn screenshot(client: &Client, name: &str) {
    let path = artifacts().join(name);
    std::fs::write(&path, client.screenshot().await.expect("a screenshot")).expect("saved");
    println!("screenshot: {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_counts_down_buys_and_sees_the_order_created_and_claimed_in_a_browser() {
    let platform = Platform::start().await;
    // The browser first: it is the slow part, and the sale must still be
    // upcoming when the page first shows it, on a loaded machine too.
    let browser = Browser::start().await;
    let begins = Utc::now() + Duration::seconds(10);
    let voucher = platform.create_voucher_between(3, 1, begins, begins + Duration::hours(1)).await;
    let client = &browser.client;
    client.goto(&format!("{}/sale/{voucher}", platform.base)).await.expect("the page loads");

    // The buyer pastes a token, as a login service would have issued it.
    sign_in(client, "browser-buyer").await;

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
    until_text(client, "order-status", |status| status == "PAID").await;
    until_text(client, "available", |available| available == "2").await;
    let confirmed = artifacts().join("sale-page-confirmed.png");
    std::fs::write(&confirmed, client.screenshot().await.expect("a screenshot")).expect("saved");
    browser.close().await;
}

/// A priced sale: the page shows what is sold and its price, the buyer
/// pays at the provider's checkout (the payments sandbox) and comes back to
/// the order, which turns `PAID` when the provider's signed callback lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_pays_a_priced_order_at_the_checkout_and_sees_it_paid_in_a_browser() {
    // The ingress on a known port: the checkout's way back names it.
    let ingress_port = seckill_devstack::free_port();
    let sandbox_addr = std::net::SocketAddr::from(([127, 0, 0, 1], seckill_devstack::free_port()));
    let base = format!("http://127.0.0.1:{ingress_port}");
    let platform = Platform::start_configured(None, |config| {
        config.http = seckill_core::config::HttpConfig::local(ingress_port);
        config.payments = seckill_core::config::PaymentsConfig {
            return_url: format!("{base}/sale/{{voucher_id}}"),
            ..seckill_core::config::PaymentsConfig::sandbox(&format!("http://{sandbox_addr}"))
        };
    })
    .await;
    // The sandbox of a Stripe-shaped provider, delivering to this ingress.
    let sandbox = seckill_sandbox::Sandbox::build(seckill_sandbox::SandboxConfig {
        listen: sandbox_addr,
        webhook_url: Some(format!("{base}/api/v1/payments/webhook")),
        ..seckill_sandbox::SandboxConfig::default()
    })
    .await
    .expect("the sandbox starts");
    let stop_sandbox = tokio_util::sync::CancellationToken::new();
    let sandbox = tokio::spawn(sandbox.run(stop_sandbox.clone()));

    let browser = Browser::start().await;
    let now = Utc::now();
    let voucher = platform
        .create_voucher_from(serde_json::json!({
            "stock": 3, "per_user_limit": 1, "begins_at": now - Duration::seconds(1),
            "ends_at": now + Duration::hours(1), "payment_seconds": 120,
            "title": "Limited sneakers", "description": "Size 42, one pair per buyer.",
            "price": 1999, "currency": "EUR",
        }))
        .await;
    let client = &browser.client;
    client.goto(&format!("{base}/sale/{voucher}")).await.expect("the page loads");
    let token = user_token("browser-payer");
    client.find(Locator::Id("token")).await.expect("#token").send_keys(&token).await.expect("typed");
    client.find(Locator::Id("save-identity")).await.expect("#save-identity").click().await.expect("clicked");

    // What is sold, and for how much, above the countdown.
    assert_eq!(until_text(client, "title", |title| title == "Limited sneakers").await, "Limited sneakers");
    assert_eq!(text(client, "description").await, "Size 42, one pair per buyer.");
    let price = until_text(client, "price", |price| price.contains("19.99")).await;
    assert!(price.contains('€') || price.contains("EUR"), "{price}");

    until_phase(client, "open").await;
    let buy = client.find(Locator::Id("buy")).await.expect("#buy");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !buy.is_enabled().await.expect("state") {
        assert!(tokio::time::Instant::now() < deadline, "the buy button never enabled");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    buy.click().await.expect("bought");

    // Created: a Pay button and the time left to pay, counting down.
    until_text(client, "order-status", |status| status == "CREATED").await;
    let order = text(client, "order-id").await;
    let left = until_text(client, "pay-by", |left| left.starts_with("00:01:") || left.starts_with("00:02:")).await;
    assert!(left.as_str() <= "00:02:00", "at most payment_seconds to pay: {left}");
    assert!(text(client, "order-amount").await.contains("19.99"));
    let screenshot = artifacts().join("sale-page-awaiting-payment.png");
    std::fs::write(&screenshot, client.screenshot().await.expect("a screenshot")).expect("saved");

    // Pay: to the provider's checkout, which takes the payment and sends
    // the buyer back to the sale page.
    client.find(Locator::Id("pay")).await.expect("#pay").click().await.expect("clicked");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !client.current_url().await.expect("a url").as_str().contains("/checkout/") {
        assert!(tokio::time::Instant::now() < deadline, "the page never went to the checkout");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    client.find(Locator::Id("pay")).await.expect("the checkout's Pay").click().await.expect("paid");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !client.current_url().await.expect("a url").as_str().contains("/sale/") {
        assert!(tokio::time::Instant::now() < deadline, "the checkout never sent the buyer back");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(until_text(client, "order-id", |shown| shown == order).await, order, "back at the same order");
    until_text(client, "order-status", |status| status == "PAID").await;
    let (status, shown) = platform.get(&format!("{base}/api/v1/orders/{order}")).await;
    assert_eq!(
        (status, shown["status"].as_str(), shown["amount"].as_u64()),
        (StatusCode::OK, Some("PAID"), Some(1999))
    );
    assert!(shown["payment_id"].as_str().is_some_and(|id| id.starts_with("pi_")), "{shown}");
    let paid = artifacts().join("sale-page-paid.png");
    std::fs::write(&paid, client.screenshot().await.expect("a screenshot")).expect("saved");
    browser.close().await;
    stop_sandbox.cancel();
    let _ = sandbox.await;
}
