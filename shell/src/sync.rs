//! A mutex guard that outlives a panicked holder. Our shared state stays usable after a panic
//! elsewhere, since every critical section leaves it consistent before it can panic; refusing the
//! lock would turn one failed task into a stopped process.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// The guard of `mutex`, also when a panicking holder poisoned it.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
