//! What the NIFs answer Elixir, as terms: the answers of a runtime's creation
//! ([`CreatedTerm`]), a load ([`LoadedTerm`]) and an execute ([`ExecutedTerm`]), maps with
//! named fields, and the `qnn` metadata types in them:
//! `%HexagonTpu.TensorInfo{}` is built here, whole (`zero_point = -offset` included), and
//! Elixir keeps what it receives. Every type here ends in `Term`; what Elixir sends is
//! `crate::protocol`'s (`*Arg`). A new field of an answer is one line here, where its value is
//! set, and one where Elixir reads it.

use std::sync::Arc;

use rustler::types::tuple::make_tuple;
use rustler::{Atom, Binary, Encoder, Env, NifMap, NifStruct, ResourceArc, Term};

use crate::atoms;
use crate::profile::ProfileTerm;
use crate::resources::{ContextRes, RuntimeRes};

/// A context load's answer (`HexagonTpu.Context`'s `load/4` reads it).
#[derive(NifMap)]
#[rustler(encode)]
pub struct LoadedTerm<'c> {
    context: ResourceArc<ContextRes>,
    graphs: Vec<GraphInfoTerm<'c>>,
    /// The pre-flight verdict's warnings.
    warnings: Vec<FindingTerm>,
    queue: QueueTerm,
    buffers: BuffersTerm,
}

impl<'c> LoadedTerm<'c> {
    pub fn new(env: Env<'_>, context: &'c Arc<qnn::Context>) -> Self {
        LoadedTerm {
            context: ResourceArc::new(ContextRes(Arc::clone(context))),
            graphs: (context.graphs().iter())
                .map(|g| GraphInfoTerm::new(env, g))
                .collect(),
            warnings: findings(env, context.warnings()),
            queue: QueueTerm(context.execute_queue().ok()),
            buffers: BuffersTerm(context.buffers().ok()),
        }
    }
}

/// `:worker`, or `{:backend, depth}`: where a context's executes queue.
struct QueueTerm(Option<qnn::ExecuteQueue>);

impl Encoder for QueueTerm {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        match self.0 {
            Some(qnn::ExecuteQueue::Backend { depth }) => (atoms::backend(), depth).encode(env),
            _ => atoms::worker().encode(env),
        }
    }
}

/// `:shared`, `:client`, or `{:client, why}` when shared buffers were not available.
struct BuffersTerm(Option<qnn::BufferPath>);

impl Encoder for BuffersTerm {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        match &self.0 {
            Some(qnn::BufferPath::Shared) => atoms::shared().encode(env),
            Some(qnn::BufferPath::Fallback(why)) => (atoms::client(), why).encode(env),
            _ => atoms::client().encode(env),
        }
    }
}

/// An execute's answer (`HexagonTpu.Graph.Call` reads it).
#[derive(NifMap)]
#[rustler(encode)]
pub struct ExecutedTerm<'a> {
    /// The outputs, each converted as asked.
    pub outputs: Vec<Binary<'a>>,
    /// QNN's `graphExecute` alone.
    pub execute_ns: u64,
    /// The profile when `profile:` asked for one or the graph sampled this execute, else `nil`.
    pub profile: Option<ProfileTerm>,
    /// When the execute was retried after a device reset: the nanoseconds it waited for its
    /// context to be created again; else `nil`.
    pub recovery_ns: Option<u64>,
}

/// A runtime's creation answer (`HexagonTpu.Runtime`'s `open/3` reads it).
#[derive(NifMap)]
#[rustler(encode)]
pub struct CreatedTerm {
    pub runtime: ResourceArc<RuntimeRes>,
    pub info: RuntimeInfoTerm,
}

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
    pub device: Option<DevicePlatformTerm>,
}

/// `%{soc_model: integer | nil, htp_arch: integer | nil, vtcm_size: integer | nil}` (bytes).
#[derive(NifMap)]
#[rustler(encode)]
pub struct DevicePlatformTerm {
    pub soc_model: Option<u32>,
    pub htp_arch: Option<u32>,
    pub vtcm_size: Option<u64>,
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
            device: info.device.as_ref().map(|d| DevicePlatformTerm {
                soc_model: d.soc_model,
                htp_arch: d.dsp_arch,
                vtcm_size: d.vtcm_size,
            }),
        }
    }
}

/// `:none | %{kind: :per_tensor, ...} | %{kind: :per_axis, ...} | %{kind: :unsupported, ...}`,
/// with the conventional zero point (`zero_point = -offset`, as `float = (q - zero_point) *
/// scale`); see `HexagonTpu.TensorInfo`.
pub struct QuantizationTerm<'q>(&'q qnn::Quantization);

#[derive(NifMap)]
#[rustler(encode)]
struct PerTensorTerm {
    kind: Atom,
    scale: f64,
    zero_point: i64,
    bitwidth: Option<u32>,
}

#[derive(NifMap)]
#[rustler(encode)]
struct PerAxisTerm {
    kind: Atom,
    axis: u32,
    scales: Vec<f64>,
    zero_points: Vec<i64>,
    bitwidth: Option<u32>,
}

#[derive(NifMap)]
#[rustler(encode)]
struct UnsupportedTerm {
    kind: Atom,
    encoding: &'static str,
}

impl Encoder for QuantizationTerm<'_> {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        // f32 -> f64 is exact, so Elixir sees the very scale QNN uses; i32 -> i64 makes the
        // negation exact.
        match self.0 {
            qnn::Quantization::None => atoms::none().encode(env),
            qnn::Quantization::PerTensor {
                scale,
                offset,
                bitwidth,
            } => PerTensorTerm {
                kind: atoms::per_tensor(),
                scale: f64::from(*scale),
                zero_point: -i64::from(*offset),
                bitwidth: *bitwidth,
            }
            .encode(env),
            qnn::Quantization::PerAxis {
                axis,
                scales,
                offsets,
                bitwidth,
            } => PerAxisTerm {
                kind: atoms::per_axis(),
                axis: *axis,
                scales: scales.iter().map(|s| f64::from(*s)).collect(),
                zero_points: offsets.iter().map(|o| -i64::from(*o)).collect(),
                bitwidth: *bitwidth,
            }
            .encode(env),
            qnn::Quantization::Unsupported { encoding } => UnsupportedTerm {
                kind: atoms::unsupported(),
                encoding,
            }
            .encode(env),
        }
    }
}

/// A shape as a tuple of dimensions, e.g. `{1, 224, 224, 3}`.
pub struct ShapeTerm<'d>(&'d [u32]);

impl Encoder for ShapeTerm<'_> {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        let dims: Vec<Term<'a>> = self.0.iter().map(|d| d.encode(env)).collect();
        make_tuple(env, &dims)
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

/// `%HexagonTpu.TensorInfo{}`, as that module documents it.
#[derive(NifStruct)]
#[module = "HexagonTpu.TensorInfo"]
#[rustler(encode)]
pub struct TensorInfoTerm<'t> {
    name: &'t str,
    id: u32,
    shape: ShapeTerm<'t>,
    r#type: NxTypeTerm,
    /// QNN's name for the dtype, e.g. `:ufixed_point_8`.
    data_type: Atom,
    quantization: QuantizationTerm<'t>,
    byte_size: usize,
    /// The binary's name when `name` is the model's: set in Elixir from the `.names` file.
    qnn_name: Option<&'t str>,
    /// Whether `qnn::io` converts this tensor from and to f32.
    f32_conversion: bool,
}

impl<'t> TensorInfoTerm<'t> {
    pub fn new(env: Env, t: &'t qnn::TensorInfo) -> Self {
        TensorInfoTerm {
            name: &t.name,
            id: t.id,
            shape: ShapeTerm(&t.dims),
            r#type: NxTypeTerm(t.data_type),
            data_type: data_type_atom(env, t.data_type),
            quantization: QuantizationTerm(&t.quantization),
            byte_size: t.byte_size,
            qnn_name: None,
            f32_conversion: t.f32_conversion(),
        }
    }
}

/// One graph's metadata: `%{name: String.t(), inputs: [TensorInfo.t()], outputs: [...]}`.
#[derive(NifMap)]
#[rustler(encode)]
pub struct GraphInfoTerm<'g> {
    name: &'g str,
    inputs: Vec<TensorInfoTerm<'g>>,
    outputs: Vec<TensorInfoTerm<'g>>,
}

impl<'g> GraphInfoTerm<'g> {
    pub fn new(env: Env, g: &'g qnn::GraphInfo) -> Self {
        let tensors =
            |ts: &'g [qnn::TensorInfo]| ts.iter().map(|t| TensorInfoTerm::new(env, t)).collect();
        GraphInfoTerm {
            name: &g.name,
            inputs: tensors(&g.inputs),
            outputs: tensors(&g.outputs),
        }
    }
}

/// QNN's name for a dtype as an atom, e.g. `:ufixed_point_8`.
pub fn data_type_atom(env: Env, data_type: qnn::DataType) -> Atom {
    // The names are a fixed, small set of static strings; this cannot fail in practice.
    Atom::from_str(env, data_type.name()).unwrap_or_else(|_| atoms::internal())
}

/// The pre-flight verdict's findings: `[%{reason: atom, evidence: atom, message: String.t()}]`.
fn findings(env: Env<'_>, findings: &[qnn::preflight::Finding]) -> Vec<FindingTerm> {
    findings
        .iter()
        .map(|f| FindingTerm {
            reason: Atom::from_str(env, f.reason.as_str()).unwrap_or_else(|_| atoms::internal()),
            evidence: Atom::from_str(env, f.evidence.as_str())
                .unwrap_or_else(|_| atoms::internal()),
            message: f.message.clone(),
        })
        .collect()
}

#[derive(NifMap)]
#[rustler(encode)]
struct FindingTerm {
    reason: Atom,
    evidence: Atom,
    message: String,
}

/// What a context binary says about itself (`qnn::BinaryInfo`) and what a runtime needs for it
/// (`qnn::preflight::requirements`); `HexagonTpu.ModelInfo` is built from it in Elixir.
#[derive(NifMap)]
#[rustler(encode)]
pub struct BinaryInfoTerm<'g> {
    binary_info_version: u32,
    backend_id: u32,
    build_id: String,
    qairt_version: Option<String>,
    core_api: String,
    backend_api: String,
    context_blob_version: String,
    soc_version: String,
    soc_model: Option<u32>,
    dsp_arch: Option<u32>,
    vtcm_size: Option<u64>,
    graphs: Vec<GraphInfoTerm<'g>>,
    loads_on: Vec<String>,
}

impl<'g> BinaryInfoTerm<'g> {
    pub fn new(env: Env, info: &'g qnn::BinaryInfo) -> Self {
        BinaryInfoTerm {
            binary_info_version: info.version,
            backend_id: info.backend_id,
            build_id: info.build_id.clone(),
            qairt_version: qnn::preflight::BuildId::parse(&info.build_id)
                .map(|b| b.version.to_string()),
            core_api: info.core_api.to_string(),
            backend_api: info.backend_api.to_string(),
            context_blob_version: info.context_blob_version.to_string(),
            soc_version: info.soc_version.clone(),
            soc_model: info.soc_model,
            dsp_arch: info.dsp_arch,
            vtcm_size: info.vtcm_size,
            graphs: info
                .graphs
                .iter()
                .map(|g| GraphInfoTerm::new(env, g))
                .collect(),
            loads_on: qnn::preflight::requirements(info),
        }
    }
}
