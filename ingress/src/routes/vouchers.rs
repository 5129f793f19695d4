//! Voucher admin: `POST /api/v1/vouchers` opens a flash sale,
//! `PATCH /api/v1/vouchers/{id}` pauses, resumes, moves the end or adds stock.
//!
//! Every change is published first (`VoucherCreated` / `VoucherUpdated` on
//! the sales topic, acknowledged), then applied to Redis. In that order an
//! admitted order never precedes, in the log, the definition or the added
//! stock it was admitted with. The processor applies the same records to
//! Redis again as it follows the log (both scripts act once), so an ingress
//! that dies between the two steps leaves nothing behind.
//!
//! A failure after the publish may have been preceded by the change: the
//! `503` says so and names the voucher (and the update), never "nothing
//! happened". With an `Idempotency-Key` (`super::admin_retries`) a retry
//! completes that very change and answers what the first answered.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use seckill_core::beacon::BeaconPlan;
use seckill_core::draw::DrawSettings;
use seckill_core::event::{Event, VoucherCreated, VoucherUpdated, MAX_STOCK};
use seckill_core::money::Currency;
use seckill_core::queue::QueueSettings;
use seckill_core::{Envelope, VoucherId};
use seckill_gate::UpdateResult;
use seckill_web::ApiError;
use serde::Deserialize;
use warp::http::StatusCode;
use warp::{Filter, Rejection, Reply};

use super::admin_retries::{gate_unavailable, AdminRetry, Prepared};
use super::{body, Ingress};
use crate::access::auth;

/// The admin's request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateVoucher {
    stock: u64,
    begins_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    #[serde(default = "one")]
    per_user_limit: u32,
    /// Seconds a created order has to be paid; `hold_seconds`, its name
    /// before payments, is accepted for one release.
    #[serde(default, alias = "hold_seconds")]
    payment_seconds: u32,
    /// Buckets the gate splits the stock into (a hot voucher on a Redis
    /// Cluster); 1 to 64.
    #[serde(default = "one")]
    shards: u32,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    /// Price of one unit in the currency's minor unit; 0 (free) by default.
    #[serde(default)]
    price: u64,
    #[serde(default)]
    currency: Option<Currency>,
    /// `fcfs` (the default: first come, first served) or `queue` (a
    /// waiting room admits; see `crate::room`).
    #[serde(default)]
    mode: SaleMode,
    /// The waiting room's settings (`queue` mode only).
    #[serde(default)]
    queue_opens_at: Option<DateTime<Utc>>,
    /// Entries open per unit left: 1.0 to 3.0 (default 1.2).
    #[serde(default)]
    queue_factor: Option<f64>,
    /// Most entries issued per second (default 500).
    #[serde(default)]
    queue_entry_rate: Option<u32>,
    /// A place whose holder stopped watching this long is skipped (default 30).
    #[serde(default)]
    queue_idle_seconds: Option<u32>,
    /// How long an entry token admits (default 120).
    #[serde(default)]
    queue_token_seconds: Option<u32>,
    /// The draw's settings (`draw` mode only): entries are taken from
    /// `entries_open_at` (default: now) until `draw_at` (required).
    #[serde(default)]
    entries_open_at: Option<DateTime<Utc>>,
    #[serde(default)]
    draw_at: Option<DateTime<Utc>>,
    /// How long a winner may order once they win (default 600).
    #[serde(default)]
    purchase_seconds: Option<u32>,
    /// Leading zero bits of the proof of work each order, queue join or
    /// draw entry needs (0, the default, asks for none; at most 28).
    #[serde(default)]
    challenge_bits: u32,
}

/// How a sale admits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SaleMode {
    #[default]
    Fcfs,
    Queue,
    Draw,
}

impl CreateVoucher {
    /// The waiting room's settings, the defaults filled in; None for a
    /// first-come sale (which takes none of them).
    fn queue(&self) -> Result<Option<QueueSettings>, ApiError> {
        let given = self.queue_opens_at.is_some()
            || self.queue_factor.is_some()
            || self.queue_entry_rate.is_some()
            || self.queue_idle_seconds.is_some()
            || self.queue_token_seconds.is_some();
        if self.mode != SaleMode::Queue {
            if given {
                return Err(ApiError::invalid("queue_* settings need \"mode\": \"queue\""));
            }
            return Ok(None);
        }
        let factor = self.queue_factor.unwrap_or(f64::from(QueueSettings::DEFAULT_FACTOR_PERCENT) / 100.0);
        if !(1.0..=3.0).contains(&factor) {
            return Err(ApiError::invalid("queue_factor must be 1.0 to 3.0"));
        }
        Ok(Some(QueueSettings {
            // By default the room opens now (or at the start, if that passed).
            opens_at: self.queue_opens_at.unwrap_or_else(|| seckill_core::clock::now().min(self.begins_at)),
            factor_percent: (factor * 100.0).round() as u32,
            entry_rate: self.queue_entry_rate.unwrap_or(QueueSettings::DEFAULT_ENTRY_RATE),
            idle_seconds: self.queue_idle_seconds.unwrap_or(QueueSettings::DEFAULT_IDLE_SECONDS),
            token_seconds: self.queue_token_seconds.unwrap_or(QueueSettings::DEFAULT_TOKEN_SECONDS),
            beacon: None,
        }))
    }
}

impl CreateVoucher {
    /// The draw's settings, the defaults filled in; None for another mode
    /// (which takes none of them).
    fn draw(&self) -> Result<Option<DrawSettings>, ApiError> {
        let given = self.entries_open_at.is_some() || self.draw_at.is_some() || self.purchase_seconds.is_some();
        if self.mode != SaleMode::Draw {
            if given {
                return Err(ApiError::invalid("entries_open_at, draw_at and purchase_seconds need \"mode\": \"draw\""));
            }
            return Ok(None);
        }
        let Some(draw_at) = self.draw_at else {
            return Err(ApiError::invalid("a draw needs draw_at: when entries close and the draw is made"));
        };
        Ok(Some(DrawSettings {
            entries_open_at: self.entries_open_at.unwrap_or_else(|| seckill_core::clock::now().min(draw_at)),
            draw_at,
            purchase_seconds: self.purchase_seconds.unwrap_or(DrawSettings::DEFAULT_PURCHASE_SECONDS),
            beacon: None,
        }))
    }
}

/// The admin's change; each field left out stays as it is (`null` is not
/// a way to leave one out: it is refused like any other wrong type).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateVoucher {
    #[serde(default, deserialize_with = "present")]
    paused: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    ends_at: Option<DateTime<Utc>>,
    #[serde(default)]
    add_stock: u64,
}

/// An optional field that, when present, holds a value.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

fn one() -> u32 {
    1
}

pub(super) fn create(
    ingress: Arc<Ingress>,
    max_body_bytes: u64,
) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers")
        .and(warp::post())
        .and(auth::admin(Arc::clone(&ingress.access)))
        .and(warp::header::optional::<String>("idempotency-key"))
        .and(body::bounded(max_body_bytes))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle_create)
}

pub(super) fn update(
    ingress: Arc<Ingress>,
    max_body_bytes: u64,
) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    warp::path!("api" / "v1" / "vouchers" / String)
        .and(warp::patch())
        .and(auth::admin(Arc::clone(&ingress.access)))
        .and(warp::header::optional::<String>("idempotency-key"))
        .and(body::bounded(max_body_bytes))
        .and(warp::any().map(move || Arc::clone(&ingress)))
        .and_then(handle_update)
}

async fn handle_create(
    key: Option<String>,
    raw: bytes::Bytes,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Response, Rejection> {
    let request: CreateVoucher = body::parse(&raw)?;
    // A waiting room's pre-queue closes at the start: its shuffle takes the
    // first round published after it, fixed now, in the creation record.
    let queue = request.queue()?.map(|settings| QueueSettings {
        beacon: ingress.rooms.beacon_chain().map(|chain| Box::new(BeaconPlan::after(chain, request.begins_at))),
        ..settings
    });
    // The beacon round is fixed now, in the creation record: the first
    // published after entries close.
    let draw = request.draw()?.map(|settings| DrawSettings {
        beacon: ingress.rooms.beacon_chain().map(|chain| Box::new(BeaconPlan::after(chain, settings.draw_at))),
        ..settings
    });
    let definition = VoucherCreated {
        voucher_id: VoucherId::generate(),
        stock: request.stock,
        per_user_limit: request.per_user_limit,
        begins_at: request.begins_at,
        ends_at: request.ends_at,
        hold_seconds: request.payment_seconds,
        shards: request.shards,
        title: request.title.clone(),
        description: request.description.clone(),
        price: request.price,
        currency: request.currency,
        queue: queue.map(Box::new),
        draw,
        challenge_bits: request.challenge_bits,
    };
    definition.validate().map_err(|e| ApiError::invalid(e.to_string().replace("event is out of range: ", "")))?;
    // An order holds at most `per_user_limit` units: if that many would
    // owe more than the provider takes in one payment, such an order could
    // be admitted and never paid.
    let largest_order = definition.price.saturating_mul(u64::from(definition.per_user_limit));
    if largest_order > seckill_payments::MAX_AMOUNT {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "amount_too_large",
            format!(
                "price × per_user_limit is {largest_order} minor units, above the {} the payment provider accepts in one \
                 payment: lower the price or the per-user limit",
                seckill_payments::MAX_AMOUNT
            ),
        )
        .into());
    }
    if definition.price > 0 && ingress.payments.is_none() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "payments_unavailable",
            "a priced voucher needs a payment provider, and this platform has none configured ([payments] base_url)",
        )
        .into());
    }
    let mut asked = serde_json::json!({ "create": { "stock": request.stock, "per_user_limit": request.per_user_limit,
        "begins_at": request.begins_at, "ends_at": request.ends_at, "hold_seconds": request.payment_seconds } });
    // Each only when given: a key remembered before the field existed still
    // matches its retry.
    if request.shards != 1 {
        asked["create"]["shards"] = request.shards.into();
    }
    for (field, value) in [("title", &request.title), ("description", &request.description)] {
        if let Some(value) = value {
            asked["create"][field] = value.as_str().into();
        }
    }
    if let Some(currency) = request.currency {
        asked["create"]["price"] = request.price.into();
        asked["create"]["currency"] = currency.as_str().into();
    } else if request.price != 0 {
        asked["create"]["price"] = request.price.into();
    }
    if let Some(queue) = &definition.queue {
        asked["create"]["queue"] = serde_json::to_value(queue).expect("settings serialize");
        // A default opening time is the first request's: a retry asks the same.
        if request.queue_opens_at.is_none() {
            asked["create"]["queue"]["opens_at"] = serde_json::Value::Null;
        }
    }
    if let Some(draw) = &definition.draw {
        asked["create"]["draw"] = serde_json::to_value(draw).expect("settings serialize");
        if request.entries_open_at.is_none() {
            asked["create"]["draw"]["entries_open_at"] = serde_json::Value::Null;
        }
    }
    if request.challenge_bits != 0 {
        asked["create"]["challenge_bits"] = request.challenge_bits.into();
    }
    let retry = AdminRetry::new(&ingress, key, asked)?;
    let mut change = Envelope::new(Event::VoucherCreated(definition));
    if let Some(retry) = &retry {
        let prepared = match retry.remembered().await? {
            Some(prepared) => prepared,
            None => retry.claim(change).await?,
        };
        change = match prepared {
            Prepared::Change(change) => *change,
            Prepared::Answered(answer) => return Ok(answer),
        };
    }
    let Event::VoucherCreated(definition) = &change.event else {
        return Err(ApiError::internal(&"an admin request record holds another kind of event").into());
    };
    let voucher_id = definition.voucher_id;
    let keyed = retry.is_some();

    ingress.producer.send(&ingress.topics.sales, &change).await.map_err(|e| {
        ingress.metrics.produce_errors.inc();
        tracing::warn!(error = %e, %voucher_id, "Voucher definition not confirmed by the event log.");
        let next = if keyed {
            "retry with the same Idempotency-Key to complete it".to_owned()
        } else {
            format!("read GET /api/v1/vouchers/{voucher_id} before creating it again")
        };
        ApiError::unavailable(format!(
            "the event log did not confirm voucher {voucher_id}; it may have been created: {next}"
        ))
        .with_detail("voucher_id", voucher_id.to_string())
    })?;
    // Published: the processor loads it into the gate even if this fails.
    ingress.gate.load_voucher(definition).await.map_err(|e| {
        tracing::warn!(error = %e, %voucher_id, "Voucher not loaded into Redis.");
        let next =
            if keyed { "retry with the same Idempotency-Key for its definition" } else { "do not create it again" };
        ApiError::unavailable(format!(
            "voucher {voucher_id} was created (published) and will be loaded into the admission gate shortly; {next}"
        ))
        .with_detail("voucher_id", voucher_id.to_string())
    })?;
    ingress.live.voucher_changed(voucher_id);
    if definition.queue.is_some() || definition.draw.is_some() {
        // Commit the room's (or the draw's) seed now, so it takes joins from the answer on;
        // failing that, every ingress's room driver does it shortly.
        if let Err(error) = ingress.rooms.handle(voucher_id).await {
            tracing::warn!(%error, %voucher_id, "The waiting room will open shortly (its seed is not committed yet).");
        }
    }
    tracing::info!(%voucher_id, stock = definition.stock, mode = definition.mode(), "Voucher created.");
    let mut body = serde_json::to_value(definition).expect("definitions serialize");
    body["mode"] = definition.mode().into();
    // The window's name before payments, answered for one release.
    body["hold_seconds"] = definition.hold_seconds.into();
    Ok(match &retry {
        Some(retry) => retry.answer(StatusCode::CREATED, body).await,
        None => warp::reply::with_status(warp::reply::json(&body), StatusCode::CREATED).into_response(),
    })
}

async fn handle_update(
    raw_id: String,
    key: Option<String>,
    raw: bytes::Bytes,
    ingress: Arc<Ingress>,
) -> Result<warp::reply::Response, Rejection> {
    let voucher_id: VoucherId = raw_id.parse().map_err(|e| ApiError::invalid(format!("voucher_id: {e}")))?;
    let request: UpdateVoucher = body::parse(&raw)?;
    let update =
        VoucherUpdated { voucher_id, paused: request.paused, ends_at: request.ends_at, add_stock: request.add_stock };
    update.validate().map_err(|e| ApiError::invalid(e.to_string().replace("event is out of range: ", "")))?;
    let asked = serde_json::json!({ "update": { "voucher_id": voucher_id, "paused": update.paused,
        "ends_at": update.ends_at, "add_stock": update.add_stock } });
    let retry = AdminRetry::new(&ingress, key, asked)?;

    // A retry carries out the change the first request checked and prepared.
    let remembered = match &retry {
        Some(retry) => retry.remembered().await?,
        None => None,
    };
    let prepared = match remembered {
        Some(prepared) => prepared,
        None => {
            let change = checked_update(&ingress, update).await?;
            match &retry {
                Some(retry) => retry.claim(change).await?,
                None => Prepared::Change(Box::new(change)),
            }
        }
    };
    let change = match prepared {
        Prepared::Change(change) => *change,
        Prepared::Answered(answer) => return Ok(answer),
    };
    let Event::VoucherUpdated(update) = &change.event else {
        return Err(ApiError::internal(&"an admin request record holds another kind of event").into());
    };
    let update_id = change.event_id;
    let keyed = retry.is_some();
    let may_have = |what: String| {
        ApiError::unavailable(what)
            .with_detail("voucher_id", voucher_id.to_string())
            .with_detail("update_id", update_id.to_string())
    };

    ingress.producer.send(&ingress.topics.sales, &change).await.map_err(|e| {
        ingress.metrics.produce_errors.inc();
        tracing::warn!(error = %e, %voucher_id, %update_id, "Voucher update not confirmed by the event log.");
        let next = if keyed {
            "retry with the same Idempotency-Key to complete it"
        } else {
            "read the voucher before sending a change again"
        };
        may_have(format!("the event log did not confirm update {update_id}; it may have been published: {next}"))
    })?;
    // Published: the processor applies it to the gate even if this fails.
    let applied = match ingress.gate.update_voucher(update_id, update).await {
        Ok(UpdateResult::Applied(voucher) | UpdateResult::Repeated(voucher)) => voucher,
        Ok(UpdateResult::UnknownVoucher) => return Err(ApiError::unknown_voucher(voucher_id).into()),
        Err(e) => {
            tracing::warn!(error = %e, %voucher_id, %update_id, "Voucher update not applied to Redis.");
            let next =
                if keyed { "retry with the same Idempotency-Key for its result" } else { "do not send it again" };
            return Err(may_have(format!("update {update_id} was published and will be applied; {next}")).into());
        }
    };
    ingress.live.voucher_changed(voucher_id);
    tracing::info!(%voucher_id, ?update, "Voucher updated.");
    let body = serde_json::json!({
        "voucher_id": voucher_id,
        "update_id": update_id,
        "stock": applied.stock,
        "paused": applied.paused,
        "begins_at": applied.begins_at,
        "ends_at": applied.ends_at,
    });
    Ok(match &retry {
        Some(retry) => retry.answer(StatusCode::OK, body).await,
        None => warp::reply::json(&body).into_response(),
    })
}

/// `update` as an event to publish, once checked against the voucher as the
/// gate holds it: it must exist, keep its end after its start and its stock
/// within bounds.
async fn checked_update(ingress: &Ingress, update: VoucherUpdated) -> Result<Envelope, ApiError> {
    let voucher_id = update.voucher_id;
    let current = ingress.gate.voucher(voucher_id).await.map_err(gate_unavailable)?;
    let current = current.ok_or_else(|| ApiError::unknown_voucher(voucher_id))?;
    if let Some(ends_at) = update.ends_at {
        if ends_at <= current.begins_at {
            return Err(ApiError::invalid("ends_at must be after begins_at"));
        }
        // The winners buy after the draw: a sale ending before it sells nothing.
        let draw_at = ingress.gate.draw_at(voucher_id).await.map_err(gate_unavailable)?;
        if let Some(draw_at) = draw_at.filter(|draw_at| ends_at.timestamp_millis() <= draw_at.timestamp_millis()) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "ends_before_draw",
                format!("ends_at must be after the draw's draw_at ({})", draw_at.to_rfc3339()),
            ));
        }
    }
    if current.stock.saturating_add(update.add_stock) > MAX_STOCK {
        return Err(ApiError::invalid(format!("the stock would exceed {MAX_STOCK}")));
    }
    Ok(Envelope::new(Event::VoucherUpdated(update)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_is_not_a_way_to_leave_a_field_out() {
        let parsed: UpdateVoucher = serde_json::from_str(r#"{"paused": true}"#).expect("valid");
        assert_eq!((parsed.paused, parsed.ends_at, parsed.add_stock), (Some(true), None, 0));
        for refused in [r#"{"ends_at": null}"#, r#"{"paused": null}"#, r#"{"add_stock": null}"#, r#"{"x": 1}"#] {
            assert!(serde_json::from_str::<UpdateVoucher>(refused).is_err(), "{refused}");
        }
    }
}
