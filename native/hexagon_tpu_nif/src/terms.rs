//! Plain-data encodings of the `qnn` metadata types.
//!
//! These are maps and tagged tuples; the Elixir side turns them into structs
//! (`HexagonTpu.TensorInfo` also normalizes `offset` into `zero_point`).

use rustler::{Atom, Encoder, Env, NifMap, NifTaggedEnum, Term};

use crate::atoms;

#[derive(NifMap)]
#[rustler(encode)]
pub struct RuntimeInfoTerm {
    pub backend_id: u32,
    pub provider_name: String,
    pub build_id: String,
    pub core_api: String,
    pub backend_api: String,
    pub system_api: String,
    pub backend_lib: String,
    pub system_lib: String,
}

impl From<&qnn::RuntimeInfo> for RuntimeInfoTerm {
    fn from(info: &qnn::RuntimeInfo) -> Self {
        RuntimeInfoTerm {
            backend_id: info.backend_id,
            provider_name: info.provider_name.clone(),
            build_id: info.build_id.clone(),
            core_api: info.core_api.to_string(),
            backend_api: info.backend_api.to_string(),
            system_api: info.system_api.to_string(),
            backend_lib: info.backend_lib.display().to_string(),
            system_lib: info.system_lib.display().to_string(),
        }
    }
}

/// `:none | {:per_tensor, %{...}} | {:per_axis, %{...}} | {:unsupported, %{encoding: ...}}`,
/// with QNN's own `offset` (`float = (q + offset) * scale`).
#[derive(NifTaggedEnum)]
#[rustler(encode)]
pub enum QuantizationTerm {
    None,
    PerTensor {
        scale: f64,
        offset: i32,
        bitwidth: Option<u32>,
    },
    PerAxis {
        axis: u32,
        scales: Vec<f64>,
        offsets: Vec<i32>,
        bitwidth: Option<u32>,
    },
    Unsupported {
        encoding: String,
    },
}

impl From<&qnn::Quantization> for QuantizationTerm {
    fn from(q: &qnn::Quantization) -> Self {
        // f32 -> f64 is exact, so Elixir sees the very scale QNN uses.
        match q {
            qnn::Quantization::None => QuantizationTerm::None,
            qnn::Quantization::PerTensor {
                scale,
                offset,
                bitwidth,
            } => QuantizationTerm::PerTensor {
                scale: f64::from(*scale),
                offset: *offset,
                bitwidth: *bitwidth,
            },
            qnn::Quantization::PerAxis {
                axis,
                scales,
                offsets,
                bitwidth,
            } => QuantizationTerm::PerAxis {
                axis: *axis,
                scales: scales.iter().map(|s| f64::from(*s)).collect(),
                offsets: offsets.clone(),
                bitwidth: *bitwidth,
            },
            qnn::Quantization::Unsupported { encoding } => QuantizationTerm::Unsupported {
                encoding: (*encoding).to_string(),
            },
        }
    }
}

/// Nx-style type holding a tensor's raw values: `{:u, 8}`, `{:f, 16}`, `{:bf, 16}`, or `nil`
/// for the packed 4-bit types (an Nx notion, so it lives here and not in `qnn`).
pub struct NxTypeTerm(pub qnn::DataType);

impl Encoder for NxTypeTerm {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        use qnn::DataType::*;
        let (kind, bits) = match self.0 {
            SFixed4 | UFixed4 => return rustler::types::atom::nil().encode(env),
            t @ (Float16 | Float32 | Float64) => (atoms::f(), t.bits()),
            BFloat16 => (atoms::bf(), 16),
            Bool8 => (atoms::u(), 8),
            t if t.is_signed() => (atoms::s(), t.bits()),
            t => (atoms::u(), t.bits()),
        };
        (kind, bits).encode(env)
    }
}

#[derive(NifMap)]
#[rustler(encode)]
pub struct TensorInfoTerm {
    pub name: String,
    pub id: u32,
    /// QNN's name for the dtype, e.g. `:ufixed_point_8`.
    pub data_type: Atom,
    pub nx_type: NxTypeTerm,
    pub dims: Vec<u32>,
    pub quantization: QuantizationTerm,
    pub byte_size: usize,
    /// Whether `qnn::io` can quantize f32 into this tensor / dequantize it to f32.
    pub f32_conversion: bool,
}

impl TensorInfoTerm {
    pub fn new(env: Env, t: &qnn::TensorInfo) -> Self {
        TensorInfoTerm {
            name: t.name.clone(),
            id: t.id,
            data_type: data_type_atom(env, t.data_type),
            nx_type: NxTypeTerm(t.data_type),
            dims: t.dims.clone(),
            quantization: QuantizationTerm::from(&t.quantization),
            byte_size: t.byte_size,
            f32_conversion: t.f32_conversion(),
        }
    }
}

#[derive(NifMap)]
#[rustler(encode)]
pub struct GraphInfoTerm {
    pub name: String,
    pub inputs: Vec<TensorInfoTerm>,
    pub outputs: Vec<TensorInfoTerm>,
}

impl GraphInfoTerm {
    pub fn new(env: Env, g: &qnn::GraphInfo) -> Self {
        GraphInfoTerm {
            name: g.name.clone(),
            inputs: g
                .inputs
                .iter()
                .map(|t| TensorInfoTerm::new(env, t))
                .collect(),
            outputs: g
                .outputs
                .iter()
                .map(|t| TensorInfoTerm::new(env, t))
                .collect(),
        }
    }
}

/// QNN's name for a dtype as an atom, e.g. `:ufixed_point_8`.
pub fn data_type_atom(env: Env, data_type: qnn::DataType) -> Atom {
    // The names are a fixed, small set of static strings; this cannot fail in practice.
    Atom::from_str(env, data_type.name()).unwrap_or_else(|_| atoms::internal())
}
