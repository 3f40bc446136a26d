//! `QnnMem_register` / `QnnMem_deRegister`: shared buffers over rpcmem, modelled.
//!
//! On the device a runtime allocates a tensor's buffer with rpcmem (`rpcmem_alloc`), registers
//! its file descriptor (`rpcmem_to_fd`) as a `QNN_MEM_TYPE_ION` descriptor, and names the
//! returned handle in the tensor (`QNN_TENSORMEMTYPE_MEMHANDLE`), so FastRPC maps it instead
//! of copying. Here a registration maps the descriptor's fd itself (`mmap`, `MAP_SHARED`), so
//! an execute reads inputs from and writes outputs into the very memory the client holds,
//! whoever allocated it (a memfd from the fake rpcmem library, or any file).
//!
//! - Only ION descriptors register (the HTP does not list DMA_BUF): CUSTOM and DMA_BUF answer
//!   `QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE`. The shape's byte size (dimensions × the data type's
//!   size) must be non-zero and fit in the fd's size (`fstat`), else
//!   `QNN_MEM_ERROR_INVALID_SHAPE`; memory already registered (the same file, by device and
//!   inode, live in any context, or twice in one call) answers
//!   `QNN_MEM_ERROR_ALREADY_REGISTERED`. A failed call registers nothing.
//! - The `mem_register_unsupported` knob makes `QnnMem_register` answer
//!   `QNN_COMMON_ERROR_NOT_SUPPORTED` before looking at its arguments, as Qualcomm's x86
//!   emulator does.
//! - An execute's MEMHANDLE tensor must name a live registration of the graph's own context
//!   whose size holds the tensor; a handle never registered, deregistered, or of another
//!   context answers `QNN_GRAPH_ERROR_INVALID_TENSOR` and is counted (`QnnSim_memStaleUses`),
//!   never a crash (the emulator crashed). A queued asynchronous execute keeps the mapping
//!   alive, and answers the same error if its handle was deregistered before it ran.
//! - `QnnContext_free` deregisters the context's live registrations (counted).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use qnn_sys::*;

use super::state::*;
use crate::model::DType;

/// Handles are these plus a serial number: never NULL, never a registry id, never reused.
const HANDLE_BASE: u64 = 0x4d45_4d00_0000_0000;

/// Registrations made (each handle once).
pub static REGISTRATIONS: AtomicU64 = AtomicU64::new(0);
/// Registrations ended by `QnnMem_deRegister`.
pub static DEREGISTRATIONS: AtomicU64 = AtomicU64::new(0);
/// Registrations ended by freeing their context.
pub static FREED_WITH_CONTEXT: AtomicU64 = AtomicU64::new(0);
/// Executes (synchronous or asynchronous) that ran with at least one MEMHANDLE tensor.
pub static MEMHANDLE_EXECUTES: AtomicU64 = AtomicU64::new(0);
/// Executes refused because a MEMHANDLE tensor named no live registration of its context.
pub static STALE_USES: AtomicU64 = AtomicU64::new(0);
/// `QnnMem_register` calls refused (any code).
pub static REGISTER_REFUSALS: AtomicU64 = AtomicU64::new(0);

pub fn reset() {
    for c in [
        &REGISTRATIONS,
        &DEREGISTRATIONS,
        &FREED_WITH_CONTEXT,
        &MEMHANDLE_EXECUTES,
        &STALE_USES,
        &REGISTER_REFUSALS,
    ] {
        c.store(0, Ordering::SeqCst);
    }
}

/// One registered buffer: our own shared mapping of the client's fd.
pub struct Region {
    pub context: u64,
    /// (st_dev, st_ino) of the fd: what "the same memory" means.
    identity: (u64, u64),
    ptr: *mut u8,
    /// The shape's byte size (what is mapped, and what a tensor may use).
    pub len: usize,
    /// Cleared when deregistered (a queued execute holding the region then refuses to run).
    live: AtomicBool,
}

// SAFETY: `ptr` is a MAP_SHARED mapping owned by the region (unmapped only on drop); the bytes
// are the client's shared buffer, which QNN's contract leaves to the backend during an execute.
unsafe impl Send for Region {}
// SAFETY: as above; the region itself is never written through `&Region`.
unsafe impl Sync for Region {}

impl Region {
    pub fn ptr(&self) -> *mut std::ffi::c_void {
        self.ptr.cast()
    }

    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `map_fd`, unmapped only here.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[derive(Default)]
struct Table {
    next: u64,
    regions: HashMap<u64, Arc<Region>>,
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Default::default);

/// Live registrations, all contexts.
pub fn live() -> u64 {
    lock(&TABLE).regions.len() as u64
}

/// The live registration `handle` names, if it belongs to `context`; else counts a stale use.
pub fn resolve(handle: Qnn_MemHandle_t, context: u64) -> Option<Arc<Region>> {
    let found = lock(&TABLE)
        .regions
        .get(&handle_id(handle))
        .filter(|r| r.context == context)
        .cloned();
    if found.is_none() {
        STALE_USES.fetch_add(1, Ordering::SeqCst);
    }
    found
}

/// Counts a stale use found at run time (deregistered while queued).
pub fn count_stale() {
    STALE_USES.fetch_add(1, Ordering::SeqCst);
}

/// Deregisters every live registration of a context being freed.
pub fn free_context(context: u64) {
    let gone: Vec<Arc<Region>> = {
        let mut t = lock(&TABLE);
        let ids: Vec<u64> = t
            .regions
            .iter()
            .filter(|(_, r)| r.context == context)
            .map(|(&id, _)| id)
            .collect();
        ids.iter().filter_map(|id| t.regions.remove(id)).collect()
    };
    for r in gone {
        r.live.store(false, Ordering::SeqCst);
        FREED_WITH_CONTEXT.fetch_add(1, Ordering::SeqCst);
    }
}

/// A checked descriptor, not yet mapped.
struct Checked {
    fd: i32,
    identity: (u64, u64),
    len: usize,
}

/// # Safety
/// `d.memShape.dimSize` must be NULL or hold `numDim` readable entries.
unsafe fn check(d: &Qnn_MemDescriptor_t) -> Result<Checked, u32> {
    if d.memType != QNN_MEM_TYPE_ION {
        return Err(QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE);
    }
    // SAFETY: the member read is the one `memType` selects (ION), and any bits are an i32.
    let fd = unsafe { d.info.ionInfo.fd };
    if fd < 0 {
        return Err(QNN_MEM_ERROR_INVALID_ARGUMENT);
    }
    let shape = d.memShape;
    if shape.numDim == 0 || shape.dimSize.is_null() {
        return Err(QNN_MEM_ERROR_INVALID_SHAPE);
    }
    let dtype = DType::from_code(d.dataType).ok_or(QNN_MEM_ERROR_INVALID_ARGUMENT)?;
    // SAFETY: non-NULL with `numDim` entries (the caller's contract).
    let dims = unsafe { std::slice::from_raw_parts(shape.dimSize, shape.numDim as usize) };
    let len = dims
        .iter()
        .try_fold(dtype.size(), |acc, &x| acc.checked_mul(x as usize))
        .filter(|&n| n > 0)
        .ok_or(QNN_MEM_ERROR_INVALID_SHAPE)?;
    // SAFETY: `stat` is plain old data, written whole by a successful fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a writable stat; a bad fd only makes fstat fail.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(QNN_MEM_ERROR_MAPPING);
    }
    if usize::try_from(st.st_size).map_or(true, |size| len > size) {
        return Err(QNN_MEM_ERROR_INVALID_SHAPE);
    }
    #[allow(clippy::unnecessary_cast)] // st_dev / st_ino are not u64 on every target
    let identity = (st.st_dev as u64, st.st_ino as u64);
    Ok(Checked { fd, identity, len })
}

fn map_fd(c: &Checked, context: u64) -> Result<Region, u32> {
    // SAFETY: a fresh shared mapping of `len` bytes of a file at least that long (checked);
    // the kernel picks the address, so nothing of ours is replaced.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            c.len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            c.fd,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(QNN_MEM_ERROR_MAPPING);
    }
    Ok(Region {
        context,
        identity: c.identity,
        ptr: ptr.cast(),
        len: c.len,
        live: AtomicBool::new(true),
    })
}

/// `QnnMem_register`.
///
/// # Safety
/// `descriptors` must be NULL or hold `count` readable descriptors (each shape's `dimSize`
/// NULL or valid for `numDim`); `handles` NULL or writable for `count` handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnMem_register(
    context: Qnn_ContextHandle_t,
    descriptors: *const Qnn_MemDescriptor_t,
    count: u32,
    handles: *mut Qnn_MemHandle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let code = unsafe { register(context, descriptors, count, handles) };
        if code != 0 {
            REGISTER_REFUSALS.fetch_add(1, Ordering::SeqCst);
        }
        err(code)
    })
}

/// # Safety
/// As for [`QnnMem_register`].
unsafe fn register(
    context: Qnn_ContextHandle_t,
    descriptors: *const Qnn_MemDescriptor_t,
    count: u32,
    handles: *mut Qnn_MemHandle_t,
) -> u32 {
    if knobs().mem_register_unsupported {
        return QNN_COMMON_ERROR_NOT_SUPPORTED;
    }
    let ctx = handle_id(context);
    match registry().get(ctx, Kind::Context) {
        Some(Obj::Context(c)) if !super::ssr::is_dead(&c.dead) => {}
        _ => return QNN_MEM_ERROR_INVALID_HANDLE,
    }
    if descriptors.is_null() || handles.is_null() || count == 0 {
        return QNN_MEM_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: non-NULL and writable for `count` handles (the caller's contract).
    let out = unsafe { std::slice::from_raw_parts_mut(handles, count as usize) };
    out.fill(std::ptr::null_mut());
    // SAFETY: non-NULL and readable for `count` descriptors (the caller's contract).
    let ds = unsafe { std::slice::from_raw_parts(descriptors, count as usize) };
    let mut checked = Vec::with_capacity(ds.len());
    for d in ds {
        // SAFETY: the caller's contract on each shape.
        match unsafe { check(d) } {
            Ok(c) => checked.push(c),
            Err(code) => return code,
        }
    }
    // Map outside the table's lock, then check and insert under it, all or nothing.
    let mut regions = Vec::with_capacity(checked.len());
    for c in &checked {
        match map_fd(c, ctx) {
            Ok(r) => regions.push(r),
            Err(code) => return code,
        }
    }
    let mut t = lock(&TABLE);
    for (i, r) in regions.iter().enumerate() {
        let twice = regions[..i].iter().any(|o| o.identity == r.identity);
        if twice || t.regions.values().any(|o| o.identity == r.identity) {
            return QNN_MEM_ERROR_ALREADY_REGISTERED;
        }
    }
    for (slot, r) in out.iter_mut().zip(regions) {
        t.next += 1;
        let id = HANDLE_BASE + t.next;
        t.regions.insert(id, Arc::new(r));
        *slot = handle_ptr(id);
        REGISTRATIONS.fetch_add(1, Ordering::SeqCst);
    }
    0
}

/// `QnnMem_deRegister`: every valid handle is deregistered even when another is not
/// (`QNN_MEM_ERROR_INVALID_HANDLE` then).
///
/// # Safety
/// `handles` must be NULL or hold `count` readable handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnMem_deRegister(
    handles: *const Qnn_MemHandle_t,
    count: u32,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if handles.is_null() {
            return err(QNN_MEM_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: non-NULL and readable for `count` handles (the caller's contract).
        let hs = unsafe { std::slice::from_raw_parts(handles, count as usize) };
        let mut invalid = false;
        let gone: Vec<Arc<Region>> = {
            let mut t = lock(&TABLE);
            hs.iter()
                .filter_map(|&h| {
                    let r = t.regions.remove(&handle_id(h));
                    invalid |= r.is_none();
                    r
                })
                .collect()
        };
        for r in gone {
            r.live.store(false, Ordering::SeqCst);
            DEREGISTRATIONS.fetch_add(1, Ordering::SeqCst);
        }
        if invalid {
            err(QNN_MEM_ERROR_INVALID_HANDLE)
        } else {
            0
        }
    })
}
