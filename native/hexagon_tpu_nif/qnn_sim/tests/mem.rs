//! Shared buffers (`QnnMem_register` / `QnnMem_deRegister`, `QNN_TENSORMEMTYPE_MEMHANDLE`)
//! through a fresh library copy: a registered buffer is read and written in place, the
//! QnnMem error codes, stale handles answered (never a crash), the emulator's NOT_SUPPORTED
//! knob, contexts freed with live registrations, 10,000 executes with counters back at their
//! baseline. The fake rpcmem library's buffers end to end are in tests/fake_rpcmem.rs.

mod common;
mod mem_support;
mod models;

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::*;
use mem_support::*;
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
