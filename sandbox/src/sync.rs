//! Locking the sandbox's shared books and switches.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`; a panic while it was held left nothing half-done that
/// matters to a sandbox, so the state is used as it is.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
