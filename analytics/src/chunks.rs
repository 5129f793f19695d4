//! Reading topics to their end in bounded chunks, for a rebuild that
//! applies them to a store: the reader blocks while the store is behind,
//! so memory stays at a few chunks whatever the log's length.

use seckill_core::Envelope;
use seckill_kafka::Message;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::AnalyticsError;

/// Events per chunk (one store call each).
const CHUNK: usize = 500;
/// Chunks read ahead of the store.
const QUEUED_CHUNKS: usize = 4;

/// What the reader counted: records read, and those that are not events.
pub(crate) type Counts = (u64, u64);

/// Reads `topics` from their first record to the high watermarks present
/// now, with no consumer group, as decoded events in chunks of [`CHUNK`];
/// the reader's task ends with its counts once every chunk is handed over
/// (or the receiver is dropped).
pub(crate) fn read_in_chunks(
    brokers: String,
    topics: Vec<String>,
) -> (mpsc::Receiver<Vec<Envelope>>, JoinHandle<Result<Counts, AnalyticsError>>) {
    let (chunks, received) = mpsc::channel::<Vec<Envelope>>(QUEUED_CHUNKS);
    let reader = tokio::task::spawn_blocking(move || {
        let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
        let mut chunk = Vec::with_capacity(CHUNK);
        let mut undecodable = 0u64;
        let mut closed = false;
        let read = seckill_kafka::read_to_end(&brokers, &topics, |message| {
            match Envelope::decode(message.payload().unwrap_or_default()) {
                Ok(envelope) => chunk.push(envelope),
                Err(_) => undecodable += 1,
            }
            if chunk.len() >= CHUNK && !closed {
                closed = chunks.blocking_send(std::mem::take(&mut chunk)).is_err();
            }
        });
        if !chunk.is_empty() && !closed {
            let _ = chunks.blocking_send(chunk);
        }
        Ok((read?, undecodable))
    });
    (received, reader)
}

/// The reader's counts, once it ended.
pub(crate) async fn counts(reader: JoinHandle<Result<Counts, AnalyticsError>>) -> Result<Counts, AnalyticsError> {
    reader.await.map_err(|e| AnalyticsError::Task(e.to_string()))?
}
