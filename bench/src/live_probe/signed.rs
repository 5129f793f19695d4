//! Signed provider callbacks for `wrk` (`bench/wrk/webhook.lua`): what the
//! webhook route costs to verify, parse and check for a repeat, without the
//! log.
//!
//! Each is a `payment_intent.created` event with its own event id and an
//! intent shaped like the sandbox's, signed as the provider signs
//! (`seckill_payments::signature::sign`, dated now). The ingress verifies
//! it, reads it, asks whether it handled that event before, and answers
//! `200` with `ignored`: only paid checkouts are logged. The
//! signatures are good for the ingress's tolerance (five minutes by
//! default), so they are written just before `wrk` runs.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use seckill_payments::types::{ORDER_ID_KEY, VOUCHER_ID_KEY};
use seckill_payments::{signature, Event, EventData, IntentStatus, NextAction, PaymentIntent, RedirectToUrl};

/// The event type: verified and read by the ingress, never logged.
const KIND: &str = "payment_intent.created";

/// Writes `count` callbacks signed with `secret`, one `SIGNATURE<TAB>BODY`
/// line each (the body one line of JSON).
pub(crate) fn write(secret: &str, count: usize, out: &Path) -> anyhow::Result<serde_json::Value> {
    let now = chrono::Utc::now().timestamp();
    let mut file = BufWriter::new(std::fs::File::create(out)?);
    let mut bytes = 0;
    for _ in 0..count {
        let body = serde_json::to_string(&event(now)?)?;
        bytes += body.len();
        writeln!(file, "{}\t{body}", signature::sign(secret, now, body.as_bytes()))?;
    }
    file.flush()?;
    Ok(serde_json::json!({
        "webhooks": count,
        "type": KIND,
        "signed_at": now,
        "mean_body_bytes": bytes.checked_div(count).unwrap_or(0),
    }))
}

/// A provider id: `prefix_` and 32 hex digits, as the sandbox makes them.
fn id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

/// A new intent's `payment_intent.created` event, dated `now`.
fn event(now: i64) -> anyhow::Result<Event> {
    let intent_id = id("pi");
    let intent = PaymentIntent {
        object: "payment_intent".to_owned(),
        amount: 250,
        amount_received: 0,
        currency: "eur".to_owned(),
        status: IntentStatus::RequiresPaymentMethod,
        metadata: BTreeMap::from([
            (ORDER_ID_KEY.to_owned(), uuid::Uuid::now_v7().to_string()),
            (VOUCHER_ID_KEY.to_owned(), uuid::Uuid::now_v7().to_string()),
        ]),
        created: now,
        canceled_at: None,
        latest_charge: None,
        next_action: Some(NextAction {
            kind: "redirect_to_url".to_owned(),
            redirect_to_url: Some(RedirectToUrl {
                url: format!("http://127.0.0.1:18091/checkout/{intent_id}"),
                return_url: None,
            }),
        }),
        livemode: false,
        id: intent_id,
    };
    Ok(Event {
        id: id("evt"),
        object: "event".to_owned(),
        kind: KIND.to_owned(),
        created: now,
        data: EventData { object: serde_json::to_value(&intent)? },
        livemode: false,
    })
}
