//! Decoding a replay's records on more than one thread.
//!
//! Writing a record is cheap (JSON Lines copies its bytes); decoding it,
//! which every record needs for the filters and to tell events from
//! undecodable records, was most of a replay's one busy thread. Records
//! are gathered in batches, each batch decoded by up to
//! [`most_threads`] threads in parallel, then written in the order read.
//! A batch holds [`BATCH`] records copied out of librdkafka's buffers, so
//! memory stays bounded: one batch beside librdkafka's prefetch queue.
//!
//! A replay that follows the topics (`--follow`) decodes each record as
//! it comes: a batch would hold records back until it filled.

use rdkafka::message::OwnedMessage;
use rdkafka::Message;
use seckill_core::Envelope;

use super::LogTopic;

/// Records per batch: a few milliseconds of decoding, so a thread per
/// batch costs little beside it.
pub(super) const BATCH: usize = 4096;
/// Fewer records than this are decoded on the calling thread alone.
const SPLIT_FROM: usize = 256;

/// One record read, owned so that another thread may decode it.
pub(super) struct Read {
    pub(super) topic: LogTopic,
    pub(super) message: OwnedMessage,
}

/// Threads a batch is decoded on: the machine's cores, at most four (past
/// that the single writer is the bound).
pub(super) fn most_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get().min(4))
}

/// Each record's payload decoded (None: not an event), in `records`'
/// order, on up to `threads` threads.
pub(super) fn decode_all(records: &[Read], threads: usize) -> Vec<Option<Envelope>> {
    let decode = |records: &[Read]| -> Vec<Option<Envelope>> {
        records.iter().map(|read| Envelope::decode(read.message.payload().unwrap_or_default()).ok()).collect()
    };
    if threads <= 1 || records.len() < SPLIT_FROM {
        return decode(records);
    }
    let share = records.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut parts = records.chunks(share);
        let first = parts.next().unwrap_or_default();
        let others: Vec<_> = parts.map(|part| scope.spawn(move || decode(part))).collect();
        let mut decoded = decode(first);
        for other in others {
            // A panic in a decoder is a bug: carried to the caller as one.
            decoded.extend(other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        decoded
    })
}

#[cfg(test)]
mod tests {
    use rdkafka::message::Timestamp;
    use seckill_core::event::VoucherUpdated;
    use seckill_core::{Event, VoucherId};

    use super::*;

    fn read(payload: Vec<u8>, offset: i64) -> Read {
        let message = OwnedMessage::new(Some(payload), None, "t".into(), Timestamp::NotAvailable, 0, offset, None);
        Read { topic: LogTopic::Sales, message }
    }

    #[test]
    fn a_batch_decodes_in_order_on_several_threads_as_on_one() {
        let records: Vec<Read> = (0..1_000)
            .map(|i| {
                let event = Event::VoucherUpdated(VoucherUpdated {
                    voucher_id: VoucherId::generate(),
                    paused: None,
                    ends_at: None,
                    add_stock: i,
                });
                // Every seventh record is not an event.
                let payload = if i % 7 == 0 { b"{not json".to_vec() } else { Envelope::new(event).encode() };
                read(payload, i64::try_from(i).expect("small"))
            })
            .collect();
        let alone = decode_all(&records, 1);
        let shared = decode_all(&records, 3);
        assert_eq!(alone.len(), 1_000);
        assert_eq!(alone.iter().filter(|decoded| decoded.is_none()).count(), 143);
        let ids = |decoded: &[Option<Envelope>]| -> Vec<Option<String>> {
            decoded.iter().map(|envelope| envelope.as_ref().map(|e| e.event_id.to_string())).collect()
        };
        assert_eq!(ids(&shared), ids(&alone));
    }
}
