//! One checked function per QNN call of the backend and System libraries: each takes the exit
//! permit ([`crate::base::exit::enter`], [`Error::Exiting`] once exit has begun), makes the call
//! and turns a failed status into the library's error. Callers outside this layer never touch a
//! function pointer or a raw status.
//!
//! A function whose soundness depends on handles or buffers the caller holds is an `unsafe fn`
//! whose `# Safety` states that contract; the others are safe. The execute hot path
//! (`graphExecute`, `graphExecuteAsync`) is the exception: `exec::graph::ExecuteCall` holds its
//! permit across the call and the accounting of the submission.

use std::ffi::{CStr, c_void};

use crate::base::error::{Error, Result};
use crate::base::exit;
use crate::ffi::loader::{BackendLibrary, SystemLibrary};
use crate::ffi::log::{self, LogLevel};
use crate::sys::{self, QnnSystemContext_BinaryInfo_t};

impl BackendLibrary {
    /// Takes the permit, makes `call` and checks its status as the call `op`.
    fn checked(
        &self,
        op: &'static str,
        call: impl FnOnce() -> sys::Qnn_ErrorHandle_t,
    ) -> Result<()> {
        let _in_qnn = exit::enter()?;
        self.check(op, sys::Status(call()))
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

impl SystemLibrary {
    /// `systemContextCreate`; the handle it returns may be NULL.
    pub(crate) fn system_context_create(&self) -> Result<sys::QnnSystemContext_Handle_t> {
        let _in_qnn = exit::enter()?;
        let mut handle: sys::QnnSystemContext_Handle_t = std::ptr::null_mut();
        // SAFETY: the out-pointer is valid for a write.
        sys::Status(unsafe { (self.fns.context_create)(&mut handle) })
            .ok_or_else(|raw| Error::qnn("systemContextCreate", raw))?;
        Ok(handle)
    }

    /// `systemContextFree`.
    ///
    /// # Safety
    /// `handle` came from this library's systemContextCreate and is not used after this call
    /// (nor is any answer it owns).
    pub(crate) unsafe fn system_context_free(
        &self,
        handle: sys::QnnSystemContext_Handle_t,
    ) -> Result<()> {
        let _in_qnn = exit::enter()?;
        // SAFETY: the caller's contract: a System context of this library, freed once.
        sys::Status(unsafe { (self.fns.context_free)(handle) })
            .ok_or_else(|raw| Error::qnn("systemContextFree", raw))
    }

    /// `systemContextGetMetaData`, or the deprecated `systemContextGetBinaryInfo` where the
    /// library has only that one: the binary's info, owned by the System context. The
    /// deprecated entry takes a mutable buffer, so it gets `copy` (filled here) to scribble
    /// on; the answer may point into it.
    ///
    /// # Safety
    /// `handle` is a live System context of this library. The answer is read only while both
    /// the context and `copy` are alive and `copy` is not touched.
    pub(crate) unsafe fn system_context_binary_info(
        &self,
        handle: sys::QnnSystemContext_Handle_t,
        binary: &[u8],
        copy: &mut Vec<u8>,
    ) -> Result<*const QnnSystemContext_BinaryInfo_t> {
        let _in_qnn = exit::enter()?;
        let mut info: *const QnnSystemContext_BinaryInfo_t = std::ptr::null();
        let size = binary.len() as u64;
        let status = sys::Status(
            match (
                self.fns.context_get_metadata,
                self.fns.context_get_binary_info,
            ) {
                (Some(get_metadata), _) => {
                    // SAFETY: the buffer is valid for `size` bytes for the duration of the call;
                    // the result stays owned by the System context (the caller's contract).
                    unsafe { get_metadata(handle, binary.as_ptr().cast(), size, &mut info) }
                }
                (None, Some(get_binary_info)) => {
                    copy.extend_from_slice(binary);
                    let mut info_size = 0u64;
                    // SAFETY: the copy is valid for `size` bytes and, by the caller's contract,
                    // lives until the answer has been read; the System context owns the rest.
                    unsafe {
                        get_binary_info(
                            handle,
                            copy.as_mut_ptr().cast::<c_void>(),
                            size,
                            &mut info,
                            &mut info_size,
                        )
                    }
                }
                (None, None) => {
                    return Err(Error::Internal {
                        message:
                            "the System library has no metadata entry (the loader requires one)"
                                .into(),
                    });
                }
            },
        );
        status.ok_or_else(|raw| Error::qnn("systemContextGetMetaData", raw))?;
        Ok(info)
    }
}
