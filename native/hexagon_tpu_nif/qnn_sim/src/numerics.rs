//! Reference numerics: (de)quantization and the ops, computed in `f64`.
//!
//! Every tensor is dequantized with `float = (q + offset) * scale`, ops compute in `f64`, and
//! each node's output is quantized to its own type (round half to even, saturating; NaN becomes
//! the zero point, i.e. `q = -offset`) before the next node reads it, as a quantized pipeline
//! would. Not fast, not meant to be.

use crate::model::*;

/// Reads element `i` as the stored value (integers exactly, floats widened).
fn load(dtype: DType, bitwidth: Option<u32>, bytes: &[u8], i: usize) -> f64 {
    let s = dtype.size();
    let b = &bytes[i * s..(i + 1) * s];
    let raw: i64 = match dtype {
        DType::Float32 => return f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        DType::Float16 => return f64::from(f16_to_f32(u16::from_le_bytes([b[0], b[1]]))),
        DType::UFixed8 | DType::UInt8 => i64::from(b[0]),
        DType::SFixed8 | DType::Int8 => i64::from(b[0] as i8),
        DType::UFixed16 | DType::UInt16 => i64::from(u16::from_le_bytes([b[0], b[1]])),
        DType::SFixed16 | DType::Int16 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        DType::UFixed32 | DType::UInt32 => i64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        DType::SFixed32 | DType::Int32 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    };
    // A narrower bit width occupies the low bits; higher bits are ignored and signed values
    // are two's complement within the bit width.
    match bitwidth {
        Some(bw) if bw < dtype.bits() => {
            let masked = raw & ((1i64 << bw) - 1);
            if dtype.is_signed_int() && masked >= 1i64 << (bw - 1) {
                (masked - (1i64 << bw)) as f64
            } else {
                masked as f64
            }
        }
        _ => raw as f64,
    }
}

fn store(dtype: DType, out: &mut [u8], i: usize, q: i64, f: f64) {
    let s = dtype.size();
    let b = &mut out[i * s..(i + 1) * s];
    match dtype {
        DType::Float32 => b.copy_from_slice(&(f as f32).to_le_bytes()),
        DType::Float16 => b.copy_from_slice(&f32_to_f16(f as f32).to_le_bytes()),
        _ => b.copy_from_slice(&q.to_le_bytes()[..s]),
    }
}

/// Index along `axis` of flat element `i` in a tensor of shape `dims`.
fn axis_index(dims: &[u32], axis: usize, i: usize) -> usize {
    let inner: usize = dims[axis + 1..].iter().map(|&d| d as usize).product();
    (i / inner.max(1)) % (dims[axis] as usize).max(1)
}

fn quant_axis(spec: &TensorSpec) -> Option<usize> {
    match spec.quant {
        Quant::PerAxis { axis, .. } => Some(axis as usize),
        _ => None,
    }
}

/// Dequantizes a whole tensor (`bytes.len()` must be its byte size).
pub fn dequantize(spec: &TensorSpec, bytes: &[u8]) -> Vec<f64> {
    let n = bytes.len() / spec.dtype.size();
    let bw = spec.quant.bitwidth();
    let axis = quant_axis(spec);
    (0..n)
        .map(|i| {
            let v = load(spec.dtype, bw, bytes, i);
            if !spec.dtype.is_fixed_point() {
                return v;
            }
            let (scale, offset) = spec
                .quant
                .params(axis.map_or(0, |a| axis_index(&spec.dims, a, i)));
            (v + offset as f64) * scale
        })
        .collect()
}

/// Rounds half to even and saturates into `[lo, hi]`; NaN gives `nan_value`.
pub fn round_saturate(x: f64, lo: i64, hi: i64, nan_value: i64) -> i64 {
    if x.is_nan() {
        return nan_value.clamp(lo, hi);
    }
    let r = x.round_ties_even();
    if r <= lo as f64 {
        lo
    } else if r >= hi as f64 {
        hi
    } else {
        r as i64
    }
}

/// Quantizes (or converts) `values` to a tensor's type: `q = round(x / scale) - offset`.
pub fn quantize(spec: &TensorSpec, values: &[f64]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * spec.dtype.size()];
    let bw = spec.quant.bitwidth();
    let (lo, hi) = spec.dtype.int_range(bw);
    let axis = quant_axis(spec);
    for (i, &x) in values.iter().enumerate() {
        if spec.dtype.is_float() {
            store(spec.dtype, &mut out, i, 0, x);
            continue;
        }
        let q = if spec.dtype.is_fixed_point() {
            let (scale, offset) = spec
                .quant
                .params(axis.map_or(0, |a| axis_index(&spec.dims, a, i)));
            // round(x/scale) - offset == round(x/scale - offset) since offset is an integer.
            round_saturate(x / scale - offset as f64, lo, hi, -offset)
        } else {
            round_saturate(x, lo, hi, 0)
        };
        store(spec.dtype, &mut out, i, q, 0.0);
    }
    out
}

/// `dequantize(quantize(values))`: what the next op sees after a tensor is stored.
pub fn fake_quant(spec: &TensorSpec, values: &[f64]) -> Vec<f64> {
    dequantize(spec, &quantize(spec, values))
}

/// IEEE half to single (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // subnormal: value = m * 2^-24
            let v = m as f32 * f32::from_bits(0x3380_0000); // 2^-24
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7fc0_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Single to IEEE half, round to nearest even, overflow to infinity, NaN stays NaN.
pub fn f32_to_f16(f: f32) -> u16 {
    let bits = f.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign
            | 0x7c00
            | if man != 0 {
                0x200 | (man >> 13) as u16
            } else {
                0
            };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // subnormal or zero in half precision
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let mid = 1 << (shift - 1);
        let rounded = if rem > mid || (rem == mid && half & 1 == 1) {
            half + 1
        } else {
            half
        };
        return sign | rounded as u16;
    }
    let half = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    let rounded = if rem > 0x1000 || (rem == 0x1000 && half & 1 == 1) {
        half + 1
    } else {
        half
    };
    sign | rounded as u16 // a carry into the exponent is the correct rounding (up to inf)
}

fn broadcast_index(out_dims: &[u32], in_dims: &[u32], flat: usize) -> usize {
    let off = out_dims.len() - in_dims.len();
    let mut rem = flat;
    let mut idx = 0usize;
    let mut stride = 1usize;
    for k in (0..out_dims.len()).rev() {
        let od = out_dims[k] as usize;
        let coord = rem % od.max(1);
        rem /= od.max(1);
        if k >= off {
            let d = in_dims[k - off] as usize;
            if d != 1 {
                idx += coord * stride;
            }
            stride *= d;
        }
    }
    idx
}

/// `f` of the two inputs, broadcast to the output's shape.
fn elementwise(
    ins: &[(&TensorSpec, &[f64])],
    out: &TensorSpec,
    f: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let ((a_spec, a), (b_spec, b)) = (ins[0], ins[1]);
    let (ad, bd, od) = (&a_spec.dims, &b_spec.dims, &out.dims);
    let n: usize = od.iter().map(|&d| d as usize).product();
    (0..n)
        .map(|i| f(a[broadcast_index(od, ad, i)], b[broadcast_index(od, bd, i)]))
        .collect()
}

/// Computes one op on dequantized inputs (the model has been validated).
pub fn compute(op: Op, ins: &[(&TensorSpec, &[f64])], out: &TensorSpec) -> Vec<f64> {
    match op {
        Op::Identity | Op::Reshape => ins[0].1.to_vec(),
        Op::Relu => ins[0]
            .1
            .iter()
            .map(|&x| if x > 0.0 { x } else { 0.0 })
            .collect(),
        Op::Add => elementwise(ins, out, |x, y| x + y),
        Op::Mul => elementwise(ins, out, |x, y| x * y),
        Op::FullyConnected => {
            let (x, w) = (ins[0].1, ins[1].1);
            let bias = ins.get(2).map(|b| b.1);
            let (outs, inn) = (ins[1].0.dims[0] as usize, ins[1].0.dims[1] as usize);
            let batch = x.len() / inn.max(1);
            let mut y = Vec::with_capacity(batch * outs);
            for bi in 0..batch {
                let row = &x[bi * inn..(bi + 1) * inn];
                for o in 0..outs {
                    let wr = &w[o * inn..(o + 1) * inn];
                    let acc: f64 = row.iter().zip(wr).map(|(a, b)| a * b).sum();
                    y.push(acc + bias.map_or(0.0, |b| b[o]));
                }
            }
            y
        }
        Op::Softmax { beta } => {
            let x = ins[0].1;
            let last = *ins[0].0.dims.last().unwrap_or(&1) as usize;
            let beta = f64::from(beta);
            let mut y = Vec::with_capacity(x.len());
            for row in x.chunks(last.max(1)) {
                let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(beta * v));
                let e: Vec<f64> = row.iter().map(|&v| (beta * v - m).exp()).collect();
                let s: f64 = e.iter().sum();
                y.extend(e.iter().map(|v| v / s));
            }
            y
        }
    }
}

/// Runs a validated graph: `inputs` are the graph inputs' bytes in graph order (sizes already
/// checked); returns the outputs' bytes in graph order.
pub fn run_graph(g: &GraphDef, inputs: &[&[u8]]) -> Vec<Vec<u8>> {
    // A lone identity between per-tensor fixed-point tensors of one type and encoding gives its
    // input back, which the arithmetic below would too (an integer is dequantized and quantized
    // again exactly): copied without that cost, for benchmarks that time large ones.
    if let [node] = g.nodes.as_slice()
        && matches!(node.op, Op::Identity)
        && node.inputs == g.inputs
        && node.outputs == g.outputs
    {
        let (x, y) = (
            &g.tensor(node.inputs[0]).spec,
            &g.tensor(node.outputs[0]).spec,
        );
        if x == y && x.dtype.is_fixed_point() && matches!(x.quant, Quant::PerTensor { .. }) {
            return vec![inputs[0].to_vec()];
        }
    }
    let mut values: Vec<Option<Vec<f64>>> = vec![None; g.tensors.len()];
    for (k, &ti) in g.inputs.iter().enumerate() {
        values[ti as usize] = Some(dequantize(&g.tensor(ti).spec, inputs[k]));
    }
    for (i, t) in g.tensors.iter().enumerate() {
        if t.kind == TensorKind::Constant {
            values[i] = Some(dequantize(&t.spec, &t.data));
        }
    }
    for node in &g.nodes {
        let out = node.outputs[0];
        let y = {
            let ins: Vec<(&TensorSpec, &[f64])> = node
                .inputs
                .iter()
                .map(|&i| {
                    (
                        &g.tensor(i).spec,
                        values[i as usize].as_deref().unwrap_or(&[]),
                    )
                })
                .collect();
            compute(node.op, &ins, &g.tensor(out).spec)
        };
        values[out as usize] = Some(fake_quant(&g.tensor(out).spec, &y));
    }
    g.outputs
        .iter()
        .map(|&o| {
            quantize(
                &g.tensor(o).spec,
                values[o as usize].as_deref().unwrap_or(&[]),
            )
        })
        .collect()
}
