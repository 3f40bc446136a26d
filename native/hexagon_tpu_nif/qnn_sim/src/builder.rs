//! Builds qnn_sim context binaries.
//!
//! A [`ModelBuilder`] holds graphs and a behaviour section; each graph is described inside a
//! closure that receives a [`GraphBuilder`]. Tensors are referred to by [`TensorRef`]s; mistakes
//! (a wrong shape, a missing quantization, a reference from another graph) are collected and
//! reported by [`ModelBuilder::build`], which validates the whole model exactly as the backend
//! will when it loads it.
//!
//! ```
//! use qnn_sim::builder::{ModelBuilder, ConstData};
//! use qnn_sim::model::{DType, Fault, Quant, TensorSpec};
//!
//! // A small quantized classifier: u8 [1,4] -> FC (per-channel i8 weights, i32 bias) -> softmax.
//! let bytes = ModelBuilder::new()
//!     .graph("classifier", |g| {
//!         let x = g.input("x", TensorSpec::new(DType::UFixed8, [1, 4]).quant(Quant::per_tensor(1.0 / 255.0, 0)));
//!         let w_scales = vec![0.01, 0.02, 0.015];
//!         let w = g.constant(
//!             "w",
//!             TensorSpec::new(DType::SFixed8, [3, 4]).quant(Quant::per_axis_symmetric(0, w_scales.clone())),
//!             ConstData::values([0.5, -0.25, 0.1, 0.0, 1.0, 0.5, -0.5, 0.2, -1.0, 0.3, 0.3, 0.3]),
//!         );
//!         // Bias scale = input scale * weight scale, per channel (the usual convention).
//!         let b_scales: Vec<f32> = w_scales.iter().map(|s| s / 255.0).collect();
//!         let b = g.constant(
//!             "b",
//!             TensorSpec::new(DType::SFixed32, [3]).quant(Quant::per_axis_symmetric(0, b_scales)),
//!             ConstData::values([0.1, -0.1, 0.0]),
//!         );
//!         let logits = g.fully_connected(
//!             "logits", x, w, Some(b),
//!             TensorSpec::new(DType::UFixed8, [1, 3]).quant(Quant::per_tensor(4.0 / 255.0, -128)),
//!         );
//!         let probs = g.softmax("probs", logits, TensorSpec::f32([1, 3]));
//!         g.output(probs);
//!     })
//!     .sleep_ms(0)
//!     .fail_execute(Fault::after(1007, 3)) // the 4th execute and later fail with 1007
//!     .build()
//!     .expect("valid model");
//! assert_eq!(&bytes[..8], b"QNNSIMCB");
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::format;
use crate::model::*;
use crate::numerics;

/// Why a model could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildError(pub Vec<String>);

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

impl std::error::Error for BuildError {}

/// Data for a constant tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstData {
    /// Real values, quantized with the tensor's quantization (round half to even,
    /// saturating), converted for float types, rounded for plain integer types.
    Values(Vec<f64>),
    /// Stored integers (already quantized), range-checked against the type (and bit width).
    Raw(Vec<i64>),
    /// Little-endian bytes, stored as they are.
    Bytes(Vec<u8>),
}

impl ConstData {
    /// Real values from anything that iterates over numbers.
    pub fn values<T: Into<f64>>(v: impl IntoIterator<Item = T>) -> ConstData {
        ConstData::Values(v.into_iter().map(Into::into).collect())
    }

    /// Stored integers.
    pub fn raw<T: Into<i64>>(v: impl IntoIterator<Item = T>) -> ConstData {
        ConstData::Raw(v.into_iter().map(Into::into).collect())
    }
}

impl From<Vec<f32>> for ConstData {
    fn from(v: Vec<f32>) -> ConstData {
        ConstData::values(v)
    }
}

impl From<Vec<f64>> for ConstData {
    fn from(v: Vec<f64>) -> ConstData {
        ConstData::Values(v)
    }
}

impl From<&[f32]> for ConstData {
    fn from(v: &[f32]) -> ConstData {
        ConstData::values(v.iter().copied())
    }
}

/// Encodes constant data for a tensor type.
pub fn encode_const(spec: &TensorSpec, data: &ConstData) -> Result<Vec<u8>, String> {
    let n = spec.element_count().ok_or("element count overflows")?;
    let len = match data {
        ConstData::Values(v) => v.len(),
        ConstData::Raw(v) => v.len(),
        ConstData::Bytes(b) => {
            return if Some(b.len()) == spec.byte_size() {
                Ok(b.clone())
            } else {
                Err(format!(
                    "{} bytes given, {:?} needed",
                    b.len(),
                    spec.byte_size()
                ))
            };
        }
    };
    if len != n {
        return Err(format!(
            "{len} values given, shape {:?} has {n} elements",
            spec.dims
        ));
    }
    match data {
        ConstData::Values(v) => Ok(numerics::quantize(spec, v)),
        ConstData::Raw(v) => {
            if spec.dtype.is_float() {
                let f: Vec<f64> = v.iter().map(|&x| x as f64).collect();
                return Ok(numerics::quantize(spec, &f));
            }
            let (lo, hi) = spec.dtype.int_range(spec.quant.bitwidth());
            if let Some(bad) = v.iter().find(|&&x| x < lo || x > hi) {
                return Err(format!(
                    "raw value {bad} outside {lo}..={hi} for {}",
                    spec.dtype
                ));
            }
            let s = spec.dtype.size();
            Ok(v.iter()
                .flat_map(|x| x.to_le_bytes()[..s].to_vec())
                .collect())
        }
        ConstData::Bytes(_) => unreachable!("handled above"),
    }
}

static NEXT_GRAPH_TOKEN: AtomicU64 = AtomicU64::new(1);

/// A tensor of the graph being built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorRef {
    graph: u64,
    index: u32,
}

/// Describes one graph; handed to the closure of [`ModelBuilder::graph`].
pub struct GraphBuilder {
    token: u64,
    def: GraphDef,
    errors: Vec<String>,
}

impl GraphBuilder {
    fn new(name: &str) -> GraphBuilder {
        GraphBuilder {
            token: NEXT_GRAPH_TOKEN.fetch_add(1, Ordering::Relaxed),
            def: GraphDef {
                name: name.to_owned(),
                tensors: Vec::new(),
                inputs: Vec::new(),
                outputs: Vec::new(),
                nodes: Vec::new(),
            },
            errors: Vec::new(),
        }
    }

    fn add_tensor(
        &mut self,
        name: &str,
        kind: TensorKind,
        spec: TensorSpec,
        data: Vec<u8>,
    ) -> TensorRef {
        let index = self.def.tensors.len() as u32;
        self.def.tensors.push(TensorDef {
            id: index + 1,
            name: name.to_owned(),
            kind,
            spec,
            data,
        });
        TensorRef {
            graph: self.token,
            index,
        }
    }

    fn check(&mut self, t: TensorRef, what: &str) -> Option<u32> {
        if t.graph != self.token || t.index as usize >= self.def.tensors.len() {
            self.errors
                .push(format!("{what}: tensor reference from another graph"));
            return None;
        }
        Some(t.index)
    }

    /// Adds a graph input (inputs are reported in the order they are added).
    pub fn input(&mut self, name: &str, spec: TensorSpec) -> TensorRef {
        let t = self.add_tensor(name, TensorKind::Input, spec, Vec::new());
        self.def.inputs.push(t.index);
        t
    }

    /// Adds a constant (static weights, biases, operands).
    pub fn constant(
        &mut self,
        name: &str,
        spec: TensorSpec,
        data: impl Into<ConstData>,
    ) -> TensorRef {
        let bytes = match encode_const(&spec, &data.into()) {
            Ok(b) => b,
            Err(e) => {
                self.errors.push(format!("constant {name:?}: {e}"));
                Vec::new()
            }
        };
        self.add_tensor(name, TensorKind::Constant, spec, bytes)
    }

    /// A copy of a tensor's spec (to reuse as an op's output spec).
    pub fn spec(&self, t: TensorRef) -> TensorSpec {
        self.def
            .tensors
            .get(t.index as usize)
            .filter(|_| t.graph == self.token)
            .map_or_else(|| TensorSpec::f32([1]), |d| d.spec.clone())
    }

    /// Adds a node whose single output is a new tensor named `name` (the node gets the same
    /// name).
    pub fn node(&mut self, op: Op, name: &str, inputs: &[TensorRef], out: TensorSpec) -> TensorRef {
        let mut idx = Vec::with_capacity(inputs.len());
        for &i in inputs {
            if let Some(i) = self.check(i, name) {
                idx.push(i);
            }
        }
        let y = self.add_tensor(name, TensorKind::Intermediate, out, Vec::new());
        self.def.nodes.push(Node {
            name: name.to_owned(),
            op,
            inputs: idx,
            outputs: vec![y.index],
        });
        y
    }

    /// `y = x`, requantized to `out`.
    pub fn identity(&mut self, name: &str, x: TensorRef, out: TensorSpec) -> TensorRef {
        self.node(Op::Identity, name, &[x], out)
    }

    /// Elementwise `a + b` (numpy broadcasting).
    pub fn add(&mut self, name: &str, a: TensorRef, b: TensorRef, out: TensorSpec) -> TensorRef {
        self.node(Op::Add, name, &[a, b], out)
    }

    /// Elementwise `a * b` (numpy broadcasting).
    pub fn mul(&mut self, name: &str, a: TensorRef, b: TensorRef, out: TensorSpec) -> TensorRef {
        self.node(Op::Mul, name, &[a, b], out)
    }

    /// `max(x, 0)`.
    pub fn relu(&mut self, name: &str, x: TensorRef, out: TensorSpec) -> TensorRef {
        self.node(Op::Relu, name, &[x], out)
    }

    /// `y[b, o] = sum_i x[b, i] * w[o, i] + bias[o]`, with `w` of shape `[out, in]`
    /// (quantized per channel along axis 0, typically) and `out` of shape `[batch, out]`.
    pub fn fully_connected(
        &mut self,
        name: &str,
        x: TensorRef,
        w: TensorRef,
        bias: Option<TensorRef>,
        out: TensorSpec,
    ) -> TensorRef {
        let mut ins = vec![x, w];
        ins.extend(bias);
        self.node(Op::FullyConnected, name, &ins, out)
    }

    /// Softmax over the last axis.
    pub fn softmax(&mut self, name: &str, x: TensorRef, out: TensorSpec) -> TensorRef {
        self.node(Op::Softmax { beta: 1.0 }, name, &[x], out)
    }

    /// Softmax over the last axis of `beta * x`.
    pub fn softmax_beta(
        &mut self,
        name: &str,
        x: TensorRef,
        beta: f32,
        out: TensorSpec,
    ) -> TensorRef {
        self.node(Op::Softmax { beta }, name, &[x], out)
    }

    /// Same data, new dims (type and quantization kept).
    pub fn reshape(&mut self, name: &str, x: TensorRef, dims: impl Into<Vec<u32>>) -> TensorRef {
        let mut spec = self.spec(x);
        spec.dims = dims.into();
        if let Quant::PerAxis { .. } = spec.quant {
            self.errors.push(format!(
                "reshape {name:?}: per-axis quantized input; use node() with an explicit spec"
            ));
        }
        self.node(Op::Reshape, name, &[x], spec)
    }

    /// Marks a node output as a graph output (outputs are reported in this order).
    pub fn output(&mut self, t: TensorRef) {
        let Some(i) = self.check(t, "output") else {
            return;
        };
        let def = &mut self.def.tensors[i as usize];
        if def.kind != TensorKind::Intermediate {
            self.errors.push(format!(
                "output {:?}: only node outputs can be graph outputs (add an identity node)",
                def.name
            ));
            return;
        }
        def.kind = TensorKind::Output;
        self.def.outputs.push(i);
    }
}

/// Builds a whole context binary: graphs plus behaviour.
#[derive(Default)]
pub struct ModelBuilder {
    model: Model,
    errors: Vec<String>,
    format_version: Option<u32>,
}

impl ModelBuilder {
    /// An empty model with the default behaviour (BinaryInfo v3, GraphInfo v3, tensor v2).
    pub fn new() -> ModelBuilder {
        ModelBuilder::default()
    }

    /// Adds a graph described by `f`.
    pub fn graph(mut self, name: &str, f: impl FnOnce(&mut GraphBuilder)) -> ModelBuilder {
        let mut g = GraphBuilder::new(name);
        f(&mut g);
        self.errors
            .extend(g.errors.into_iter().map(|e| format!("graph {name:?}: {e}")));
        self.model.graphs.push(g.def);
        self
    }

    /// Sets the `socVersion` string reported in the binary info.
    pub fn soc_version(mut self, soc: &str) -> ModelBuilder {
        self.model.soc_version = soc.to_owned();
        self
    }

    /// Sets what the binary info says about the QNN that made it ([`Stamp`]).
    pub fn stamp(mut self, stamp: Stamp) -> ModelBuilder {
        self.model.stamp = stamp;
        self
    }

    /// Replaces the whole behaviour section.
    pub fn behaviour(mut self, b: Behaviour) -> ModelBuilder {
        self.model.behaviour = b;
        self
    }

    /// Edits the behaviour section in place.
    pub fn with_behaviour(mut self, f: impl FnOnce(&mut Behaviour)) -> ModelBuilder {
        f(&mut self.model.behaviour);
        self
    }

    /// BinaryInfo, GraphInfo and tensor struct versions the System API reports.
    pub fn metadata_versions(
        mut self,
        binary_info: u32,
        graph_info: u32,
        tensor: u32,
    ) -> ModelBuilder {
        let b = &mut self.model.behaviour;
        (
            b.binary_info_version,
            b.graph_info_version,
            b.tensor_version,
        ) = (binary_info, graph_info, tensor);
        self
    }

    /// Sleeps this long inside every execute.
    pub fn sleep_ms(mut self, ms: u32) -> ModelBuilder {
        self.model.behaviour.sleep_ms = ms;
        self
    }

    /// Injects an execute failure.
    pub fn fail_execute(mut self, fault: Fault) -> ModelBuilder {
        self.model.behaviour.fail_execute = Some(fault);
        self
    }

    /// Injects a context-creation failure.
    pub fn fail_context_create(mut self, fault: Fault) -> ModelBuilder {
        self.model.behaviour.fail_context_create = Some(fault);
        self
    }

    /// Adds an adversarial-metadata option on the default target (first input of the first
    /// graph).
    pub fn adversarial(mut self, kind: AdversarialKind) -> ModelBuilder {
        self.model.behaviour.adversarial.push(Adversarial {
            kind,
            graph: None,
            tensor: None,
        });
        self
    }

    /// Adds an adversarial-metadata option on a named graph and/or tensor.
    pub fn adversarial_on(
        mut self,
        kind: AdversarialKind,
        graph: Option<&str>,
        tensor: Option<&str>,
    ) -> ModelBuilder {
        self.model.behaviour.adversarial.push(Adversarial {
            kind,
            graph: graph.map(str::to_owned),
            tensor: tensor.map(str::to_owned),
        });
        self
    }

    /// Writes another format version in the header (to test version rejection).
    pub fn format_version(mut self, version: u32) -> ModelBuilder {
        self.format_version = Some(version);
        self
    }

    /// The validated model, without serializing it.
    pub fn build_model(self) -> Result<Model, BuildError> {
        self.finish().map(|(m, _)| m)
    }

    fn finish(self) -> Result<(Model, u32), BuildError> {
        let mut errors = self.errors;
        if let Err(e) = self.model.validate() {
            errors.push(e.0);
        }
        if errors.is_empty() {
            Ok((
                self.model,
                self.format_version.unwrap_or(format::FORMAT_VERSION),
            ))
        } else {
            Err(BuildError(errors))
        }
    }

    /// Validates and serializes the model.
    pub fn build(self) -> Result<Vec<u8>, BuildError> {
        let (model, version) = self.finish()?;
        Ok(format::encode_with_version(&model, version))
    }
}
