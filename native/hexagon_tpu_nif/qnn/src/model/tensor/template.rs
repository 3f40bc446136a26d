//! The C tensor descriptions an execute hands QNN, built once per graph from validated metadata.

use std::ffi::CString;

use crate::sys::{self, Qnn_Tensor_t};

/// Owned copies of everything a `Qnn_Tensor_t` points to, so that execute can hand QNN tensor
/// descriptions after the System context that reported them is freed.
#[derive(Debug)]
pub(crate) struct TensorTemplate {
    pub(super) version: u32,
    pub(super) id: u32,
    pub(super) name: CString,
    pub(super) type_: u32,
    pub(super) data_type: u32,
    pub(super) dims: Vec<u32>,
    pub(super) sparse: sys::Qnn_SparseParams_t,
    pub(super) quant: TemplateQuant,
}

/// The quantization parameters of a template, in the C layout QNN reads.
#[derive(Debug)]
pub(super) enum TemplateQuant {
    Undefined,
    ScaleOffset(sys::Qnn_ScaleOffset_t),
    AxisScaleOffset {
        axis: i32,
        values: Vec<sys::Qnn_ScaleOffset_t>,
    },
    BwScaleOffset(sys::Qnn_BwScaleOffset_t),
    BwAxisScaleOffset {
        bitwidth: u32,
        axis: i32,
        scales: Vec<f32>,
        offsets: Vec<i32>,
    },
}

impl TensorTemplate {
    /// A `Qnn_Tensor_t` describing this tensor with a client buffer, pointing into `self`.
    pub(crate) fn to_raw(&self, data: *mut u8, size: u32) -> Qnn_Tensor_t {
        let memory = sys::Qnn_TensorMemory_t {
            clientBuf: sys::Qnn_ClientBuffer_t {
                data: data.cast(),
                dataSize: size,
            },
        };
        self.to_raw_in(sys::QNN_TENSORMEMTYPE_RAW, memory)
    }

    /// A `Qnn_Tensor_t` describing this tensor in the registered shared buffer `handle`
    /// (`QNN_TENSORMEMTYPE_MEMHANDLE`), pointing into `self`.
    pub(crate) fn to_raw_registered(&self, handle: sys::Qnn_MemHandle_t) -> Qnn_Tensor_t {
        let memory = sys::Qnn_TensorMemory_t { memHandle: handle };
        self.to_raw_in(sys::QNN_TENSORMEMTYPE_MEMHANDLE, memory)
    }

    /// The dimensions and data type, as a shared buffer's registration describes the tensor.
    pub(crate) fn shape(&self) -> (&[u32], u32) {
        (&self.dims, self.data_type)
    }

    fn to_raw_in(&self, mem_type: u32, memory: sys::Qnn_TensorMemory_t) -> Qnn_Tensor_t {
        let (definition, encoding_kind, encoding) = self.raw_quant();
        let v1 = sys::Qnn_TensorV1_t {
            id: self.id,
            name: self.name.as_ptr(),
            type_: self.type_,
            dataFormat: sys::QNN_TENSOR_DATA_FORMAT_DENSE,
            dataType: self.data_type,
            quantizeParams: sys::Qnn_QuantizeParams_t {
                encodingDefinition: definition,
                quantizationEncoding: encoding_kind,
                encoding,
            },
            rank: self.dims.len() as u32,
            dimensions: if self.dims.is_empty() {
                std::ptr::null_mut()
            } else {
                // QNN declares the field mutable but never writes through it for graph I/O.
                self.dims.as_ptr().cast_mut()
            },
            memType: mem_type,
            memory,
        };
        let tensor = if self.version == sys::QNN_TENSOR_VERSION_2 {
            sys::Qnn_TensorUnion_t {
                v2: sys::Qnn_TensorV2_t {
                    id: v1.id,
                    name: v1.name,
                    type_: v1.type_,
                    dataFormat: v1.dataFormat,
                    dataType: v1.dataType,
                    quantizeParams: v1.quantizeParams,
                    rank: v1.rank,
                    dimensions: v1.dimensions,
                    memType: v1.memType,
                    memory: v1.memory,
                    isDynamicDimensions: std::ptr::null_mut(),
                    sparseParams: self.sparse,
                    isProduced: 0,
                },
            }
        } else {
            // Zero the whole union first so the bytes past a V1 struct are defined.
            let mut u = sys::Qnn_TensorUnion_t { v2: zeroed_v2() };
            u.v1 = v1;
            u
        };
        Qnn_Tensor_t {
            version: self.version,
            tensor,
        }
    }

    fn raw_quant(&self) -> (u32, u32, sys::Qnn_QuantizeParamsUnion_t) {
        let empty = zeroed_encoding();
        let defined = sys::QNN_DEFINITION_DEFINED;
        match &self.quant {
            TemplateQuant::Undefined => (
                sys::QNN_DEFINITION_UNDEFINED,
                sys::QNN_QUANTIZATION_ENCODING_UNDEFINED,
                empty,
            ),
            TemplateQuant::ScaleOffset(so) => {
                let mut u = empty;
                u.scaleOffsetEncoding = *so;
                (defined, sys::QNN_QUANTIZATION_ENCODING_SCALE_OFFSET, u)
            }
            TemplateQuant::AxisScaleOffset { axis, values } => {
                let mut u = empty;
                u.axisScaleOffsetEncoding = sys::Qnn_AxisScaleOffset_t {
                    axis: *axis,
                    numScaleOffsets: values.len() as u32,
                    scaleOffset: values.as_ptr(),
                };
                (defined, sys::QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET, u)
            }
            TemplateQuant::BwScaleOffset(bw) => {
                let mut u = empty;
                u.bwScaleOffsetEncoding = *bw;
                (defined, sys::QNN_QUANTIZATION_ENCODING_BW_SCALE_OFFSET, u)
            }
            TemplateQuant::BwAxisScaleOffset {
                bitwidth,
                axis,
                scales,
                offsets,
            } => {
                let mut u = empty;
                u.bwAxisScaleOffsetEncoding = sys::Qnn_BwAxisScaleOffset_t {
                    bitwidth: *bitwidth,
                    axis: *axis,
                    numElements: scales.len() as u32,
                    scales: scales.as_ptr(),
                    offsets: offsets.as_ptr(),
                };
                (
                    defined,
                    sys::QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET,
                    u,
                )
            }
        }
    }
}

/// A quantization encoding of zeros and null pointers (written as `bwAxisScaleOffsetEncoding`),
/// the start of every encoding `raw_quant` fills in.
fn zeroed_encoding() -> sys::Qnn_QuantizeParamsUnion_t {
    sys::Qnn_QuantizeParamsUnion_t {
        bwAxisScaleOffsetEncoding: sys::Qnn_BwAxisScaleOffset_t {
            bitwidth: 0,
            axis: 0,
            numElements: 0,
            scales: std::ptr::null(),
            offsets: std::ptr::null(),
        },
    }
}

fn zeroed_v2() -> sys::Qnn_TensorV2_t {
    sys::Qnn_TensorV2_t {
        id: 0,
        name: std::ptr::null(),
        type_: 0,
        dataFormat: 0,
        dataType: 0,
        quantizeParams: sys::Qnn_QuantizeParams_t {
            encodingDefinition: 0,
            quantizationEncoding: 0,
            encoding: zeroed_encoding(),
        },
        rank: 0,
        dimensions: std::ptr::null_mut(),
        memType: 0,
        memory: sys::Qnn_TensorMemory_t {
            clientBuf: sys::Qnn_ClientBuffer_t {
                data: std::ptr::null_mut(),
                dataSize: 0,
            },
        },
        isDynamicDimensions: std::ptr::null_mut(),
        sparseParams: sys::Qnn_SparseParams_t::default(),
        isProduced: 0,
    }
}
