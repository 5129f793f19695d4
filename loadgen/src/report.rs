//! The run's report, for people (Display) and machines (serde).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::Percentiles;

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub voucher_id: String,
    pub requests: usize,
    pub elapsed_s: f64,
    pub requests_per_s: f64,
    /// HTTP status → answers.
    pub status_counts: BTreeMap<u16, u64>,
    /// Error code of the non-2xx answers → answers.
    pub error_codes: BTreeMap<String, u64>,
    /// Requests that got no HTTP answer (connection errors, timeouts).
    pub transport_errors: u64,
    /// Latency of the order POSTs (open loop: from the scheduled time).
    pub latency: Percentiles,
    /// Open loop only: requests that could not start on time because
    /// `max_in_flight` were outstanding (the server could not keep up).
    pub late_starts: u64,
    /// Distinct orders admitted (`202`; replays of one order count once).
    pub admitted_orders: usize,
    /// Final statuses of the admitted orders, from the status view.
    pub final_statuses: BTreeMap<String, u64>,
    /// Accept → decision of the admitted orders (the view's `accepted_at`
    /// and `decided_at`).
    pub end_to_end: Percentiles,
    /// A sample of admitted orders: from the `202` arriving to a client's
    /// poll first seeing the final status (polled every 10 ms, at most 16
    /// at a time).
    pub visible: Percentiles,
    /// From the first request to the admission that took the last unit;
    /// None when units were left.
    pub sold_out_after_s: Option<f64>,
    /// From the last answer until the status view had decided every
    /// admitted order: how far the pipeline was behind when the load ended.
    /// None when it did not within the settle timeout.
    pub drained_after_s: Option<f64>,
    pub invariants: Invariants,
    /// CPU the generator itself used, and as a share of one core over the run.
    pub loadgen_cpu_s: f64,
    pub loadgen_cores: f64,
}

/// The sale's invariants as seen from outside.
#[derive(Clone, Debug, Serialize)]
pub struct Invariants {
    pub stock: u64,
    pub created_units: u64,
    pub created_within_stock: bool,
    pub per_user_limit: u32,
    pub users_over_limit: usize,
    /// None when not checked (no Redis URL / processor URL given).
    pub redis_remaining: Option<u64>,
    pub persistent_remaining: Option<u64>,
    pub remaining_agree: Option<bool>,
    pub every_admitted_order_final: bool,
    /// All of the above that were checked hold.
    pub passed: bool,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "voucher {}", self.voucher_id)?;
        writeln!(
            f,
            "requests      {} in {:.2} s = {:.0} requests/s ({} without an answer)",
            self.requests, self.elapsed_s, self.requests_per_s, self.transport_errors
        )?;
        let statuses: Vec<String> = self.status_counts.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        writeln!(f, "answers       {}", statuses.join(", "))?;
        let codes: Vec<String> = self.error_codes.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        writeln!(f, "error codes   {}", if codes.is_empty() { "-".to_owned() } else { codes.join(", ") })?;
        write_percentiles(f, "POST latency", &self.latency)?;
        if self.late_starts > 0 {
            writeln!(f, "late starts   {} (open loop: the server fell behind the arrival rate)", self.late_starts)?;
        }
        let finals: Vec<String> = self.final_statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        writeln!(f, "admitted      {} orders; final: {}", self.admitted_orders, finals.join(", "))?;
        write_percentiles(f, "accept→final", &self.end_to_end)?;
        if self.visible.count > 0 {
            write_percentiles(f, "202→visible", &self.visible)?;
            writeln!(f, "              ({} sampled orders, polled every 10 ms)", self.visible.count)?;
        }
        match self.sold_out_after_s {
            Some(seconds) => writeln!(f, "sold out      after {seconds:.3} s")?,
            None => writeln!(f, "sold out      no (units left)")?,
        }
        match self.drained_after_s {
            Some(seconds) => {
                writeln!(f, "drained       every admitted order decided {seconds:.3} s after the last answer")?
            }
            None => writeln!(f, "drained       NOT within the settle timeout")?,
        }
        let i = &self.invariants;
        writeln!(
            f,
            "invariants    created {} ≤ stock {}: {}; users over the limit of {}: {}; Redis remaining {} == persistent {}: {}; all final: {} → {}",
            i.created_units,
            i.stock,
            yes(i.created_within_stock),
            i.per_user_limit,
            i.users_over_limit,
            shown(i.redis_remaining),
            shown(i.persistent_remaining),
            i.remaining_agree.map_or("not checked", yes),
            yes(i.every_admitted_order_final),
            if i.passed { "PASS" } else { "FAIL" }
        )?;
        writeln!(f, "loadgen CPU   {:.2} s ({:.2} cores)", self.loadgen_cpu_s, self.loadgen_cores)
    }
}

fn write_percentiles(f: &mut fmt::Formatter<'_>, label: &str, p: &Percentiles) -> fmt::Result {
    writeln!(
        f,
        "{label:<13} p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms",
        p.p50_ms, p.p90_ms, p.p99_ms, p.p999_ms, p.max_ms
    )
}

fn yes(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "NO"
    }
}

fn shown(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}
