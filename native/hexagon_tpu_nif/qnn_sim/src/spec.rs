//! The JSON model spec read by `qnn-sim-build` (it mirrors [`crate::builder`]).
//!
//! ```
//! let json = r#"{
//!   "graphs": [{
//!     "name": "double",
//!     "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
//!     "constants": [{"name": "two", "dtype": "f32", "shape": [1], "values": [2.0]}],
//!     "nodes": [{"op": "mul", "inputs": ["x", "two"], "output": {"name": "y", "dtype": "f32", "shape": [2]}}],
//!     "outputs": ["y"]
//!   }]
//! }"#;
//! let bytes = qnn_sim::spec::build_from_json(json).unwrap();
//! assert_eq!(&bytes[..8], b"QNNSIMCB");
//! ```
//!
//! The README documents every field with a complete example.

use std::collections::HashMap;

use serde::Deserialize;

use crate::builder::{ConstData, GraphBuilder, ModelBuilder, TensorRef};
use crate::model::*;

/// A whole spec file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    #[serde(default)]
    pub soc_version: Option<String>,
    /// Written in the header instead of the current version (to test version rejection).
    #[serde(default)]
    pub format_version: Option<u32>,
    pub graphs: Vec<GraphSpec>,
    #[serde(default, alias = "behavior")]
    pub behaviour: Option<BehaviourSpec>,
    /// What the binary info says about the QNN that made it.
    #[serde(default)]
    pub stamp: Option<StampSpec>,
}

/// `Stamp` in JSON: `{"build_id": "v2.51.0.1", "backend_id": 6, "soc_model": 35, "dsp_arch": 68,
/// "spill_fill": 1048576}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StampSpec {
    #[serde(default)]
    pub build_id: Option<String>,
    #[serde(default)]
    pub backend_id: Option<u32>,
    #[serde(default)]
    pub soc_model: Option<u32>,
    #[serde(default)]
    pub dsp_arch: Option<u32>,
    #[serde(default)]
    pub spill_fill: Option<u64>,
}

/// One graph.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphSpec {
    pub name: String,
    pub inputs: Vec<TensorJson>,
    #[serde(default)]
    pub constants: Vec<TensorJson>,
    pub nodes: Vec<NodeJson>,
    pub outputs: Vec<String>,
}

/// A tensor: input, constant (with `values` or `raw`) or node output.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorJson {
    pub name: String,
    /// Required except for node outputs (which default to the first input's type).
    #[serde(default)]
    pub dtype: Option<String>,
    /// Required except for node outputs of identity/relu/softmax (default: input's shape).
    #[serde(default)]
    pub shape: Option<Vec<u32>>,
    #[serde(default)]
    pub quant: Option<QuantJson>,
    /// Constants: real values, quantized with `quant`.
    #[serde(default)]
    pub values: Option<Vec<f64>>,
    /// Constants: stored integers.
    #[serde(default)]
    pub raw: Option<Vec<i64>>,
}

/// Quantization: per-tensor (`scale` + `offset` or `zero_point`) or per-axis (`axis` +
/// `scales` + optional `offsets`/`zero_points`), optional `bitwidth`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantJson {
    #[serde(default)]
    pub scale: Option<f32>,
    #[serde(default)]
    pub offset: Option<i32>,
    #[serde(default)]
    pub zero_point: Option<i32>,
    #[serde(default)]
    pub axis: Option<u32>,
    #[serde(default)]
    pub scales: Option<Vec<f32>>,
    #[serde(default)]
    pub offsets: Option<Vec<i32>>,
    #[serde(default)]
    pub zero_points: Option<Vec<i32>>,
    #[serde(default)]
    pub bitwidth: Option<u32>,
}

/// A node.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeJson {
    pub op: String,
    pub inputs: Vec<String>,
    /// The output tensor (the node is named after it).
    pub output: TensorJson,
    /// softmax only.
    #[serde(default)]
    pub beta: Option<f32>,
}

/// A QNN error code as a number or a name (`"QNN_COMMON_ERROR_SYSTEM_COMMUNICATION"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum CodeJson {
    Number(u32),
    Name(String),
}

/// A fault.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultJson {
    pub code: CodeJson,
    /// `"once"`, `"always"`; default: `"always"` (combined with `after`).
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub after: Option<u64>,
    #[serde(default)]
    pub times: Option<u64>,
    /// `"library"` (default) or `"context"`.
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub graph: Option<String>,
}

/// An adversarial option: a name, or an object with a target.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum AdversarialJson {
    Name(String),
    Target {
        kind: String,
        #[serde(default)]
        graph: Option<String>,
        #[serde(default)]
        tensor: Option<String>,
    },
}

/// The behaviour section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BehaviourSpec {
    #[serde(default)]
    pub binary_info_version: Option<u32>,
    #[serde(default)]
    pub graph_info_version: Option<u32>,
    #[serde(default)]
    pub tensor_version: Option<u32>,
    #[serde(default)]
    pub sleep_ms: Option<u32>,
    #[serde(default)]
    pub fail_execute: Option<FaultJson>,
    #[serde(default)]
    pub fail_context_create: Option<FaultJson>,
    #[serde(default)]
    pub adversarial: Vec<AdversarialJson>,
}

/// Resolves a dtype name. Short names (`u8`, `i8`, `u16`, `i16`, `u32`, `i32`) mean the
/// fixed-point type when `quantized`, the plain integer type otherwise.
pub fn parse_dtype(name: &str, quantized: bool) -> Result<DType, String> {
    let n = name.trim().to_ascii_lowercase();
    let n = n.strip_prefix("qnn_datatype_").unwrap_or(&n);
    let short = |fixed: DType, plain: DType| if quantized { fixed } else { plain };
    Ok(match n {
        "u8" | "uint8" => short(DType::UFixed8, DType::UInt8),
        "i8" | "s8" | "int8" => short(DType::SFixed8, DType::Int8),
        "u16" | "uint16" => short(DType::UFixed16, DType::UInt16),
        "i16" | "s16" | "int16" => short(DType::SFixed16, DType::Int16),
        "u32" | "uint32" => short(DType::UFixed32, DType::UInt32),
        "i32" | "s32" | "int32" => short(DType::SFixed32, DType::Int32),
        "f16" | "float16" => DType::Float16,
        "f32" | "float32" | "float" => DType::Float32,
        other => DType::ALL
            .into_iter()
            .find(|d| d.name() == other)
            .ok_or_else(|| format!("unknown dtype {name:?}"))?,
    })
}

fn parse_quant(q: &QuantJson) -> Result<Quant, String> {
    let quant = match (q.scale, &q.scales) {
        (Some(scale), None) => {
            if q.axis.is_some() || q.offsets.is_some() || q.zero_points.is_some() {
                return Err("per-tensor quant takes scale + offset/zero_point only".into());
            }
            let offset = match (q.offset, q.zero_point) {
                (Some(_), Some(_)) => return Err("give offset or zero_point, not both".into()),
                (Some(o), None) => o,
                (None, Some(z)) => z.checked_neg().ok_or("zero_point out of range")?,
                (None, None) => 0,
            };
            Quant::per_tensor(scale, offset)
        }
        (None, Some(scales)) => {
            if q.offset.is_some() || q.zero_point.is_some() {
                return Err("per-axis quant takes offsets/zero_points (plural)".into());
            }
            let axis = q.axis.ok_or("per-axis quant needs \"axis\"")?;
            let offsets = match (&q.offsets, &q.zero_points) {
                (Some(_), Some(_)) => return Err("give offsets or zero_points, not both".into()),
                (Some(o), None) => o.clone(),
                (None, Some(z)) => z.iter().map(|z| z.wrapping_neg()).collect(),
                (None, None) => vec![0; scales.len()],
            };
            if offsets.len() != scales.len() {
                return Err(format!(
                    "{} scales but {} offsets",
                    scales.len(),
                    offsets.len()
                ));
            }
            Quant::per_axis(axis, scales.clone(), offsets)
        }
        (Some(_), Some(_)) => {
            return Err("give scale (per-tensor) or scales (per-axis), not both".into());
        }
        (None, None) => return Err("quant needs \"scale\" or \"scales\"".into()),
    };
    Ok(match q.bitwidth {
        Some(bw) => quant.with_bitwidth(bw),
        None => quant,
    })
}

fn parse_spec(t: &TensorJson, default: Option<&TensorSpec>) -> Result<TensorSpec, String> {
    let quant = match &t.quant {
        Some(q) => parse_quant(q)?,
        None => Quant::None,
    };
    let dtype = match (&t.dtype, default) {
        (Some(d), _) => parse_dtype(d, !matches!(quant, Quant::None))?,
        (None, Some(d)) => d.dtype,
        (None, None) => return Err("\"dtype\" is required".into()),
    };
    let dims = match (&t.shape, default) {
        (Some(s), _) => s.clone(),
        (None, Some(d)) => d.dims.clone(),
        (None, None) => return Err("\"shape\" is required".into()),
    };
    // A node output without its own dtype and quant inherits the input's quantization.
    let quant = match (&t.dtype, &t.quant, default) {
        (None, None, Some(d)) => d.quant.clone(),
        _ => quant,
    };
    Ok(TensorSpec { dtype, dims, quant })
}

/// Looks up a QNN error code by number or header name (aliases such as
/// `QNN_CONTEXT_ERROR_MEM_ALLOC` included; `QNN_SUCCESS` is no error).
pub fn parse_code(c: &CodeJson) -> Result<u32, String> {
    match c {
        CodeJson::Number(n) => Ok(*n),
        CodeJson::Name(name) => qnn_sys::error_code_by_name(name)
            .filter(|&code| code != 0)
            .ok_or_else(|| format!("unknown error name {name:?}")),
    }
}

fn parse_fault(f: &FaultJson) -> Result<Fault, String> {
    let code = parse_code(&f.code)?;
    let after = f.after.unwrap_or(0);
    let times = match (f.mode.as_deref(), f.times) {
        (Some("once"), None) => Some(1),
        (Some("always") | None, t) => t,
        (Some("once"), Some(_)) => return Err("mode \"once\" with \"times\"".into()),
        (Some(m), _) => return Err(format!("unknown fault mode {m:?} (once, always)")),
    };
    let scope = match f.scope.as_deref() {
        None | Some("library") => FaultScope::Library,
        Some("context") => FaultScope::Context,
        Some(s) => return Err(format!("unknown fault scope {s:?} (library, context)")),
    };
    Ok(Fault {
        code,
        after,
        times,
        scope,
        graph: f.graph.clone(),
    })
}

fn build_graph(g: &mut GraphBuilder, spec: &GraphSpec) -> Result<(), String> {
    let mut tensors: HashMap<String, (TensorRef, TensorSpec)> = HashMap::new();
    for t in &spec.inputs {
        let s = parse_spec(t, None).map_err(|e| format!("input {:?}: {e}", t.name))?;
        if t.values.is_some() || t.raw.is_some() {
            return Err(format!("input {:?} cannot have values", t.name));
        }
        tensors.insert(t.name.clone(), (g.input(&t.name, s.clone()), s));
    }
    for t in &spec.constants {
        let s = parse_spec(t, None).map_err(|e| format!("constant {:?}: {e}", t.name))?;
        let data = match (&t.values, &t.raw) {
            (Some(v), None) => ConstData::Values(v.clone()),
            (None, Some(r)) => ConstData::Raw(r.clone()),
            _ => {
                return Err(format!(
                    "constant {:?} needs exactly one of \"values\" or \"raw\"",
                    t.name
                ));
            }
        };
        tensors.insert(t.name.clone(), (g.constant(&t.name, s.clone(), data), s));
    }
    for n in &spec.nodes {
        let what = || format!("node {:?} ({})", n.output.name, n.op);
        let mut ins = Vec::new();
        for i in &n.inputs {
            let (r, s) = tensors
                .get(i)
                .ok_or_else(|| format!("{}: unknown input tensor {i:?}", what()))?;
            ins.push((*r, s.clone()));
        }
        let op = match n.op.as_str() {
            "identity" => Op::Identity,
            "add" => Op::Add,
            "mul" => Op::Mul,
            "relu" => Op::Relu,
            "fully_connected" | "fc" => Op::FullyConnected,
            "softmax" => Op::Softmax {
                beta: n.beta.unwrap_or(1.0),
            },
            "reshape" => Op::Reshape,
            other => return Err(format!("{}: unknown op {other:?}", what())),
        };
        if n.beta.is_some() && !matches!(op, Op::Softmax { .. }) {
            return Err(format!("{}: \"beta\" is for softmax only", what()));
        }
        if n.output.values.is_some() || n.output.raw.is_some() {
            return Err(format!("{}: a node output cannot have values", what()));
        }
        let default = match op {
            Op::Identity | Op::Relu | Op::Softmax { .. } | Op::Reshape => {
                ins.first().map(|(_, s)| s)
            }
            _ => None,
        };
        let out = parse_spec(&n.output, default).map_err(|e| format!("{}: output: {e}", what()))?;
        if op == Op::Reshape && n.output.shape.is_none() {
            return Err(format!("{}: reshape needs an output \"shape\"", what()));
        }
        if n.output.name.is_empty() || tensors.contains_key(&n.output.name) {
            return Err(format!("{}: output name is empty or already used", what()));
        }
        let refs: Vec<TensorRef> = ins.iter().map(|(r, _)| *r).collect();
        let y = g.node(op, &n.output.name, &refs, out.clone());
        tensors.insert(n.output.name.clone(), (y, out));
    }
    for o in &spec.outputs {
        let (r, _) = tensors
            .get(o)
            .ok_or_else(|| format!("unknown output tensor {o:?}"))?;
        g.output(*r);
    }
    Ok(())
}

/// Parses a spec into a builder.
pub fn builder_from_spec(spec: &Spec) -> Result<ModelBuilder, String> {
    let mut errors = Vec::new();
    let mut mb = ModelBuilder::new();
    for gs in &spec.graphs {
        mb = mb.graph(&gs.name, |g| {
            if let Err(e) = build_graph(g, gs) {
                errors.push(format!("graph {:?}: {e}", gs.name));
            }
        });
    }
    if let Some(soc) = &spec.soc_version {
        mb = mb.soc_version(soc);
    }
    if let Some(v) = spec.format_version {
        mb = mb.format_version(v);
    }
    if let Some(st) = &spec.stamp {
        mb = mb.stamp(Stamp {
            build_id: st.build_id.clone(),
            backend_id: st.backend_id,
            soc_model: st.soc_model,
            dsp_arch: st.dsp_arch,
            spill_fill: st.spill_fill,
        });
    }
    if let Some(b) = &spec.behaviour {
        let mut beh = Behaviour::default();
        if let Some(v) = b.binary_info_version {
            beh.binary_info_version = v;
        }
        if let Some(v) = b.graph_info_version {
            beh.graph_info_version = v;
        }
        if let Some(v) = b.tensor_version {
            beh.tensor_version = v;
        }
        beh.sleep_ms = b.sleep_ms.unwrap_or(0);
        match b.fail_execute.as_ref().map(parse_fault).transpose() {
            Ok(f) => beh.fail_execute = f,
            Err(e) => errors.push(format!("fail_execute: {e}")),
        }
        match b.fail_context_create.as_ref().map(parse_fault).transpose() {
            Ok(f) => beh.fail_context_create = f,
            Err(e) => errors.push(format!("fail_context_create: {e}")),
        }
        for a in &b.adversarial {
            let (kind, graph, tensor) = match a {
                AdversarialJson::Name(n) => (n, None, None),
                AdversarialJson::Target {
                    kind,
                    graph,
                    tensor,
                } => (kind, graph.clone(), tensor.clone()),
            };
            match AdversarialKind::from_name(kind) {
                Some(kind) => beh.adversarial.push(Adversarial {
                    kind,
                    graph,
                    tensor,
                }),
                None => errors.push(format!(
                    "unknown adversarial option {kind:?} (one of: {})",
                    AdversarialKind::ALL
                        .iter()
                        .map(|(_, n)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        }
        mb = mb.behaviour(beh);
    }
    if errors.is_empty() {
        Ok(mb)
    } else {
        Err(errors.join("; "))
    }
}

/// Parses JSON text into a spec.
pub fn parse(json: &str) -> Result<Spec, String> {
    serde_json::from_str(json).map_err(|e| format!("invalid spec JSON: {e}"))
}

/// JSON text to a context binary.
pub fn build_from_json(json: &str) -> Result<Vec<u8>, String> {
    let spec = parse(json)?;
    builder_from_spec(&spec)?.build().map_err(|e| e.to_string())
}
