//! The QNN C ABI, declared by hand.
//!
//! Only what the runtime calls (and what qnn_sim implements) is declared. Layouts follow the
//! QAIRT 2.43 headers (core API 2.32, System API 1.7; the public copy used is `include/QNN/` of
//! github.com/chuzcjoe/qnnx at commit 4d4c8dc); `layout.rs` asserts every size, alignment and
//! field offset at compile time and lists them in [`DECLARED`], which the maintainer tool `qnn/sdk_layout/`
//! compares with bindgen's view of real headers (see `qnn/README.md`, "ABI layout check").
//!
//! Conventions:
//! - every C enum is a `u32` (libraries may return values newer than our lists);
//! - handles are `*mut c_void`;
//! - function-table entries are `Option<unsafe extern "C" fn ...>` because a backend may leave
//!   any entry NULL; entries the runtime never calls are [`OpaqueFn`].

#![allow(non_camel_case_types, non_snake_case)]

mod consts;
mod context;
mod device;
mod interface;
pub mod layout;
mod mem;
mod perf;
mod profile;
mod rpcmem;
mod system;
mod tensor;

pub use consts::*;
pub use context::*;
pub use device::*;
pub use interface::*;
pub use layout::{DECLARED, FieldLayout, StructLayout};
pub use mem::*;
pub use perf::*;
pub use profile::*;
pub use rpcmem::*;
pub use system::*;
pub use tensor::*;

use std::ffi::c_void;

/// `Qnn_ErrorHandle_t`: 0 is success; the error code is the low 16 bits.
pub type Qnn_ErrorHandle_t = u64;
pub type Qnn_LogHandle_t = *mut c_void;
pub type Qnn_BackendHandle_t = *mut c_void;
pub type Qnn_DeviceHandle_t = *mut c_void;
pub type Qnn_ContextHandle_t = *mut c_void;
pub type Qnn_GraphHandle_t = *mut c_void;
pub type Qnn_ProfileHandle_t = *mut c_void;
pub type Qnn_SignalHandle_t = *mut c_void;
pub type Qnn_MemHandle_t = *mut c_void;
pub type QnnSystemContext_Handle_t = *mut c_void;

/// A table entry this crate never calls: only its pointer size matters.
pub type OpaqueFn = Option<unsafe extern "C" fn()>;

/// `Qnn_Version_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Qnn_Version_t {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// `Qnn_ApiVersion_t`: the core API and the backend's own API version.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Qnn_ApiVersion_t {
    pub coreApiVersion: Qnn_Version_t,
    pub backendApiVersion: Qnn_Version_t,
}

/// A QNN call's result, read once: 0 is success, anything else a failure whose code is the low
/// 16 bits. Every call site wraps the raw `Qnn_ErrorHandle_t` in one and turns it into a
/// `Result`, so no status is compared with 0 by hand or forgotten.
#[must_use = "a QNN call's status says whether it failed"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status(pub Qnn_ErrorHandle_t);

impl Status {
    pub const fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// The error code QNN compares on.
    pub const fn code(self) -> u32 {
        error_code(self.0)
    }

    /// `Ok(())`, or `Err` with what `error` makes of the failed handle.
    pub fn ok_or_else<E>(self, error: impl FnOnce(Qnn_ErrorHandle_t) -> E) -> Result<(), E> {
        if self.is_ok() {
            Ok(())
        } else {
            Err(error(self.0))
        }
    }
}

/// Extracts the error code QNN compares on (the low 16 bits of a handle).
pub const fn error_code(handle: Qnn_ErrorHandle_t) -> u32 {
    (handle & 0xFFFF) as u32
}
