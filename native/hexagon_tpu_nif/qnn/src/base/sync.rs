//! Synchronisation helpers shared by every layer: the poison-tolerant lock, the callback type of
//! work handed to another thread, and the blocking wait on such a callback.

use std::sync::{Condvar, Mutex, MutexGuard, mpsc};

use crate::base::error::{Error, Result};

/// Locks `mutex`, taking its state even when a holder panicked: the state this crate keeps under
/// a lock is whole between statements, and one panic must not make every later caller panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A callback that receives the result of an operation handed to another thread.
pub type Done<T> = Box<dyn FnOnce(Result<T>) + Send>;

/// Runs an operation that reports through a callback and waits for its result: the blocking
/// form of the `*_then` functions, for callers that own their thread.
pub(crate) fn blocking<T: Send + 'static>(
    start: impl FnOnce(Box<dyn FnOnce(Result<T>) + Send>),
) -> Result<T> {
    let (tx, rx) = mpsc::sync_channel(1);
    start(Box::new(move |result| {
        let _ = tx.send(result);
    }));
    rx.recv().unwrap_or_else(|_| {
        Err(Error::Internal {
            message: "an operation ended without a result".into(),
        })
    })
}

/// [`Condvar::wait`], poison-tolerant like [`lock`].
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(|e| e.into_inner())
}

/// [`Condvar::wait_timeout`], poison-tolerant like [`lock`]; whether it timed out is not needed.
pub(crate) fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
) -> MutexGuard<'a, T> {
    condvar
        .wait_timeout(guard, timeout)
        .unwrap_or_else(|e| e.into_inner())
        .0
}
