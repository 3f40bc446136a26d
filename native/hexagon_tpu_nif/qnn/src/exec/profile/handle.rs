//! A QnnProfile handle's life: created and freed on the runtime's owner thread, read after the
//! execute it was attached to.

use std::sync::Arc;

use crate::base::error::{Error, Result};
use crate::base::exit;
use crate::base::sync::blocking;
use crate::exec::runtime::RuntimeCore;
use crate::ffi::loader::{BackendLibrary, ProfileFns};
use crate::observe::counters;
use crate::sys;

use super::reader::{Reader, id_slice};
use super::types::*;

fn fns(lib: &BackendLibrary) -> Result<ProfileFns> {
    lib.fns.profile.ok_or_else(|| Error::InvalidInput {
        message: format!(
            "profile: the backend {} has no QnnProfile functions",
            lib.path.display()
        ),
    })
}

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
        let lib = Arc::clone(&runtime.backend_lib);
        let fns = fns(&lib)?;
        let raw = blocking(|done| {
            runtime.owner.run(Box::new(move |handles| {
                done(create_on_owner(&handles.lib, fns, handles.backend, level).map(Raw));
            }))
        })?;
        let extended = fns.get_extended_event_data.is_some()
            && lib.has_capability(sys::QNN_PROPERTY_PROFILE_SUPPORTS_EXTENDED_EVENT);
        Ok(Handle {
            raw,
            runtime: Arc::clone(runtime),
            extended,
        })
    }

    /// Reads every event of the last call the handle was attached to.
    pub(super) fn read(&self, level: Level, sampled: bool) -> Result<Profile> {
        let lib = &self.runtime.backend_lib;
        let fns = fns(lib)?;
        let _in_qnn = exit::enter()?;
        let mut ids: *const sys::QnnProfile_EventId_t = std::ptr::null();
        let mut count = 0u32;
        // SAFETY: the handle is live (owned by `self`) and not in use by another call (the
        // caller holds the graph's turn); both out-pointers are writable.
        let status = sys::Status(unsafe { (fns.get_events)(self.raw.0, &mut ids, &mut count) });
        lib.check("profileGetEvents", status)?;
        // SAFETY: QNN returned `count` ids at `ids`, valid until the handle is freed.
        let ids = unsafe { id_slice(ids, count, "profileGetEvents")? };
        let mut reader = Reader {
            lib,
            fns,
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
        let Some(fns) = self.runtime.backend_lib.fns.profile else {
            return;
        };
        // Freed where it was made. Never waits: the owner thread runs it after the jobs before
        // it, and before it frees the backend (which waits for every holder of the runtime).
        self.runtime.owner.run(Box::new(move |handles| {
            let raw = raw;
            let Ok(_in_qnn) = exit::enter() else {
                // Exit has begun: the process's end reclaims it.
                return;
            };
            // SAFETY: the handle was created by this library on this thread and is attached to
            // no call (its graph's executes are over: the graph is closed or dropped); it is
            // freed once, here.
            let status = sys::Status(unsafe { (fns.free)(raw.0) });
            if handles.lib.check("profileFree", status).is_err() {
                counters::record_release_error();
            }
            counters::record_profile_handle(false);
        }));
    }
}

/// `profileCreate` (and, for the optrace level, `profileSetConfig`), on the owner thread.
fn create_on_owner(
    lib: &BackendLibrary,
    fns: ProfileFns,
    backend: sys::Qnn_BackendHandle_t,
    level: Level,
) -> Result<sys::Qnn_ProfileHandle_t> {
    let _in_qnn = exit::enter()?;
    let mut raw: sys::Qnn_ProfileHandle_t = std::ptr::null_mut();
    // SAFETY: the backend handle is live on this, its owner thread; the out-pointer is writable.
    let status = sys::Status(unsafe { (fns.create)(backend, level.raw(), &mut raw) });
    lib.check("profileCreate", status)?;
    if raw.is_null() {
        return Err(Error::Internal {
            message: "profileCreate returned a NULL handle".into(),
        });
    }
    counters::record_profile_handle(true);
    if level == Level::Optrace {
        let enabled = match fns.set_config {
            None => Err(Error::InvalidInput {
                message: format!(
                    "profile: :optrace needs profileSetConfig, which the backend {} lacks",
                    lib.path.display()
                ),
            }),
            Some(set_config) => {
                let config = sys::QnnProfile_Config_t {
                    option: sys::QNN_PROFILE_CONFIG_OPTION_ENABLE_OPTRACE,
                    value: sys::QnnProfile_ConfigValue_t { enableOptrace: 1 },
                };
                let list = [&raw const config, std::ptr::null()];
                // SAFETY: a live handle attached to no call; a NULL-terminated list of one
                // config that outlives the call.
                let status = sys::Status(unsafe { set_config(raw, list.as_ptr()) });
                lib.check("profileSetConfig (enableOptrace)", status)
            }
        };
        if let Err(error) = enabled {
            // SAFETY: created just above on this thread, attached to nothing; freed once.
            let _ = sys::Status(unsafe { (fns.free)(raw) });
            counters::record_profile_handle(false);
            return Err(error);
        }
    }
    Ok(raw)
}
