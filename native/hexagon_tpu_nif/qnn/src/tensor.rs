//! Tensor metadata: what QnnSystem reports about a graph's inputs and outputs, validated.

use std::ffi::{CString, c_char};

use crate::error::{Error, Result};
use crate::sys::{self, Qnn_Tensor_t};

/// Highest rank accepted from a library (QNN's HTP tensors go up to 5-6; 8 leaves room).
pub const MAX_RANK: u32 = 8;
/// Longest tensor or graph name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 4096;

/// Element types a QNN tensor can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float16,
    BFloat16,
    Float32,
    Float64,
    SFixed4,
    SFixed8,
    SFixed16,
    SFixed32,
    UFixed4,
    UFixed8,
    UFixed16,
    UFixed32,
    Bool8,
}

/// The class of an Nx type: `{:u, _}`, `{:s, _}`, `{:f, _}` or `{:bf, _}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NxKind {
    U,
    S,
    F,
    BF,
}

impl DataType {
    /// Every data type, for tables and tests.
    pub const ALL: [DataType; 21] = [
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::UInt64,
        DataType::Float16,
        DataType::BFloat16,
        DataType::Float32,
        DataType::Float64,
        DataType::SFixed4,
        DataType::SFixed8,
        DataType::SFixed16,
        DataType::SFixed32,
        DataType::UFixed4,
        DataType::UFixed8,
        DataType::UFixed16,
        DataType::UFixed32,
        DataType::Bool8,
    ];

    /// Maps a `Qnn_DataType_t` value; `None` for unknown values (and strings).
    pub fn from_raw(raw: u32) -> Option<Self> {
        DataType::ALL.into_iter().find(|t| t.raw() == raw)
    }

    /// The `Qnn_DataType_t` value.
    pub fn raw(self) -> u32 {
        use DataType::*;
        match self {
            Int8 => sys::QNN_DATATYPE_INT_8,
            Int16 => sys::QNN_DATATYPE_INT_16,
            Int32 => sys::QNN_DATATYPE_INT_32,
            Int64 => sys::QNN_DATATYPE_INT_64,
            UInt8 => sys::QNN_DATATYPE_UINT_8,
            UInt16 => sys::QNN_DATATYPE_UINT_16,
            UInt32 => sys::QNN_DATATYPE_UINT_32,
            UInt64 => sys::QNN_DATATYPE_UINT_64,
            Float16 => sys::QNN_DATATYPE_FLOAT_16,
            BFloat16 => sys::QNN_DATATYPE_BFLOAT_16,
            Float32 => sys::QNN_DATATYPE_FLOAT_32,
            Float64 => sys::QNN_DATATYPE_FLOAT_64,
            SFixed4 => sys::QNN_DATATYPE_SFIXED_POINT_4,
            SFixed8 => sys::QNN_DATATYPE_SFIXED_POINT_8,
            SFixed16 => sys::QNN_DATATYPE_SFIXED_POINT_16,
            SFixed32 => sys::QNN_DATATYPE_SFIXED_POINT_32,
            UFixed4 => sys::QNN_DATATYPE_UFIXED_POINT_4,
            UFixed8 => sys::QNN_DATATYPE_UFIXED_POINT_8,
            UFixed16 => sys::QNN_DATATYPE_UFIXED_POINT_16,
            UFixed32 => sys::QNN_DATATYPE_UFIXED_POINT_32,
            Bool8 => sys::QNN_DATATYPE_BOOL_8,
        }
    }

    /// A lower-case name following the QNN header (`ufixed_point_8`, `float_32`, ...).
    pub fn name(self) -> &'static str {
        use DataType::*;
        match self {
            Int8 => "int_8",
            Int16 => "int_16",
            Int32 => "int_32",
            Int64 => "int_64",
            UInt8 => "uint_8",
            UInt16 => "uint_16",
            UInt32 => "uint_32",
            UInt64 => "uint_64",
            Float16 => "float_16",
            BFloat16 => "bfloat_16",
            Float32 => "float_32",
            Float64 => "float_64",
            SFixed4 => "sfixed_point_4",
            SFixed8 => "sfixed_point_8",
            SFixed16 => "sfixed_point_16",
            SFixed32 => "sfixed_point_32",
            UFixed4 => "ufixed_point_4",
            UFixed8 => "ufixed_point_8",
            UFixed16 => "ufixed_point_16",
            UFixed32 => "ufixed_point_32",
            Bool8 => "bool_8",
        }
    }

    /// Bits per element.
    pub fn bits(self) -> u32 {
        use DataType::*;
        match self {
            SFixed4 | UFixed4 => 4,
            Int8 | UInt8 | SFixed8 | UFixed8 | Bool8 => 8,
            Int16 | UInt16 | Float16 | BFloat16 | SFixed16 | UFixed16 => 16,
            Int32 | UInt32 | Float32 | SFixed32 | UFixed32 => 32,
            Int64 | UInt64 | Float64 => 64,
        }
    }

    /// Whether values are signed (two's complement integers, fixed point, or floats).
    pub fn is_signed(self) -> bool {
        use DataType::*;
        matches!(
            self,
            Int8 | Int16
                | Int32
                | Int64
                | SFixed4
                | SFixed8
                | SFixed16
                | SFixed32
                | Float16
                | BFloat16
                | Float32
                | Float64
        )
    }

    /// Whether QNN calls the type fixed point (it carries quantization parameters).
    pub fn is_fixed_point(self) -> bool {
        use DataType::*;
        matches!(
            self,
            SFixed4 | SFixed8 | SFixed16 | SFixed32 | UFixed4 | UFixed8 | UFixed16 | UFixed32
        )
    }

    /// Bytes needed for `count` elements (4-bit types pack two per byte), `None` on overflow.
    pub fn byte_size(self, count: usize) -> Option<usize> {
        match self.bits() {
            4 => Some(count.div_ceil(2)),
            bits => count.checked_mul(bits as usize / 8),
        }
    }

    /// The Nx type holding the raw values, `None` for the packed 4-bit types.
    pub fn nx_type(self) -> Option<(NxKind, u32)> {
        use DataType::*;
        Some(match self {
            SFixed4 | UFixed4 => return None,
            Float16 | Float32 | Float64 => (NxKind::F, self.bits()),
            BFloat16 => (NxKind::BF, 16),
            Bool8 => (NxKind::U, 8),
            t if t.is_signed() => (NxKind::S, t.bits()),
            t => (NxKind::U, t.bits()),
        })
    }
}

/// How a tensor's stored integers map to real values: `real = (q + offset) * scale`, so the
/// conventional zero point is `-offset`.
#[derive(Clone, Debug, PartialEq)]
pub enum Quantization {
    /// Not quantized (floats, plain integers, booleans).
    None,
    /// One scale and offset for the whole tensor; `bitwidth` when narrower than the container.
    PerTensor {
        scale: f32,
        offset: i32,
        bitwidth: Option<u32>,
    },
    /// One scale and offset per index along `axis`.
    PerAxis {
        axis: u32,
        scales: Vec<f32>,
        offsets: Vec<i32>,
        bitwidth: Option<u32>,
    },
    /// An encoding this runtime describes but does not convert (block, LPBQ, vector, ...):
    /// data passes through in the model's own dtype.
    Unsupported { encoding: &'static str },
}

impl Quantization {
    /// The range of stored values a (possibly narrower) bit width allows in `data_type`.
    pub fn value_range(&self, data_type: DataType) -> (i64, i64) {
        let bits = match self {
            Quantization::PerTensor {
                bitwidth: Some(b), ..
            }
            | Quantization::PerAxis {
                bitwidth: Some(b), ..
            } => *b,
            _ => data_type.bits(),
        };
        if data_type.is_signed() {
            (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
        } else {
            (0, (1i64 << bits) - 1)
        }
    }
}

/// A graph input or output as the model describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub id: u32,
    pub data_type: DataType,
    pub dims: Vec<u32>,
    pub quantization: Quantization,
    /// Exact byte size of the tensor's data (fits in `u32`, as QNN's client buffers require).
    pub byte_size: usize,
}

impl TensorInfo {
    /// Number of elements (1 for a scalar).
    pub fn element_count(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }
}

/// Owned copies of everything a `Qnn_Tensor_t` points to, so that execute can hand QNN tensor
/// descriptions after the System context that reported them is freed.
#[derive(Debug)]
pub(crate) struct TensorTemplate {
    version: u32,
    id: u32,
    name: CString,
    type_: u32,
    data_type: u32,
    dims: Vec<u32>,
    sparse: sys::Qnn_SparseParams_t,
    quant: TemplateQuant,
}

#[derive(Debug)]
enum TemplateQuant {
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
            memType: sys::QNN_TENSORMEMTYPE_RAW,
            memory: sys::Qnn_TensorMemory_t {
                clientBuf: sys::Qnn_ClientBuffer_t {
                    data: data.cast(),
                    dataSize: size,
                },
            },
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
        use sys::Qnn_QuantizeParamsUnion_t as U;
        let empty = U {
            bwAxisScaleOffsetEncoding: sys::Qnn_BwAxisScaleOffset_t {
                bitwidth: 0,
                axis: 0,
                numElements: 0,
                scales: std::ptr::null(),
                offsets: std::ptr::null(),
            },
        };
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
            encoding: sys::Qnn_QuantizeParamsUnion_t {
                bwAxisScaleOffsetEncoding: sys::Qnn_BwAxisScaleOffset_t {
                    bitwidth: 0,
                    axis: 0,
                    numElements: 0,
                    scales: std::ptr::null(),
                    offsets: std::ptr::null(),
                },
            },
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

/// Reads a NUL-terminated name of at most `MAX_NAME_LEN` bytes.
///
/// # Safety
/// `ptr` must be NULL or point to readable bytes up to a NUL terminator.
pub(crate) unsafe fn read_name(ptr: *const c_char, what: &str) -> Result<String> {
    if ptr.is_null() {
        return Err(Error::invalid_model(format!("{what} has a NULL name")));
    }
    let mut bytes = Vec::new();
    loop {
        // SAFETY: the caller guarantees the bytes up to the terminator are readable, and the loop
        // stops at the terminator.
        let b = unsafe { *ptr.add(bytes.len()) } as u8;
        if b == 0 {
            break;
        }
        if bytes.len() == MAX_NAME_LEN {
            return Err(Error::invalid_model(format!(
                "{what} has a name longer than {MAX_NAME_LEN} bytes"
            )));
        }
        bytes.push(b);
    }
    String::from_utf8(bytes).map_err(|e| {
        Error::invalid_model(format!(
            "{what} has a name that is not UTF-8: {:?}",
            String::from_utf8_lossy(e.as_bytes())
        ))
    })
}

/// Reads and validates one tensor description reported by a QNN library.
///
/// # Safety
/// `ptr` must point to a readable `Qnn_Tensor_t` (144 bytes) whose pointers are NULL or valid
/// for the counts they come with.
pub(crate) unsafe fn read_tensor(
    ptr: *const Qnn_Tensor_t,
    what: &str,
) -> Result<(TensorInfo, TensorTemplate)> {
    // SAFETY: `ptr` is readable per the contract; `version` is the first field.
    let version = unsafe { std::ptr::addr_of!((*ptr).version).read() };
    if version != sys::QNN_TENSOR_VERSION_1 && version != sys::QNN_TENSOR_VERSION_2 {
        return Err(Error::invalid_model(format!(
            "{what} has unknown tensor version {version}"
        )));
    }
    // SAFETY: V1 is the common prefix of V1 and V2, and the union slot is 136 bytes either way.
    let t = unsafe { std::ptr::addr_of!((*ptr).tensor.v1).read() };
    let sparse = if version == sys::QNN_TENSOR_VERSION_2 {
        // SAFETY: the library reported a V2 tensor, so the V2 fields are initialized.
        unsafe { std::ptr::addr_of!((*ptr).tensor.v2.sparseParams).read() }
    } else {
        sys::Qnn_SparseParams_t::default()
    };
    // SAFETY: the name is NULL or a NUL-terminated string per the contract.
    let name = unsafe { read_name(t.name, what) }?;
    let what = format!("{what} {name:?}");
    let data_type = DataType::from_raw(t.dataType).ok_or_else(|| {
        Error::invalid_model(format!("{what} has unknown data type 0x{:04x}", t.dataType))
    })?;
    if t.dataFormat != sys::QNN_TENSOR_DATA_FORMAT_DENSE {
        return Err(Error::invalid_model(format!(
            "{what} uses data format {}; only dense tensors are supported",
            t.dataFormat
        )));
    }
    if t.rank > MAX_RANK {
        return Err(Error::invalid_model(format!(
            "{what} has rank {}, above the limit of {MAX_RANK}",
            t.rank
        )));
    }
    if t.rank > 0 && t.dimensions.is_null() {
        return Err(Error::invalid_model(format!(
            "{what} has rank {} but no dimensions",
            t.rank
        )));
    }
    let dims: Vec<u32> = (0..t.rank as usize)
        // SAFETY: `dimensions` holds `rank` entries per the contract (non-NULL checked above).
        .map(|i| unsafe { *t.dimensions.add(i) })
        .collect();
    if let Some(i) = dims.iter().position(|&d| d == 0) {
        return Err(Error::invalid_model(format!(
            "{what} has dimension {i} of size 0 (dims {dims:?})"
        )));
    }
    let byte_size = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize))
        .and_then(|count| data_type.byte_size(count))
        .filter(|&size| u32::try_from(size).is_ok())
        .ok_or_else(|| {
            Error::invalid_model(format!(
                "{what} with dims {dims:?} of {} is larger than 4 GiB",
                data_type.name()
            ))
        })?;
    // SAFETY: the quantization pointers are NULL or valid per the contract.
    let (quantization, quant) =
        unsafe { read_quantization(&t.quantizeParams, &dims, data_type, &what) }?;
    let info = TensorInfo {
        name: name.clone(),
        id: t.id,
        data_type,
        dims: dims.clone(),
        quantization,
        byte_size,
    };
    let template = TensorTemplate {
        version,
        id: t.id,
        name: CString::new(name).expect("a name read up to its NUL has no interior NUL"),
        type_: t.type_,
        data_type: t.dataType,
        dims,
        sparse,
        quant,
    };
    Ok((info, template))
}

fn check_scale(scale: f32, what: &str) -> Result<()> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(Error::invalid_model(format!(
            "{what} has quantization scale {scale}; scales must be finite and positive"
        )))
    }
}

fn check_axis(axis: i32, count: u32, dims: &[u32], what: &str) -> Result<u32> {
    let axis_u = u32::try_from(axis)
        .ok()
        .filter(|&a| (a as usize) < dims.len())
        .ok_or_else(|| {
            Error::invalid_model(format!(
                "{what} is quantized along axis {axis}, but has rank {}",
                dims.len()
            ))
        })?;
    if count != dims[axis_u as usize] {
        return Err(Error::invalid_model(format!(
            "{what} has {count} scales for axis {axis} of size {}",
            dims[axis_u as usize]
        )));
    }
    Ok(axis_u)
}

fn check_bitwidth(bitwidth: u32, container_bits: u32, what: &str) -> Result<()> {
    if (1..=container_bits).contains(&bitwidth) {
        Ok(())
    } else {
        Err(Error::invalid_model(format!(
            "{what} has quantization bit width {bitwidth} in a {container_bits}-bit type"
        )))
    }
}

/// # Safety
/// Pointers inside `q` must be NULL or valid for the counts they come with.
unsafe fn read_quantization(
    q: &sys::Qnn_QuantizeParams_t,
    dims: &[u32],
    data_type: DataType,
    what: &str,
) -> Result<(Quantization, TemplateQuant)> {
    if q.encodingDefinition != sys::QNN_DEFINITION_DEFINED {
        return Ok((Quantization::None, TemplateQuant::Undefined));
    }
    match q.quantizationEncoding {
        sys::QNN_QUANTIZATION_ENCODING_SCALE_OFFSET => {
            // SAFETY: the encoding selects this union member.
            let so = unsafe { q.encoding.scaleOffsetEncoding };
            check_scale(so.scale, what)?;
            Ok((
                Quantization::PerTensor {
                    scale: so.scale,
                    offset: so.offset,
                    bitwidth: None,
                },
                TemplateQuant::ScaleOffset(so),
            ))
        }
        sys::QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET => {
            // SAFETY: the encoding selects this union member.
            let a = unsafe { q.encoding.axisScaleOffsetEncoding };
            let axis = check_axis(a.axis, a.numScaleOffsets, dims, what)?;
            if a.scaleOffset.is_null() {
                return Err(Error::invalid_model(format!(
                    "{what} has per-axis quantization with no scales"
                )));
            }
            // SAFETY: `scaleOffset` holds `numScaleOffsets` entries (checked against a dim).
            let values = unsafe {
                std::slice::from_raw_parts(a.scaleOffset, a.numScaleOffsets as usize).to_vec()
            };
            for v in &values {
                check_scale(v.scale, what)?;
            }
            Ok((
                Quantization::PerAxis {
                    axis,
                    scales: values.iter().map(|v| v.scale).collect(),
                    offsets: values.iter().map(|v| v.offset).collect(),
                    bitwidth: None,
                },
                TemplateQuant::AxisScaleOffset {
                    axis: a.axis,
                    values,
                },
            ))
        }
        sys::QNN_QUANTIZATION_ENCODING_BW_SCALE_OFFSET => {
            // SAFETY: the encoding selects this union member.
            let bw = unsafe { q.encoding.bwScaleOffsetEncoding };
            check_scale(bw.scale, what)?;
            check_bitwidth(bw.bitwidth, data_type.bits(), what)?;
            Ok((
                Quantization::PerTensor {
                    scale: bw.scale,
                    offset: bw.offset,
                    bitwidth: Some(bw.bitwidth),
                },
                TemplateQuant::BwScaleOffset(bw),
            ))
        }
        sys::QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET => {
            // SAFETY: the encoding selects this union member.
            let a = unsafe { q.encoding.bwAxisScaleOffsetEncoding };
            check_bitwidth(a.bitwidth, data_type.bits(), what)?;
            let axis = check_axis(a.axis, a.numElements, dims, what)?;
            if a.scales.is_null() {
                return Err(Error::invalid_model(format!(
                    "{what} has per-axis quantization with no scales"
                )));
            }
            let n = a.numElements as usize;
            // SAFETY: `scales` holds `numElements` entries (checked against a dim).
            let scales = unsafe { std::slice::from_raw_parts(a.scales, n).to_vec() };
            for &s in &scales {
                check_scale(s, what)?;
            }
            let offsets = if a.offsets.is_null() {
                vec![0; n]
            } else {
                // SAFETY: a non-NULL `offsets` holds `numElements` entries.
                unsafe { std::slice::from_raw_parts(a.offsets, n).to_vec() }
            };
            Ok((
                Quantization::PerAxis {
                    axis,
                    scales: scales.clone(),
                    offsets: offsets.clone(),
                    bitwidth: Some(a.bitwidth),
                },
                TemplateQuant::BwAxisScaleOffset {
                    bitwidth: a.bitwidth,
                    axis: a.axis,
                    scales,
                    offsets,
                },
            ))
        }
        other => {
            let encoding = match other {
                sys::QNN_QUANTIZATION_ENCODING_BLOCK => "block",
                sys::QNN_QUANTIZATION_ENCODING_BLOCKWISE_EXPANSION => "blockwise_expansion",
                sys::QNN_QUANTIZATION_ENCODING_VECTOR => "vector",
                sys::QNN_QUANTIZATION_ENCODING_FLOAT_BLOCK => "float_block",
                sys::QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET_MAPPED => {
                    "bw_axis_scale_offset_mapped"
                }
                sys::QNN_QUANTIZATION_ENCODING_BW_BLOCK_MAPPED => "bw_block_mapped",
                sys::QNN_QUANTIZATION_ENCODING_BW_BLOCKWISE_EXPANSION_MAPPED => {
                    "bw_blockwise_expansion_mapped"
                }
                sys::QNN_QUANTIZATION_ENCODING_BW_FLOAT_BLOCK => "bw_float_block",
                sys::QNN_QUANTIZATION_ENCODING_UNDEFINED => {
                    return Ok((Quantization::None, TemplateQuant::Undefined));
                }
                _ => {
                    return Err(Error::invalid_model(format!(
                        "{what} has unknown quantization encoding {other}"
                    )));
                }
            };
            // Pointer-based encodings are not deep-copied; execute describes the tensor without
            // them (backends match graph I/O by id).
            Ok((
                Quantization::Unsupported { encoding },
                TemplateQuant::Undefined,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_types_round_trip_and_size() {
        for t in DataType::ALL {
            assert_eq!(DataType::from_raw(t.raw()), Some(t));
        }
        assert_eq!(DataType::from_raw(sys::QNN_DATATYPE_STRING), None);
        assert_eq!(DataType::from_raw(0x0999), None);
        assert_eq!(DataType::UFixed4.byte_size(3), Some(2));
        assert_eq!(DataType::Float32.byte_size(usize::MAX), None);
        assert_eq!(DataType::UFixed8.nx_type(), Some((NxKind::U, 8)));
        assert_eq!(DataType::SFixed16.nx_type(), Some((NxKind::S, 16)));
        assert_eq!(DataType::BFloat16.nx_type(), Some((NxKind::BF, 16)));
        assert_eq!(DataType::UFixed4.nx_type(), None);
    }

    #[test]
    fn value_range_honours_bitwidth() {
        let q = Quantization::PerTensor {
            scale: 1.0,
            offset: 0,
            bitwidth: Some(4),
        };
        assert_eq!(q.value_range(DataType::UFixed8), (0, 15));
        assert_eq!(q.value_range(DataType::SFixed8), (-8, 7));
        assert_eq!(
            Quantization::None.value_range(DataType::UFixed16),
            (0, 65535)
        );
    }
}
