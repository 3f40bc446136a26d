//! What a QNN library or context binary says about itself, without a [`Runtime`](crate::Runtime).
//!
//! A runtime needs a backend that initializes (on the HTP: a DSP to talk to). These functions
//! do not: they negotiate a library's provider and read what it reports, read a binary's
//! metadata with the System library alone, and [`probe_backend`] tries each step of bringing a
//! backend up on its own, so a machine without a working DSP gets every step's own QNN error
//! rather than only the first.

use std::path::{Path, PathBuf};

use crate::base::error::{Error, Result};
use crate::base::version::Version;
use crate::ffi::loader;
use crate::ffi::log::LogLevel;
use crate::ffi::platform;
pub use crate::ffi::platform::HardwareDevice;
use crate::model::metadata::{self, BinaryInfo};
use crate::sys;

/// What a backend library's chosen provider reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendLibraryInfo {
    pub path: PathBuf,
    pub backend_id: u32,
    pub provider_name: String,
    pub core_api: Version,
    /// From `backendGetApiVersion` when the library implements it, else the provider's.
    pub backend_api: Version,
    /// `backendGetBuildId`, `""` when the library has none.
    pub build_id: String,
    /// Whether the provider's table has a `graphExecuteAsync` entry (non-NULL). Whether the
    /// backend accepts the calls is another matter: only calling it tells.
    pub has_execute_async: bool,
}

/// What a System library's chosen provider reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemLibraryInfo {
    pub path: PathBuf,
    pub backend_id: u32,
    pub provider_name: String,
    pub system_api: Version,
}

/// Opens a backend library (cached for the process, like a runtime's) and reports its provider.
/// Creates no QNN handle.
pub fn backend_library(path: &Path) -> Result<BackendLibraryInfo> {
    let lib = loader::backend(path)?;
    Ok(BackendLibraryInfo {
        path: lib.path.clone(),
        backend_id: lib.backend_id,
        provider_name: lib.provider_name.clone(),
        core_api: lib.core_api,
        backend_api: lib.api_version(),
        build_id: lib.build_id(),
        has_execute_async: lib.has_execute_async(),
    })
}

/// Opens a System library (cached for the process) and reports its provider.
pub fn system_library(path: &Path) -> Result<SystemLibraryInfo> {
    let lib = loader::system(path)?;
    Ok(SystemLibraryInfo {
        path: lib.path.clone(),
        backend_id: lib.backend_id,
        provider_name: lib.provider_name.clone(),
        system_api: lib.system_api,
    })
}

/// Reads a context binary's metadata with the System library at `system_lib` alone, validated
/// as a context load validates it.
pub fn binary_info(system_lib: &Path, binary: &[u8]) -> Result<BinaryInfo> {
    if binary.is_empty() {
        return Err(Error::invalid_model("the context binary is empty"));
    }
    let lib = loader::system(system_lib)?;
    metadata::read_binary(&lib, binary).map(|b| b.info)
}

/// Each step of bringing a backend up, tried on its own; whatever a step created is freed
/// before [`probe_backend`] returns. A step the library does not implement is `None`.
#[derive(Debug)]
pub struct BackendProbe {
    pub library: BackendLibraryInfo,
    /// `logCreate` with the default sink, when a log level was asked for.
    pub log_create: Option<Result<()>>,
    pub backend_create: Result<()>,
    pub device_platform_info: Option<Result<Vec<HardwareDevice>>>,
    /// `deviceCreate` with the default configuration.
    pub device_create: Option<Result<()>>,
}

/// Opens the backend library at `path` and tries, each regardless of the others' outcome:
/// `logCreate` (if `log_level` is given), `backendCreate`, `deviceGetPlatformInfo` and
/// `deviceCreate`, then frees what was created (device, backend, log). The library's own
/// messages for failures are in the errors, as everywhere in this crate; its log goes where a
/// runtime's does ([`log::set_sink`](crate::ffi::log::set_sink)).
///
/// Every handle is created and freed on the calling thread (QNN ties device handles to the
/// thread that created them).
pub fn probe_backend(path: &Path, log_level: Option<LogLevel>) -> Result<BackendProbe> {
    let lib = loader::backend(path)?;
    let library = backend_library(path)?;
    // Each call takes its own permit: once exit has begun the rest of the probe is refused.
    if crate::base::exit::exiting() {
        return Err(Error::Exiting);
    }
    let mut log: sys::Qnn_LogHandle_t = std::ptr::null_mut();
    // The runtime's own callback, so QNN's messages reach the log sink, not stdout.
    let log_create = log_level
        .and_then(|level| lib.log_create(level))
        .map(|created| created.map(|handle| log = handle));

    // SAFETY: `log` is NULL or a live log handle of this library.
    let backend_create = unsafe { lib.backend_create(log) };
    let backend = *backend_create.as_ref().unwrap_or(&std::ptr::null_mut());
    let backend_create = backend_create.map(|_| ());

    let device_platform_info = platform::read(&lib, log);

    // SAFETY: as for backendCreate.
    let device_create = unsafe { lib.device_create(log) };
    let device = match &device_create {
        Some(Ok(device)) => *device,
        _ => std::ptr::null_mut(),
    };
    let device_create = device_create.map(|created| created.map(|_| ()));

    // The frees' failures are not the probe's answer (they are counted nowhere, as before).
    if !device.is_null() {
        // SAFETY: created above by this library, on this thread, and freed once.
        let _ = unsafe { lib.device_free(device) };
    }
    if !backend.is_null() {
        // SAFETY: as above.
        let _ = unsafe { lib.backend_free(backend) };
    }
    if !log.is_null() {
        // SAFETY: as above.
        let _ = unsafe { lib.log_free(log) };
    }
    Ok(BackendProbe {
        library,
        log_create,
        backend_create,
        device_platform_info,
        device_create,
    })
}
