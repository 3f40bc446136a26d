//! `Runtime`: one backend library with its log, backend and device handles.

use std::ffi::{CStr, c_char};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::closable::Closable;
use crate::counters;
use crate::error::{Error, Result};
use crate::ledger::{self, Alive, Kind};
use crate::loader::{self, BackendLibrary, SystemLibrary};
use crate::sys;
use crate::version::Version;

/// QNN's log levels; the runtime's default is `Error` (verbose QNN logging costs real time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogLevel {
    #[default]
    Error,
    Warn,
    Info,
    Verbose,
    Debug,
}

impl LogLevel {
    fn raw(self) -> u32 {
        match self {
            LogLevel::Error => sys::QNN_LOG_LEVEL_ERROR,
            LogLevel::Warn => sys::QNN_LOG_LEVEL_WARN,
            LogLevel::Info => sys::QNN_LOG_LEVEL_INFO,
            LogLevel::Verbose => sys::QNN_LOG_LEVEL_VERBOSE,
            LogLevel::Debug => sys::QNN_LOG_LEVEL_DEBUG,
        }
    }
}

/// Where the libraries are and how much QNN should log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    pub backend_lib: PathBuf,
    pub system_lib: PathBuf,
    /// `None` creates no QNN log handle at all.
    pub log_level: Option<LogLevel>,
}

impl RuntimeConfig {
    /// The device defaults on the Dragon Q6A (`qairt-runtime` installs both in `/usr/lib`).
    pub fn htp() -> Self {
        RuntimeConfig {
            backend_lib: PathBuf::from("/usr/lib/libQnnHtp.so"),
            system_lib: PathBuf::from("/usr/lib/libQnnSystem.so"),
            log_level: Some(LogLevel::Error),
        }
    }
}

/// What the backend reports about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeInfo {
    pub backend_id: u32,
    pub provider_name: String,
    pub build_id: String,
    pub core_api: Version,
    pub backend_api: Version,
    pub system_api: Version,
    pub backend_lib: PathBuf,
    pub system_lib: PathBuf,
}

/// The QNN handles of a runtime. Contexts hold it through an `Arc`, so the handles are freed
/// after the last context, whenever the runtime itself is closed or dropped.
pub(crate) struct RuntimeCore {
    pub backend_lib: Arc<BackendLibrary>,
    pub system_lib: Arc<SystemLibrary>,
    pub log: sys::Qnn_LogHandle_t,
    pub backend: sys::Qnn_BackendHandle_t,
    pub device: sys::Qnn_DeviceHandle_t,
    alive: Mutex<Alive>,
    freed: Mutex<bool>,
}

// SAFETY: the handles are opaque tokens owned by this struct. QNN allows backend, device and log
// handles to be used from any thread (contexts are created and freed on whichever dirty scheduler
// runs the call); the only mutation, freeing, happens once, guarded by `freed`.
unsafe impl Send for RuntimeCore {}
// SAFETY: as above; shared use only passes the handles to QNN calls that accept concurrent use.
unsafe impl Sync for RuntimeCore {}

impl RuntimeCore {
    /// Frees the handles (device, backend, log, in reverse order of creation) once.
    pub(crate) fn free(&self) -> Result<()> {
        let mut freed = self.freed.lock().unwrap_or_else(|e| e.into_inner());
        if *freed {
            return Ok(());
        }
        *freed = true;
        let fns = &self.backend_lib.fns;
        let mut first_error = None;
        let mut check = |op: &'static str, status: sys::Qnn_ErrorHandle_t| {
            if status != 0 {
                counters::record_release_error();
                first_error.get_or_insert(Error::qnn(op, status));
            }
        };
        if !self.device.is_null()
            && let Some(device_free) = fns.device_free
        {
            // SAFETY: the device was created by this backend library and is freed exactly once.
            check("deviceFree", unsafe { device_free(self.device) });
        }
        // SAFETY: the backend was created by this library and is freed exactly once.
        check("backendFree", unsafe { (fns.backend_free)(self.backend) });
        if !self.log.is_null()
            && let Some(log_free) = fns.log_free
        {
            // SAFETY: the log handle was created by this library and is freed exactly once.
            check("logFree", unsafe { log_free(self.log) });
        }
        self.alive
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release();
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for RuntimeCore {
    fn drop(&mut self) {
        // Errors are already counted in `release_errors`; a destructor has no one to tell.
        let _ = self.free();
    }
}

/// A QNN backend, ready to load context binaries.
pub struct Runtime {
    info: RuntimeInfo,
    core: Closable<RuntimeCore>,
}

impl Runtime {
    /// Opens the libraries (cached process-wide), negotiates providers and creates the log,
    /// backend and device handles. The caller's `file:line` is its site in the
    /// [ledger].
    #[track_caller]
    pub fn new(config: &RuntimeConfig) -> Result<Arc<Runtime>> {
        Self::new_at(
            config,
            &ledger::location_site(std::panic::Location::caller()),
        )
    }

    /// [`Runtime::new`], entered in the [ledger] with `site` as where it was
    /// created (a binding passes its own caller's location).
    pub fn new_at(config: &RuntimeConfig, site: &str) -> Result<Arc<Runtime>> {
        let backend_lib = loader::backend(&config.backend_lib)?;
        let system_lib = loader::system(&config.system_lib)?;
        let fns = backend_lib.fns;

        let mut log: sys::Qnn_LogHandle_t = std::ptr::null_mut();
        if let (Some(level), Some(log_create)) = (config.log_level, fns.log_create) {
            // SAFETY: a NULL callback asks the backend for its default sink; `log` is writable.
            let status = unsafe { log_create(std::ptr::null(), level.raw(), &mut log) };
            if status != 0 {
                return Err(Error::qnn("logCreate", status));
            }
        }
        // Frees what exists so far if a later step fails.
        let mut partial = PartialRuntime {
            lib: &backend_lib,
            log,
            backend: std::ptr::null_mut(),
            device: std::ptr::null_mut(),
        };
        // SAFETY: `log` is NULL or a live log handle of this library; the out-pointer is valid.
        let status = unsafe { (fns.backend_create)(log, std::ptr::null(), &mut partial.backend) };
        if status != 0 {
            return Err(Error::qnn("backendCreate", status));
        }
        if let (Some(device_create), Some(_)) = (fns.device_create, fns.device_free) {
            // SAFETY: as above; a NULL config asks for the default device.
            let status = unsafe { device_create(log, std::ptr::null(), &mut partial.device) };
            // Backends without devices (the CPU backend) answer NOT_SUPPORTED; carry on.
            if status != 0 && sys::error_code(status) != sys::QNN_COMMON_ERROR_NOT_SUPPORTED {
                return Err(Error::qnn("deviceCreate", status));
            }
            if status != 0 {
                partial.device = std::ptr::null_mut();
            }
        }

        // The core version is the negotiated provider's; the backend's own API version comes
        // from backendGetApiVersion when the library implements it.
        let mut backend_api = backend_lib.backend_api;
        if let Some(get_api_version) = fns.backend_get_api_version {
            let mut reported = sys::Qnn_ApiVersion_t::default();
            // SAFETY: the out-pointer is valid for a write of a `Qnn_ApiVersion_t`.
            if unsafe { get_api_version(&mut reported) } == 0 {
                backend_api = reported.backendApiVersion.into();
            }
        }
        let mut build_id = String::new();
        if let Some(get_build_id) = fns.backend_get_build_id {
            let mut s: *const c_char = std::ptr::null();
            // SAFETY: the out-pointer is valid; the returned string is owned by the library.
            if unsafe { get_build_id(&mut s) } == 0 && !s.is_null() {
                // SAFETY: a non-NULL build id is a NUL-terminated string owned by the library.
                build_id = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
            }
        }

        let core = RuntimeCore {
            backend_lib: Arc::clone(&backend_lib),
            system_lib: Arc::clone(&system_lib),
            log: partial.log,
            backend: partial.backend,
            device: partial.device,
            alive: Mutex::new(Alive::new(
                Kind::Runtime,
                site,
                backend_lib.path.display().to_string(),
            )),
            freed: Mutex::new(false),
        };
        std::mem::forget(partial);
        let info = RuntimeInfo {
            backend_id: backend_lib.backend_id,
            provider_name: backend_lib.provider_name.clone(),
            build_id,
            core_api: backend_lib.core_api,
            backend_api,
            system_api: system_lib.system_api,
            backend_lib: backend_lib.path.clone(),
            system_lib: system_lib.path.clone(),
        };
        Ok(Arc::new(Runtime {
            info,
            core: Closable::new("runtime", core),
        }))
    }

    /// What the backend reported at creation (available after close too).
    pub fn info(&self) -> &RuntimeInfo {
        &self.info
    }

    /// Closes the runtime: no new contexts can be created from it. Its QNN handles are freed
    /// now if no context holds them, or when the last context goes. Closing twice is an error.
    pub fn close(&self) -> Result<()> {
        match Arc::try_unwrap(self.core.close()?) {
            Ok(core) => core.free(),
            // Contexts still hold the handles; the last one frees them.
            Err(_shared) => Ok(()),
        }
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    pub(crate) fn core(&self) -> Result<Arc<RuntimeCore>> {
        self.core.get()
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("backend_lib", &self.info.backend_lib)
            .field("core_api", &self.info.core_api)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Handles created so far by `Runtime::new`, freed if it returns early.
struct PartialRuntime<'a> {
    lib: &'a BackendLibrary,
    log: sys::Qnn_LogHandle_t,
    backend: sys::Qnn_BackendHandle_t,
    device: sys::Qnn_DeviceHandle_t,
}

impl Drop for PartialRuntime<'_> {
    fn drop(&mut self) {
        let fns = &self.lib.fns;
        // SAFETY (all three): each non-NULL handle was created by this library during the
        // failed `Runtime::new` and is freed exactly once here.
        if !self.device.is_null()
            && let Some(device_free) = fns.device_free
        {
            // SAFETY: see above.
            unsafe { device_free(self.device) };
        }
        if !self.backend.is_null() {
            // SAFETY: see above.
            unsafe { (fns.backend_free)(self.backend) };
        }
        if !self.log.is_null()
            && let Some(log_free) = fns.log_free
        {
            // SAFETY: see above.
            unsafe { log_free(self.log) };
        }
    }
}
