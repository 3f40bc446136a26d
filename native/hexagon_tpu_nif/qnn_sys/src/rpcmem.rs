//! rpcmem (`rpcmem.h`, exported by `libcdsprpc.so` on the device): the shared-memory allocator
//! whose buffers FastRPC maps to the DSP without copying. A buffer's file descriptor
//! (`rpcmem_to_fd`) is what [`QNN_MEM_TYPE_ION`](super::QNN_MEM_TYPE_ION) registration takes.
//! Not part of QNN: these are the types of the symbols a runtime looks up with `dlsym`.

use std::ffi::{c_int, c_void};

/// `RPCMEM_HEAP_ID_SYSTEM`: the system heap, the one every HTP runtime asks for.
pub const RPCMEM_HEAP_ID_SYSTEM: c_int = 25;
/// `RPCMEM_DEFAULT_FLAGS`: cached memory (`RPCMEM_FLAG_CACHED`).
pub const RPCMEM_DEFAULT_FLAGS: u32 = 1;

/// `void* rpcmem_alloc(int heapid, uint32 flags, int size)`: NULL on failure.
pub type RpcMem_AllocFn =
    unsafe extern "C" fn(heapid: c_int, flags: u32, size: c_int) -> *mut c_void;
/// `void rpcmem_free(void* po)`.
pub type RpcMem_FreeFn = unsafe extern "C" fn(po: *mut c_void);
/// `int rpcmem_to_fd(void* po)`: the buffer's file descriptor, -1 for a pointer rpcmem did not
/// allocate.
pub type RpcMem_ToFdFn = unsafe extern "C" fn(po: *mut c_void) -> c_int;
/// `void rpcmem_init(void)` / `void rpcmem_deinit(void)`: no-ops in current `libcdsprpc.so`.
pub type RpcMem_InitFn = unsafe extern "C" fn();
