//! A draw sale under a crowd: every user enters in the entry window, then
//! the draw is made at `draw_at` by the ingress's driver, in Redis, a chunk
//! of the ranking at a time.
//!
//! Reported: how fast the entries went in, and how long after `draw_at`
//! the draw was done, three ways: the `emitted_at` of its records (stamped
//! by the Redis clock inside the script that wrote them, so the gate's own
//! work without the relay to Kafka), when the probe, following the sales
//! topic like any reader of the log, saw them, and when entrants parked on
//! `GET …/entries/me?wait=10s` heard their outcome.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt};
use seckill_core::{Envelope, Event};
use seckill_kafka::{Follower, Message};
use serde_json::{json, Value};

use super::quantiles;

/// What the probe is pointed at.
#[derive(Debug)]
pub(crate) struct Draw {
    pub(crate) url: String,
    pub(crate) voucher: String,
    /// The voucher's `draw_at`.
    pub(crate) draw_at: DateTime<Utc>,
    pub(crate) brokers: String,
    /// The sales topic (`<prefix>.sales`), where the draw's records go.
    pub(crate) sales_topic: String,
    /// Entries in flight at once.
    pub(crate) concurrency: usize,
    /// Entrants who wait for their outcome on a long-poll.
    pub(crate) waiters: usize,
    /// Longest the draw may take after `draw_at`.
    pub(crate) settle: Duration,
}

/// When the probe saw one of the draw's records, and when it was written.
#[derive(Clone, Copy, Debug)]
struct Seen {
    at: DateTime<Utc>,
    emitted: DateTime<Utc>,
}

/// The draw's records as the follower saw them.
#[derive(Debug, Default)]
struct DrawLog {
    revealed: Option<Seen>,
    revealed_entries: Option<u64>,
    first_chunk: Option<Seen>,
    last_chunk: Option<Seen>,
    chunks: u64,
    ranked_users: u64,
    selected: Option<Seen>,
    winners: Option<u64>,
}

/// When an entrant heard the draw's outcome for them, and which it was.
type Heard = Option<(DateTime<Utc>, String)>;

/// Enters every token's user, writes `entered`, parks the waiters, writes
/// `drawing` just before `draw_at`, and reports once the draw is in the
/// log and the waiters heard it (JSON).
pub(crate) async fn run(draw: &Draw, tokens: &[String], entered: &Path, drawing: &Path) -> anyhow::Result<Value> {
    let clients = super::h2_clients(draw.concurrency.max(draw.waiters), Duration::from_secs(60))?;
    let client = |index: usize| clients[index % clients.len()].clone();
    let entries_url = format!("{}/api/v1/vouchers/{}/entries", draw.url, draw.voucher);

    let entering = Instant::now();
    let answers: Vec<(u16, f64)> = stream::iter(0..tokens.len())
        .map(|index| {
            let request = client(index).post(entries_url.clone()).bearer_auth(&tokens[index]);
            async move {
                let sent = Instant::now();
                let Ok(response) = request.send().await else { return (0, 0.0) };
                let status = response.status().as_u16();
                // Read to the end, so the answer is complete when it is timed.
                let _ = response.bytes().await;
                (status, sent.elapsed().as_secs_f64() * 1e3)
            }
        })
        .buffer_unordered(draw.concurrency.max(1))
        .collect()
        .await;
    let entry_seconds = entering.elapsed().as_secs_f64();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for (status, _) in &answers {
        *statuses.entry(status.to_string()).or_default() += 1;
    }
    let created = statuses.get("201").copied().unwrap_or(0);
    let margin_ms = (draw.draw_at - Utc::now()).num_milliseconds();
    eprintln!(
        "    {created} of {} entered in {entry_seconds:.1} s ({:.0}/s), {margin_ms} ms before draw_at",
        tokens.len(),
        created as f64 / entry_seconds.max(1e-9)
    );
    std::fs::write(entered, b"entered\n")?;
    anyhow::ensure!(margin_ms > 3_000, "the entries were not in 3 s before draw_at: give them more time");

    // Follow the log from before the draw, so every draw record is seen as it arrives.
    let follower = Follower::start_at_end(&draw.brokers, &[&draw.sales_topic], Duration::from_millis(10)).await?;
    let log = Arc::new(Mutex::new(DrawLog::default()));
    let following = tokio::spawn(follow(follower, draw.voucher.clone(), Arc::clone(&log), draw.draw_at + draw.settle));

    // The waiters park a little before the draw: long-polls answer a change.
    let park_at = draw.draw_at - chrono::Duration::seconds(3);
    tokio::time::sleep((park_at - Utc::now()).to_std().unwrap_or_default()).await;
    let step = (tokens.len() / draw.waiters.max(1)).max(1);
    let me_url = format!("{}/api/v1/vouchers/{}/entries/me?wait=10s", draw.url, draw.voucher);
    let deadline = draw.draw_at + draw.settle;
    let waiting: Vec<tokio::task::JoinHandle<Heard>> = (0..tokens.len())
        .step_by(step)
        .take(draw.waiters)
        .map(|index| {
            let (client, token, url) = (client(index), tokens[index].clone(), me_url.clone());
            tokio::spawn(async move { outcome(&client, &url, &token, deadline).await })
        })
        .collect();
    let before_draw = (draw.draw_at - chrono::Duration::seconds(1) - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(before_draw).await;
    std::fs::write(drawing, b"drawing\n")?;

    let _ = following.await;
    let mut heard = Vec::with_capacity(waiting.len());
    for task in waiting {
        heard.push(task.await.ok().flatten());
    }
    let log = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let after_draw = |at: DateTime<Utc>| (at - draw.draw_at).num_microseconds().unwrap_or(0) as f64 / 1e3;
    let seen = |seen: Option<Seen>| {
        seen.map(|s| json!({ "emitted_after_draw_ms": after_draw(s.emitted), "seen_after_draw_ms": after_draw(s.at) }))
    };
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for (_, state) in heard.iter().flatten() {
        *outcomes.entry(state.clone()).or_default() += 1;
    }
    let answered: Vec<f64> = heard.iter().flatten().map(|(at, _)| after_draw(*at)).collect();
    Ok(json!({
        "entrants": tokens.len(),
        "entered": created,
        "entry_statuses": statuses,
        "entry_seconds": entry_seconds,
        "entries_per_s": created as f64 / entry_seconds.max(1e-9),
        "entry_ms": quantiles(answers.iter().filter(|(status, _)| *status == 201).map(|(_, ms)| *ms).collect()),
        "entries_done_before_draw_ms": margin_ms,
        "concurrency": draw.concurrency,
        "draw_at": draw.draw_at,
        "revealed": seen(log.revealed),
        "revealed_entries": log.revealed_entries,
        "first_chunk": seen(log.first_chunk),
        "last_chunk": seen(log.last_chunk),
        "chunks": log.chunks,
        "ranked_users": log.ranked_users,
        "winners_selected": seen(log.selected),
        "winners": log.winners,
        "waiters": heard.len(),
        "waiters_answered": answered.len(),
        "waiter_outcomes": outcomes,
        "outcome_heard_after_draw_ms": quantiles(answered),
    }))
}

/// Long-polls the entrant's status until the draw gives it an outcome;
/// when it was heard, and which.
async fn outcome(client: &reqwest::Client, url: &str, token: &str, deadline: DateTime<Utc>) -> Heard {
    while Utc::now() < deadline {
        let answer = client.get(url).bearer_auth(token).send().await;
        let body: Option<Value> = match answer {
            Ok(response) if response.status().is_success() => response.json().await.ok(),
            _ => None,
        };
        let Some(body) = body else {
            // Refused or cut off: a client retries after a moment.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        match body["state"].as_str() {
            Some("entered" | "not_entered") | None => continue,
            Some(state) => return Some((Utc::now(), state.to_owned())),
        }
    }
    None
}

/// Notes the draw's records of `voucher` until its winners are selected
/// or `deadline` passes.
async fn follow(follower: Follower, voucher: String, log: Arc<Mutex<DrawLog>>, deadline: DateTime<Utc>) {
    let until = (deadline - Utc::now()).to_std().unwrap_or_default();
    let watching = async {
        loop {
            let Ok(message) = follower.recv().await else { continue };
            let at = Utc::now();
            let Some(Ok(envelope)) = message.payload().map(Envelope::decode) else { continue };
            if envelope.event.voucher_id().to_string() != voucher {
                continue;
            }
            let seen = Seen { at, emitted: envelope.emitted_at };
            let mut log = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match &envelope.event {
                Event::DrawSeedRevealed(revealed) => {
                    log.revealed = Some(seen);
                    log.revealed_entries = Some(revealed.entries);
                }
                Event::DrawRanked(chunk) => {
                    log.first_chunk.get_or_insert(seen);
                    log.last_chunk = Some(seen);
                    log.chunks += 1;
                    log.ranked_users += chunk.users.len() as u64;
                }
                Event::DrawWinnersSelected(selected) => {
                    log.selected = Some(seen);
                    log.winners = Some(selected.winners);
                    return;
                }
                _ => {}
            }
        }
    };
    let _ = tokio::time::timeout(until, watching).await;
}
