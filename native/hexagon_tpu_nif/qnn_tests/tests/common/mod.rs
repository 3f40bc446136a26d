//! Shared helpers for the integration tests: a private copy of qnn_sim per test (so
//! live-handle counts and knobs are the test's own) and the models the tests run.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use qnn::Site;
use qnn::{Context, Graph, Runtime, RuntimeConfig};
use qnn_sim::builder::{ConstData, ModelBuilder};
use qnn_sim::model::{DType, Quant, TensorSpec};

/// A private copy of qnn_sim's library.
pub fn fresh_library() -> PathBuf {
    qnn_sim::testing::fresh_library()
}

pub fn config(lib: &Path) -> RuntimeConfig {
    RuntimeConfig {
        backend_lib: lib.to_path_buf(),
        system_lib: lib.to_path_buf(),
        rpcmem_lib: qnn::shared::DEFAULT_RPCMEM_LIB.into(),
        log_level: Some(qnn::LogLevel::Error),
        performance: Default::default(),
    }
}

/// A runtime over a private copy of qnn_sim.
pub fn runtime() -> (PathBuf, Arc<Runtime>) {
    let lib = fresh_library();
    let runtime = Runtime::new(&config(&lib), &Site::here()).expect("runtime over qnn_sim");
    (lib, runtime)
}

/// Loads `model` and retrieves its only (or first) graph.
pub fn load(runtime: &Arc<Runtime>, model: &[u8]) -> (Arc<Context>, Arc<Graph>) {
    let context = Context::from_bytes(runtime, model, &Site::here()).expect("context");
    let name = context.graphs()[0].name.clone();
    let graph = Graph::retrieve(&context, &name, &Site::here()).expect("graph");
    (context, graph)
}

pub fn live_handles(lib: &Path) -> u64 {
    qnn::sim_probe::live_handles(lib).expect("live handle count")
}

/// Asserts that every QNN handle created through `lib` was freed.
pub fn assert_all_freed(lib: &Path) {
    assert!(qnn::counters::settle(std::time::Duration::from_secs(10)));
    assert_eq!(live_handles(lib), 0, "qnn_sim still has live handles");
}

/// An identity graph `x -> y` over one tensor spec.
pub fn identity_model(spec: TensorSpec) -> Vec<u8> {
    identity_model_sleeping(spec, 0)
}

/// [`identity_model`] that sleeps `sleep_ms` in every execute.
pub fn identity_model_sleeping(spec: TensorSpec, sleep_ms: u32) -> Vec<u8> {
    ModelBuilder::new()
        .sleep_ms(sleep_ms)
        .graph("identity", |g| {
            let x = g.input("x", spec.clone());
            let y = g.identity("y", x, spec);
            g.output(y);
        })
        .build()
        .expect("identity model")
}

/// Weights, bias and quantization of the test classifier (4 features, 3 classes).
pub struct Classifier {
    pub input_scale: f32,
    pub input_offset: i32,
    pub weights: Vec<f64>,
    pub weight_scales: Vec<f32>,
    pub bias: Vec<f64>,
    pub logits: TensorSpec,
}

impl Classifier {
    pub fn new(logits: TensorSpec) -> Self {
        Classifier {
            input_scale: 1.0 / 255.0,
            input_offset: 0,
            weights: vec![
                0.5, -0.25, 0.1, 0.0, //
                1.0, 0.5, -0.5, 0.2, //
                -1.0, 0.3, 0.3, 0.3,
            ],
            weight_scales: vec![0.5 / 127.0, 1.0 / 127.0, 1.0 / 127.0],
            bias: vec![0.1, -0.1, 0.05],
            logits,
        }
    }

    pub fn bias_scales(&self) -> Vec<f32> {
        self.weight_scales
            .iter()
            .map(|s| s * self.input_scale)
            .collect()
    }

    /// u8 [1,4] -> fully connected (per-channel i8 weights, i32 bias) -> logits -> softmax f32.
    pub fn model(&self) -> Vec<u8> {
        ModelBuilder::new()
            .graph("classifier", |g| {
                let x = g.input(
                    "x",
                    TensorSpec::new(DType::UFixed8, [1, 4])
                        .quant(Quant::per_tensor(self.input_scale, self.input_offset)),
                );
                let w = g.constant(
                    "w",
                    TensorSpec::new(DType::SFixed8, [3, 4])
                        .quant(Quant::per_axis_symmetric(0, self.weight_scales.clone())),
                    ConstData::values(self.weights.clone()),
                );
                let b = g.constant(
                    "b",
                    TensorSpec::new(DType::SFixed32, [3])
                        .quant(Quant::per_axis_symmetric(0, self.bias_scales())),
                    ConstData::values(self.bias.clone()),
                );
                let logits = g.fully_connected("logits", x, w, Some(b), self.logits.clone());
                let probs = g.softmax("probs", logits, TensorSpec::f32([1, 3]));
                g.output(logits);
                g.output(probs);
            })
            .build()
            .expect("classifier model")
    }
}

/// Round half to even, computed from the definition in f64.
pub fn round_half_even(x: f64) -> f64 {
    let floor = x.floor();
    let diff = x - floor;
    let round_up = diff > 0.5 || (diff == 0.5 && floor % 2.0 != 0.0);
    if round_up { floor + 1.0 } else { floor }
}

/// What a stored value means under QNN's `(q + offset) * scale`.
pub fn dequantize(q: f64, scale: f32, offset: i32) -> f64 {
    (q + f64::from(offset)) * f64::from(scale)
}

/// The stored value for `x`, saturated to `[lo, hi]`.
pub fn quantize(x: f64, scale: f32, offset: i32, lo: f64, hi: f64) -> f64 {
    (round_half_even(x / f64::from(scale)) - f64::from(offset)).clamp(lo, hi)
}

pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
