//! The element container of quantized data: a leaf, so that the kernels (`kernels.rs`,
//! `x86.rs`) name it without importing `quant.rs`, which is above them.

/// Element container of quantized data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
}

impl QuantType {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            QuantType::U8 | QuantType::I8 => 1,
            QuantType::U16 | QuantType::I16 => 2,
            QuantType::U32 | QuantType::I32 => 4,
        }
    }

    /// The full representable range `(min, max)` of the container.
    pub fn full_range(self) -> (i64, i64) {
        match self {
            QuantType::U8 => (0, u8::MAX as i64),
            QuantType::I8 => (i8::MIN as i64, i8::MAX as i64),
            QuantType::U16 => (0, u16::MAX as i64),
            QuantType::I16 => (i16::MIN as i64, i16::MAX as i64),
            QuantType::U32 => (0, u32::MAX as i64),
            QuantType::I32 => (i32::MIN as i64, i32::MAX as i64),
        }
    }
}
