//! Bounded conditional batches: a voucher's writes of one consumer batch,
//! split into batches of at most so many rows and bytes, written in
//! sequence, each conditioned on the version the previous one wrote.
//!
//! A consumer batch may hold thousands of one voucher's orders
//! (`consumer.max_batch` up to 10,000); as one conditional batch that is
//! megabytes in one Paxos round, which the server copies into its Paxos
//! state and its commit log. Past the server's mutation size limit (half a
//! commit log segment: 16 MiB by default on ScyllaDB and Cassandra) the
//! write is refused every time it is retried, and long before that a round
//! that large outlives the write and CAS timeouts, so the hot voucher stalls.
//!
//! The split is by decided input: a chunk carries whole inputs, the rows
//! they wrote, and the partition's static values (stock level, or view
//! record and counters) as they stood after its last input. So whatever
//! prefix of chunks has committed when a writer fails or loses a race, the
//! partition holds exactly the state after a prefix of the inputs: the next
//! attempt reads it again, finds those inputs decided (replayed, never
//! applied twice) and decides only the rest. What the writer reports for
//! the inputs its own earlier batches committed is what it decided then
//! ([`FirstDecisions`]), not a replay of itself.

use std::future::Future;

use seckill_core::config::{StoreConfig, DEFAULT_BATCH_MAX_BYTES, DEFAULT_BATCH_MAX_ROWS};
use seckill_core::VoucherId;
use uuid::Uuid;

use crate::StoreError;

/// A row of a voucher's partition: its kind and id.
pub(super) type RowKey = (&'static str, Uuid);

/// A row to write: its key and value (None: a row that only marks).
pub(super) type RowWrite = (RowKey, Option<Vec<u8>>);

/// Bytes counted for a row besides its value: the partition key and the
/// row's key (16 + 16 + the kind), and the server's per-cell overhead
/// (timestamps, column names), estimated high so the estimate errs on the
/// large side.
const ROW_OVERHEAD_BYTES: usize = 128;

/// The most one conditional batch may carry (`store.batch_max_rows`,
/// `store.batch_max_bytes`; why the defaults are what they are is told at
/// [`DEFAULT_BATCH_MAX_ROWS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Row statements besides the one conditional statement.
    pub max_rows: usize,
    /// Estimated bytes of the batch's values (see `ROW_OVERHEAD_BYTES`).
    pub max_bytes: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        Self { max_rows: DEFAULT_BATCH_MAX_ROWS, max_bytes: DEFAULT_BATCH_MAX_BYTES }
    }
}

impl From<&StoreConfig> for BatchLimits {
    fn from(config: &StoreConfig) -> Self {
        Self { max_rows: config.batch_max_rows, max_bytes: config.batch_max_bytes }
    }
}

/// What one decided input wrote, and the partition's static values after it.
#[derive(Debug)]
pub(super) struct Step<S> {
    pub(super) rows: Vec<RowWrite>,
    pub(super) statics: S,
}

/// One conditional batch's worth of consecutive steps.
#[derive(Debug)]
pub(super) struct Chunk<S> {
    /// How many steps (decided inputs) it carries.
    pub(super) steps: usize,
    /// The last write of each row only: the statements of one batch share a
    /// timestamp, so two writes of one row would not keep the later one.
    pub(super) rows: Vec<RowWrite>,
    /// The static values after the chunk's last step.
    pub(super) statics: S,
}

/// Writes `chunks` in order with `write_chunk(expected version, chunk)`,
/// each conditioned on the version the one before wrote (`expected` for the
/// first), stopping at the first one refused. Returns how many steps
/// committed: fewer than all when another writer got there first (the
/// chunks before it stay: they hold whole steps and the statics after them,
/// which the next attempt reads).
pub(super) async fn write_in_sequence<S, F, Fut>(
    voucher: VoucherId,
    mut expected: i64,
    chunks: Vec<Chunk<S>>,
    mut write_chunk: F,
) -> Result<usize, StoreError>
where
    F: FnMut(i64, Chunk<S>) -> Fut,
    Fut: Future<Output = Result<bool, StoreError>>,
{
    let batches = chunks.len();
    let mut committed = 0;
    for (index, chunk) in chunks.into_iter().enumerate() {
        let steps = chunk.steps;
        if !write_chunk(expected, chunk).await? {
            if index > 0 {
                tracing::debug!(%voucher, index, batches, "Another writer changed the voucher between batches.");
            }
            break;
        }
        committed += steps;
        expected += 1;
    }
    Ok(committed)
}

/// Splits `steps` into chunks within `limits`, in order, never splitting a
/// step (a step over the limits alone, which decided inputs never come near,
/// is a chunk of its own). `statics_bytes` estimates a chunk's statics.
pub(super) fn into_chunks<S>(
    steps: Vec<Step<S>>,
    limits: BatchLimits,
    statics_bytes: impl Fn(&S) -> usize,
) -> Vec<Chunk<S>> {
    let mut chunks: Vec<Chunk<S>> = Vec::new();
    let mut rows_in_last = 0;
    let mut bytes_in_last = 0;
    for step in steps {
        let step_bytes: usize = step.rows.iter().map(row_bytes).sum();
        let fits = !chunks.is_empty()
            && rows_in_last + step.rows.len() <= limits.max_rows
            && bytes_in_last + step_bytes + statics_bytes(&step.statics) <= limits.max_bytes;
        if !fits {
            chunks.push(Chunk { steps: 0, rows: Vec::new(), statics: step.statics });
            rows_in_last = 0;
            bytes_in_last = 0;
        } else if let Some(last) = chunks.last_mut() {
            last.statics = step.statics;
        }
        let Some(last) = chunks.last_mut() else { unreachable!("a chunk was just pushed or found") };
        last.steps += 1;
        rows_in_last += step.rows.len();
        bytes_in_last += step_bytes;
        for (key, value) in step.rows {
            // A row written again keeps its place and takes the later value.
            match last.rows.iter_mut().find(|(written, _)| *written == key) {
                Some(earlier) => earlier.1 = value,
                None => last.rows.push((key, value)),
            }
        }
    }
    chunks
}

/// What one call reports for each of its inputs, kept from the attempt
/// whose batches committed the input. After a refusal between two batches,
/// the next attempt finds the inputs of the committed batches decided and
/// would report them as replays; but this call decided them, exactly once,
/// and says so (another writer racing it finds them decided and reports
/// replays: between the two, each input is reported decided once).
#[derive(Debug)]
pub(super) struct FirstDecisions<T> {
    per_input: Vec<Option<T>>,
}

impl<T> FirstDecisions<T> {
    pub(super) fn new(inputs: usize) -> Self {
        Self { per_input: std::iter::repeat_with(|| None).take(inputs).collect() }
    }

    /// Keeps, for each of the first `committed` inputs not kept yet, what
    /// this attempt reported (`reported(i)`).
    pub(super) fn keep(&mut self, committed: usize, mut reported: impl FnMut(usize) -> T) {
        for (index, kept) in self.per_input.iter_mut().enumerate().take(committed) {
            if kept.is_none() {
                *kept = Some(reported(index));
            }
        }
    }

    /// Per input: what was kept, else what the last attempt reported.
    pub(super) fn merge(self, mut reported: impl FnMut(usize) -> T) -> Vec<T> {
        self.per_input.into_iter().enumerate().map(|(index, kept)| kept.unwrap_or_else(|| reported(index))).collect()
    }
}

/// A row's estimated size in a batch.
fn row_bytes((_, value): &RowWrite) -> usize {
    ROW_OVERHEAD_BYTES + value.as_ref().map_or(0, Vec::len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(rows: &[(u128, usize)], statics: u32) -> Step<u32> {
        Step {
            rows: rows.iter().map(|(id, len)| (("order", Uuid::from_u128(*id)), Some(vec![0; *len]))).collect(),
            statics,
        }
    }

    #[test]
    fn steps_fill_chunks_up_to_the_row_limit_and_keep_the_latest_statics() {
        let limits = BatchLimits { max_rows: 3, max_bytes: usize::MAX };
        let steps = (0..7).map(|i| step(&[(i, 10)], i as u32)).collect();
        let chunks = into_chunks(steps, limits, |_| 0);
        assert_eq!(chunks.iter().map(|c| c.rows.len()).collect::<Vec<_>>(), [3, 3, 1]);
        assert_eq!(chunks.iter().map(|c| c.steps).collect::<Vec<_>>(), [3, 3, 1]);
        assert_eq!(
            chunks.iter().map(|c| c.statics).collect::<Vec<_>>(),
            [2, 5, 6],
            "statics after each chunk's last step"
        );
        let ids: Vec<u128> = chunks.iter().flat_map(|c| c.rows.iter().map(|((_, id), _)| id.as_u128())).collect();
        assert_eq!(ids, (0..7).collect::<Vec<_>>(), "order kept");
    }

    #[test]
    fn the_byte_limit_counts_values_overhead_and_statics() {
        let limits = BatchLimits { max_rows: 100, max_bytes: 3 * (ROW_OVERHEAD_BYTES + 100) + 50 };
        let steps = (0..6).map(|i| step(&[(i, 100)], 0)).collect();
        let chunks = into_chunks(steps, limits, |_| 50);
        assert_eq!(chunks.iter().map(|c| c.rows.len()).collect::<Vec<_>>(), [3, 3]);
        let chunks = into_chunks((0..6).map(|i| step(&[(i, 100)], 0)).collect(), limits, |_| 51);
        assert_eq!(chunks.iter().map(|c| c.rows.len()).collect::<Vec<_>>(), [2, 2, 2]);
    }

    #[test]
    fn a_step_is_never_split_and_an_oversized_one_goes_alone() {
        let limits = BatchLimits { max_rows: 2, max_bytes: usize::MAX };
        let steps = vec![step(&[(1, 1)], 1), step(&[(2, 1), (3, 1), (4, 1)], 2), step(&[(5, 1)], 3)];
        let chunks = into_chunks(steps, limits, |_| 0);
        assert_eq!(chunks.iter().map(|c| c.rows.len()).collect::<Vec<_>>(), [1, 3, 1]);
    }

    #[test]
    fn a_row_written_twice_in_a_chunk_keeps_its_later_value_and_steps_without_rows_still_move_statics() {
        let limits = BatchLimits { max_rows: 10, max_bytes: usize::MAX };
        let steps = vec![step(&[(1, 1)], 1), step(&[], 2), step(&[(1, 2)], 3), step(&[], 4)];
        let chunks = into_chunks(steps, limits, |_| 0);
        assert_eq!(chunks.len(), 1);
        assert_eq!((chunks[0].steps, chunks[0].rows.len()), (4, 1));
        assert_eq!(chunks[0].rows[0].1.as_ref().map(Vec::len), Some(2));
        assert_eq!(chunks[0].statics, 4);
        assert!(into_chunks(Vec::<Step<u32>>::new(), limits, |_| 0).is_empty());
    }

    #[test]
    fn first_decisions_are_kept_over_later_attempts() {
        let mut first = FirstDecisions::new(4);
        // Attempt 1 committed its first two inputs, attempt 2 none, attempt
        // 3 all (replaying the first two).
        first.keep(2, |i| format!("attempt 1 decided {i}"));
        first.keep(0, |i| format!("attempt 2 decided {i}"));
        first.keep(4, |i| format!("attempt 3 decided {i}"));
        let merged = first.merge(|i| format!("attempt 3 reported {i}"));
        assert_eq!(
            merged,
            ["attempt 1 decided 0", "attempt 1 decided 1", "attempt 3 decided 2", "attempt 3 decided 3"]
        );
    }
}
