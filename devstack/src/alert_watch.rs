//! Watching alerts on a running Prometheus through its API, for tests that
//! provoke a fault and expect its alert: an alert seen pending, then
//! firing, then gone once the fault is removed. A Prometheus that does not
//! answer is an error, never "no alerts" (which would pass every wait for a
//! resolution).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::DevstackError;

/// How often the alerts are read while waiting.
const EVERY: Duration = Duration::from_millis(200);

/// A Prometheus's alerts API.
#[derive(Clone, Debug)]
pub struct AlertWatch {
    http: reqwest::Client,
    /// `http://host:port` of the Prometheus.
    url: String,
}

impl AlertWatch {
    pub fn new(url: &str) -> Self {
        Self { http: reqwest::Client::new(), url: url.trim_end_matches('/').to_owned() }
    }

    /// Waits up to `within` until Prometheus says it is ready (`/-/ready`):
    /// while it starts, its API answers `503`.
    pub async fn ready(&self, within: Duration) -> Result<(), DevstackError> {
        let started = Instant::now();
        loop {
            let answer = self.http.get(format!("{}/-/ready", self.url)).send().await;
            if answer.is_ok_and(|answer| answer.status().is_success()) {
                return Ok(());
            }
            if started.elapsed() > within {
                return Err(DevstackError::Setup(format!("Prometheus at {} not ready within {within:?}", self.url)));
            }
            tokio::time::sleep(EVERY).await;
        }
    }

    /// The state (`pending` or `firing`) of each active alert named `name`
    /// whose labels include `labels`.
    pub async fn states(&self, name: &str, labels: &[(&str, &str)]) -> Result<Vec<String>, DevstackError> {
        let failed = |why: String| DevstackError::Setup(format!("Prometheus's alerts API at {}: {why}", self.url));
        let response = self
            .http
            .get(format!("{}/api/v1/alerts", self.url))
            .send()
            .await
            .map_err(|error| failed(error.to_string()))?;
        let status = response.status();
        let body: Value = response.json().await.map_err(|error| failed(format!("{status}: {error}")))?;
        if !status.is_success() || body["status"] != "success" {
            return Err(failed(format!("{status}: {body}")));
        }
        let alerts = body["data"]["alerts"].as_array().ok_or_else(|| failed(format!("no alerts list: {body}")))?;
        Ok(alerts
            .iter()
            .filter(|alert| alert["labels"]["alertname"] == name)
            .filter(|alert| labels.iter().all(|(key, value)| alert["labels"][*key] == *value))
            .map(|alert| alert["state"].as_str().unwrap_or_default().to_owned())
            .collect())
    }

    /// Waits up to `within` until the alert fires; how long it took, and
    /// whether it was seen pending first.
    pub async fn firing(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        within: Duration,
    ) -> Result<(Duration, bool), DevstackError> {
        let started = Instant::now();
        let mut seen_pending = false;
        loop {
            let states = self.states(name, labels).await?;
            seen_pending |= states.iter().any(|state| state == "pending");
            if states.iter().any(|state| state == "firing") {
                return Ok((started.elapsed(), seen_pending));
            }
            if started.elapsed() > within {
                return Err(DevstackError::Setup(format!(
                    "{name} {labels:?} did not fire within {within:?}: {states:?}"
                )));
            }
            tokio::time::sleep(EVERY).await;
        }
    }

    /// Waits up to `within` until no alert named `name` with `labels` is
    /// active; how long it took.
    pub async fn resolved(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        within: Duration,
    ) -> Result<Duration, DevstackError> {
        let started = Instant::now();
        loop {
            let states = self.states(name, labels).await?;
            if states.is_empty() {
                return Ok(started.elapsed());
            }
            if started.elapsed() > within {
                return Err(DevstackError::Setup(format!(
                    "{name} {labels:?} still active after {within:?}: {states:?}"
                )));
            }
            tokio::time::sleep(EVERY).await;
        }
    }
}
