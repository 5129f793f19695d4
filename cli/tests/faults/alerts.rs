//! Operators hear about a fault: a Prometheus of the scenario's own
//! scrapes the platform's three services under `prometheus/alerts.yml`,
//! its durations divided by [`COMPRESSION`] so that a `for: 30s` fires in
//! seconds, and the scenario requires the alert its fault should raise to
//! fire during it (and, in the partitions lane, to resolve after the heal),
//! for the services concerned and no other. Shared by the fault suite and
//! the partitions lane (by path).

use std::path::Path;
use std::time::Duration;

use seckill_devstack::{AlertWatch, Prometheus, TempDir};

use crate::cluster::{Cluster, Service};

/// How many times shorter every duration of the rules is here.
const COMPRESSION: u64 = 12;
/// How long an alert may take to resolve after the heal.
const RESOLVE_WITHIN: Duration = Duration::from_secs(60);

/// A Prometheus watching one platform; stopped when dropped.
pub struct Alerts {
    watch: AlertWatch,
    _prometheus: Prometheus,
    _dir: TempDir,
}

impl Alerts {
    /// Starts a Prometheus scraping `cluster`'s ingress, processor and
    /// projector (every second) under the compressed rules, once it is
    /// ready.
    pub async fn watch(cluster: &Cluster) -> Self {
        let dir = TempDir::new().expect("dir");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../prometheus/alerts.yml");
        let rules = seckill_devstack::compressed_rules(&source, dir.path(), COMPRESSION).expect("rules compressed");
        let targets: Vec<String> = [Service::Ingress, Service::Processor, Service::Projector]
            .into_iter()
            .map(|service| cluster.url(service).trim_start_matches("http://").to_owned())
            .collect();
        let prometheus = tokio::task::block_in_place(|| {
            Prometheus::start_with_rules(&dir.path().join("prometheus"), &targets, Some(&rules))
        })
        .expect("prometheus starts (run scripts/setup)");
        let watch = AlertWatch::new(&prometheus.url());
        watch.ready(Duration::from_secs(30)).await.expect("prometheus gets ready");
        Self { watch, _prometheus: prometheus, _dir: dir }
    }

    /// Waits until `name` with `labels` fires, at most `within` (in the
    /// partitions lane the cut's length: an alert that fires only after
    /// the heal came too late); how long it took.
    pub async fn fires(&self, fault: &str, name: &str, labels: &[(&str, &str)], within: Duration) -> Duration {
        let (after, _) =
            self.watch.firing(name, labels, within).await.unwrap_or_else(|error| panic!("[{fault}] {error}"));
        println!("[{fault}] alert {name} {labels:?} firing {after:?} after it was awaited");
        after
    }

    /// Requires `name` with `labels` to be neither pending nor firing.
    pub async fn quiet(&self, fault: &str, name: &str, labels: &[(&str, &str)]) {
        let states = self.watch.states(name, labels).await.unwrap_or_else(|error| panic!("[{fault}] {error}"));
        assert!(states.is_empty(), "[{fault}] {name} {labels:?} is active: {states:?}");
    }

    /// Waits until `name` with `labels` is no longer active.
    pub async fn resolve(&self, fault: &str, name: &str, labels: &[(&str, &str)]) {
        let after =
            self.watch.resolved(name, labels, RESOLVE_WITHIN).await.unwrap_or_else(|error| panic!("[{fault}] {error}"));
        println!("[{fault}] alert {name} {labels:?} resolved {after:?} after the heal");
    }
}
