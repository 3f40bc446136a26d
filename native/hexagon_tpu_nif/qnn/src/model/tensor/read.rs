//! Reading a QNN library's tensor descriptions: untrusted C structs, validated before use.

use std::ffi::{CString, c_char};

use super::template::TemplateQuant;
use super::{DataType, MAX_NAME_LEN, MAX_RANK, Quantization, TensorInfo, TensorTemplate};
use crate::base::error::{Error, Result};
use crate::base::preflight_rules::EncodingSupport;
use crate::sys::{self, Qnn_Tensor_t};

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
        // Read as u8: `c_char` is i8 on x86-64 and u8 on aarch64.
        // SAFETY: the caller guarantees the bytes up to the terminator are readable, and the loop
        // stops at the terminator.
        let b = unsafe { *ptr.cast::<u8>().add(bytes.len()) };
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
    crate::base::preflight_rules::check_data_format(t.dataFormat, &what)?;
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
    let info = TensorInfo::new(
        name.clone(),
        t.id,
        data_type,
        dims.clone(),
        quantization,
        byte_size,
    );
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
    if super::valid_scale(scale) {
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
        other => match crate::base::preflight_rules::check_encoding(other, what)? {
            EncodingSupport::Raw(encoding) => {
                // Pointer-based encodings are not deep-copied; execute describes the tensor
                // without them (backends match graph I/O by id).
                Ok((
                    Quantization::Unsupported { encoding },
                    TemplateQuant::Undefined,
                ))
            }
            EncodingSupport::None => Ok((Quantization::None, TemplateQuant::Undefined)),
            EncodingSupport::Converted => Err(Error::Internal {
                message: format!("{what}: encoding {other} is converted but was not read"),
            }),
        },
    }
}
