//! `Qnn_Tensor_t` and its quantization parameters.

use std::ffi::{c_char, c_void};

use super::Qnn_MemHandle_t;

/// `Qnn_ScaleOffset_t`: per-tensor encoding, `float = (q + offset) * scale`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Qnn_ScaleOffset_t {
    pub scale: f32,
    pub offset: i32,
}

/// `Qnn_AxisScaleOffset_t`: one scale/offset per index along `axis`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Qnn_AxisScaleOffset_t {
    pub axis: i32,
    pub numScaleOffsets: u32,
    pub scaleOffset: *const Qnn_ScaleOffset_t,
}

/// `Qnn_BwScaleOffset_t`: per-tensor with an explicit bit width.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Qnn_BwScaleOffset_t {
    pub bitwidth: u32,
    pub scale: f32,
    pub offset: i32,
}

/// `Qnn_BwAxisScaleOffset_t`: per-axis with an explicit bit width; `offsets` may be NULL.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Qnn_BwAxisScaleOffset_t {
    pub bitwidth: u32,
    pub axis: i32,
    pub numElements: u32,
    pub scales: *const f32,
    pub offsets: *const i32,
}

/// `Qnn_BlockEncoding_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Qnn_BlockEncoding_t {
    pub blockSize: *const u32,
    pub scaleOffset: *const Qnn_ScaleOffset_t,
}

/// `Qnn_FloatBlockEncoding_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Qnn_FloatBlockEncoding_t {
    pub blockSize: *const u32,
    pub floatScaleOffset: *const c_void,
}

/// `Qnn_BwFloatBlockEncoding_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Qnn_BwFloatBlockEncoding_t {
    pub bitwidth: u32,
    pub blockSize: *const u32,
    pub floatScaleOffset: *const c_void,
}

/// The anonymous union inside `Qnn_QuantizeParams_t` (32 bytes). Encodings held by pointer
/// (blockwise expansion, vector, the mapped variants) share `pointer`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union Qnn_QuantizeParamsUnion_t {
    pub scaleOffsetEncoding: Qnn_ScaleOffset_t,
    pub axisScaleOffsetEncoding: Qnn_AxisScaleOffset_t,
    pub bwScaleOffsetEncoding: Qnn_BwScaleOffset_t,
    pub bwAxisScaleOffsetEncoding: Qnn_BwAxisScaleOffset_t,
    pub blockEncoding: Qnn_BlockEncoding_t,
    pub floatBlockEncoding: Qnn_FloatBlockEncoding_t,
    pub bwFloatBlockEncoding: Qnn_BwFloatBlockEncoding_t,
    pub pointer: *const c_void,
}

/// `Qnn_QuantizeParams_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Qnn_QuantizeParams_t {
    pub encodingDefinition: u32,
    pub quantizationEncoding: u32,
    pub encoding: Qnn_QuantizeParamsUnion_t,
}

/// `Qnn_ClientBuffer_t`: a caller-owned buffer; `dataSize` is 32-bit.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Qnn_ClientBuffer_t {
    pub data: *mut c_void,
    pub dataSize: u32,
}

/// Where a tensor's data lives (selected by `memType`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union Qnn_TensorMemory_t {
    pub clientBuf: Qnn_ClientBuffer_t,
    pub memHandle: Qnn_MemHandle_t,
    pub retrieveRaw: *mut c_void,
}

/// `Qnn_TensorV1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Qnn_TensorV1_t {
    pub id: u32,
    pub name: *const c_char,
    pub type_: u32,
    pub dataFormat: u32,
    pub dataType: u32,
    pub quantizeParams: Qnn_QuantizeParams_t,
    pub rank: u32,
    pub dimensions: *mut u32,
    pub memType: u32,
    pub memory: Qnn_TensorMemory_t,
}

/// `Qnn_SparseLayoutHybridCoo_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Qnn_SparseLayoutHybridCoo_t {
    pub numSpecifiedElements: u32,
    pub numSparseDimensions: u32,
}

/// `Qnn_SparseParams_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Qnn_SparseParams_t {
    pub type_: u32,
    pub hybridCoo: Qnn_SparseLayoutHybridCoo_t,
}

/// `Qnn_TensorV2_t`: V1 plus three trailing fields.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Qnn_TensorV2_t {
    pub id: u32,
    pub name: *const c_char,
    pub type_: u32,
    pub dataFormat: u32,
    pub dataType: u32,
    pub quantizeParams: Qnn_QuantizeParams_t,
    pub rank: u32,
    pub dimensions: *mut u32,
    pub memType: u32,
    pub memory: Qnn_TensorMemory_t,
    pub isDynamicDimensions: *mut u8,
    pub sparseParams: Qnn_SparseParams_t,
    pub isProduced: u8,
}

/// The versioned union inside `Qnn_Tensor_t` (136 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union Qnn_TensorUnion_t {
    pub v1: Qnn_TensorV1_t,
    pub v2: Qnn_TensorV2_t,
}

/// `Qnn_Tensor_t`: 144 bytes whatever the version, so arrays have a 144-byte stride.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Qnn_Tensor_t {
    pub version: u32,
    pub tensor: Qnn_TensorUnion_t,
}
