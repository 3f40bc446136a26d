//! Memory registration (`QnnMem.h`): descriptors of memory the client allocated (rpcmem, on the
//! device: an ION file descriptor), registered with a context so a tensor can name it by
//! handle (`memType = QNN_TENSORMEMTYPE_MEMHANDLE`) and FastRPC does not copy it.

use std::ffi::{c_char, c_void};

use super::{Qnn_ContextHandle_t, Qnn_ErrorHandle_t, Qnn_MemHandle_t};

/// `QNN_MEM_INVALID_FD`.
pub const QNN_MEM_INVALID_FD: i32 = -1;

// Qnn_MemType_t
pub const QNN_MEM_TYPE_ION: u32 = 1;
pub const QNN_MEM_TYPE_CUSTOM: u32 = 2;
pub const QNN_MEM_TYPE_DMA_BUF: u32 = 3;

/// `Qnn_MemShape_t`: the registered memory's shape (its byte size is the product of the
/// dimensions times the data type's size).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Qnn_MemShape_t {
    pub numDim: u32,
    /// `numDim` dimensions.
    pub dimSize: *mut u32,
    /// A backend's extra configuration (e.g. a UBWC format); may be NULL.
    pub shapeConfig: *const c_char,
}

/// `Qnn_MemIonInfo_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Qnn_MemIonInfo_t {
    /// The ION (rpcmem) buffer's file descriptor.
    pub fd: i32,
}

/// `Qnn_MemDmaBufInfo_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Qnn_MemDmaBufInfo_t {
    pub fd: i32,
    /// The client's mapping of `fd`.
    pub data: *mut c_void,
}

/// The anonymous union of `Qnn_MemDescriptor_t`; which member is meant follows `memType`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union Qnn_MemDescriptorUnion_t {
    /// [`QNN_MEM_TYPE_ION`].
    pub ionInfo: Qnn_MemIonInfo_t,
    /// [`QNN_MEM_TYPE_CUSTOM`]: `Qnn_MemInfoCustom_t`, a backend's own object.
    pub customInfo: *mut c_void,
    /// [`QNN_MEM_TYPE_DMA_BUF`].
    pub dmaBufInfo: Qnn_MemDmaBufInfo_t,
}

/// `Qnn_MemDescriptor_t`: one piece of memory to register.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Qnn_MemDescriptor_t {
    pub memShape: Qnn_MemShape_t,
    /// `Qnn_DataType_t`.
    pub dataType: u32,
    /// `Qnn_MemType_t`: [`QNN_MEM_TYPE_ION`], [`QNN_MEM_TYPE_CUSTOM`], [`QNN_MEM_TYPE_DMA_BUF`].
    pub memType: u32,
    pub info: Qnn_MemDescriptorUnion_t,
}

/// `QnnMem_register`: on success `memHandles[n]` is the handle of `memDescriptors[n]`; on
/// failure nothing is registered and the handles stay NULL.
pub type QnnMem_RegisterFn = unsafe extern "C" fn(
    context: Qnn_ContextHandle_t,
    memDescriptors: *const Qnn_MemDescriptor_t,
    numDescriptors: u32,
    memHandles: *mut Qnn_MemHandle_t,
) -> Qnn_ErrorHandle_t;

/// `QnnMem_deRegister`: on failure every valid handle in the array is still deregistered.
pub type QnnMem_DeRegisterFn =
    unsafe extern "C" fn(memHandles: *const Qnn_MemHandle_t, numHandles: u32) -> Qnn_ErrorHandle_t;
