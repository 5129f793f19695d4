//! `seckill`: the platform's command line.
//!
//! ```text
//! seckill dev                    # Redis, Kafka and all three services, data in .seckill/
//! seckill dev --data-dir /tmp/x  # elsewhere
//! seckill serve ingress --config config/ingress.toml   # one service, as its own process
//! seckill reconcile --dry-run    # what a Redis rebuilt from the log would differ in
//! seckill dead-letters list      # every parked record, one JSON object per line
//! seckill dead-letters redrive   # put them back on their source topics, once each
//! seckill rebuild-view --into view2.redb --verify   # the view from the log, compared with the live one
//! seckill rebuild-stock --into stock2.redb --verify # the processor's stock from the log, checked
//! seckill token alice            # a signed user token for curl (the local run's secret)
//! seckill report --voucher ID --output sale.html   # a sale's charts and tables, from the log
//! seckill audit --voucher ID --live                # whether its books balance (exit status 1 if not)
//! seckill draw verify --voucher ID --from draw.jsonl   # a draw recomputed from a copy of the log
//! seckill groups                 # the consumer groups: state, members, partitions, lag
//! seckill export --voucher ID --out sale/          # Parquet, one file per event kind, for SQL
//! seckill schema --out docs/schemas                # the records' JSON Schemas
//! ```

mod audit;
mod dead_letters;
mod dev;
mod dev_beacon;
mod dev_servers;
mod draw;
mod export;
mod group_args;
mod groups;
mod loadgen;
mod output;
mod rebuild_stock;
mod rebuild_target;
mod rebuild_view;
mod reconcile;
mod replay;
mod report;
mod sale_selection;
mod schema;
mod secrets;
mod serve;
mod stats;
mod token;
mod tool_config;
mod topics;
mod verdict;

use clap::{Parser, Subcommand};
use seckill_core::telemetry;

/// Every service and tool of the binary allocates through mimalloc: its
/// per-thread free lists suit the many small, short-lived allocations of
/// request handling and record decoding, where glibc's malloc spent a fifth
/// of the ingress's CPU in the admission burst (locks, consolidation).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The seckill flash-sale platform.
#[derive(Debug, Parser)]
#[command(version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the whole platform on this machine: a local Redis and Apache
    /// Kafka, the ingress, processor and projector with embedded stores.
    /// Ctrl-C stops it.
    Dev(dev::DevArgs),
    /// Runs one service (ingress, processor or projector) in this process
    /// until SIGINT or SIGTERM, configured by file and `SECKILL_*` variables.
    Serve(serve::ServeArgs),
    /// Rebuilds the Redis admission state (stock, per-user counts) from the
    /// log plus the outbox after a Redis data loss, and reports what changed.
    /// Safe while the platform runs; --dry-run only reports.
    Reconcile(reconcile::ReconcileArgs),
    /// Lists the records consumers parked on the dead-letter topic, or
    /// produces them back to their source topics.
    DeadLetters(dead_letters::DeadLetterArgs),
    /// Rebuilds the order-status view from the log into a fresh store and,
    /// with --verify, reports every row that differs from the live view.
    RebuildView(rebuild_view::RebuildArgs),
    /// Rebuilds the processor's stock store from the sales topic into a
    /// fresh store (after losing it) and, with --verify, reports every
    /// order whose outcome differs from the log and every voucher whose
    /// stock differs from the running processor's.
    RebuildStock(rebuild_stock::RebuildStockArgs),
    /// Per-voucher sale statistics from the log: orders accepted, created,
    /// failed, cancelled and paid, units sold, sell-out time and the
    /// accept → decision latency (p50/p99); --json for machines.
    Stats(stats::StatsArgs),
    /// Writes the platform's topics between two bounds (offsets, times, or
    /// following), filtered by type, voucher or user, as JSON Lines or CSV.
    /// Joins no consumer group.
    Replay(replay::ReplayArgs),
    /// Draws a sale (or several) from the log as one self-contained HTML
    /// page: orders per second by outcome, units left with the sell-out,
    /// latency, cancellations and re-sales, summary tables.
    Report(report::ReportArgs),
    /// Checks a sale's books from the log (stock balance, one decision per
    /// order, limits, returns), and with --live against the view, the
    /// persistent stock and Redis; exit status 1 on any failed rule.
    Audit(audit::AuditArgs),
    /// Verifies a draw-mode sale from the log alone (`draw verify`): the
    /// ranking recomputed from the revealed seed and the entries, the
    /// winners and every order; exit status 1 on any failed check.
    Draw(draw::DrawArgs),
    /// Lists the platform's topics: partitions, watermarks, and the
    /// services' consumer groups' committed offsets and lag.
    Topics(topics::TopicsArgs),
    /// Describes the services' consumer groups as Kafka does: state,
    /// members, the partitions each holds, committed offsets and lag.
    Groups(groups::GroupsArgs),
    /// Drives a flash sale over HTTP against a running platform (closed loop
    /// or open loop at a fixed rate) and reports requests/s, answers,
    /// latency percentiles, accept → final latency, time to sell out, the
    /// invariants and its own CPU use.
    Loadgen(loadgen::LoadgenArgs),
    /// Prints a signed user token (HS256 JWT, `sub` = the user id), as the
    /// platform's login service would issue it; for curl, scripts and tests.
    Token(token::TokenArgs),
    /// Writes the log (the topics, or a JSON Lines copy) as Parquet, one
    /// file per event kind with typed columns, for SQL (DuckDB, Spark,
    /// Trino); --since, --until and --voucher as for replay.
    Export(export::ExportArgs),
    /// Writes the records' JSON Schemas (one file per event kind, and the
    /// envelope's), derived from this build's event types; --check compares
    /// them with the files instead.
    Schema(schema::SchemaArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init_logging();
    match Cli::parse().command {
        Command::Dev(args) => dev::run(args).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Reconcile(args) => reconcile::run(args).await,
        Command::DeadLetters(args) => dead_letters::run(args).await,
        Command::RebuildView(args) => rebuild_view::run(args).await,
        Command::RebuildStock(args) => rebuild_stock::run(args).await,
        Command::Stats(args) => stats::run(args).await,
        Command::Replay(args) => replay::run(args).await,
        Command::Report(args) => report::run(args).await,
        Command::Audit(args) => audit::run(args).await,
        Command::Draw(args) => draw::run(args).await,
        Command::Topics(args) => topics::run(args).await,
        Command::Groups(args) => groups::run(args).await,
        Command::Loadgen(args) => loadgen::run(args).await,
        Command::Token(args) => token::run(args),
        Command::Export(args) => export::run(args).await,
        Command::Schema(args) => schema::run(args),
    }
}
