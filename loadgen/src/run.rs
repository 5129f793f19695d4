//! Running a plan: create the voucher, send the requests, settle, check.

use std::collections::{BTreeMap, HashSet};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use seckill_core::UserId;

use crate::check::{self, Checks, FinalOrder};
use crate::error::LoadgenError;
use crate::report::{Invariants, Report};
use crate::visibility::VisibilityProbe;
use crate::{Pacing, Percentiles, Plan};

/// One order request's result.
struct Outcome {
    user: UserId,
    status: Option<StatusCode>,
    code: Option<String>,
    order: Option<String>,
    latency: Duration,
    /// When the answer arrived, since the start.
    answered_at: Duration,
}

/// Runs `plan`; shows a progress bar on a terminal when `progress`.
pub async fn run(plan: &Plan, checks: &Checks, progress: bool) -> Result<Report, LoadgenError> {
    if plan.requests == 0 || plan.users == 0 || plan.quantity == 0 {
        return Err(LoadgenError::Invalid("requests, users and quantity must be at least 1".to_owned()));
    }
    UserId::parse(&plan.user(plan.users - 1))
        .map_err(|e| LoadgenError::Invalid(format!("the user prefix makes invalid user ids: {e}")))?;
    let http = reqwest::Client::builder().pool_max_idle_per_host(4096).timeout(Duration::from_secs(10)).build()?;
    let voucher = create_voucher(&http, plan).await?;
    let bar = progress_bar(plan.requests, progress);
    let probe = (plan.visibility_sample > 0).then(|| {
        let probe = VisibilityProbe::new(
            http.clone(),
            &plan.base_url,
            plan.credentials.clone(),
            plan.visibility_sample,
            plan.settle_timeout,
        );
        Arc::new(probe)
    });
    let sent = Sender { http: http.clone(), plan: plan.clone(), voucher: voucher.clone(), probe: probe.clone() };
    let sent = Arc::new(sent);
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let outcomes = match plan.pacing {
        Pacing::Closed { connections } => closed_loop(&sent, connections, &bar, started).await,
        Pacing::Open { per_second, max_in_flight } => open_loop(&sent, per_second, max_in_flight, &bar, started).await,
    };
    let (outcomes, late_starts) = outcomes;
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    let loadgen_cpu_s = cpu_seconds() - cpu_before;
    drop(sent);

    let mut status_counts = BTreeMap::new();
    let mut error_codes = BTreeMap::new();
    let mut transport_errors = 0;
    let mut admitted: Vec<(Duration, String, UserId)> = Vec::new();
    let mut seen = HashSet::new();
    for outcome in &outcomes {
        match outcome.status {
            Some(status) => *status_counts.entry(status.as_u16()).or_insert(0u64) += 1,
            None => transport_errors += 1,
        }
        if let Some(code) = &outcome.code {
            *error_codes.entry(code.clone()).or_insert(0u64) += 1;
        }
        if let Some(order) = &outcome.order {
            if seen.insert(order.clone()) {
                admitted.push((outcome.answered_at, order.clone(), outcome.user.clone()));
            }
        }
    }
    admitted.sort();
    let units_to_sell_out = usize::try_from(plan.stock.div_ceil(u64::from(plan.quantity))).unwrap_or(usize::MAX);
    let sold_out_after_s = (plan.stock > 0 && admitted.len() >= units_to_sell_out)
        .then(|| admitted[units_to_sell_out - 1].0.as_secs_f64());

    let orders: Vec<(String, UserId)> = admitted.into_iter().map(|(_, order, user)| (order, user)).collect();
    let drained = check::wait_drained(&http, plan, &voucher, orders.len(), plan.settle_timeout).await;
    let visible = match probe.and_then(Arc::into_inner) {
        Some(probe) => probe.finish().await,
        None => Vec::new(),
    };
    let finals = check::wait_final(&http, plan, &orders, plan.settle_timeout).await;
    let invariants = invariants(&http, plan, checks, &voucher, &orders, &finals).await?;
    let mut final_statuses = BTreeMap::new();
    for order in &finals {
        *final_statuses.entry(order.status.clone()).or_insert(0u64) += 1;
    }
    Ok(Report {
        voucher_id: voucher,
        requests: outcomes.len(),
        elapsed_s: elapsed.as_secs_f64(),
        requests_per_s: outcomes.len() as f64 / elapsed.as_secs_f64().max(f64::EPSILON),
        status_counts,
        error_codes,
        transport_errors,
        latency: Percentiles::of(outcomes.iter().map(|o| o.latency.as_secs_f64() * 1000.0).collect()),
        late_starts,
        admitted_orders: orders.len(),
        final_statuses,
        end_to_end: Percentiles::of(finals.iter().filter_map(|o| o.accept_to_final_ms).collect()),
        visible: Percentiles::of(visible),
        sold_out_after_s,
        drained_after_s: drained.map(|after| after.as_secs_f64()),
        invariants,
        loadgen_cpu_s,
        loadgen_cores: loadgen_cpu_s / elapsed.as_secs_f64().max(f64::EPSILON),
    })
}

async fn invariants(
    http: &reqwest::Client,
    plan: &Plan,
    checks: &Checks,
    voucher: &str,
    orders: &[(String, UserId)],
    finals: &[FinalOrder],
) -> Result<Invariants, LoadgenError> {
    let per_user = check::units_per_user(finals);
    let created_units: u64 = per_user.values().sum();
    let users_over_limit = per_user.values().filter(|units| **units > u64::from(plan.per_user_limit)).count();
    let (redis_remaining, persistent_remaining) = check::remaining(http, checks, voucher).await?;
    let remaining_agree = match (redis_remaining, persistent_remaining) {
        (Some(a), Some(b)) => Some(a == b),
        _ => None,
    };
    let created_within_stock = created_units <= plan.stock;
    let every_admitted_order_final = finals.len() == orders.len();
    Ok(Invariants {
        stock: plan.stock,
        created_units,
        created_within_stock,
        per_user_limit: plan.per_user_limit,
        users_over_limit,
        redis_remaining,
        persistent_remaining,
        remaining_agree,
        every_admitted_order_final,
        passed: created_within_stock
            && users_over_limit == 0
            && remaining_agree != Some(false)
            && every_admitted_order_final,
    })
}

async fn create_voucher(http: &reqwest::Client, plan: &Plan) -> Result<String, LoadgenError> {
    let now = chrono::Utc::now();
    let mut body = json!({
        "stock": plan.stock,
        "per_user_limit": plan.per_user_limit,
        "begins_at": now - chrono::Duration::seconds(1),
        "ends_at": now + chrono::Duration::hours(1),
    });
    if plan.shards != 1 {
        body["shards"] = plan.shards.into();
    }
    let mut request = http.post(format!("{}/api/v1/vouchers", plan.base_url)).json(&body);
    if let Some(token) = &plan.admin_token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await?;
    let status = response.status();
    let body: Value = response.json().await?;
    match body["voucher_id"].as_str() {
        Some(id) if status == StatusCode::CREATED => Ok(id.to_owned()),
        _ => Err(LoadgenError::Invalid(format!("creating the voucher answered {status}: {body}"))),
    }
}

/// What every request task shares.
struct Sender {
    http: reqwest::Client,
    plan: Plan,
    voucher: String,
    probe: Option<Arc<VisibilityProbe>>,
}

impl Sender {
    /// Sends request `index` and measures it from `since`.
    async fn order(&self, index: usize, since: Instant, started: Instant) -> Outcome {
        let plan = &self.plan;
        let user = UserId::parse(&plan.user(index)).expect("user ids were checked before the run");
        let url = format!("{}/api/v1/vouchers/{}/orders", plan.base_url, self.voucher);
        let mut request =
            plan.credentials.as_user(self.http.post(url), &user).json(&json!({ "quantity": plan.quantity }));
        if plan.idempotency_keys {
            request = request.header("idempotency-key", format!("{user}-order"));
        }
        let answer = request.send().await;
        let (status, body) = match answer {
            Ok(response) => {
                let status = response.status();
                (Some(status), response.json::<Value>().await.unwrap_or(Value::Null))
            }
            Err(_) => (None, Value::Null),
        };
        let now = Instant::now();
        let order =
            (status == Some(StatusCode::ACCEPTED)).then(|| body["order_id"].as_str().map(str::to_owned)).flatten();
        if let (Some(probe), Some(order)) = (&self.probe, &order) {
            probe.admitted(order, &user, now);
        }
        Outcome {
            user,
            status,
            code: body["error"].as_str().map(str::to_owned),
            order,
            latency: now - since,
            answered_at: now - started,
        }
    }
}

async fn closed_loop(
    sender: &Arc<Sender>,
    connections: usize,
    bar: &ProgressBar,
    started: Instant,
) -> (Vec<Outcome>, u64) {
    let outcomes = stream::iter(0..sender.plan.requests)
        .map(|index| async move {
            let outcome = sender.order(index, Instant::now(), started).await;
            bar.inc(1);
            outcome
        })
        .buffer_unordered(connections.max(1))
        .collect()
        .await;
    (outcomes, 0)
}

async fn open_loop(
    sender: &Arc<Sender>,
    per_second: f64,
    max_in_flight: usize,
    bar: &ProgressBar,
    started: Instant,
) -> (Vec<Outcome>, u64) {
    let gap = Duration::from_secs_f64(1.0 / per_second.max(0.001));
    let in_flight = Arc::new(Semaphore::new(max_in_flight.max(1)));
    let mut tasks = JoinSet::new();
    let mut late = 0;
    for index in 0..sender.plan.requests {
        let scheduled = started + gap.mul_f64(index as f64);
        tokio::time::sleep_until(scheduled.into()).await;
        let permit = match Arc::clone(&in_flight).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                late += 1;
                Arc::clone(&in_flight).acquire_owned().await.expect("the semaphore is never closed")
            }
        };
        let (sender, bar) = (Arc::clone(sender), bar.clone());
        tasks.spawn(async move {
            // Measured from the schedule: waiting for a free slot counts.
            let outcome = sender.order(index, scheduled, started).await;
            drop(permit);
            bar.inc(1);
            outcome
        });
    }
    let mut outcomes = Vec::with_capacity(sender.plan.requests);
    while let Some(outcome) = tasks.join_next().await {
        if let Ok(outcome) = outcome {
            outcomes.push(outcome);
        }
    }
    (outcomes, late)
}

fn progress_bar(len: usize, wanted: bool) -> ProgressBar {
    if !wanted || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} requests  {per_sec}  ETA {eta}") {
        bar.set_style(style);
    }
    bar
}

/// CPU time this process has used, over all its threads (Linux schedstat).
fn cpu_seconds() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .map(|nanos| nanos as f64 / 1e9)
        .sum()
}
