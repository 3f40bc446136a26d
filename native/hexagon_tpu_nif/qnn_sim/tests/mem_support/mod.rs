//! What the shared-buffer tests share (tests/mem.rs, tests/fake_rpcmem.rs): ION descriptors,
//! `memRegister` / `memDeRegister` through a fresh library copy, an execute over registered
//! handles, and a context with one identity graph over f32[N].
#![allow(dead_code)]

use std::ffi::{c_int, c_void};
use std::ptr;

use qnn_sys::*;

use crate::common::*;
use crate::models::*;

/// An ION descriptor of `fd` with an f32 shape (the dims live as long as `dims`).
pub fn ion(fd: c_int, dims: &mut [u32], mem_type: u32) -> Qnn_MemDescriptor_t {
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

pub fn register_all(
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

pub fn register(sim: &Sim, ctx: *mut c_void, fd: c_int, n: u32) -> Result<Qnn_MemHandle_t, u32> {
    let mut dims = [n];
    match register_all(sim, ctx, &[ion(fd, &mut dims, QNN_MEM_TYPE_ION)]) {
        (0, hs) => Ok(hs[0]),
        (e, _) => Err(e),
    }
}

pub fn deregister(sim: &Sim, hs: &[Qnn_MemHandle_t]) -> u32 {
    // SAFETY: `hs` readable for its length (any handle values).
    code(unsafe { sim.core().memDeRegister.unwrap()(hs.as_ptr(), hs.len() as u32) })
}

/// Executes `g` (identity over f32[n]) with MEMHANDLE tensors; the client buffers the helper
/// made are returned too (they must stay untouched).
pub fn execute_mem(
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

pub struct Fixture {
    pub sim: Sim,
    pub session: Session,
    pub ctx: *mut c_void,
    pub g: *mut c_void,
    pub system: *mut c_void,
    pub info: *const QnnSystemContext_BinaryInfo_t,
}

pub const N: u32 = 4;

pub fn fixture() -> Fixture {
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
    pub fn counter(&self, name: &str) -> u64 {
        self.sim.counter_named(name)
    }

    pub fn finish(self) {
        assert_eq!(self.sim.free_system(self.system), 0);
        assert_eq!(self.sim.free_context(self.ctx), 0);
        assert_eq!(self.counter("QnnSim_memLiveRegistrations"), 0);
        self.sim.close(self.session);
        assert_eq!(self.sim.live(), 0);
    }
}
