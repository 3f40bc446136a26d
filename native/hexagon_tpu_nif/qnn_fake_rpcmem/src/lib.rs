//! A stand-in for the rpcmem allocator of `libcdsprpc.so`, for tests: `rpcmem_alloc`,
//! `rpcmem_free`, `rpcmem_to_fd` (and the no-ops `rpcmem_init` / `rpcmem_deinit`) over
//! `memfd_create` + `mmap`, so a buffer has a file descriptor that `QnnMem_register` (ION) can
//! take and that qnn_sim maps on its side: what one writes, the other sees.
//!
//! Each allocation is its own memfd of exactly the size asked, mapped shared. A registry maps
//! each pointer handed out to its (fd, size); `rpcmem_free` unmaps and closes. A pointer the
//! library did not hand out (or already freed) answers -1 from `rpcmem_to_fd` and is ignored by
//! `rpcmem_free`; both are counted. [`fake_rpcmem_counters`] reads the counters, so a test can
//! show nothing leaked. State is per library instance (load a copy for a test of its own).
//!
//! Test support only: nothing shipped links or loads it.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex, MutexGuard};

/// The library cargo built beside the running test binary (in its folder, `deps/`, or the one
/// above): tests load it by path, as the runtime loads `libcdsprpc.so`. Panics when it is not
/// there (a test of a crate that does not depend on this one).
pub fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("libqnn_fake_rpcmem.so"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("libqnn_fake_rpcmem.so not found near {}", exe.display()))
}

/// What [`fake_rpcmem_counters`] writes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FakeRpcmemCounters {
    /// `rpcmem_alloc` calls that returned a buffer.
    pub allocs: u64,
    /// `rpcmem_alloc` calls that returned NULL (a size <= 0, or the system refused).
    pub failed_allocs: u64,
    /// Buffers freed by `rpcmem_free`.
    pub frees: u64,
    /// Buffers allocated and not freed.
    pub live: u64,
    /// Their bytes.
    pub live_bytes: u64,
    /// `rpcmem_free` calls with a pointer that is not a live buffer (ignored).
    pub unknown_frees: u64,
    /// `rpcmem_to_fd` calls with a pointer that is not a live buffer (answered -1).
    pub unknown_to_fd: u64,
}

struct Buffer {
    fd: c_int,
    size: usize,
}

#[derive(Default)]
struct State {
    buffers: HashMap<usize, Buffer>,
    counters: FakeRpcmemCounters,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(Default::default);

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// rpcmem's `RPCMEM_HEAP_ID_SYSTEM`; any heap id is accepted.
pub const RPCMEM_HEAP_ID_SYSTEM: c_int = 25;

fn alloc(size: c_int) -> Option<(*mut c_void, c_int)> {
    let size = usize::try_from(size).ok().filter(|&s| s > 0)?;
    // SAFETY: a NUL-terminated name; the flags are valid for memfd_create.
    let fd = unsafe { libc::memfd_create(c"fake_rpcmem".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let ptr = libc::off_t::try_from(size)
        .ok()
        // SAFETY: `fd` is our fresh memfd.
        .filter(|&len| unsafe { libc::ftruncate(fd, len) } == 0)
        .map(|_| {
            // SAFETY: a new shared mapping of the memfd's `size` bytes at an address the
            // kernel picks.
            unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            }
        })
        .filter(|&p| p != libc::MAP_FAILED);
    match ptr {
        Some(p) => Some((p, fd)),
        None => {
            // SAFETY: our own fd, closed once.
            unsafe { libc::close(fd) };
            None
        }
    }
}

/// `void* rpcmem_alloc(int heapid, uint32 flags, int size)`: a zeroed shared buffer of `size`
/// bytes, or NULL. The heap id and flags are ignored.
#[unsafe(no_mangle)]
pub extern "C" fn rpcmem_alloc(_heapid: c_int, _flags: u32, size: c_int) -> *mut c_void {
    let Some((ptr, fd)) = alloc(size) else {
        state().counters.failed_allocs += 1;
        return std::ptr::null_mut();
    };
    let size = size as usize; // > 0, checked by `alloc`
    let mut st = state();
    st.buffers.insert(ptr as usize, Buffer { fd, size });
    st.counters.allocs += 1;
    st.counters.live += 1;
    st.counters.live_bytes += size as u64;
    ptr
}

/// `void rpcmem_free(void* po)`: unmaps and closes a buffer; any other pointer is ignored
/// (and counted).
///
/// # Safety
/// No one may use the buffer's memory afterwards (its mapping is gone).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rpcmem_free(po: *mut c_void) {
    let buffer = {
        let mut st = state();
        let Some(b) = st.buffers.remove(&(po as usize)) else {
            st.counters.unknown_frees += 1;
            return;
        };
        st.counters.frees += 1;
        st.counters.live -= 1;
        st.counters.live_bytes -= b.size as u64;
        b
    };
    // SAFETY: `po`/`size` are exactly a mapping this library made, removed from the registry
    // above so it is unmapped once; the caller uses it no more. The fd is ours, closed once.
    unsafe {
        libc::munmap(po, buffer.size);
        libc::close(buffer.fd);
    }
}

/// `int rpcmem_to_fd(void* po)`: the buffer's file descriptor (the library keeps owning it), or
/// -1 for a pointer that is not a live buffer's start.
#[unsafe(no_mangle)]
pub extern "C" fn rpcmem_to_fd(po: *mut c_void) -> c_int {
    let mut st = state();
    match st.buffers.get(&(po as usize)) {
        Some(b) => b.fd,
        None => {
            st.counters.unknown_to_fd += 1;
            -1
        }
    }
}

/// `void rpcmem_init(void)`: a no-op, as in current `libcdsprpc.so`.
#[unsafe(no_mangle)]
pub extern "C" fn rpcmem_init() {}

/// `void rpcmem_deinit(void)`: a no-op, as in current `libcdsprpc.so`.
#[unsafe(no_mangle)]
pub extern "C" fn rpcmem_deinit() {}

/// Writes the counters to `out` (nothing for NULL).
///
/// # Safety
/// `out` must be NULL or writable for one [`FakeRpcmemCounters`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fake_rpcmem_counters(out: *mut FakeRpcmemCounters) {
    let counters = state().counters;
    if !out.is_null() {
        // SAFETY: non-NULL and writable (the caller's contract).
        unsafe { out.write(counters) };
    }
}
