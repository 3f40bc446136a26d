//! Tensor metadata: what QnnSystem reports about a graph's inputs and outputs, as plain types.
//! Reading it from the library's untrusted C structs is `tensor/read.rs`'s job; building the C structs
//! an execute hands back to QNN is `tensor/template.rs`'s.

pub(crate) mod f32_form;
mod read;
mod template;

pub(crate) use read::{read_name, read_tensor};
pub(crate) use template::TensorTemplate;

use crate::sys;

/// Highest rank accepted from a library (QNN's HTP tensors go up to 5-6; 8 leaves room).
pub const MAX_RANK: u32 = 8;
/// Longest tensor or graph name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 4096;

/// Whether a quantization scale is usable: finite and positive (a library reporting another is
/// refused at load, so executes never see one).
pub fn valid_scale(scale: f32) -> bool {
    scale.is_finite() && scale > 0.0
}

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
    /// How f32 data converts to this tensor's type, or why it does not ([`crate::io`]).
    pub(crate) f32_form: Result<f32_form::F32Form, String>,
}

impl TensorInfo {
    /// A tensor's metadata, its f32 form decided once here.
    pub(crate) fn new(
        name: String,
        id: u32,
        data_type: DataType,
        dims: Vec<u32>,
        quantization: Quantization,
        byte_size: usize,
    ) -> Self {
        let f32_form = f32_form::f32_form(data_type, &dims, &quantization);
        TensorInfo {
            name,
            id,
            data_type,
            dims,
            quantization,
            byte_size,
            f32_form,
        }
    }

    /// Whether f32 data converts to this tensor's type and back ([`crate::io`]): true for
    /// per-tensor and per-axis quantized integer tensors, f16 and f32; false for plain integers,
    /// booleans, 4-bit types and encodings only described.
    pub fn f32_conversion(&self) -> bool {
        self.f32_form.is_ok()
    }

    /// Number of elements (1 for a scalar).
    pub fn element_count(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
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
