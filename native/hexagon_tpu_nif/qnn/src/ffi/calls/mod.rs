//! One checked function per QNN call: each takes the exit permit ([`crate::base::exit::enter`];
//! [`Error::Exiting`] once exit has begun), makes the call and turns a failed status into the
//! library's error, through [`checked`]. Above `ffi` no module reads a function table; outside
//! these files only the loader (dlopen and `getProviders`, before a library has a table) calls
//! into a QNN library.
//!
//! A function whose soundness depends on handles or buffers the caller holds is an `unsafe fn`
//! whose `# Safety` states that contract; the others are safe. The two execute calls
//! ([`execute`]) differ on purpose: `exec::graph::ExecuteCall` holds their permit across the
//! submission's accounting, and counts the answer before it checks it, so they take the
//! caller's permit and return the raw status.

mod backend;
pub(crate) mod execute;
pub(crate) mod mem;
pub(crate) mod perf;
pub(crate) mod profile;
mod status;
mod system;

use crate::base::error::{Error, Result};
use crate::base::exit;
use crate::ffi::loader::BackendLibrary;
use crate::sys;

/// The ritual, once: takes the permit, makes `call` and, when its status is a failure, answers
/// `error(op, status)`.
fn checked(
    op: &'static str,
    call: impl FnOnce() -> sys::Qnn_ErrorHandle_t,
    error: impl FnOnce(&'static str, sys::Qnn_ErrorHandle_t) -> Error,
) -> Result<()> {
    let _in_qnn = exit::enter()?;
    sys::Status(call()).ok_or_else(|raw| error(op, raw))
}

impl BackendLibrary {
    /// [`checked`], the failure reported with the library's text ([`BackendLibrary::error`]).
    fn checked(
        &self,
        op: &'static str,
        call: impl FnOnce() -> sys::Qnn_ErrorHandle_t,
    ) -> Result<()> {
        checked(op, call, |op, raw| self.error(op, raw))
    }

    /// Whether the library has a log (`logCreate`).
    pub(crate) fn has_log(&self) -> bool {
        self.fns.log_create.is_some()
    }

    /// Whether the library makes devices (`deviceCreate` and `deviceFree`).
    pub(crate) fn has_device(&self) -> bool {
        self.fns.device_create.is_some() && self.fns.device_free.is_some()
    }

    /// Whether the library has `graphExecuteAsync` (which a backend may still refuse: see
    /// `QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION`).
    pub(crate) fn has_execute_async(&self) -> bool {
        self.fns.graph_execute_async.is_some()
    }
}
