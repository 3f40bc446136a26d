//! The backend library's calls that describe it (API version, build id, capabilities) and that
//! make and free its objects: log, backend, device, context, graph retrieval.

use std::ffi::{CStr, c_char};

use crate::base::error::{Error, Result};
use crate::base::version::Version;
use crate::ffi::loader::{BackendLibrary, lossy_string};
use crate::ffi::log::{self, LogLevel};
use crate::sys;

impl BackendLibrary {
    /// The backend's own API version, from backendGetApiVersion when the library implements it
    /// (the negotiated provider's otherwise).
    pub(crate) fn api_version(&self) -> Version {
        let Some(get_api_version) = self.fns.backend_get_api_version else {
            return self.backend_api;
        };
        let mut reported = sys::Qnn_ApiVersion_t::default();
        // A failure is no news: the provider's version stands (so no error text is asked for).
        let answered = super::checked(
            "backendGetApiVersion",
            // SAFETY: the out-pointer is valid for a write of a `Qnn_ApiVersion_t`.
            || unsafe { get_api_version(&mut reported) },
            Error::qnn,
        );
        match answered {
            Ok(()) => reported.backendApiVersion.into(),
            Err(_) => self.backend_api,
        }
    }

    /// `backendGetBuildId`, or `""` when the library has none (or does not answer).
    pub(crate) fn build_id(&self) -> String {
        let Some(get_build_id) = self.fns.backend_get_build_id else {
            return String::new();
        };
        let mut id: *const c_char = std::ptr::null();
        let answered = super::checked(
            "backendGetBuildId",
            // SAFETY: the out-pointer is valid; the returned string is owned by the library.
            || unsafe { get_build_id(&mut id) },
            Error::qnn,
        );
        match answered {
            // SAFETY: NULL or a NUL-terminated string owned by the library.
            Ok(()) => unsafe { lossy_string(id) },
            Err(_) => String::new(),
        }
    }

    /// Whether the library says it has `property` (`propertyHasCapability` answers success);
    /// `false` without the entry, and once exit has begun.
    pub(crate) fn has_capability(&self, property: u32) -> bool {
        self.fns.property_has_capability.is_some_and(|has| {
            // SAFETY: a table entry of the loaded library, taking a key by value.
            super::checked(
                "propertyHasCapability",
                || unsafe { has(property) },
                Error::qnn,
            )
            .is_ok()
        })
    }

    /// `logCreate` with the runtime's log callback, or `None` when the library has no log.
    pub(crate) fn log_create(&self, level: LogLevel) -> Option<Result<sys::Qnn_LogHandle_t>> {
        let log_create = self.fns.log_create?;
        let callback = log::callback_for(self);
        let mut handle: sys::Qnn_LogHandle_t = std::ptr::null_mut();
        Some(
            self.checked("logCreate", || {
                // SAFETY: the callback is an `extern "C"` function with QnnLog_Callback_t's
                // signature that lives for the whole process; `handle` is writable.
                unsafe { log_create(callback, level.raw(), &mut handle) }
            })
            .map(|()| handle),
        )
    }

    /// `logFree`; `Ok` without the entry.
    ///
    /// # Safety
    /// `log` is a live log handle of this library, not used after this call.
    pub(crate) unsafe fn log_free(&self, log: sys::Qnn_LogHandle_t) -> Result<()> {
        let Some(log_free) = self.fns.log_free else {
            return Ok(());
        };
        // SAFETY: the caller's contract: a live log handle of this library, freed once.
        self.checked("logFree", || unsafe { log_free(log) })
    }

    /// `backendCreate` with the default config.
    ///
    /// # Safety
    /// `log` is NULL or a live log handle of this library.
    pub(crate) unsafe fn backend_create(
        &self,
        log: sys::Qnn_LogHandle_t,
    ) -> Result<sys::Qnn_BackendHandle_t> {
        let mut handle: sys::Qnn_BackendHandle_t = std::ptr::null_mut();
        self.checked("backendCreate", || {
            // SAFETY: `log` per the caller's contract; a NULL config asks for the defaults;
            // `handle` is writable.
            unsafe { (self.fns.backend_create)(log, std::ptr::null(), &mut handle) }
        })?;
        Ok(handle)
    }

    /// `backendFree`.
    ///
    /// # Safety
    /// `backend` is a live backend handle of this library, not used after this call.
    pub(crate) unsafe fn backend_free(&self, backend: sys::Qnn_BackendHandle_t) -> Result<()> {
        // SAFETY: the caller's contract: a live backend handle of this library, freed once.
        self.checked("backendFree", || unsafe {
            (self.fns.backend_free)(backend)
        })
    }

    /// `deviceCreate` for the default device, or `None` when the library lacks `deviceCreate`
    /// or `deviceFree`. Backends without devices (the CPU backend) answer NOT_SUPPORTED.
    ///
    /// # Safety
    /// `log` is NULL or a live log handle of this library.
    pub(crate) unsafe fn device_create(
        &self,
        log: sys::Qnn_LogHandle_t,
    ) -> Option<Result<sys::Qnn_DeviceHandle_t>> {
        let (Some(device_create), Some(_)) = (self.fns.device_create, self.fns.device_free) else {
            return None;
        };
        let mut handle: sys::Qnn_DeviceHandle_t = std::ptr::null_mut();
        Some(
            self.checked("deviceCreate", || {
                // SAFETY: `log` per the caller's contract; a NULL config asks for the default
                // device; `handle` is writable.
                unsafe { device_create(log, std::ptr::null(), &mut handle) }
            })
            .map(|()| handle),
        )
    }

    /// `deviceFree`; `Ok` without the entry.
    ///
    /// # Safety
    /// `device` is a live device handle of this library, created on this thread and not used
    /// after this call.
    pub(crate) unsafe fn device_free(&self, device: sys::Qnn_DeviceHandle_t) -> Result<()> {
        let Some(device_free) = self.fns.device_free else {
            return Ok(());
        };
        // SAFETY: the caller's contract: a live device handle of this library, freed once.
        self.checked("deviceFree", || unsafe { device_free(device) })
    }

    /// `deviceGetPlatformInfo`, or `None` when the library lacks the entry. The answer (which
    /// may be NULL) is the library's until [`BackendLibrary::device_free_platform_info`].
    ///
    /// # Safety
    /// `log` is NULL or a live log handle of this library.
    pub(crate) unsafe fn device_platform_info(
        &self,
        log: sys::Qnn_LogHandle_t,
    ) -> Option<Result<*const sys::QnnDevice_PlatformInfo_t>> {
        let get = self.fns.device_get_platform_info?;
        let mut info: *const sys::QnnDevice_PlatformInfo_t = std::ptr::null();
        Some(
            self.checked("deviceGetPlatformInfo", || {
                // SAFETY: `log` per the caller's contract; the out-pointer is writable.
                unsafe { get(log, &mut info) }
            })
            .map(|()| info),
        )
    }

    /// `deviceFreePlatformInfo`; `Ok` without the entry.
    ///
    /// # Safety
    /// `info` came from this library's `deviceGetPlatformInfo` with `log`, and is not used after
    /// this call.
    pub(crate) unsafe fn device_free_platform_info(
        &self,
        log: sys::Qnn_LogHandle_t,
        info: *const sys::QnnDevice_PlatformInfo_t,
    ) -> Result<()> {
        let Some(free) = self.fns.device_free_platform_info else {
            return Ok(());
        };
        // SAFETY: the caller's contract: the library's answer, freed once.
        self.checked("deviceFreePlatformInfo", || unsafe { free(log, info) })
    }

    /// `contextCreateFromBinary`; the handle it returns may be NULL.
    ///
    /// # Safety
    /// `backend` and `device` (NULL or) live handles of this library, created on this thread;
    /// `config` NULL or a NULL-terminated list of configs that outlives the call.
    pub(crate) unsafe fn context_create_from_binary(
        &self,
        backend: sys::Qnn_BackendHandle_t,
        device: sys::Qnn_DeviceHandle_t,
        config: *const *const sys::QnnContext_Config_t,
        binary: &[u8],
    ) -> Result<sys::Qnn_ContextHandle_t> {
        let mut handle: sys::Qnn_ContextHandle_t = std::ptr::null_mut();
        self.checked("contextCreateFromBinary", || {
            // SAFETY: handles and config per the caller's contract; the binary is valid for
            // `len` bytes during the call (QNN copies what it keeps); `handle` is writable.
            unsafe {
                (self.fns.context_create_from_binary)(
                    backend,
                    device,
                    config,
                    binary.as_ptr().cast(),
                    binary.len() as u64,
                    &mut handle,
                    std::ptr::null_mut(),
                )
            }
        })?;
        Ok(handle)
    }

    /// `contextFree`.
    ///
    /// # Safety
    /// `context` came from this library's contextCreateFromBinary, no call is using it, and it
    /// is not used after this call.
    pub(crate) unsafe fn context_free(&self, context: sys::Qnn_ContextHandle_t) -> Result<()> {
        self.checked("contextFree", || {
            // SAFETY: the caller's contract: an idle context of this library, freed once.
            unsafe { (self.fns.context_free)(context, std::ptr::null_mut()) }
        })
    }

    /// `graphRetrieve`; the handle it returns may be NULL.
    ///
    /// # Safety
    /// `context` is a live context of this library, kept from being freed during the call.
    pub(crate) unsafe fn graph_retrieve(
        &self,
        context: sys::Qnn_ContextHandle_t,
        name: &CStr,
    ) -> Result<sys::Qnn_GraphHandle_t> {
        let mut handle: sys::Qnn_GraphHandle_t = std::ptr::null_mut();
        self.checked("graphRetrieve", || {
            // SAFETY: the context per the caller's contract; the name is NUL-terminated; the
            // out-pointer is writable.
            unsafe { (self.fns.graph_retrieve)(context, name.as_ptr(), &mut handle) }
        })?;
        Ok(handle)
    }
}
