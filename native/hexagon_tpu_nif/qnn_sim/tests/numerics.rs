//! Numerics of each op and dtype against independent f64 computations.

mod models;

use qnn_sim::builder::{ConstData, ModelBuilder};
use qnn_sim::model::*;
use qnn_sim::numerics::{self, f16_to_f32, f32_to_f16, round_saturate};

fn run(b: ModelBuilder, graph: &str, inputs: &[&[u8]]) -> Vec<Vec<u8>> {
    let m = b.build_model().unwrap();
    numerics::run_graph(m.graph(graph).unwrap(), inputs)
}

fn q(x: f64, scale: f64, offset: i64, lo: i64, hi: i64) -> i64 {
    ((x / scale).round_ties_even() - offset as f64).clamp(lo as f64, hi as f64) as i64
}

#[test]
fn rounding_is_half_to_even_and_saturating() {
    assert_eq!(round_saturate(0.5, 0, 255, 0), 0);
    assert_eq!(round_saturate(1.5, 0, 255, 0), 2);
    assert_eq!(round_saturate(2.5, 0, 255, 0), 2);
    assert_eq!(round_saturate(-2.5, -128, 127, 0), -2);
    assert_eq!(round_saturate(300.0, 0, 255, 0), 255);
    assert_eq!(round_saturate(-1e300, -128, 127, 0), -128);
    assert_eq!(round_saturate(f64::INFINITY, 0, 255, 0), 255);
    assert_eq!(round_saturate(f64::NAN, 0, 255, 128), 128);
}

#[test]
fn quantize_every_dtype() {
    for dtype in DType::ALL {
        let spec = if dtype.is_fixed_point() {
            TensorSpec::new(dtype, [5]).quant(Quant::per_tensor(
                0.5,
                if dtype.is_signed_int() { 0 } else { -10 },
            ))
        } else {
            TensorSpec::new(dtype, [5])
        };
        let xs = [0.0, 1.25, -3.0, 1e12, f64::NAN];
        let bytes = numerics::quantize(&spec, &xs);
        assert_eq!(bytes.len(), 5 * dtype.size());
        let back = numerics::dequantize(&spec, &bytes);
        let (lo, hi) = dtype.int_range(None);
        for (i, (&x, &y)) in xs.iter().zip(&back).enumerate() {
            let want = if dtype.is_float() {
                if dtype == DType::Float16 {
                    f64::from(f16_to_f32(f32_to_f16(x as f32)))
                } else {
                    x as f32 as f64
                }
            } else if dtype.is_fixed_point() {
                let (s, o) = (0.5, if dtype.is_signed_int() { 0 } else { -10 });
                let qv = if x.is_nan() {
                    (-o).clamp(lo, hi)
                } else {
                    q(x, s, o, lo, hi)
                };
                (qv + o) as f64 * s
            } else if x.is_nan() {
                0.0
            } else {
                x.round_ties_even().clamp(lo as f64, hi as f64)
            };
            assert!(
                want == y || (want.is_nan() && y.is_nan()),
                "{dtype} element {i}: {x} -> {y}, want {want}"
            );
        }
    }
}

#[test]
fn narrow_bitwidth_saturates_and_sign_extends() {
    let spec =
        TensorSpec::new(DType::SFixed8, [3]).quant(Quant::per_tensor(1.0, 0).with_bitwidth(4));
    let b = numerics::quantize(&spec, &[100.0, -100.0, 3.0]);
    assert_eq!(b, vec![7, (-8i8) as u8, 3]);
    assert_eq!(
        numerics::dequantize(&spec, &[0x0F, 0xF8, 0x03]),
        vec![-1.0, -8.0, 3.0]
    );
    let u = TensorSpec::new(DType::UFixed8, [1]).quant(Quant::per_tensor(1.0, 0).with_bitwidth(4));
    assert_eq!(numerics::quantize(&u, &[99.0]), vec![15]);
}

#[test]
fn f16_conversions() {
    for (f, h) in [
        (0.0f32, 0x0000u16),
        (-0.0, 0x8000),
        (1.0, 0x3C00),
        (65504.0, 0x7BFF),
        (1e6, 0x7C00),
        (-1e6, 0xFC00),
    ] {
        assert_eq!(f32_to_f16(f), h, "{f}");
    }
    assert_eq!(f32_to_f16(5.960_464_5e-8), 0x0001); // smallest subnormal
    assert_eq!(f32_to_f16(2.0e-8), 0x0000); // below half of it
    assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3C00); // tie, even mantissa
    assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3C02); // tie, rounds up to even
    assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
    for h in 0..=u16::MAX {
        let f = f16_to_f32(h);
        if !f.is_nan() {
            assert_eq!(f32_to_f16(f), h, "{h:#06x}");
        }
    }
}

#[test]
fn identity_requantizes_between_types() {
    let b = ModelBuilder::new().graph("g", |g| {
        let x = g.input(
            "x",
            TensorSpec::new(DType::UFixed8, [4]).quant(Quant::per_tensor(0.1, -128)),
        );
        let y = g.identity(
            "y",
            x,
            TensorSpec::new(DType::SFixed16, [4]).quant(Quant::per_tensor(0.01, 0)),
        );
        g.output(y);
    });
    let x = [0u8, 128, 255, 129];
    let out = run(b, "g", &[&x]);
    let got: Vec<i16> = out[0]
        .chunks(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    let want: Vec<i16> = x
        .iter()
        .map(|&v| q((v as f64 - 128.0) * 0.1, 0.01, 0, -32768, 32767) as i16)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn add_and_mul_broadcast() {
    let b = ModelBuilder::new().graph("g", |g| {
        let a = g.input("a", TensorSpec::f32([2, 3]));
        let row = g.constant(
            "row",
            TensorSpec::f32([3]),
            ConstData::values([1.0f32, 2.0, 3.0]),
        );
        let s = g.constant(
            "s",
            TensorSpec::new(DType::Int32, [1]),
            ConstData::raw([3i32]),
        );
        let sum = g.add("sum", a, row, TensorSpec::f32([2, 3]));
        let col = g.input("col", TensorSpec::f32([2, 1]));
        let prod = g.mul("prod", sum, col, TensorSpec::f32([2, 3]));
        let scaled = g.mul(
            "scaled",
            prod,
            s,
            TensorSpec::new(DType::SFixed16, [2, 3]).quant(Quant::per_tensor(0.25, 0)),
        );
        g.output(scaled);
    });
    let a = [1.0f32, -2.0, 0.5, 4.0, 0.0, -1.0];
    let col = [2.0f32, -0.5];
    let out = run(b, "g", &[&models::f32_bytes(&a), &models::f32_bytes(&col)]);
    let got: Vec<i16> = out[0]
        .chunks(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    let row = [1.0, 2.0, 3.0];
    let want: Vec<i16> = (0..6)
        .map(|i| {
            let v = (a[i] as f64 + row[i % 3]) * col[i / 3] as f64 * 3.0;
            q(v, 0.25, 0, -32768, 32767) as i16
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn relu_and_reshape() {
    let b = ModelBuilder::new().graph("g", |g| {
        let x = g.input(
            "x",
            TensorSpec::new(DType::SFixed8, [2, 2]).quant(Quant::per_tensor(0.5, 0)),
        );
        let r = g.relu("r", x, g.spec(x));
        let y = g.reshape("y", r, [4]);
        g.output(y);
    });
    let x = [(-3i8) as u8, 5, 0, (-128i8) as u8];
    let out = run(b, "g", &[&x]);
    assert_eq!(out[0], vec![0, 5, 0, 0]);
}

#[test]
fn fully_connected_per_axis_output_and_batch() {
    // x [2,3] i16 per-tensor, W [2,3] u8 per-axis with offsets, no bias, y [2,2] i8 per-axis (axis 1).
    let w_scales = [0.05f32, 0.1];
    let w_offsets = [-128, -100];
    let y_scales = [0.2f32, 0.3];
    let b = ModelBuilder::new().graph("g", |g| {
        let x = g.input(
            "x",
            TensorSpec::new(DType::SFixed16, [2, 3]).quant(Quant::per_tensor(0.001, 0)),
        );
        let w = g.constant(
            "w",
            TensorSpec::new(DType::UFixed8, [2, 3]).quant(Quant::per_axis(
                0,
                w_scales.to_vec(),
                w_offsets.to_vec(),
            )),
            ConstData::raw([0i64, 128, 255, 100, 50, 200]),
        );
        let y = g.fully_connected(
            "y",
            x,
            w,
            None,
            TensorSpec::new(DType::SFixed8, [2, 2]).quant(Quant::per_axis(
                1,
                y_scales.to_vec(),
                vec![0, 0],
            )),
        );
        g.output(y);
    });
    let xq: [i16; 6] = [1000, -2000, 500, 32767, -32768, 0];
    let xb: Vec<u8> = xq.iter().flat_map(|v| v.to_le_bytes()).collect();
    let out = run(b, "g", &[&xb]);
    let wq = [0i64, 128, 255, 100, 50, 200];
    let mut want = Vec::new();
    for bi in 0..2 {
        for o in 0..2 {
            let acc: f64 = (0..3)
                .map(|i| {
                    xq[bi * 3 + i] as f64
                        * 0.001
                        * (wq[o * 3 + i] + w_offsets[o] as i64) as f64
                        * w_scales[o] as f64
                })
                .sum();
            want.push(q(acc, y_scales[o] as f64, 0, -128, 127) as i8 as u8);
        }
    }
    assert_eq!(out[0], want);
}

#[test]
fn softmax_quantized_output_and_beta() {
    let b = ModelBuilder::new().graph("g", |g| {
        let x = g.input("x", TensorSpec::f32([2, 3]));
        let y = g.softmax_beta(
            "y",
            x,
            2.0,
            TensorSpec::new(DType::UFixed8, [2, 3]).quant(Quant::per_tensor(1.0 / 256.0, 0)),
        );
        g.output(y);
    });
    let x = [1.0f32, 2.0, 3.0, -1.0, -1.0, 1000.0];
    let out = run(b, "g", &[&models::f32_bytes(&x)]);
    let mut want = Vec::new();
    for row in x.chunks(3) {
        let m = row
            .iter()
            .map(|&v| 2.0 * v as f64)
            .fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|&v| (2.0 * v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        want.extend(e.iter().map(|v| q(v / s, 1.0 / 256.0, 0, 0, 255) as u8));
    }
    assert_eq!(out[0], want);
}

#[test]
fn classifier_within_one_step_of_f64() {
    let m = models::classifier().build_model().unwrap();
    let g = m.graph("classifier").unwrap();
    for x in [
        [0u8, 0, 0, 0],
        [255, 255, 255, 255],
        [1, 2, 3, 4],
        [200, 13, 77, 150],
    ] {
        let out = numerics::run_graph(g, &[&x]);
        let got = models::f32_from(&out[0]);
        let want = models::classifier_reference(&x);
        for (a, b) in got.iter().zip(&want) {
            assert!((*a as f64 - b).abs() < 1e-6);
        }
    }
}

#[test]
fn per_axis_constant_is_quantized_per_channel() {
    let spec =
        TensorSpec::new(DType::SFixed8, [2, 2]).quant(Quant::per_axis_symmetric(0, vec![0.1, 1.0]));
    let bytes =
        qnn_sim::builder::encode_const(&spec, &ConstData::values([0.25, -0.42, 2.5, 200.0]))
            .unwrap();
    assert_eq!(bytes, vec![2, (-4i8) as u8, 2, 127]);
    assert!(qnn_sim::builder::encode_const(&spec, &ConstData::raw([0i64, 0, 0, 128])).is_err());
}
