//! Context-binary metadata returned by QnnSystem (`QnnSystemContext_*`).

use std::ffi::{c_char, c_void};

use super::{Qnn_Tensor_t, Qnn_Version_t};

/// `QnnSystemContext_BinaryInfoV1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemContext_BinaryInfoV1_t {
    pub backendId: u32,
    pub buildId: *const c_char,
    pub coreApiVersion: Qnn_Version_t,
    pub backendApiVersion: Qnn_Version_t,
    pub socVersion: *const c_char,
    pub hwInfoBlobVersion: Qnn_Version_t,
    pub contextBlobVersion: Qnn_Version_t,
    pub hwInfoBlobSize: u32,
    pub hwInfoBlob: *mut c_void,
    pub contextBlobSize: u64,
    pub numContextTensors: u32,
    pub contextTensors: *mut Qnn_Tensor_t,
    pub numGraphs: u32,
    pub graphs: *mut QnnSystemContext_GraphInfo_t,
}

/// `QnnSystemContext_BinaryInfoV2_t`: V1 plus `platformInfo`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemContext_BinaryInfoV2_t {
    pub backendId: u32,
    pub buildId: *const c_char,
    pub coreApiVersion: Qnn_Version_t,
    pub backendApiVersion: Qnn_Version_t,
    pub socVersion: *const c_char,
    pub hwInfoBlobVersion: Qnn_Version_t,
    pub contextBlobVersion: Qnn_Version_t,
    pub hwInfoBlobSize: u32,
    pub hwInfoBlob: *mut c_void,
    pub contextBlobSize: u64,
    pub numContextTensors: u32,
    pub contextTensors: *mut Qnn_Tensor_t,
    pub numGraphs: u32,
    pub graphs: *mut QnnSystemContext_GraphInfo_t,
    pub platformInfo: *mut c_void,
}

/// `QnnSystemContext_BinaryInfoV3_t`: not a superset of V2 (the hw-info fields are gone, so
/// every field after `socVersion` moves).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemContext_BinaryInfoV3_t {
    pub backendId: u32,
    pub buildId: *const c_char,
    pub coreApiVersion: Qnn_Version_t,
    pub backendApiVersion: Qnn_Version_t,
    pub socVersion: *const c_char,
    pub contextBlobVersion: Qnn_Version_t,
    pub contextBlobSize: u64,
    pub numContextTensors: u32,
    pub contextTensors: *mut Qnn_Tensor_t,
    pub numGraphs: u32,
    pub graphs: *mut QnnSystemContext_GraphInfo_t,
    pub platformInfo: *mut c_void,
    pub contextMetadataSize: u32,
    pub contextMetadata: *mut c_void,
    pub socModel: u32,
}

/// The versioned union inside `QnnSystemContext_BinaryInfo_t` (136 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union QnnSystemContext_BinaryInfoUnion_t {
    pub contextBinaryInfoV1: QnnSystemContext_BinaryInfoV1_t,
    pub contextBinaryInfoV2: QnnSystemContext_BinaryInfoV2_t,
    pub contextBinaryInfoV3: QnnSystemContext_BinaryInfoV3_t,
}

/// `QnnSystemContext_BinaryInfo_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemContext_BinaryInfo_t {
    pub version: u32,
    pub info: QnnSystemContext_BinaryInfoUnion_t,
}

/// `QnnSystemContext_GraphInfoV1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemContext_GraphInfoV1_t {
    pub graphName: *const c_char,
    pub numGraphInputs: u32,
    pub graphInputs: *mut Qnn_Tensor_t,
    pub numGraphOutputs: u32,
    pub graphOutputs: *mut Qnn_Tensor_t,
}

/// `QnnSystemContext_GraphInfoV2_t`: V1 plus updateable tensors.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemContext_GraphInfoV2_t {
    pub graphName: *const c_char,
    pub numGraphInputs: u32,
    pub graphInputs: *mut Qnn_Tensor_t,
    pub numGraphOutputs: u32,
    pub graphOutputs: *mut Qnn_Tensor_t,
    pub numUpdateableTensors: u32,
    pub updateableTensors: *mut Qnn_Tensor_t,
}

/// `QnnSystemContext_GraphInfoV3_t`: V2 plus graph blob info and the op index range.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemContext_GraphInfoV3_t {
    pub graphName: *const c_char,
    pub numGraphInputs: u32,
    pub graphInputs: *mut Qnn_Tensor_t,
    pub numGraphOutputs: u32,
    pub graphOutputs: *mut Qnn_Tensor_t,
    pub numUpdateableTensors: u32,
    pub updateableTensors: *mut Qnn_Tensor_t,
    pub graphBlobInfoSize: u32,
    pub graphBlobInfo: *mut c_void,
    pub startOpIndex: u32,
    pub endOpIndex: u32,
}

/// The versioned union inside `QnnSystemContext_GraphInfo_t` (80 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union QnnSystemContext_GraphInfoUnion_t {
    pub graphInfoV1: QnnSystemContext_GraphInfoV1_t,
    pub graphInfoV2: QnnSystemContext_GraphInfoV2_t,
    pub graphInfoV3: QnnSystemContext_GraphInfoV3_t,
}

/// `QnnSystemContext_GraphInfo_t`: 88 bytes since System API 1.4 (V3 in the union), 64 before.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemContext_GraphInfo_t {
    pub version: u32,
    pub info: QnnSystemContext_GraphInfoUnion_t,
}

/// Array stride of `QnnSystemContext_GraphInfo_t` as laid out by a System library of the given
/// minor. 1.1 (SDK 2.25) is measured at 64 bytes and 1.4 onwards at 88; the minors in between
/// were never measured, so they are refused rather than guessed.
pub const fn graph_info_stride(system_minor: u32) -> Option<usize> {
    match system_minor {
        1 => Some(64),
        2 | 3 => None,
        0 => None,
        _ => Some(88),
    }
}
