//! The System library's calls: its context and the binary's metadata.

use std::ffi::c_void;

use crate::base::error::{Error, Result};
use crate::ffi::loader::SystemLibrary;
use crate::sys::{self, QnnSystemContext_BinaryInfo_t};

impl SystemLibrary {
    /// [`checked`](super::checked); the System library has no error texts.
    fn checked(
        &self,
        op: &'static str,
        call: impl FnOnce() -> sys::Qnn_ErrorHandle_t,
    ) -> Result<()> {
        super::checked(op, call, Error::qnn)
    }

    /// `systemContextCreate`; the handle it returns may be NULL.
    pub(crate) fn system_context_create(&self) -> Result<sys::QnnSystemContext_Handle_t> {
        let mut handle: sys::QnnSystemContext_Handle_t = std::ptr::null_mut();
        self.checked("systemContextCreate", || {
            // SAFETY: the out-pointer is valid for a write.
            unsafe { (self.fns.context_create)(&mut handle) }
        })?;
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
        // SAFETY: the caller's contract: a System context of this library, freed once.
        self.checked("systemContextFree", || unsafe {
            (self.fns.context_free)(handle)
        })
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
        let mut info: *const QnnSystemContext_BinaryInfo_t = std::ptr::null();
        let size = binary.len() as u64;
        match (
            self.fns.context_get_metadata,
            self.fns.context_get_binary_info,
        ) {
            (Some(get_metadata), _) => self.checked("systemContextGetMetaData", || {
                // SAFETY: the buffer is valid for `size` bytes for the duration of the call;
                // the result stays owned by the System context (the caller's contract).
                unsafe { get_metadata(handle, binary.as_ptr().cast(), size, &mut info) }
            })?,
            (None, Some(get_binary_info)) => {
                copy.extend_from_slice(binary);
                let mut info_size = 0u64;
                self.checked("systemContextGetBinaryInfo", || {
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
                })?
            }
            (None, None) => {
                return Err(Error::Internal {
                    message: "the System library has no metadata entry (the loader requires one)"
                        .into(),
                });
            }
        }
        Ok(info)
    }
}
