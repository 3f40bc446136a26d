//! QnnMem: registering rpcmem buffers with a context, so that tensors name them by handle
//! (`QNN_TENSORMEMTYPE_MEMHANDLE`) and FastRPC maps them instead of copying.

use crate::base::error::{Error, Result};
use crate::ffi::loader::BackendLibrary;
use crate::sys;

impl BackendLibrary {
    /// Whether the library has `memRegister` and `memDeRegister` (which a backend may still
    /// refuse: Qualcomm's x86 emulator answers `QNN_COMMON_ERROR_NOT_SUPPORTED`).
    pub(crate) fn has_mem(&self) -> bool {
        self.fns.mem_register.is_some() && self.fns.mem_deregister.is_some()
    }

    /// `memRegister` of one ION descriptor: the buffer behind `fd`, holding a tensor of
    /// `dims` and `data_type`. Never a NULL handle.
    ///
    /// # Safety
    /// `context` is a live context handle of this library, kept from being freed during the
    /// call; `fd` is the descriptor of an rpcmem buffer of at least the tensor's byte size.
    pub(crate) unsafe fn mem_register(
        &self,
        context: sys::Qnn_ContextHandle_t,
        fd: i32,
        dims: &[u32],
        data_type: u32,
    ) -> Result<sys::Qnn_MemHandle_t> {
        let register = self.fns.mem_register.ok_or_else(|| Error::Internal {
            message: "the backend has no memRegister".into(),
        })?;
        let mut dims = dims.to_vec();
        let descriptor = sys::Qnn_MemDescriptor_t {
            memShape: sys::Qnn_MemShape_t {
                numDim: dims.len() as u32,
                dimSize: dims.as_mut_ptr(),
                shapeConfig: std::ptr::null(),
            },
            dataType: data_type,
            memType: sys::QNN_MEM_TYPE_ION,
            info: sys::Qnn_MemDescriptorUnion_t {
                ionInfo: sys::Qnn_MemIonInfo_t { fd },
            },
        };
        let mut handle: sys::Qnn_MemHandle_t = std::ptr::null_mut();
        self.checked("memRegister", || {
            // SAFETY: the caller's contract; one descriptor, read during the call (its
            // dimensions outlive it), and one writable handle.
            unsafe { register(context, &descriptor, 1, &mut handle) }
        })?;
        if handle.is_null() {
            return Err(Error::Internal {
                message: "memRegister returned a NULL handle".into(),
            });
        }
        Ok(handle)
    }

    /// `memDeRegister` of `handles`.
    ///
    /// # Safety
    /// Each handle came from this library's `memRegister` on a context still live, and is
    /// deregistered once; no execute using it is running or queued.
    pub(crate) unsafe fn mem_deregister(&self, handles: &[sys::Qnn_MemHandle_t]) -> Result<()> {
        let Some(deregister) = self.fns.mem_deregister else {
            return Ok(());
        };
        if handles.is_empty() {
            return Ok(());
        }
        self.checked("memDeRegister", || {
            // SAFETY: the caller's contract; the array outlives the call.
            unsafe { deregister(handles.as_ptr(), handles.len() as u32) }
        })
    }
}
