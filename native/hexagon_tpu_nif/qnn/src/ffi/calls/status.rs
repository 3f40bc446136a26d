//! A failed call's status as the library's error: its code, header name and the library's own
//! text for it.

use std::ffi::c_char;

use crate::base::error::{Error, Result};
use crate::ffi::loader::{BackendLibrary, lossy_string};
use crate::sys;

impl BackendLibrary {
    /// `Ok(())` when the call `op` succeeded, else its error (see [`BackendLibrary::error`]).
    pub(crate) fn check(&self, op: &'static str, status: sys::Status) -> Result<()> {
        status.ok_or_else(|raw| self.error(op, raw))
    }

    /// The error for a failed call `op` through this library's table: the code, its header
    /// name and the library's own text for it (`errorGetMessage`, and `errorGetVerboseMessage`
    /// where it answers). Every failed backend call is reported through this.
    pub(crate) fn error(&self, op: &'static str, status: sys::Qnn_ErrorHandle_t) -> Error {
        let mut error = Error::qnn(op, status);
        if let Error::Qnn { detail, name, .. } = &mut error {
            // The HTP's messages repeat the name ("QNN_COMMON_ERROR_GENERAL: General error, ...").
            *detail = self.error_text(status).map(|text| {
                match text.strip_prefix(*name).and_then(|t| t.strip_prefix(':')) {
                    Some(rest) if !rest.trim().is_empty() => rest.trim().to_string(),
                    _ => text,
                }
            });
        }
        error
    }

    /// What the library says about a failed call: `errorGetMessage`'s text and, where the
    /// library implements it, `errorGetVerboseMessage`'s (when it adds something), or `None`
    /// when it says nothing. (The HTP answers the verbose call with NOT_SUPPORTED unless the
    /// backend was created with detailed error reporting.)
    fn error_text(&self, status: sys::Qnn_ErrorHandle_t) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        if let Some(get_message) = self.fns.error_get_message {
            let mut message: *const c_char = std::ptr::null();
            // SAFETY: the out-pointer is writable; the message is static in the library.
            if unsafe { get_message(status, &mut message) } == 0 {
                // SAFETY: NULL or a NUL-terminated string owned by the library.
                parts.push(unsafe { lossy_string(message) });
            }
        }
        if let (Some(get_verbose), Some(free_verbose)) = (
            self.fns.error_get_verbose_message,
            self.fns.error_free_verbose_message,
        ) {
            let mut message: *const c_char = std::ptr::null();
            // SAFETY: the out-pointer is writable; the message is the library's until freed.
            if unsafe { get_verbose(status, &mut message) } == 0 && !message.is_null() {
                // SAFETY: a non-NULL verbose message is a NUL-terminated string, valid until
                // freed below.
                parts.push(unsafe { lossy_string(message) });
                // SAFETY: `message` came from errorGetVerboseMessage and is freed once; it is
                // not used afterwards (its text was copied above).
                unsafe { free_verbose(message) };
            }
        }
        let mut parts: Vec<String> = parts
            .into_iter()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        parts.dedup();
        (!parts.is_empty()).then(|| parts.join(": "))
    }
}
