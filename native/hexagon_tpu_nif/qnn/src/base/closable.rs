//! The user-facing half of an object whose QNN handles are shared with its children.

use std::sync::{Arc, Mutex};

use crate::base::error::{Error, Result};
use crate::base::sync::lock;

/// Holds a user object's reference to its shared core until `close` gives it up. Children keep
/// their own `Arc`s, so a closed parent's handles live until the last child goes.
pub(crate) struct Closable<T> {
    what: &'static str,
    core: Mutex<Option<Arc<T>>>,
}

impl<T> Closable<T> {
    pub(crate) fn new(what: &'static str, core: T) -> Self {
        Self::from_arc(what, Arc::new(core))
    }

    /// For a core made with [`Arc::new_cyclic`] (one that refers to itself).
    pub(crate) fn from_arc(what: &'static str, core: Arc<T>) -> Self {
        Closable {
            what,
            core: Mutex::new(Some(core)),
        }
    }

    /// The core, or `Closed` after `close`.
    pub(crate) fn get(&self) -> Result<Arc<T>> {
        self.lock().clone().ok_or(Error::Closed { what: self.what })
    }

    /// Gives up this reference (once; `Closed` the second time).
    pub(crate) fn close(&self) -> Result<Arc<T>> {
        self.lock().take().ok_or(Error::Closed { what: self.what })
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.lock().is_none()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<T>>> {
        lock(&self.core)
    }
}
