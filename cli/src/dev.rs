//! `seckill dev`: the all-in-one local run.
//!
//! Starts Redis (append-only file) and one Apache Kafka node (KRaft) as
//! child processes with their data under one directory (see
//! `dev_servers`), the payment provider's sandbox (`seckill serve
//! payments`, a SANDBOX: no money moves) as another, the randomness
//! beacon's sandbox (`seckill-beacon-sandbox`, a drand chain of one signer:
//! a SANDBOX, not the League of Entropy) as a third, then the three
//! services in this process with embedded stores in the same directory. The ingress answers status
//! queries from the projector's view directly, so one base URL serves
//! everything. Running it again reuses the data, and first stops any server
//! a killed earlier run left running.
//!
//! Authentication is real but convenient: an admin token and a JWT secret
//! are created in the data directory on the first run (`seckill token USER`
//! signs user tokens with it), and, for curl, `X-User-Id` is trusted too
//! (`auth.insecure_dev_user_header`). Every client is on this machine, so
//! only the per-user rate limit applies, not the per-address one.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use prometheus::Registry;
use std::net::SocketAddr;
use std::time::Duration;

use seckill_core::beacon::BeaconConfig;
use seckill_core::config::{DrawConfig, HttpConfig, KafkaConfig, PaymentsConfig, RedisConfig, StoreConfig};
use seckill_core::shutdown;
use seckill_devstack::KafkaDurability;
use seckill_devstack::{stop_leftover_program, Leftover, Server};
use seckill_ingress::{AuthConfig, Dependencies, IngressConfig, RateLimitConfig};
use seckill_processor::ProcessorConfig;
use seckill_projector::ProjectorConfig;
use tokio::task::JoinSet;

use crate::dev_servers::{LocalServers, ServerPorts};
use crate::secrets::{local_secret, ADMIN_TOKEN_FILE, DRAW_SEAL_KEY_FILE, JWT_SECRET_FILE};

/// Flags of `seckill dev`.
#[derive(Debug, Args)]
pub(crate) struct DevArgs {
    /// Where Redis, Kafka and the stores keep their data.
    #[arg(long, default_value = ".seckill")]
    data_dir: PathBuf,
    /// Port of the public API (ingress).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Port of the processor's health and metrics.
    #[arg(long, default_value_t = 8081)]
    processor_port: u16,
    /// Port of the projector's query API, health and metrics.
    #[arg(long, default_value_t = 8082)]
    projector_port: u16,
    /// Port of the local Redis.
    #[arg(long, default_value_t = 16379)]
    redis_port: u16,
    /// Port of the local Kafka broker.
    #[arg(long, default_value_t = 19092)]
    broker_port: u16,
    /// Port of the payment provider sandbox (its checkout pages too).
    #[arg(long, default_value_t = 8090)]
    payments_port: u16,
    /// Port of the randomness beacon sandbox (drand's HTTP API), whose
    /// rounds rank draws and waiting rooms.
    #[arg(long, default_value_t = 8099)]
    beacon_port: u16,
    /// Make Kafka fsync every appended batch before it acknowledges, so an
    /// acknowledged order survives a machine crash on this single node (by
    /// default Kafka leaves that to the page cache and, in production, to
    /// its other replicas). See docs/OPERATIONS.md for the measured cost.
    #[arg(long)]
    fsync_every_batch: bool,
}

pub(crate) async fn run(args: DevArgs) -> anyhow::Result<()> {
    let data = std::path::absolute(&args.data_dir).context("resolving --data-dir")?;
    std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    let ports = ServerPorts { redis: args.redis_port, kafka: args.broker_port };
    let durability = if args.fsync_every_batch { KafkaDurability::FlushEveryBatch } else { KafkaDurability::PageCache };
    let servers = tokio::task::block_in_place(|| LocalServers::start(&data, ports, durability))?;

    let kafka = KafkaConfig { brokers: servers.brokers(), ..KafkaConfig::default() };
    let redis_config = RedisConfig { url: servers.redis_url(), ..RedisConfig::default() };

    let mut sandbox = match tokio::task::block_in_place(|| start_sandbox(&args, &data)) {
        Ok(sandbox) => sandbox,
        Err(error) => {
            tokio::task::block_in_place(|| servers.stop());
            return Err(error);
        }
    };
    let result = match crate::dev_beacon::start(&data, args.beacon_port).await {
        Ok(beacon) => {
            let config = beacon.as_ref().map(crate::dev_beacon::DevBeacon::config);
            serve(&args, &data, kafka, redis_config, config).await
        }
        Err(error) => Err(error),
    };
    tokio::task::block_in_place(|| {
        sandbox.stop(Duration::from_secs(10));
        servers.stop();
    });
    result
}

/// Runs the payment provider sandbox as a process of its own, as a real
/// provider is, delivering its callbacks to this run's ingress.
fn start_sandbox(args: &DevArgs, data: &std::path::Path) -> anyhow::Result<Server> {
    let exe = std::env::current_exe().context("finding this executable")?;
    let addr = SocketAddr::from(([127, 0, 0, 1], args.payments_port));
    let mut command = std::process::Command::new(exe);
    command
        .args(["serve", "payments"])
        .env("SECKILL_SANDBOX_LISTEN", addr.to_string())
        .env("SECKILL_SANDBOX_WEBHOOK_URL", format!("http://127.0.0.1:{}/api/v1/payments/webhook", args.port));
    let dir = data.join("payments");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // A sandbox a killed earlier run left running holds the port.
    let exe = std::env::current_exe().context("finding this executable")?;
    if let Leftover::Stopped { pid } = stop_leftover_program("the payments sandbox", &dir, "payments", &exe)? {
        tracing::warn!(pid, "Stopped the payments sandbox an earlier run left running.");
    }
    Server::start("the payments sandbox", command, &dir, "payments", addr, Duration::from_secs(30))
        .context("starting the payments sandbox (--payments-port)")
}

async fn serve(
    args: &DevArgs,
    data: &std::path::Path,
    kafka: KafkaConfig,
    redis: RedisConfig,
    beacon: Option<BeaconConfig>,
) -> anyhow::Result<()> {
    let stock = seckill_store::open_stock_store(&StoreConfig::embedded(data.join("processor.redb"))).await?;
    // The sandbox's keys; checkout brings the buyer back to the sale page.
    let payments = PaymentsConfig {
        return_url: format!("http://127.0.0.1:{}/sale/{{voucher_id}}", args.port),
        ..PaymentsConfig::sandbox(&format!("http://127.0.0.1:{}", args.payments_port))
    };
    let view = seckill_store::open_view_store(&StoreConfig::embedded(data.join("view.redb"))).await?;

    let processor = seckill_processor::App::build(
        ProcessorConfig {
            http: HttpConfig::local(args.processor_port),
            kafka: kafka.clone(),
            redis: redis.clone(),
            payments: payments.clone(),
            ..ProcessorConfig::default()
        },
        stock,
        Registry::new(),
    )
    .await
    .context("starting the processor")?;
    let projector = seckill_projector::App::build(
        ProjectorConfig {
            http: HttpConfig::local(args.projector_port),
            kafka: kafka.clone(),
            ..ProjectorConfig::default()
        },
        view,
        Registry::new(),
    )
    .await
    .context("starting the projector")?;
    let auth = AuthConfig {
        admin_token: Some(local_secret(data, ADMIN_TOKEN_FILE)?),
        jwt_secret: Some(local_secret(data, JWT_SECRET_FILE)?),
        insecure_dev_user_header: true,
        ..AuthConfig::default()
    };
    let rate_limit = RateLimitConfig { per_ip_per_second: 0, ..RateLimitConfig::default() };
    let ingress = seckill_ingress::App::build(
        IngressConfig {
            http: HttpConfig::local(args.port),
            redis,
            kafka,
            auth,
            rate_limit,
            payments,
            draw: DrawConfig { seal_key: local_secret(data, DRAW_SEAL_KEY_FILE)? },
            beacon: beacon.clone().unwrap_or_default(),
            ..IngressConfig::default()
        },
        Dependencies { registry: Registry::new(), view: projector.view() },
    )
    .await
    .context("starting the ingress")?;

    let base = format!("http://{}", ingress.local_addr());
    let admin_file = data.join(ADMIN_TOKEN_FILE);
    println!("\nseckill is up: {base}\n");
    println!("  admin=\"authorization: Bearer $(cat {})\"", admin_file.display());
    println!("  # open a sale of 10 units, one per user, for the next hour");
    println!(
        "  curl -s -X POST {base}/api/v1/vouchers -H \"$admin\" -H 'content-type: application/json' \\\n    -d \"{{\\\"stock\\\":10,\\\"per_user_limit\\\":1,\\\"begins_at\\\":\\\"$(date -u +%FT%TZ)\\\",\\\"ends_at\\\":\\\"$(date -u -d '+1 hour' +%FT%TZ)\\\"}}\""
    );
    println!("  # order as user alice (use the voucher_id from the answer), then poll the order");
    let seckill = std::env::current_exe().map_or_else(|_| "seckill".to_owned(), |exe| exe.display().to_string());
    println!("  alice=\"authorization: Bearer $({seckill} token alice --data-dir {})\"", data.display());
    println!("  curl -s -X POST {base}/api/v1/vouchers/VOUCHER_ID/orders -H \"$alice\"");
    println!("  curl -s \"{base}/api/v1/orders/ORDER_ID?wait=10s&status=PENDING\" -H \"$alice\"   # answers when it is decided\n");
    println!("The sale page (the reference client): {base}/sale/VOUCHER_ID");
    println!("  open it in a browser, enter a user id such as alice, watch the countdown, buy.");
    println!(
        "  A voucher with \"price\" (minor units), \"currency\" and \"payment_seconds\" is paid at the payment SANDBOX \
         (http://127.0.0.1:{}; no money moves).\n",
        args.payments_port
    );
    match &beacon {
        Some(beacon) => println!(
            "Draws and waiting rooms rank by the randomness beacon SANDBOX at {} (a drand chain of one signer, \
             not the League of Entropy).\n",
            beacon.relays.join(", ")
        ),
        None => println!(
            "No beacon sandbox (cargo build -p seckill-beacon builds it): draws and waiting rooms rank by the \
             operator's committed seed.\n"
        ),
    }
    println!("Development run: X-User-Id is also trusted as the user (never outside development).");
    println!(
        "Metrics: {base}/metrics, http://{}/metrics, http://{}/metrics",
        processor.local_addr(),
        projector.local_addr()
    );
    println!("Ctrl-C stops everything.\n");

    let shutdown = shutdown::on_signals()?;
    let mut services = JoinSet::new();
    let token = shutdown.clone();
    services.spawn(async move { ingress.run(token).await.context("the ingress failed") });
    let token = shutdown.clone();
    services.spawn(async move { processor.run(token).await.context("the processor failed") });
    let token = shutdown.clone();
    services.spawn(async move { projector.run(token).await.context("the projector failed") });

    let mut outcome = Ok(());
    while let Some(joined) = services.join_next().await {
        // Services end only on shutdown; one ending early stops the rest.
        shutdown.cancel();
        if let Err(error) = joined.context("a service task panicked").and_then(|result| result) {
            tracing::error!(error = format!("{error:#}"), "Service stopped with an error.");
            outcome = Err(error);
        }
    }
    outcome
}
