//! End-to-end tests: each starts its own Redis and services on the run's
//! Kafka (topics and groups of its own) and checks behaviour from the
//! outside, through the HTTP API and the topics.

// Test helpers are `pub` for the test modules; nothing is exported.
#![allow(unreachable_pub)]

mod admin_retries;
mod admission_timeout;
mod alerts;
mod api_fuzz;
mod audit;
mod beacon_draw;
mod beacon_room;
mod browser;
mod challenge;
mod cluster;
mod contention;
mod dead_letters;
mod decisions;
mod draw;
mod export;
mod failover_retry;
mod groups;
mod helpers;
mod lifecycle;
mod live;
mod loadgen;
mod observability;
mod old_logs;
mod openapi;
mod orders;
mod pause_lost;
mod payments;
mod rebuild;
mod rebuild_stock;
mod reconcile;
mod redis_outage;
mod replay;
mod replica_acks;
mod report;
mod restart;
mod retries;
mod room_restore;
mod rules;
mod security;
mod slow_clients;
mod stats;
mod stress;
mod waiting_room;
