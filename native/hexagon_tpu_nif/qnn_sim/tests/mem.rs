//! Shared buffers (`QnnMem_register` / `QnnMem_deRegister`, `QNN_TENSORMEMTYPE_MEMHANDLE`)
//! through a fresh library copy: a registered buffer is read and written in place, the
//! QnnMem error codes, stale handles answered (never a crash), the emulator's NOT_SUPPORTED
//! knob, contexts freed with live registrations, 10,000 executes with counters back at their
//! baseline, and the fake rpcmem library's buffers end to end.

mod common;
mod models;

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::*;
use models::*;
use qnn_sys::*;

/// A memfd of `len` bytes and the test's own shared mapping of it (the client's view).
struct Shm {
    fd: c_int,
    ptr: *mut u8,
    len: usize,
}

impl Shm {
    fn new(len: usize) -> Shm {
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe { libc::memfd_create(c"qnn_sim-mem-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: our fresh memfd.
        assert_eq!(unsafe { libc::ftruncate(fd, len as libc::off_t) }, 0);
        // SAFETY: a new shared mapping of the memfd's `len` bytes.
        let ptr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Shm {
            fd,
            ptr: ptr.cast(),
            len,
        }
    }

    fn write_f32(&self, v: &[f32]) {
        let b = f32_bytes(v);
        assert!(b.len() <= self.len);
        // SAFETY: our mapping, `len` bytes, nothing else borrows it.
        unsafe { ptr::copy_nonoverlapping(b.as_ptr(), self.ptr, b.len()) };
    }

    fn read_f32(&self) -> Vec<f32> {
        // SAFETY: our mapping, `len` readable bytes.
        let b = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        f32_from(b)
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: our own mapping and fd, released once.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
            libc::close(self.fd);
        }
    }
}

/// An ION descriptor of `fd` with an f32 shape (the dims live as long as `dims`).
fn ion(fd: c_int, dims: &mut [u32], mem_type: u32) -> Qnn_MemDescriptor_t {
    Qnn_MemDescriptor_t {
        memShape: Qnn_MemShape_t {
            numDim: dims.len() as u32,
            dimSize: dims.as_mut_ptr(),
            shapeConfig: ptr::null(),
        },
        dataType: QNN_DATATYPE_FLOAT_32,
        memType: mem_type,
        info: Qnn_MemDescriptorUnion_t {
            ionInfo: Qnn_MemIonInfo_t { fd },
        },
    }
}

fn register_all(
    sim: &Sim,
    ctx: *mut c_void,
    ds: &[Qnn_MemDescriptor_t],
) -> (u32, Vec<Qnn_MemHandle_t>) {
    // Not NULL before the call: the library must write NULL on failure.
    let mut hs = vec![0x1 as Qnn_MemHandle_t; ds.len()];
    // SAFETY: `ds` readable (their dims alive), `hs` writable, both of `len` entries.
    let rc = unsafe {
        sim.core().memRegister.unwrap()(ctx, ds.as_ptr(), ds.len() as u32, hs.as_mut_ptr())
    };
    (code(rc), hs)
}

fn register(sim: &Sim, ctx: *mut c_void, fd: c_int, n: u32) -> Result<Qnn_MemHandle_t, u32> {
    let mut dims = [n];
    match register_all(sim, ctx, &[ion(fd, &mut dims, QNN_MEM_TYPE_ION)]) {
        (0, hs) => Ok(hs[0]),
        (e, _) => Err(e),
    }
}

fn deregister(sim: &Sim, hs: &[Qnn_MemHandle_t]) -> u32 {
    // SAFETY: `hs` readable for its length (any handle values).
    code(unsafe { sim.core().memDeRegister.unwrap()(hs.as_ptr(), hs.len() as u32) })
}

/// Executes `g` (identity over f32[n]) with MEMHANDLE tensors; the client buffers the helper
/// made are returned too (they must stay untouched).
fn execute_mem(
    sim: &Sim,
    info: *const QnnSystemContext_BinaryInfo_t,
    g: *mut c_void,
    x: Qnn_MemHandle_t,
    y: Qnn_MemHandle_t,
    n: usize,
) -> Result<Vec<Vec<u8>>, u32> {
    let dummy = vec![0xAAu8; n * 4];
    sim.execute_with_info(info, g, "g", &[&dummy], |ins, outs| {
        for (t, h) in ins.iter_mut().zip([x]).chain(outs.iter_mut().zip([y])) {
            t.tensor.v1.memType = QNN_TENSORMEMTYPE_MEMHANDLE;
            t.tensor.v1.memory.memHandle = h;
        }
    })
}

struct Fixture {
    sim: Sim,
    session: Session,
    ctx: *mut c_void,
    g: *mut c_void,
    system: *mut c_void,
    info: *const QnnSystemContext_BinaryInfo_t,
}

const N: u32 = 4;

fn fixture() -> Fixture {
    let sim = Sim::load();
    let bytes = identity_f32("g", N).build().unwrap();
    let session = sim.open();
    let ctx = sim.create_context(&session, &bytes).unwrap();
    let g = sim.retrieve(ctx, "g").unwrap();
    let (system, info) = sim.metadata_raw(&bytes).expect("metadata");
    Fixture {
        sim,
        session,
        ctx,
        g,
        system,
        info,
    }
}

impl Fixture {
    fn counter(&self, name: &str) -> u64 {
        self.sim.counter_named(name)
    }

    fn finish(self) {
        assert_eq!(self.sim.free_system(self.system), 0);
        assert_eq!(self.sim.free_context(self.ctx), 0);
        assert_eq!(self.counter("QnnSim_memLiveRegistrations"), 0);
        self.sim.close(self.session);
        assert_eq!(self.sim.live(), 0);
    }
}

#[test]
fn a_registered_buffer_is_read_and_written_in_place() {
    let f = fixture();
    let live = f.sim.live();
    let (x, y) = (Shm::new(16), Shm::new(16));
    x.write_f32(&[1.0, -2.5, 3.25, 1e6]);
    let hx = register(&f.sim, f.ctx, x.fd, N).unwrap();
    let hy = register(&f.sim, f.ctx, y.fd, N).unwrap();
    assert!(!hx.is_null() && !hy.is_null() && hx != hy);
    assert_eq!(f.counter("QnnSim_memRegistrations"), 2);
    assert_eq!(f.counter("QnnSim_memLiveRegistrations"), 2);
    assert_eq!(f.sim.live(), live + 2, "registrations are live handles");

    let client = execute_mem(&f.sim, f.info, f.g, hx, hy, 4).unwrap();
    assert_eq!(
        y.read_f32(),
        [1.0, -2.5, 3.25, 1e6],
        "written into the memfd"
    );
    assert!(
        client[0].iter().all(|&b| b == 0),
        "no client buffer is involved"
    );
    // In place: the next execute sees what the client wrote since.
    x.write_f32(&[7.0, 8.0, 9.0, 10.0]);
    execute_mem(&f.sim, f.info, f.g, hx, hy, 4).unwrap();
    assert_eq!(y.read_f32(), [7.0, 8.0, 9.0, 10.0]);
    assert_eq!(f.counter("QnnSim_memHandleExecutes"), 2);

    assert_eq!(deregister(&f.sim, &[hx, hy]), 0);
    assert_eq!(f.counter("QnnSim_memDeregistrations"), 2);
    assert_eq!(f.counter("QnnSim_memLiveRegistrations"), 0);
    assert_eq!(f.sim.live(), live);

    // Use after deregistration: an error, counted, never a crash.
    assert_eq!(
        execute_mem(&f.sim, f.info, f.g, hx, hy, 4).unwrap_err(),
        QNN_GRAPH_ERROR_INVALID_TENSOR
    );
    assert_eq!(f.counter("QnnSim_memStaleUses"), 1);
    // A handle value never registered, too.
    assert_eq!(
        execute_mem(&f.sim, f.info, f.g, 0x1234 as _, hy, 4).unwrap_err(),
        QNN_GRAPH_ERROR_INVALID_TENSOR
    );
    assert_eq!(f.counter("QnnSim_memStaleUses"), 2);
    assert_eq!(f.counter("QnnSim_memHandleExecutes"), 2);
    // Deregistering again: invalid handle.
    assert_eq!(deregister(&f.sim, &[hx]), QNN_MEM_ERROR_INVALID_HANDLE);
    assert_eq!(f.counter("QnnSim_memDeregistrations"), 2);
    f.finish();
}

#[test]
fn register_answers_the_qnnmem_error_codes() {
    let f = fixture();
    let (a, small) = (Shm::new(16), Shm::new(8));
    let mut dims = [N];
    let good = ion(a.fd, &mut dims, QNN_MEM_TYPE_ION);
    let mut h = ptr::null_mut();
    // SAFETY: argument checks only: NULL arrays are refused before they are read.
    unsafe {
        let reg = f.sim.core().memRegister.unwrap();
        assert_eq!(
            code(reg(ptr::null_mut(), &good, 1, &mut h)),
            QNN_MEM_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            code(reg(f.g, &good, 1, &mut h)),
            QNN_MEM_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            code(reg(f.ctx, ptr::null(), 1, &mut h)),
            QNN_MEM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            code(reg(f.ctx, &good, 1, ptr::null_mut())),
            QNN_MEM_ERROR_INVALID_ARGUMENT
        );
        let dereg = f.sim.core().memDeRegister.unwrap();
        assert_eq!(code(dereg(ptr::null(), 1)), QNN_MEM_ERROR_INVALID_ARGUMENT);
    }
    // Wrong memory types: the HTP registers ION only.
    for t in [QNN_MEM_TYPE_DMA_BUF, QNN_MEM_TYPE_CUSTOM, 77] {
        let mut dims = [N];
        let (rc, hs) = register_all(&f.sim, f.ctx, &[ion(a.fd, &mut dims, t)]);
        assert_eq!(rc, QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE, "mem type {t}");
        assert!(hs[0].is_null(), "handles stay NULL on failure");
    }
    // No fd; a closed fd.
    assert_eq!(
        register(&f.sim, f.ctx, -1, N),
        Err(QNN_MEM_ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(
        register(&f.sim, f.ctx, 999_999, N),
        Err(QNN_MEM_ERROR_MAPPING)
    );
    // Size: 4 f32 do not fit in 8 bytes; an empty shape.
    assert_eq!(
        register(&f.sim, f.ctx, small.fd, N),
        Err(QNN_MEM_ERROR_INVALID_SHAPE)
    );
    assert_eq!(
        register(&f.sim, f.ctx, a.fd, 0),
        Err(QNN_MEM_ERROR_INVALID_SHAPE)
    );
    // Twice in one call: nothing registered.
    let (mut d1, mut d2) = ([N], [2]);
    let (rc, hs) = register_all(
        &f.sim,
        f.ctx,
        &[
            ion(a.fd, &mut d1, QNN_MEM_TYPE_ION),
            ion(a.fd, &mut d2, QNN_MEM_TYPE_ION),
        ],
    );
    assert_eq!(rc, QNN_MEM_ERROR_ALREADY_REGISTERED);
    assert!(hs.iter().all(|h| h.is_null()));
    assert_eq!(f.counter("QnnSim_memLiveRegistrations"), 0);
    // Once, then again (by the same fd, or a dup of it).
    let h = register(&f.sim, f.ctx, a.fd, N).unwrap();
    assert_eq!(
        register(&f.sim, f.ctx, a.fd, N),
        Err(QNN_MEM_ERROR_ALREADY_REGISTERED)
    );
    // SAFETY: dup of our own fd, closed below.
    let dup = unsafe { libc::dup(a.fd) };
    assert_eq!(
        register(&f.sim, f.ctx, dup, 2),
        Err(QNN_MEM_ERROR_ALREADY_REGISTERED)
    );
    // SAFETY: our dup, closed once.
    unsafe { libc::close(dup) };
    assert_eq!(f.counter("QnnSim_memRegistrations"), 1);
    // A smaller tensor than the registration is fine; a bigger one is not.
    let h_small = register(&f.sim, f.ctx, small.fd, 2).unwrap();
    assert_eq!(
        execute_mem(&f.sim, f.info, f.g, h, h_small, 4).unwrap_err(),
        QNN_GRAPH_ERROR_INVALID_TENSOR
    );
    // Deregistering a valid and an invalid handle: the valid one goes anyway.
    assert_eq!(
        deregister(&f.sim, &[h, ptr::null_mut(), h_small]),
        QNN_MEM_ERROR_INVALID_HANDLE
    );
    assert_eq!(f.counter("QnnSim_memLiveRegistrations"), 0);
    assert_eq!(f.counter("QnnSim_memDeregistrations"), 2);
    f.finish();
}

#[test]
fn the_emulators_not_supported_knob() {
    let f = fixture();
    let a = Shm::new(16);
    assert_eq!(f.sim.configure("mem_register_unsupported", "1"), 0);
    assert_eq!(
        register(&f.sim, f.ctx, a.fd, N),
        Err(QNN_COMMON_ERROR_NOT_SUPPORTED)
    );
    // Before any argument is looked at.
    let mut h = ptr::null_mut();
    // SAFETY: the library answers before reading anything.
    let rc = unsafe { f.sim.core().memRegister.unwrap()(ptr::null_mut(), ptr::null(), 0, &mut h) };
    assert_eq!(code(rc), QNN_COMMON_ERROR_NOT_SUPPORTED);
    assert_eq!(f.counter("QnnSim_memRegisterRefusals"), 2);
    assert_eq!(f.sim.configure("mem_register_unsupported", "maybe"), 2);
    assert_eq!(f.sim.configure("mem_register_unsupported", "0"), 0);
    let h = register(&f.sim, f.ctx, a.fd, N).unwrap();
    assert_eq!(deregister(&f.sim, &[h]), 0);
    f.finish();
}

#[test]
fn another_contexts_handle_and_a_freed_context() {
    let f = fixture();
    let bytes = identity_f32("g", N).build().unwrap();
    let other = f.sim.create_context(&f.session, &bytes).unwrap();
    let (x, y) = (Shm::new(16), Shm::new(16));
    let hx = register(&f.sim, other, x.fd, N).unwrap();
    let hy = register(&f.sim, other, y.fd, N).unwrap();
    // Registered with `other`, used on a graph of `f.ctx`.
    assert_eq!(
        execute_mem(&f.sim, f.info, f.g, hx, hy, 4).unwrap_err(),
        QNN_GRAPH_ERROR_INVALID_TENSOR
    );
    assert_eq!(f.counter("QnnSim_memStaleUses"), 1);
    // Freeing the context deregisters what it still has.
    assert_eq!(f.sim.free_context(other), 0);
    assert_eq!(f.counter("QnnSim_memFreedWithContext"), 2);
    assert_eq!(f.counter("QnnSim_memLiveRegistrations"), 0);
    assert_eq!(deregister(&f.sim, &[hx, hy]), QNN_MEM_ERROR_INVALID_HANDLE);
    // The memory may be registered again, elsewhere.
    let h = register(&f.sim, f.ctx, x.fd, N).unwrap();
    assert_eq!(deregister(&f.sim, &[h]), 0);
    f.finish();
}

static ASYNC_STATUS: AtomicU32 = AtomicU32::new(u32::MAX);

unsafe extern "C" fn note(_param: *mut c_void, status: Qnn_NotifyStatus_t) {
    ASYNC_STATUS.store(error_code(status.error), Ordering::SeqCst);
}

#[test]
fn asynchronous_executes_use_registered_buffers_and_refuse_a_handle_deregistered_meanwhile() {
    let f = fixture();
    let (x, y) = (Shm::new(16), Shm::new(16));
    x.write_f32(&[1.0, 2.0, 3.0, 4.0]);
    let hx = register(&f.sim, f.ctx, x.fd, N).unwrap();
    let hy = register(&f.sim, f.ctx, y.fd, N).unwrap();
    let run = |expect: u32| {
        // SAFETY: a live metadata answer; the tensor structs are copied and outlive the execute
        // (the test waits for its notification below).
        let (ins, mut outs) = unsafe {
            let g = &*(*f.info).info.contextBinaryInfoV3.graphs;
            let v = g.info.graphInfoV1;
            (vec![*v.graphInputs], vec![*v.graphOutputs])
        };
        let mut ins = ins;
        for (t, h) in ins.iter_mut().zip([hx]).chain(outs.iter_mut().zip([hy])) {
            t.tensor.v1.memType = QNN_TENSORMEMTYPE_MEMHANDLE;
            t.tensor.v1.memory.memHandle = h;
        }
        ASYNC_STATUS.store(u32::MAX, Ordering::SeqCst);
        // SAFETY: tensors alive until the notification (waited for below).
        let rc = unsafe {
            f.sim.core().graphExecuteAsync.unwrap()(
                f.g,
                ins.as_ptr(),
                1,
                outs.as_mut_ptr(),
                1,
                ptr::null_mut(),
                ptr::null_mut(),
                Some(note),
                ptr::null_mut(),
            )
        };
        assert_eq!(code(rc), 0);
        (ins, outs, expect)
    };
    let wait = |expect: u32| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while ASYNC_STATUS.load(Ordering::SeqCst) == u32::MAX {
            assert!(Instant::now() < deadline, "no notification");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(ASYNC_STATUS.load(Ordering::SeqCst), expect);
    };
    let kept = run(0);
    wait(kept.2);
    assert_eq!(y.read_f32(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(f.counter("QnnSim_memHandleExecutes"), 1);

    // Queued while the worker is paused, deregistered before it runs.
    assert_eq!(f.sim.configure("async_paused", "1"), 0);
    x.write_f32(&[5.0, 6.0, 7.0, 8.0]);
    let kept = run(QNN_GRAPH_ERROR_INVALID_TENSOR);
    assert_eq!(deregister(&f.sim, &[hx, hy]), 0);
    assert_eq!(f.sim.configure("async_paused", "0"), 0);
    wait(kept.2);
    assert_eq!(y.read_f32(), [1.0, 2.0, 3.0, 4.0], "nothing written");
    assert_eq!(f.counter("QnnSim_memStaleUses"), 1);
    assert_eq!(f.counter("QnnSim_memHandleExecutes"), 1);
    f.finish();
}

#[test]
fn ten_thousand_executes_with_registered_buffers_leave_the_counters_at_baseline() {
    let f = fixture();
    let live = f.sim.live();
    let (x, y) = (Shm::new(16), Shm::new(16));
    let hx = register(&f.sim, f.ctx, x.fd, N).unwrap();
    let hy = register(&f.sim, f.ctx, y.fd, N).unwrap();
    for k in 0..10_000 {
        let v = [k as f32, -(k as f32), 0.5 * k as f32, 1.0];
        x.write_f32(&v);
        execute_mem(&f.sim, f.info, f.g, hx, hy, 4).unwrap();
        assert_eq!(y.read_f32(), v, "execute {k}");
    }
    assert_eq!(f.counter("QnnSim_memHandleExecutes"), 10_000);
    assert_eq!(deregister(&f.sim, &[hx, hy]), 0);
    assert_eq!(f.sim.live(), live);
    assert_eq!(f.counter("QnnSim_memLiveRegistrations"), 0);
    assert_eq!(f.counter("QnnSim_memRegistrations"), 2);
    assert_eq!(f.counter("QnnSim_memDeregistrations"), 2);
    assert_eq!(f.counter("QnnSim_memStaleUses"), 0);
    f.finish();
}

/// The fake rpcmem library's counters, as it lays them out.
#[repr(C)]
#[derive(Debug, Default, PartialEq)]
struct RpcmemCounters {
    allocs: u64,
    failed_allocs: u64,
    frees: u64,
    live: u64,
    live_bytes: u64,
    unknown_frees: u64,
    unknown_to_fd: u64,
}

/// `libqnn_fake_rpcmem.so`, built by cargo next to the test (qnn_sim dev-depends on it).
fn fake_rpcmem_path() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let mut dir = exe.parent().map(std::path::Path::to_path_buf);
    for _ in 0..2 {
        let d = dir.expect("a directory");
        let p = d.join("libqnn_fake_rpcmem.so");
        if p.is_file() {
            return p;
        }
        dir = d.parent().map(std::path::Path::to_path_buf);
    }
    panic!("libqnn_fake_rpcmem.so not found near {}", exe.display());
}

#[test]
fn rpcmem_buffers_end_to_end_through_the_fake_library() {
    // SAFETY: our own test library, with trivial initializers.
    let lib = unsafe { libloading::Library::new(fake_rpcmem_path()) }.expect("dlopen");
    // SAFETY: the exports have exactly these types (qnn_sys's rpcmem declarations).
    let (alloc, free, to_fd, init, deinit, counters) = unsafe {
        (
            *lib.get::<RpcMem_AllocFn>(b"rpcmem_alloc").unwrap(),
            *lib.get::<RpcMem_FreeFn>(b"rpcmem_free").unwrap(),
            *lib.get::<RpcMem_ToFdFn>(b"rpcmem_to_fd").unwrap(),
            *lib.get::<RpcMem_InitFn>(b"rpcmem_init").unwrap(),
            *lib.get::<RpcMem_InitFn>(b"rpcmem_deinit").unwrap(),
            *lib.get::<unsafe extern "C" fn(*mut RpcmemCounters)>(b"fake_rpcmem_counters")
                .unwrap(),
        )
    };
    let read = || {
        let mut c = RpcmemCounters::default();
        // SAFETY: a writable counters struct.
        unsafe { counters(&mut c) };
        c
    };
    let f = fixture();
    // SAFETY: rpcmem's contract: pointers from rpcmem_alloc, used within their size, freed
    // once (and then not used).
    unsafe {
        init();
        let x = alloc(RPCMEM_HEAP_ID_SYSTEM, RPCMEM_DEFAULT_FLAGS, 16);
        let y = alloc(RPCMEM_HEAP_ID_SYSTEM, RPCMEM_DEFAULT_FLAGS, 16);
        assert!(!x.is_null() && !y.is_null());
        assert!(alloc(RPCMEM_HEAP_ID_SYSTEM, RPCMEM_DEFAULT_FLAGS, 0).is_null());
        let (fx, fy) = (to_fd(x), to_fd(y));
        assert!(fx >= 0 && fy >= 0 && fx != fy);
        let bytes = f32_bytes(&[0.25, 0.5, 0.75, 1.0]);
        ptr::copy_nonoverlapping(bytes.as_ptr(), x.cast::<u8>(), 16);
        let hx = register(&f.sim, f.ctx, fx, N).unwrap();
        let hy = register(&f.sim, f.ctx, fy, N).unwrap();
        execute_mem(&f.sim, f.info, f.g, hx, hy, 4).unwrap();
        let got = f32_from(std::slice::from_raw_parts(y.cast::<u8>(), 16));
        assert_eq!(got, [0.25, 0.5, 0.75, 1.0], "in the rpcmem buffer");
        assert_eq!(deregister(&f.sim, &[hx, hy]), 0);
        assert_eq!(
            read(),
            RpcmemCounters {
                allocs: 2,
                failed_allocs: 1,
                live: 2,
                live_bytes: 32,
                ..Default::default()
            }
        );
        free(x);
        free(y);
        // Unknown pointers: answered -1 / ignored, and counted.
        assert_eq!(to_fd(x), -1);
        free(x);
        deinit();
    }
    assert_eq!(
        read(),
        RpcmemCounters {
            allocs: 2,
            failed_allocs: 1,
            frees: 2,
            live: 0,
            live_bytes: 0,
            unknown_frees: 1,
            unknown_to_fd: 1,
        },
        "nothing leaked"
    );
    assert_eq!(f.counter("QnnSim_memHandleExecutes"), 1);
    f.finish();
}

#[test]
fn null_entries_can_hide_the_qnnmem_entries() {
    let sim = Sim::load();
    assert!(sim.core().memRegister.is_some() && sim.core().memDeRegister.is_some());
    assert_eq!(
        sim.configure("null_entries", "memRegister,memDeRegister"),
        0
    );
    assert!(sim.core().memRegister.is_none() && sim.core().memDeRegister.is_none());
    assert_eq!(sim.configure("null_entries", ""), 0);
    assert!(sim.core().memRegister.is_some());
}
