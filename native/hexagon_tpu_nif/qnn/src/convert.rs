//! Conversions between caller f32 data and a tensor's own type, as the model's metadata says.
//!
//! Quantized tensors (per-tensor or per-axis) are quantized / dequantized with the kernels in
//! [`crate::quant`]; f16 tensors are narrowed / widened; f32 tensors are copied. Anything else
//! (plain integers, booleans, 4-bit, unsupported encodings) has no f32 form and must be passed
//! in the model's own type.

use crate::error::{Error, Result};
use crate::quant::{self, AxisLayout, QuantType};
use crate::tensor::{DataType, Quantization, TensorInfo};

enum Conversion<'a> {
    Copy,
    F16,
    PerTensor {
        ty: QuantType,
        scale: f32,
        offset: i32,
        range: (i64, i64),
    },
    PerAxis {
        ty: QuantType,
        layout: AxisLayout,
        scales: &'a [f32],
        offsets: &'a [i32],
        range: (i64, i64),
    },
}

fn quant_type(data_type: DataType) -> Option<QuantType> {
    use DataType::*;
    Some(match data_type {
        UFixed8 | UInt8 => QuantType::U8,
        SFixed8 | Int8 => QuantType::I8,
        UFixed16 | UInt16 => QuantType::U16,
        SFixed16 | Int16 => QuantType::I16,
        UFixed32 | UInt32 => QuantType::U32,
        SFixed32 | Int32 => QuantType::I32,
        _ => return None,
    })
}

fn conversion(info: &TensorInfo) -> std::result::Result<Conversion<'_>, String> {
    let dtype = info.data_type;
    match (&info.quantization, dtype) {
        (Quantization::None, DataType::Float32) => Ok(Conversion::Copy),
        (Quantization::None, DataType::Float16) => Ok(Conversion::F16),
        (Quantization::Unsupported { encoding }, _) => Err(format!(
            "uses the {encoding} quantization encoding, which is passed through undecoded"
        )),
        (Quantization::PerTensor { scale, offset, .. }, _) => {
            let ty = quant_type(dtype).ok_or_else(|| no_f32_form(dtype))?;
            Ok(Conversion::PerTensor {
                ty,
                scale: *scale,
                offset: *offset,
                range: info.quantization.value_range(dtype),
            })
        }
        (
            Quantization::PerAxis {
                axis,
                scales,
                offsets,
                ..
            },
            _,
        ) => {
            let ty = quant_type(dtype).ok_or_else(|| no_f32_form(dtype))?;
            let dims: Vec<usize> = info.dims.iter().map(|&d| d as usize).collect();
            let layout = AxisLayout::from_dims(&dims, *axis as usize).map_err(|e| e.to_string())?;
            Ok(Conversion::PerAxis {
                ty,
                layout,
                scales,
                offsets,
                range: info.quantization.value_range(dtype),
            })
        }
        (Quantization::None, _) => Err(no_f32_form(dtype)),
    }
}

fn no_f32_form(dtype: DataType) -> String {
    format!(
        "is {} without quantization parameters, so it has no f32 form",
        dtype.name()
    )
}

/// Whether f32 data can be converted to this tensor's type (and back).
pub fn converts_from_f32(info: &TensorInfo) -> bool {
    conversion(info).is_ok()
}

fn check_len(
    info: &TensorInfo,
    role: &str,
    given: usize,
    expected: usize,
    unit: &str,
) -> Result<()> {
    if given == expected {
        return Ok(());
    }
    Err(Error::invalid_input(format!(
        "{role} {:?} needs {expected} bytes of {unit} for dims {:?}, {given} given",
        info.name, info.dims
    )))
}

/// Converts caller f32 data (little-endian bytes) into the tensor's own type.
pub fn input_from_f32(info: &TensorInfo, src_f32: &[u8], dst: &mut [u8]) -> Result<()> {
    let conv = conversion(info)
        .map_err(|why| Error::invalid_input(format!("input {:?} {why}", info.name)))?;
    check_len(
        info,
        "input",
        src_f32.len(),
        info.element_count() * 4,
        "f32",
    )?;
    check_len(
        info,
        "input buffer",
        dst.len(),
        info.byte_size,
        info.data_type.name(),
    )?;
    let result = match conv {
        Conversion::Copy => {
            dst.copy_from_slice(src_f32);
            Ok(())
        }
        Conversion::F16 => quant::f32_to_f16(src_f32, dst),
        Conversion::PerTensor {
            ty,
            scale,
            offset,
            range,
        } => quant::quantize_per_tensor(src_f32, dst, ty, scale, offset, range),
        Conversion::PerAxis {
            ty,
            layout,
            scales,
            offsets,
            range,
        } => quant::quantize_per_axis(src_f32, dst, ty, layout, scales, offsets, range),
    };
    result.map_err(|e| Error::invalid_input(format!("input {:?}: {e}", info.name)))
}

/// Converts a tensor's own data into f32 (little-endian bytes).
pub fn output_to_f32(info: &TensorInfo, src: &[u8], dst_f32: &mut [u8]) -> Result<()> {
    let conv = conversion(info)
        .map_err(|why| Error::invalid_input(format!("output {:?} {why}", info.name)))?;
    check_len(
        info,
        "output buffer",
        src.len(),
        info.byte_size,
        info.data_type.name(),
    )?;
    check_len(
        info,
        "output",
        dst_f32.len(),
        info.element_count() * 4,
        "f32",
    )?;
    let result = match conv {
        Conversion::Copy => {
            dst_f32.copy_from_slice(src);
            Ok(())
        }
        Conversion::F16 => quant::f16_to_f32(src, dst_f32),
        Conversion::PerTensor {
            ty, scale, offset, ..
        } => quant::dequantize_per_tensor(src, dst_f32, ty, scale, offset),
        Conversion::PerAxis {
            ty,
            layout,
            scales,
            offsets,
            ..
        } => quant::dequantize_per_axis(src, dst_f32, ty, layout, scales, offsets),
    };
    result.map_err(|e| Error::invalid_input(format!("output {:?}: {e}", info.name)))
}
