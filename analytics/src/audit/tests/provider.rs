//! The provider's answers fetched from a sandbox provider (in-process, on
//! a port of its own), and the rule on them.

use std::time::Duration;

use seckill_payments::{NewCheckout, PaymentIntent, Provider, ProviderSettings};
use seckill_sandbox::{Sandbox, SandboxConfig};
use tokio_util::sync::CancellationToken;

use super::failing;
use crate::audit::{audit_voucher_against, ProviderSource};
use crate::sale::script::Script;

/// A sandbox serving until dropped, and a client of it.
struct TestSandbox {
    base_url: String,
    api_key: String,
    provider: Provider,
    stop: CancellationToken,
}

impl Drop for TestSandbox {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TestSandbox {
    async fn start() -> Self {
        // Searched right after paying: no lag (Stripe's search can lag).
        let config = SandboxConfig { search_lag_ms: 0, ..SandboxConfig::local(None) };
        let sandbox = Sandbox::build(config.clone()).await.expect("the sandbox binds");
        let base_url = format!("http://{}", sandbox.local_addr());
        let stop = CancellationToken::new();
        tokio::spawn(sandbox.run(stop.clone()));
        let settings = ProviderSettings {
            base_url: base_url.clone(),
            api_key: config.api_key.clone(),
            timeout: Duration::from_secs(5),
        };
        let provider = Provider::new(settings).expect("valid settings");
        Self { base_url, api_key: config.api_key, provider, stop }
    }

    /// A checkout for `order`'s amount, paid by its buyer: the intent it
    /// made.
    async fn paid_intent(&self, order: &seckill_core::event::OrderAccepted, amount: u64) -> PaymentIntent {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let request = NewCheckout {
            unit_amount: amount,
            quantity: 1,
            currency: "eur".to_owned(),
            title: "Voucher".to_owned(),
            order_id: order.order_id.to_string(),
            voucher_id: order.voucher_id.to_string(),
            success_url: "http://127.0.0.1:9/sale".to_owned(),
            cancel_url: "http://127.0.0.1:9/sale".to_owned(),
            expires_at: now + 31 * 60,
        };
        let session =
            self.provider.create_checkout(&request, &format!("create-{}", order.order_id)).await.expect("created");
        let url = format!("{}/sandbox/checkout/sessions/{}/pay", self.base_url, session.id);
        let response = reqwest::Client::new().post(url).send().await.expect("the sandbox answers");
        assert!(response.status().is_success(), "{}", response.status());
        let session = self.provider.retrieve_checkout(&session.id).await.expect("read back");
        session.expanded_intent().cloned().expect("paid, so an intent")
    }
}

#[tokio::test]
async fn the_provider_is_asked_about_every_payment_and_order() {
    let sandbox = TestSandbox::start().await;
    let mut sale = Script::priced(4, 1, 60, 1_250, Some("EUR"));
    let orders: Vec<_> = ["ann", "bob", "cat", "dan"]
        .into_iter()
        .enumerate()
        .map(|(i, user)| {
            let order = sale.accept(user, 1, 10 * i as i64);
            sale.decide(&order, 10 * i as i64 + 5);
            order
        })
        .collect();
    // Ann pays and keeps it; Bob pays and is refunded; Cat never pays (no
    // intent: Stripe makes one only when the buyer pays); Dan pays, and
    // the log never hears of it.
    let mut intents = Vec::new();
    // Bob's checkout was for a cent less than his order owes.
    for (order, amount) in [(&orders[0], 1_250), (&orders[1], 1_249), (&orders[3], 1_250)] {
        intents.push(sandbox.paid_intent(order, amount).await);
    }
    let dan = &intents[2];
    let refund = sandbox.provider.refund(&intents[1].id, "refund-bob").await.expect("refunded");
    sale.pay(&orders[0], &intents[0].id, 1_000);
    let bob = sale.payment(&orders[1], &intents[1].id, 1_249, 1_100);
    sale.refund(&bob, seckill_core::event::RefundReason::AmountMismatch, &refund.id, 1_200);

    let source = ProviderSource::connect(&sandbox.base_url, &sandbox.api_key).expect("valid");
    let figures = source.figures(&sale.log).await.expect("the provider answers");
    assert_eq!(figures.retrieved.len(), 2);
    assert_eq!(figures.by_order.len(), 4, "every priced order searched");
    let audit = audit_voucher_against(&sale.log, None, Some(&figures));
    assert_eq!(failing(&audit), ["provider_agrees"]);
    let detail = &audit.rules.last().expect("the provider's rule").detail;
    assert!(detail.contains("4 orders searched, 1 succeeded there missing from the log"), "{detail}");
    assert!(detail.contains(&format!("(e.g. {} succeeded and is not in the log)", dan.id)), "{detail}");

    // Once the log has Dan's payment too, both sides agree.
    sale.pay(&orders[3], &dan.id, 1_300);
    let figures = source.figures(&sale.log).await.expect("the provider answers");
    let audit = audit_voucher_against(&sale.log, None, Some(&figures));
    assert!(audit.pass, "{:?}", audit.rules.last());
    assert!(audit
        .rules
        .last()
        .is_some_and(|rule| rule.detail.ends_with("paid EUR 37.49 refunded EUR 12.49 on both sides")));

    // A payment id the provider never issued is unknown to it.
    let ghost = sale.payment(&orders[2], "pi_ghost", 1_250, 1_400);
    sale.refund(&ghost, seckill_core::event::RefundReason::Late, "re_ghost", 1_500);
    let figures = source.figures(&sale.log).await.expect("a 404 is an answer");
    assert_eq!(figures.retrieved.get("pi_ghost"), Some(&None));
    let audit = audit_voucher_against(&sale.log, None, Some(&figures));
    assert!(audit.rules.last().is_some_and(|rule| !rule.pass && rule.detail.contains("1 unknown to it")));

    let wrong_key = ProviderSource::connect(&sandbox.base_url, "sk_wrong").expect("valid");
    assert!(wrong_key.figures(&sale.log).await.is_err(), "a refusal fails the audit rather than passing it");
}
