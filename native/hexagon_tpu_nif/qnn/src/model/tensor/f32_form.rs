//! The f32 form of a tensor: how f32 data maps to its own type (as it is, f16, or quantized per
//! tensor or per axis), decided when the metadata is read.

use crate::model::quant::{self, AxisLayout, QuantType};
use crate::model::tensor::{DataType, Quantization};

/// How f32 data maps to a tensor's own type: decided, with its parameters checked, when the
/// metadata is read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum F32Form {
    /// The tensor is f32 already.
    Same,
    F16,
    PerTensor(quant::PerTensor),
    PerAxis(quant::PerAxis<'static>),
}

/// The f32 form of a tensor with this metadata, or why it has none (completing "input `x` ...").
pub(crate) fn f32_form(
    data_type: DataType,
    dims: &[u32],
    quantization: &Quantization,
) -> std::result::Result<F32Form, String> {
    let range = quantization.value_range(data_type);
    match quantization {
        Quantization::None => match data_type {
            DataType::Float32 => Ok(F32Form::Same),
            DataType::Float16 => Ok(F32Form::F16),
            _ => Err(format!(
                "is {} without quantization parameters, so it has no f32 form",
                data_type.name()
            )),
        },
        Quantization::Unsupported { encoding } => Err(format!(
            "uses the {encoding} quantization encoding, which is passed through undecoded"
        )),
        Quantization::PerTensor { scale, offset, .. } => {
            let ty = quant_type(data_type)?;
            quant::PerTensor::new(ty, *scale, *offset, range)
                .map(F32Form::PerTensor)
                .map_err(|e| e.to_string())
        }
        Quantization::PerAxis {
            axis,
            scales,
            offsets,
            ..
        } => {
            let ty = quant_type(data_type)?;
            let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            let layout = AxisLayout::from_dims(&dims, *axis as usize).map_err(|e| e.to_string())?;
            quant::PerAxis::new(
                ty,
                layout,
                scales.clone().into(),
                offsets.clone().into(),
                range,
            )
            .map(F32Form::PerAxis)
            .map_err(|e| e.to_string())
        }
    }
}

fn quant_type(data_type: DataType) -> std::result::Result<QuantType, String> {
    use DataType::*;
    Ok(match data_type {
        UFixed8 | UInt8 => QuantType::U8,
        SFixed8 | Int8 => QuantType::I8,
        UFixed16 | UInt16 => QuantType::U16,
        SFixed16 | Int16 => QuantType::I16,
        UFixed32 | UInt32 => QuantType::U32,
        SFixed32 | Int32 => QuantType::I32,
        _ => {
            return Err(format!(
                "is {} with quantization parameters, which has no f32 form",
                data_type.name()
            ));
        }
    })
}

impl F32Form {
    pub(crate) fn to_model(
        &self,
        src_f32: &[u8],
        dst: &mut [u8],
    ) -> std::result::Result<(), quant::QuantError> {
        match self {
            F32Form::Same => {
                dst.copy_from_slice(src_f32);
                Ok(())
            }
            F32Form::F16 => quant::f32_to_f16(src_f32, dst),
            F32Form::PerTensor(p) => p.quantize(src_f32, dst),
            F32Form::PerAxis(p) => p.quantize(src_f32, dst),
        }
    }

    pub(crate) fn to_f32(
        &self,
        src: &[u8],
        dst_f32: &mut [u8],
    ) -> std::result::Result<(), quant::QuantError> {
        match self {
            F32Form::Same => {
                dst_f32.copy_from_slice(src);
                Ok(())
            }
            F32Form::F16 => quant::f16_to_f32(src, dst_f32),
            F32Form::PerTensor(p) => p.dequantize(src, dst_f32),
            F32Form::PerAxis(p) => p.dequantize(src, dst_f32),
        }
    }
}
