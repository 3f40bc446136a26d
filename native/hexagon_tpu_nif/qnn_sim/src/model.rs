//! The in-memory model: graphs, tensors, nodes and the behaviour section.
//!
//! [`crate::format`] serializes a [`Model`] to the context-binary format and back;
//! [`crate::builder`] is the ergonomic way to make one. [`Model::validate`] is the single place
//! that decides whether a model is well formed: the decoder calls it on every binary, so the
//! backend never executes a graph it has not checked.

use std::fmt;

use qnn_sys as sys;

/// Largest rank the backend accepts (QNN's own tools stay well below this).
pub const MAX_RANK: usize = 8;

/// Element types the backend computes with. Fixed-point types carry quantization; plain
/// integer types do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    UFixed8,
    SFixed8,
    UFixed16,
    SFixed16,
    UFixed32,
    SFixed32,
    UInt8,
    Int8,
    UInt16,
    Int16,
    UInt32,
    Int32,
    Float16,
    Float32,
}

impl DType {
    /// Every supported type, for iteration in tests.
    pub const ALL: [DType; 14] = [
        DType::UFixed8,
        DType::SFixed8,
        DType::UFixed16,
        DType::SFixed16,
        DType::UFixed32,
        DType::SFixed32,
        DType::UInt8,
        DType::Int8,
        DType::UInt16,
        DType::Int16,
        DType::UInt32,
        DType::Int32,
        DType::Float16,
        DType::Float32,
    ];

    /// The `Qnn_DataType_t` value.
    pub const fn code(self) -> u32 {
        match self {
            DType::UFixed8 => sys::QNN_DATATYPE_UFIXED_POINT_8,
            DType::SFixed8 => sys::QNN_DATATYPE_SFIXED_POINT_8,
            DType::UFixed16 => sys::QNN_DATATYPE_UFIXED_POINT_16,
            DType::SFixed16 => sys::QNN_DATATYPE_SFIXED_POINT_16,
            DType::UFixed32 => sys::QNN_DATATYPE_UFIXED_POINT_32,
            DType::SFixed32 => sys::QNN_DATATYPE_SFIXED_POINT_32,
            DType::UInt8 => sys::QNN_DATATYPE_UINT_8,
            DType::Int8 => sys::QNN_DATATYPE_INT_8,
            DType::UInt16 => sys::QNN_DATATYPE_UINT_16,
            DType::Int16 => sys::QNN_DATATYPE_INT_16,
            DType::UInt32 => sys::QNN_DATATYPE_UINT_32,
            DType::Int32 => sys::QNN_DATATYPE_INT_32,
            DType::Float16 => sys::QNN_DATATYPE_FLOAT_16,
            DType::Float32 => sys::QNN_DATATYPE_FLOAT_32,
        }
    }

    /// The type for a `Qnn_DataType_t` value, if supported.
    pub fn from_code(code: u32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.code() == code)
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::UFixed8 | DType::SFixed8 | DType::UInt8 | DType::Int8 => 1,
            DType::UFixed16 | DType::SFixed16 | DType::UInt16 | DType::Int16 | DType::Float16 => 2,
            DType::UFixed32 | DType::SFixed32 | DType::UInt32 | DType::Int32 | DType::Float32 => 4,
        }
    }

    /// Whether the type carries quantization (`*_FIXED_POINT_*`).
    pub const fn is_fixed_point(self) -> bool {
        matches!(
            self,
            DType::UFixed8
                | DType::SFixed8
                | DType::UFixed16
                | DType::SFixed16
                | DType::UFixed32
                | DType::SFixed32
        )
    }

    /// Whether the type is a float type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::Float16 | DType::Float32)
    }

    /// Whether the integer type is signed (false for floats).
    pub const fn is_signed_int(self) -> bool {
        matches!(
            self,
            DType::SFixed8
                | DType::SFixed16
                | DType::SFixed32
                | DType::Int8
                | DType::Int16
                | DType::Int32
        )
    }

    /// Container bit width.
    pub const fn bits(self) -> u32 {
        (self.size() * 8) as u32
    }

    /// The representable integer range given an optional narrower bit width.
    pub fn int_range(self, bitwidth: Option<u32>) -> (i64, i64) {
        let bits = bitwidth.unwrap_or(self.bits()).min(self.bits());
        if self.is_signed_int() {
            (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
        } else {
            (0, (1i64 << bits) - 1)
        }
    }

    /// Lower-case name used in the JSON spec (`"ufixed_point_8"`, `"float_32"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::UFixed8 => "ufixed_point_8",
            DType::SFixed8 => "sfixed_point_8",
            DType::UFixed16 => "ufixed_point_16",
            DType::SFixed16 => "sfixed_point_16",
            DType::UFixed32 => "ufixed_point_32",
            DType::SFixed32 => "sfixed_point_32",
            DType::UInt8 => "uint_8",
            DType::Int8 => "int_8",
            DType::UInt16 => "uint_16",
            DType::Int16 => "int_16",
            DType::UInt32 => "uint_32",
            DType::Int32 => "int_32",
            DType::Float16 => "float_16",
            DType::Float32 => "float_32",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Quantization of a tensor, in QNN's convention `float = (q + offset) * scale`
/// (so `offset` is the negated zero point).
#[derive(Clone, Debug, PartialEq)]
pub enum Quant {
    /// Not quantized (float and plain integer tensors).
    None,
    /// One scale and offset for the whole tensor.
    PerTensor {
        scale: f32,
        offset: i32,
        /// Bit width narrower than the container (reported as `BW_SCALE_OFFSET`).
        bitwidth: Option<u32>,
    },
    /// One scale and offset per index along `axis`.
    PerAxis {
        axis: u32,
        scales: Vec<f32>,
        offsets: Vec<i32>,
        /// Bit width narrower than the container (reported as `BW_AXIS_SCALE_OFFSET`).
        bitwidth: Option<u32>,
    },
}

impl Quant {
    /// Per-tensor quantization.
    pub fn per_tensor(scale: f32, offset: i32) -> Quant {
        Quant::PerTensor {
            scale,
            offset,
            bitwidth: None,
        }
    }

    /// Per-axis quantization; `scales.len()` must equal `offsets.len()` and the axis' size.
    pub fn per_axis(axis: u32, scales: Vec<f32>, offsets: Vec<i32>) -> Quant {
        Quant::PerAxis {
            axis,
            scales,
            offsets,
            bitwidth: None,
        }
    }

    /// Symmetric per-axis quantization (all offsets zero).
    pub fn per_axis_symmetric(axis: u32, scales: Vec<f32>) -> Quant {
        let offsets = vec![0; scales.len()];
        Quant::per_axis(axis, scales, offsets)
    }

    /// The same quantization with an explicit bit width.
    pub fn with_bitwidth(self, bits: u32) -> Quant {
        match self {
            Quant::None => Quant::None,
            Quant::PerTensor { scale, offset, .. } => Quant::PerTensor {
                scale,
                offset,
                bitwidth: Some(bits),
            },
            Quant::PerAxis {
                axis,
                scales,
                offsets,
                ..
            } => Quant::PerAxis {
                axis,
                scales,
                offsets,
                bitwidth: Some(bits),
            },
        }
    }

    /// The bit width, if one was given.
    pub fn bitwidth(&self) -> Option<u32> {
        match self {
            Quant::None => None,
            Quant::PerTensor { bitwidth, .. } | Quant::PerAxis { bitwidth, .. } => *bitwidth,
        }
    }

    /// `(scale, offset)` for the element whose index along the quantization axis is `axis_index`.
    pub fn params(&self, axis_index: usize) -> (f64, i64) {
        match self {
            Quant::None => (1.0, 0),
            Quant::PerTensor { scale, offset, .. } => (f64::from(*scale), i64::from(*offset)),
            Quant::PerAxis {
                scales, offsets, ..
            } => (
                f64::from(scales.get(axis_index).copied().unwrap_or(1.0)),
                i64::from(offsets.get(axis_index).copied().unwrap_or(0)),
            ),
        }
    }
}

/// Type, shape and quantization of a tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    pub dtype: DType,
    pub dims: Vec<u32>,
    pub quant: Quant,
}

impl TensorSpec {
    /// An unquantized tensor.
    pub fn new(dtype: DType, dims: impl Into<Vec<u32>>) -> TensorSpec {
        TensorSpec {
            dtype,
            dims: dims.into(),
            quant: Quant::None,
        }
    }

    /// A `float_32` tensor.
    pub fn f32(dims: impl Into<Vec<u32>>) -> TensorSpec {
        TensorSpec::new(DType::Float32, dims)
    }

    /// The same tensor with quantization.
    pub fn quant(mut self, quant: Quant) -> TensorSpec {
        self.quant = quant;
        self
    }

    /// Number of elements (checked).
    pub fn element_count(&self) -> Option<usize> {
        self.dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize))
    }

    /// Size in bytes (checked).
    pub fn byte_size(&self) -> Option<usize> {
        self.element_count()?.checked_mul(self.dtype.size())
    }
}

/// What a tensor is to its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// A graph input (`APP_WRITE`).
    Input,
    /// A graph output (`APP_READ`).
    Output,
    /// Static data stored in the binary.
    Constant,
    /// Produced and consumed inside the graph.
    Intermediate,
}

impl TensorKind {
    pub(crate) const fn code(self) -> u8 {
        match self {
            TensorKind::Input => 0,
            TensorKind::Output => 1,
            TensorKind::Constant => 2,
            TensorKind::Intermediate => 3,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<TensorKind> {
        match code {
            0 => Some(TensorKind::Input),
            1 => Some(TensorKind::Output),
            2 => Some(TensorKind::Constant),
            3 => Some(TensorKind::Intermediate),
            _ => None,
        }
    }
}

/// One tensor of a graph.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorDef {
    /// The id reported in `Qnn_Tensor_t.id` (unique within the graph, non-zero).
    pub id: u32,
    pub name: String,
    pub kind: TensorKind,
    pub spec: TensorSpec,
    /// Raw little-endian element data, for constants only.
    pub data: Vec<u8>,
}

/// Operations the backend computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// `y = x` (requantized to y's type).
    Identity,
    /// Elementwise `a + b` with numpy-style broadcasting.
    Add,
    /// Elementwise `a * b` with numpy-style broadcasting.
    Mul,
    /// `max(x, 0)`.
    Relu,
    /// `y[b, o] = sum_i x[b, i] * w[o, i] (+ bias[o])`; inputs `x, w[, bias]`.
    FullyConnected,
    /// Softmax over the last axis of `beta * x`.
    Softmax { beta: f32 },
    /// Same elements, new shape.
    Reshape,
}

impl Op {
    pub(crate) const fn code(self) -> u32 {
        match self {
            Op::Identity => 1,
            Op::Add => 2,
            Op::Mul => 3,
            Op::Relu => 4,
            Op::FullyConnected => 5,
            Op::Softmax { .. } => 6,
            Op::Reshape => 7,
        }
    }

    /// Name used in the JSON spec and in error messages.
    pub const fn name(self) -> &'static str {
        match self {
            Op::Identity => "identity",
            Op::Add => "add",
            Op::Mul => "mul",
            Op::Relu => "relu",
            Op::FullyConnected => "fully_connected",
            Op::Softmax { .. } => "softmax",
            Op::Reshape => "reshape",
        }
    }
}

/// One node: an op with input and output tensors (indices into [`GraphDef::tensors`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<u32>,
    pub outputs: Vec<u32>,
}

/// One graph: its tensors, its I/O lists (indices into `tensors`) and nodes in execution order.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphDef {
    pub name: String,
    pub tensors: Vec<TensorDef>,
    pub inputs: Vec<u32>,
    pub outputs: Vec<u32>,
    pub nodes: Vec<Node>,
}

impl GraphDef {
    /// The tensor at an index.
    pub fn tensor(&self, index: u32) -> &TensorDef {
        &self.tensors[index as usize]
    }

    /// Graph input tensors, in order.
    pub fn input_defs(&self) -> impl Iterator<Item = &TensorDef> {
        self.inputs.iter().map(|&i| self.tensor(i))
    }

    /// Graph output tensors, in order.
    pub fn output_defs(&self) -> impl Iterator<Item = &TensorDef> {
        self.outputs.iter().map(|&i| self.tensor(i))
    }
}

/// When an injected fault fires. Calls are counted from 0; call `n` fails when
/// `n >= after` and (`times` is `None` or `n < after + times`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The QNN error code returned (low 16 bits of the handle).
    pub code: u32,
    /// Number of calls that succeed first.
    pub after: u64,
    /// How many calls fail after that; `None` = every later call.
    pub times: Option<u64>,
    /// What the calls are counted over.
    pub scope: FaultScope,
    /// Restrict an execute fault to one graph (by name); `None` = every graph.
    pub graph: Option<String>,
}

impl Fault {
    /// Fails the first call only.
    pub fn once(code: u32) -> Fault {
        Fault {
            code,
            after: 0,
            times: Some(1),
            scope: FaultScope::Library,
            graph: None,
        }
    }

    /// Fails every call.
    pub fn always(code: u32) -> Fault {
        Fault {
            code,
            after: 0,
            times: None,
            scope: FaultScope::Library,
            graph: None,
        }
    }

    /// Lets `n` calls succeed, then fails every later one.
    pub fn after(code: u32, n: u64) -> Fault {
        Fault {
            code,
            after: n,
            times: None,
            scope: FaultScope::Library,
            graph: None,
        }
    }

    /// Whether call number `n` (0-based) fails.
    pub fn fires(&self, n: u64) -> bool {
        n >= self.after && self.times.is_none_or(|t| n - self.after < t)
    }
}

/// What a [`Fault`] counts calls over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultScope {
    /// Every context loaded from this binary (same checksum) in the library instance: a
    /// "once" fault fires once even if the runtime recreates the context to recover.
    Library,
    /// Each graph handle (each loaded context) counts on its own.
    Context,
}

/// Adversarial metadata the System API can be told to report. Each applies to one target
/// tensor (default: the first input of the first graph) or to the target graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdversarialKind {
    NullGraphName,
    NullTensorName,
    NonUtf8TensorName,
    ZeroDim,
    OverflowDims,
    RankAbove8,
    UnknownDtype,
    NullDims,
    AxisCountMismatch,
    AxisOutOfRange,
    ScaleZero,
    ScaleNegative,
    ScaleNan,
    NullScaleOffset,
    UnknownBinaryInfoVersion,
    UnknownGraphInfoVersion,
    UnknownTensorVersion,
    AbsurdNumGraphs,
    NullGraphs,
    AbsurdNumInputs,
    NullInputs,
    AbsurdNumOutputs,
    NullOutputs,
    BlockEncoding,
    SparseDataFormat,
    UnknownEncoding,
}

impl AdversarialKind {
    /// Every kind, with its JSON name.
    pub const ALL: [(AdversarialKind, &'static str); 26] = [
        (AdversarialKind::NullGraphName, "null_graph_name"),
        (AdversarialKind::NullTensorName, "null_tensor_name"),
        (AdversarialKind::NonUtf8TensorName, "non_utf8_tensor_name"),
        (AdversarialKind::ZeroDim, "zero_dim"),
        (AdversarialKind::OverflowDims, "overflow_dims"),
        (AdversarialKind::RankAbove8, "rank_above_8"),
        (AdversarialKind::UnknownDtype, "unknown_dtype"),
        (AdversarialKind::NullDims, "null_dims"),
        (AdversarialKind::AxisCountMismatch, "axis_count_mismatch"),
        (AdversarialKind::AxisOutOfRange, "axis_out_of_range"),
        (AdversarialKind::ScaleZero, "scale_zero"),
        (AdversarialKind::ScaleNegative, "scale_negative"),
        (AdversarialKind::ScaleNan, "scale_nan"),
        (AdversarialKind::NullScaleOffset, "null_scale_offset"),
        (
            AdversarialKind::UnknownBinaryInfoVersion,
            "unknown_binary_info_version",
        ),
        (
            AdversarialKind::UnknownGraphInfoVersion,
            "unknown_graph_info_version",
        ),
        (
            AdversarialKind::UnknownTensorVersion,
            "unknown_tensor_version",
        ),
        (AdversarialKind::AbsurdNumGraphs, "absurd_num_graphs"),
        (AdversarialKind::NullGraphs, "null_graphs"),
        (AdversarialKind::AbsurdNumInputs, "absurd_num_inputs"),
        (AdversarialKind::NullInputs, "null_inputs"),
        (AdversarialKind::AbsurdNumOutputs, "absurd_num_outputs"),
        (AdversarialKind::NullOutputs, "null_outputs"),
        (AdversarialKind::BlockEncoding, "block_encoding"),
        (AdversarialKind::SparseDataFormat, "sparse_data_format"),
        (AdversarialKind::UnknownEncoding, "unknown_encoding"),
    ];

    /// The JSON name (`"zero_dim"`, ...).
    pub fn name(self) -> &'static str {
        AdversarialKind::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("?", |(_, n)| n)
    }

    /// The kind for a JSON name.
    pub fn from_name(name: &str) -> Option<AdversarialKind> {
        AdversarialKind::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(k, _)| *k)
    }

    pub(crate) fn code(self) -> u32 {
        AdversarialKind::ALL
            .iter()
            .position(|(k, _)| *k == self)
            .map_or(0, |i| i as u32 + 1)
    }

    pub(crate) fn from_code(code: u32) -> Option<AdversarialKind> {
        let i = (code as usize).checked_sub(1)?;
        AdversarialKind::ALL.get(i).map(|(k, _)| *k)
    }
}

/// One adversarial-metadata option with its optional target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adversarial {
    pub kind: AdversarialKind,
    /// Target graph name (default: the first graph).
    pub graph: Option<String>,
    /// Target tensor name among the graph's inputs and outputs (default: the first input).
    pub tensor: Option<String>,
}

/// Per-model behaviour: which metadata versions to report and which faults to inject.
#[derive(Clone, Debug, PartialEq)]
pub struct Behaviour {
    /// `QnnSystemContext_BinaryInfo_t.version` reported (1, 2 or 3).
    pub binary_info_version: u32,
    /// `QnnSystemContext_GraphInfo_t.version` reported (1, 2 or 3; 3 is reported as 2 by a
    /// library configured for System API minor < 4, whose array stride is 64 bytes).
    pub graph_info_version: u32,
    /// `Qnn_Tensor_t.version` reported (1 or 2).
    pub tensor_version: u32,
    /// Milliseconds slept inside every `graphExecute`.
    pub sleep_ms: u32,
    /// Injected `graphExecute` failure.
    pub fail_execute: Option<Fault>,
    /// Injected `contextCreateFromBinary` failure.
    pub fail_context_create: Option<Fault>,
    /// Adversarial metadata reported by the System API (execution is unaffected).
    pub adversarial: Vec<Adversarial>,
}

impl Default for Behaviour {
    fn default() -> Behaviour {
        Behaviour {
            binary_info_version: 3,
            graph_info_version: 3,
            tensor_version: 2,
            sleep_ms: 0,
            fail_execute: None,
            fail_context_create: None,
            adversarial: Vec::new(),
        }
    }
}

/// What the binary says about the QNN that made it, where it differs from the library's knobs
/// (tests of the pre-flight verdict): `None` reports the knob (or nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// `buildId` (default: the library's `build_id` knob).
    pub build_id: Option<String>,
    /// `backendId` (default: the `backend_id` knob).
    pub backend_id: Option<u32>,
    /// `socModel` of BinaryInfo v3 (default 0).
    pub soc_model: Option<u32>,
    /// The HTP context metadata `{u32 1, u32 arch}` of BinaryInfo v3 (default: none), as
    /// QAIRT 2.51's QnnSystem reports it.
    pub dsp_arch: Option<u32>,
    /// The spill-fill buffer size, in bytes, each graph's HTP graph blob info reports (V3 graph
    /// infos only; default: no blob info). The blob is the emulator's version 1 layout: `u32`
    /// version 1 at 0, the spill-fill size a `u64` at 8, the VTCM size in bytes a `u64` at 16
    /// (reported as 0).
    pub spill_fill: Option<u64>,
}

/// A whole context binary.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// Reported as `socVersion` in the binary info.
    pub soc_version: String,
    /// Overrides of the binary info's version fields.
    pub stamp: Stamp,
    pub graphs: Vec<GraphDef>,
    pub behaviour: Behaviour,
}

impl Default for Model {
    fn default() -> Model {
        Model {
            soc_version: "qnn_sim".into(),
            stamp: Stamp::default(),
            graphs: Vec::new(),
            behaviour: Behaviour::default(),
        }
    }
}

/// Why a model is not well formed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError(pub String);

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ModelError {}

impl Model {
    /// The graph with a name.
    pub fn graph(&self, name: &str) -> Option<&GraphDef> {
        self.graphs.iter().find(|g| g.name == name)
    }
}

mod validate;
