//! Models shared by the tests.
#![allow(dead_code)]

use qnn_sim::builder::{ConstData, ModelBuilder};
use qnn_sim::model::{DType, Quant, TensorSpec};

pub const X_SCALE: f32 = 1.0 / 255.0;
pub const W_SCALES: [f32; 3] = [0.01, 0.02, 0.015];
pub const W: [f32; 12] = [
    0.5, -0.25, 0.1, 0.0, 1.0, 0.5, -0.5, 0.2, -1.0, 0.3, 0.3, 0.3,
];
pub const B: [f32; 3] = [0.1, -0.1, 0.0];
pub const L_SCALE: f32 = 4.0 / 255.0;
pub const L_OFFSET: i32 = -128;

/// u8 [1,4] -> FC (per-channel i8 [3,4], i32 bias) -> u8 logits -> softmax f32.
pub fn classifier() -> ModelBuilder {
    ModelBuilder::new().graph("classifier", |g| {
        let x = g.input(
            "x",
            TensorSpec::new(DType::UFixed8, [1, 4]).quant(Quant::per_tensor(X_SCALE, 0)),
        );
        let w = g.constant(
            "w",
            TensorSpec::new(DType::SFixed8, [3, 4])
                .quant(Quant::per_axis_symmetric(0, W_SCALES.to_vec())),
            ConstData::values(W),
        );
        let b_scales: Vec<f32> = W_SCALES.iter().map(|s| s * X_SCALE).collect();
        let b = g.constant(
            "b",
            TensorSpec::new(DType::SFixed32, [3]).quant(Quant::per_axis_symmetric(0, b_scales)),
            ConstData::values(B),
        );
        let logits = g.fully_connected(
            "logits",
            x,
            w,
            Some(b),
            TensorSpec::new(DType::UFixed8, [1, 3]).quant(Quant::per_tensor(L_SCALE, L_OFFSET)),
        );
        let probs = g.softmax("probs", logits, TensorSpec::f32([1, 3]));
        g.output(probs);
    })
}

/// f32 [n] -> identity -> f32 [n].
pub fn identity_f32(name: &str, n: u32) -> ModelBuilder {
    identity_into(ModelBuilder::new(), name, n)
}

pub fn identity_into(m: ModelBuilder, name: &str, n: u32) -> ModelBuilder {
    m.graph(name, |g| {
        let x = g.input("x", TensorSpec::f32([n]));
        let y = g.identity("y", x, TensorSpec::f32([n]));
        g.output(y);
    })
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f32_from(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Independent f64 computation of the classifier on raw u8 input.
pub fn classifier_reference(x: &[u8; 4]) -> Vec<f64> {
    let xf: Vec<f64> = x.iter().map(|&q| q as f64 * X_SCALE as f64).collect();
    let mut logits = Vec::new();
    for o in 0..3 {
        let ws = W_SCALES[o] as f64;
        let mut acc = 0.0;
        for i in 0..4 {
            let wq = (W[o * 4 + i] as f64 / ws)
                .round_ties_even()
                .clamp(-128.0, 127.0);
            acc += xf[i] * wq * ws;
        }
        let bs = ws * X_SCALE as f64;
        acc += (B[o] as f64 / bs).round_ties_even() * bs;
        let lq = ((acc / L_SCALE as f64).round_ties_even() - L_OFFSET as f64).clamp(0.0, 255.0);
        logits.push((lq + L_OFFSET as f64) * L_SCALE as f64);
    }
    let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}
