//! rpcmem, the allocator of memory FastRPC maps to the DSP without copying (`libcdsprpc.so` on
//! the device; `qnn_fake_rpcmem` in tests): opened once per path, its buffers freed when dropped.
//! Not a QNN library: no provider table, no exit permit (rpcmem never calls QNN).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::{Arc, LazyLock, Mutex};

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use crate::base::sync::lock;
use crate::ffi::loader::describe;
use crate::sys;

/// An opened rpcmem library.
pub(crate) struct Rpcmem {
    alloc: sys::RpcMem_AllocFn,
    free: sys::RpcMem_FreeFn,
    to_fd: sys::RpcMem_ToFdFn,
    _library: Library,
}

static OPENED: LazyLock<Mutex<HashMap<PathBuf, Arc<Rpcmem>>>> = LazyLock::new(Default::default);

/// Opens (or reuses) the rpcmem library at `path`; the error says why it cannot be used.
pub(crate) fn open(path: &Path) -> Result<Arc<Rpcmem>, String> {
    let mut opened = lock(&OPENED);
    if let Some(rpcmem) = opened.get(path) {
        return Ok(Arc::clone(rpcmem));
    }
    // SAFETY: loading runs the library's initializers; rpcmem's (libcdsprpc's FastRPC set-up,
    // or the fake's none) only set up internal state.
    let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| format!("{} could not be opened: {}", path.display(), describe(&e)))?;
    crate::base::exit::guard_exit();
    // SAFETY: the symbols are looked up by rpcmem.h's names and given rpcmem.h's types.
    let symbols = unsafe {
        (
            library.get::<sys::RpcMem_AllocFn>(b"rpcmem_alloc\0"),
            library.get::<sys::RpcMem_FreeFn>(b"rpcmem_free\0"),
            library.get::<sys::RpcMem_ToFdFn>(b"rpcmem_to_fd\0"),
        )
    };
    let (alloc, free, to_fd) = match symbols {
        (Ok(alloc), Ok(free), Ok(to_fd)) => (*alloc, *free, *to_fd),
        _ => {
            return Err(format!(
                "{} has no rpcmem_alloc, rpcmem_free and rpcmem_to_fd",
                path.display()
            ));
        }
    };
    let rpcmem = Arc::new(Rpcmem {
        alloc,
        free,
        to_fd,
        _library: library,
    });
    opened.insert(path.to_path_buf(), Arc::clone(&rpcmem));
    Ok(rpcmem)
}

impl Rpcmem {
    /// A buffer of `len` bytes from the system heap, with its file descriptor.
    pub(crate) fn alloc(self: &Arc<Self>, len: usize) -> Result<RpcBuffer, String> {
        let failed = || format!("rpcmem_alloc of {len} bytes failed");
        let size = std::ffi::c_int::try_from(len).map_err(|_| failed())?;
        // SAFETY: rpcmem_alloc takes any heap id, flags and size, answering NULL on failure.
        let raw =
            unsafe { (self.alloc)(sys::RPCMEM_HEAP_ID_SYSTEM, sys::RPCMEM_DEFAULT_FLAGS, size) };
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or_else(failed)?;
        let mut buffer = RpcBuffer {
            ptr,
            len,
            fd: -1,
            rpcmem: Arc::clone(self),
        };
        // SAFETY: the pointer is one rpcmem_alloc returned.
        let fd = unsafe { (self.to_fd)(raw) };
        if fd < 0 {
            return Err(format!(
                "rpcmem_to_fd answered {fd} for a buffer it allocated"
            ));
        }
        buffer.fd = fd;
        Ok(buffer)
    }
}

/// Memory from rpcmem: `len` bytes at `ptr`, shared with the DSP through `fd`. Freed on drop.
pub(crate) struct RpcBuffer {
    ptr: NonNull<u8>,
    len: usize,
    pub fd: i32,
    rpcmem: Arc<Rpcmem>,
}

// SAFETY: plain memory owned by this value alone; rpcmem's calls may come from any thread.
unsafe impl Send for RpcBuffer {}
// SAFETY: shared references only read the bytes.
unsafe impl Sync for RpcBuffer {}

impl std::ops::Deref for RpcBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` bytes at `ptr`, allocated by rpcmem and owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for RpcBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, borrowed exclusively through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for RpcBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by this library's rpcmem_alloc, freed once, here.
        unsafe { (self.rpcmem.free)(self.ptr.as_ptr().cast()) }
    }
}
