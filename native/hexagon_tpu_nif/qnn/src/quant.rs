//! TEMPORARY placeholder: the real kernels are being written (helper-1) and replace this file.
#![allow(unused_variables, clippy::missing_errors_doc)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisLayout {
    pub outer: usize,
    pub axis_len: usize,
    pub inner: usize,
}
#[derive(Debug, thiserror::Error)]
pub enum QuantError {
    #[error("placeholder")]
    Placeholder,
}
impl AxisLayout {
    pub fn from_dims(dims: &[usize], axis: usize) -> Result<Self, QuantError> {
        unimplemented!()
    }
}
pub fn quantize_per_tensor(
    src_f32: &[u8],
    dst: &mut [u8],
    ty: QuantType,
    scale: f32,
    offset: i32,
    range: (i64, i64),
) -> Result<(), QuantError> {
    unimplemented!()
}
pub fn dequantize_per_tensor(
    src: &[u8],
    dst_f32: &mut [u8],
    ty: QuantType,
    scale: f32,
    offset: i32,
) -> Result<(), QuantError> {
    unimplemented!()
}
pub fn quantize_per_axis(
    src_f32: &[u8],
    dst: &mut [u8],
    ty: QuantType,
    layout: AxisLayout,
    scales: &[f32],
    offsets: &[i32],
    range: (i64, i64),
) -> Result<(), QuantError> {
    unimplemented!()
}
pub fn dequantize_per_axis(
    src: &[u8],
    dst_f32: &mut [u8],
    ty: QuantType,
    layout: AxisLayout,
    scales: &[f32],
    offsets: &[i32],
) -> Result<(), QuantError> {
    unimplemented!()
}
pub fn f32_to_f16(src_f32: &[u8], dst_f16: &mut [u8]) -> Result<(), QuantError> {
    unimplemented!()
}
pub fn f16_to_f32(src_f16: &[u8], dst_f32: &mut [u8]) -> Result<(), QuantError> {
    unimplemented!()
}
