//! `seckill dead-letters list|redrive`: what the consumers parked, and
//! putting it back.
//!
//! `list` prints one JSON object per dead letter: why it was parked, by
//! which service, where it came from, and its payload. `redrive` produces
//! every dead letter not redriven before back to its source topic with its
//! original key (after a fix was deployed, say); its progress is the
//! `<prefix>.redrive` consumer group, so each dead letter goes back once. A
//! record that is still bad is parked again, as a new dead letter.

use std::path::PathBuf;
use std::time::Duration;

use crate::tool_config::ToolConfig;
use anyhow::Context;
use clap::{Args, Subcommand};
use seckill_analytics::replay::{dead_letter_header as header, describe_dead_letter as describe};
use seckill_core::config;
use seckill_kafka::{BatchConsumer, ConsumerSettings, EventProducer, Message, OwnedHeaders, ProducerSettings};
use tokio_util::sync::CancellationToken;

/// How long `redrive` waits for more dead letters before it is done.
const IDLE: Duration = Duration::from_secs(3);

/// Flags of `seckill dead-letters`.
#[derive(Debug, Args)]
pub(crate) struct DeadLetterArgs {
    #[command(subcommand)]
    action: Action,
    /// A TOML config with the `[kafka]` section (the ingress's will do);
    /// `SECKILL_*` environment variables override it.
    #[arg(long, env = "SECKILL_CONFIG", global = true)]
    config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Prints every dead letter as one JSON object per line.
    List,
    /// Produces every dead letter not redriven before back to its source topic.
    Redrive,
}

pub(crate) async fn run(args: DeadLetterArgs) -> anyhow::Result<()> {
    let config: ToolConfig = config::load(args.config.as_deref()).context("loading the config")?;
    let topic = config.kafka.topics().dead_letters;
    match args.action {
        Action::List => {
            let brokers = config.kafka.brokers.clone();
            let count = tokio::task::spawn_blocking(move || {
                seckill_kafka::read_to_end(&brokers, &[&topic], |message| {
                    // A closed pipe only ends the listing.
                    let _ = crate::output::emit(&format!("{}\n", describe(message)));
                })
            })
            .await
            .context("reading the dead letters")??;
            eprintln!("{count} dead letters.");
            Ok(())
        }
        Action::Redrive => redrive(&config, &topic).await,
    }
}

async fn redrive(config: &ToolConfig, topic: &str) -> anyhow::Result<()> {
    let settings = ConsumerSettings {
        max_batch: 500,
        max_wait: Duration::from_millis(100),
        ..ConsumerSettings::reader(&config.kafka.brokers, format!("{}.redrive", config.kafka.topic_prefix))
    };
    let consumer = BatchConsumer::subscribe(&settings, &[topic]).context("joining the redrive group")?;
    let producer = EventProducer::new(&ProducerSettings::from(&config.kafka)).context("creating the producer")?;
    let never = CancellationToken::new();
    let mut redriven = 0u64;
    loop {
        let batch = consumer.next_batch_or_idle(IDLE, &never).await.context("reading dead letters")?;
        if batch.is_empty() {
            break;
        }
        for message in &batch {
            let Some(source) = header(message, "dlq.source.topic") else {
                eprintln!("Dead letter at offset {} names no source topic; skipped.", message.offset());
                continue;
            };
            producer
                .send_raw(source, message.key(), message.payload().unwrap_or_default(), OwnedHeaders::new())
                .await
                .with_context(|| format!("producing dead letter {} back to {source}", message.offset()))?;
            redriven += 1;
        }
        consumer.store(&batch);
        consumer.commit().context("recording the redrive progress")?;
    }
    producer.flush(Duration::from_secs(5));
    println!("Redrove {redriven} dead letters to their source topics.");
    Ok(())
}
