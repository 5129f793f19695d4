//! The changes that happen by themselves later, in the order they are due.
//! One task per object at most (its expiry, its settling), so the queue is
//! bounded by `max_objects` like the books.

use std::collections::BTreeMap;

use crate::clock::Moment;

/// A change to make when its time comes; a no-op if the object has moved
/// on meanwhile (a session paid before it would expire).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Task {
    /// An open session past its `expires_at`.
    ExpireSession(String),
    /// A session's bank debit settles (or fails).
    SettleSession { id: String, fail: bool },
    /// A pending refund succeeds (or fails).
    SettleRefund { id: String, fail: bool },
}

/// The waiting tasks by due time; the sequence number keeps tasks due at
/// the same moment in the order they were scheduled.
#[derive(Debug, Default)]
pub(super) struct Due {
    queue: BTreeMap<(Moment, u64), Task>,
    next: u64,
}

impl Due {
    pub(super) fn schedule(&mut self, at: Moment, task: Task) {
        self.queue.insert((at, self.next), task);
        self.next += 1;
    }

    /// The earliest task due by `now`, taken from the queue.
    pub(super) fn pop(&mut self, now: Moment) -> Option<Task> {
        let entry = self.queue.first_entry().filter(|entry| entry.key().0 <= now)?;
        Some(entry.remove())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_come_due_in_time_order() {
        let mut due = Due::default();
        let at = Moment::from_secs(10);
        due.schedule(at.after_ms(5), Task::ExpireSession("b".to_owned()));
        due.schedule(at, Task::ExpireSession("a".to_owned()));
        due.schedule(at, Task::SettleRefund { id: "r".to_owned(), fail: true });
        assert_eq!(due.pop(at.before_ms(1)), None);
        assert_eq!(due.pop(at), Some(Task::ExpireSession("a".to_owned())));
        assert_eq!(due.pop(at), Some(Task::SettleRefund { id: "r".to_owned(), fail: true }));
        assert_eq!(due.pop(at), None);
        assert_eq!(due.pop(at.after_ms(5)), Some(Task::ExpireSession("b".to_owned())));
    }
}
