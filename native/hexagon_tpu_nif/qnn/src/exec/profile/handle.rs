//! A QnnProfile handle's life: created and freed on the runtime's owner thread, read after the
//! execute it was attached to.

use std::sync::Arc;

use crate::base::error::{Error, Result};
use crate::base::sync::blocking;
use crate::exec::runtime::RuntimeCore;
use crate::ffi::loader::BackendLibrary;
use crate::observe::counters;
use crate::sys;

use super::reader::{Reader, id_slice};
use super::types::*;

/// The raw handle, sent to and from the owner thread.
pub(super) struct Raw(pub(super) sys::Qnn_ProfileHandle_t);
// SAFETY: a profile handle is an opaque token of the backend; this crate uses each from one
// thread at a time (creation and free on the owner thread, executes under the graph's turn).
unsafe impl Send for Raw {}

/// A live profile handle; freed on the runtime's owner thread when dropped.
pub(super) struct Handle {
    pub(super) raw: Raw,
    runtime: Arc<RuntimeCore>,
    /// Read events through `profileGetExtendedEventData` (the library says it has it).
    extended: bool,
}

impl Handle {
    /// Creates a handle at `level` on the runtime's owner thread, waiting for it.
    pub(super) fn create(runtime: &Arc<RuntimeCore>, level: Level) -> Result<Handle> {
        runtime.backend_lib.can_profile()?;
        let raw = blocking(|done| {
            runtime.owner.run(Box::new(move |handles| {
                done(create_on_owner(&handles.lib, handles.backend, level).map(Raw));
            }))
        })?;
        let extended = runtime.backend_lib.has_extended_profile_events();
        Ok(Handle {
            raw,
            runtime: Arc::clone(runtime),
            extended,
        })
    }

    /// Reads every event of the last call the handle was attached to.
    pub(super) fn read(&self, level: Level, sampled: bool) -> Result<Profile> {
        let lib = &self.runtime.backend_lib;
        // SAFETY: the handle is live (owned by `self`) and not in use by another call (the
        // caller holds the graph's turn).
        let ids = unsafe { lib.profile_events(self.raw.0)? };
        // SAFETY: QNN answered with ids valid until the handle is freed.
        let ids = unsafe { id_slice(ids, "profileGetEvents")? };
        let mut reader = Reader {
            lib,
            extended: self.extended,
            events: 0,
        };
        let events = ids
            .iter()
            .map(|&id| reader.event(id, 0))
            .collect::<Result<Vec<_>>>()?;
        Ok(Profile::from_events(level, sampled, events))
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let raw = Raw(std::mem::replace(&mut self.raw.0, std::ptr::null_mut()));
        if raw.0.is_null() {
            return;
        }
        // Freed where it was made. Never waits: the owner thread runs it after the jobs before
        // it, and before it frees the backend (which waits for every holder of the runtime).
        self.runtime.owner.run(Box::new(move |handles| {
            let raw = raw;
            // SAFETY: the handle was created by this library on this thread and is attached to
            // no call (its graph's executes are over: the graph is closed or dropped); it is
            // freed once, here.
            match unsafe { handles.lib.profile_free(raw.0) } {
                // Exit has begun: the process's end reclaims it.
                Err(Error::Exiting) => return,
                Err(_) => counters::record_release_error(),
                Ok(()) => {}
            }
            counters::record_profile_handle(false);
        }));
    }
}

/// `profileCreate` (and, for the optrace level, `profileSetConfig`), on the owner thread.
fn create_on_owner(
    lib: &BackendLibrary,
    backend: sys::Qnn_BackendHandle_t,
    level: Level,
) -> Result<sys::Qnn_ProfileHandle_t> {
    // SAFETY: the backend handle is live on this, its owner thread.
    let raw = unsafe { lib.profile_create(backend, level.raw())? };
    counters::record_profile_handle(true);
    if level == Level::Optrace {
        // SAFETY: a live handle attached to no call.
        let enabled = unsafe { lib.profile_enable_optrace(raw) }.unwrap_or_else(|| {
            Err(Error::InvalidInput {
                message: format!(
                    "profile: :optrace needs profileSetConfig, which the backend {} lacks",
                    lib.path.display()
                ),
            })
        });
        if let Err(error) = enabled {
            // SAFETY: created just above on this thread, attached to nothing; freed once.
            let _ = unsafe { lib.profile_free(raw) };
            counters::record_profile_handle(false);
            return Err(error);
        }
    }
    Ok(raw)
}
