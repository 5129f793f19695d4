//! The acknowledged event producer.

use std::time::{Duration, Instant};

use prometheus::IntGauge;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use seckill_core::config::KafkaConfig;
use seckill_core::topics::Topics;
use seckill_core::Envelope;

use crate::lag::SOCKET_TIMEOUT_MS;
use crate::KafkaError;

/// How a producer talks to the broker.
#[derive(Clone, Debug)]
pub struct ProducerSettings {
    /// Bootstrap servers.
    pub brokers: String,
    /// Upper bound from `send` to the acknowledgement, including retries.
    pub timeout: Duration,
    /// Time the producer may wait to fill a batch.
    pub linger_ms: u32,
}

impl From<&KafkaConfig> for ProducerSettings {
    fn from(config: &KafkaConfig) -> Self {
        Self {
            brokers: config.brokers.clone(),
            timeout: Duration::from_millis(config.produce_timeout_ms),
            linger_ms: config.linger_ms,
        }
    }
}

/// Creates the platform's topics (if missing) and a producer: what every
/// service does first.
pub async fn connect(config: &KafkaConfig) -> Result<(Topics, EventProducer), KafkaError> {
    let topics = config.topics();
    let specs = crate::platform_topics(config, &topics);
    crate::ensure_topics(&config.brokers, &specs, config.partitions, config.replication).await?;
    let producer = EventProducer::new(&ProducerSettings::from(config))?;
    Ok((topics, producer))
}

/// Produces events keyed by voucher and waits for the broker's
/// acknowledgement (idempotent producer, `acks=all`), so a caller that got
/// `Ok` knows the event is in the log.
#[derive(Clone)]
pub struct EventProducer {
    producer: FutureProducer,
    timeout: Duration,
    /// Sends awaiting their acknowledgement, for operators.
    in_flight: Option<IntGauge>,
}

impl std::fmt::Debug for EventProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventProducer").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl EventProducer {
    /// Connects lazily: creating the producer does not wait for the broker.
    pub fn new(settings: &ProducerSettings) -> Result<Self, KafkaError> {
        let timeout_ms = settings.timeout.as_millis().max(1).to_string();
        let producer = ClientConfig::new()
            .set("bootstrap.servers", &settings.brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            // Java-compatible key placement, so other tools agree on a
            // voucher's partition.
            .set("partitioner", "murmur2_random")
            .set("linger.ms", settings.linger_ms.to_string())
            // Bounded local queue: when the broker is slow, `send` waits for
            // room (backpressure) instead of buffering without limit.
            .set("queue.buffering.max.messages", "100000")
            .set("message.timeout.ms", &timeout_ms)
            .set("socket.timeout.ms", SOCKET_TIMEOUT_MS)
            .create()
            .map_err(KafkaError::Client)?;
        Ok(Self { producer, timeout: settings.timeout, in_flight: None })
    }

    /// Whether a broker answers a metadata request within `timeout`: the
    /// dependency probe (a producer with records in flight can still wait
    /// on a broker that went away).
    pub async fn reaches_broker(&self, timeout: Duration) -> bool {
        let producer = self.producer.clone();
        tokio::task::spawn_blocking(move || producer.client().fetch_metadata(None, timeout).is_ok())
            .await
            .unwrap_or(false)
    }

    /// Counts sends awaiting their acknowledgement in `gauge`.
    pub fn with_in_flight_gauge(mut self, gauge: IntGauge) -> Self {
        self.in_flight = Some(gauge);
        self
    }

    /// Produces `envelope` to `topic`, keyed by its voucher, and waits for
    /// the acknowledgement. Returns the time it took.
    pub async fn send(&self, topic: &str, envelope: &Envelope) -> Result<Duration, KafkaError> {
        let key = envelope.event.voucher_id().to_string();
        let payload = envelope.encode();
        let headers = OwnedHeaders::new().insert(Header { key: "type", value: Some(envelope.kind()) });
        self.send_raw(topic, Some(key.as_bytes()), &payload, headers).await
    }

    /// Produces an already encoded event of type `kind` (an outbox entry),
    /// keyed by `key`, and waits for the acknowledgement.
    pub async fn send_encoded(
        &self,
        topic: &str,
        key: &str,
        kind: &str,
        payload: &[u8],
    ) -> Result<Duration, KafkaError> {
        let headers = OwnedHeaders::new().insert(Header { key: "type", value: Some(kind) });
        self.send_raw(topic, Some(key.as_bytes()), payload, headers).await
    }

    /// Produces arbitrary bytes (dead letters keep the original record).
    pub async fn send_raw(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        payload: &[u8],
        headers: OwnedHeaders,
    ) -> Result<Duration, KafkaError> {
        let started = Instant::now();
        let _in_flight = self.in_flight.as_ref().map(InFlight::enter);
        let mut record = FutureRecord::<[u8], [u8]>::to(topic).payload(payload).headers(headers);
        if let Some(key) = key {
            record = record.key(key);
        }
        let delivery = self.producer.send(record, Timeout::After(self.timeout));
        // message.timeout.ms bounds delivery; the outer timeout also bounds
        // the wait for room in the local queue.
        match tokio::time::timeout(self.timeout * 2, delivery).await {
            Ok(Ok(_)) => Ok(started.elapsed()),
            Ok(Err((error, _))) => Err(KafkaError::Produce(error)),
            Err(_) => Err(KafkaError::ProduceTimeout(self.timeout * 2)),
        }
    }

    /// Waits until every queued event is acknowledged, or `timeout` passes.
    pub fn flush(&self, timeout: Duration) {
        if let Err(error) = self.producer.flush(Timeout::After(timeout)) {
            tracing::warn!(%error, "Producer flush did not complete.");
        }
    }
}

/// One send counted in the in-flight gauge until dropped, however the send
/// ends (acknowledged, failed, or its future dropped).
struct InFlight(IntGauge);

impl InFlight {
    fn enter(gauge: &IntGauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}
