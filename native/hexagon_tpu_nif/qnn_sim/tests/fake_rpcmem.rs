//! The fake rpcmem library (`qnn_fake_rpcmem`) end to end with a fresh qnn_sim copy: its
//! buffers registered (ION, by their fd), read and written in place by an execute, and its
//! counters back at zero. A file of its own, so a process of its own: with this second Rust
//! cdylib loaded while other tests' threads dlopened and dlclosed qnn_sim copies, a new copy's
//! first thread-local access faulted (dynamic TLS, glibc 2.36 on aarch64 under qemu).

mod common;
mod mem_support;
mod models;

use std::ptr;

use mem_support::*;
use models::*;
use qnn_fake_rpcmem::{FakeRpcmemCounters, built_library};
use qnn_sys::*;

#[test]
fn rpcmem_buffers_end_to_end_through_the_fake_library() {
    // SAFETY: our own test library, with trivial initializers.
    let lib = unsafe { libloading::Library::new(built_library()) }.expect("dlopen");
    // SAFETY: the exports have exactly these types (qnn_sys's rpcmem declarations).
    let (alloc, free, to_fd, init, deinit, counters) = unsafe {
        (
            *lib.get::<RpcMem_AllocFn>(b"rpcmem_alloc").unwrap(),
            *lib.get::<RpcMem_FreeFn>(b"rpcmem_free").unwrap(),
            *lib.get::<RpcMem_ToFdFn>(b"rpcmem_to_fd").unwrap(),
            *lib.get::<RpcMem_InitFn>(b"rpcmem_init").unwrap(),
            *lib.get::<RpcMem_InitFn>(b"rpcmem_deinit").unwrap(),
            *lib.get::<unsafe extern "C" fn(*mut FakeRpcmemCounters)>(b"fake_rpcmem_counters")
                .unwrap(),
        )
    };
    let read = || {
        let mut c = FakeRpcmemCounters::default();
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
            FakeRpcmemCounters {
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
        FakeRpcmemCounters {
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
