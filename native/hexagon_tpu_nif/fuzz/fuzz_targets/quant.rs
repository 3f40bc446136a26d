//! The quantization kernels against the scalar reference forms, differentially: the slice
//! kernels (AVX-512 / AVX2 / F16C paths chosen at run time on x86-64, the portable loops
//! elsewhere and on tails) must give the very bits `quantize_scalar`, `dequantize_scalar`,
//! `f32_to_f16_bits` and `f16_bits_to_f32` give element by element (the documented tolerance
//! is none). Parameters, lengths, axes and data come from the fuzz bytes; an argument the
//! kernels refuse must be one the checks say is wrong, and leaves the destination untouched.

#![no_main]

use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use qnn::quant::{self, AxisLayout, QuantError, QuantType};

const TYPES: [QuantType; 6] = [
    QuantType::U8,
    QuantType::I8,
    QuantType::U16,
    QuantType::I16,
    QuantType::U32,
    QuantType::I32,
];

/// A scale: often a plain one, sometimes any bit pattern (0, negative, NaN, Inf, subnormal).
fn scale(u: &mut Unstructured) -> Result<f32> {
    Ok(match u.int_in_range(0..=3)? {
        0 => f32::from_bits(u.arbitrary()?),
        1 => [1.0, 0.5, 1.0 / 255.0, 0.003_921_569, 2.0e-38, 1.0e-45][u.choose_index(6)?],
        _ => (u.int_in_range(1..=1_000_000u32)? as f32) * 1.0e-4,
    })
}

/// An offset: near 0 or the 2^24 boundary of the f32 path, or any i32.
fn offset(u: &mut Unstructured) -> Result<i32> {
    Ok(match u.int_in_range(0..=2)? {
        0 => u.int_in_range(-300..=300)?,
        1 => (1 << 24) + u.int_in_range(-2..=2)? * if bool::arbitrary(u)? { -1 } else { 1 },
        _ => u.arbitrary()?,
    })
}

/// A range: the type's full one, a sub-range, or anything (possibly invalid).
fn range(u: &mut Unstructured, ty: QuantType) -> Result<(i64, i64)> {
    let (lo, hi) = ty.full_range();
    Ok(match u.int_in_range(0..=2)? {
        0 => (lo, hi),
        1 => {
            let a = u.int_in_range(lo..=hi)?;
            (a, u.int_in_range(a..=hi)?)
        }
        _ => (u.arbitrary()?, u.arbitrary()?),
    })
}

/// f32 values: any bit patterns, or values around the quantization grid (ties included).
fn values(u: &mut Unstructured, n: usize, scale: f32) -> Result<Vec<f32>> {
    (0..n)
        .map(|_| {
            Ok(match u.int_in_range(0..=2)? {
                0 => f32::from_bits(u.arbitrary()?),
                1 => (u.int_in_range(-70_000..=70_000i32)? as f32 * 0.5) * scale,
                _ => u.int_in_range(-1000..=1000i32)? as f32 * 0.25,
            })
        })
        .collect()
}

fn le_bytes_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `q` in `ty`'s little-endian container (`q` is inside the type's range).
fn store(q: i64, ty: QuantType) -> Vec<u8> {
    q.to_le_bytes()[..ty.size()].to_vec()
}

fn load(b: &[u8], ty: QuantType) -> i64 {
    match ty {
        QuantType::U8 => b[0] as i64,
        QuantType::I8 => b[0] as i8 as i64,
        QuantType::U16 => u16::from_le_bytes([b[0], b[1]]) as i64,
        QuantType::I16 => i16::from_le_bytes([b[0], b[1]]) as i64,
        QuantType::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        QuantType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
    }
}

fn valid_scale(s: f32) -> bool {
    s.is_finite() && s > 0.0
}

fn valid_range(ty: QuantType, (qmin, qmax): (i64, i64)) -> bool {
    let (lo, hi) = ty.full_range();
    qmin <= qmax && qmin >= lo && qmax <= hi
}

fn per_tensor(u: &mut Unstructured) -> Result<()> {
    let ty = TYPES[u.choose_index(TYPES.len())?];
    let (s, o) = (scale(u)?, offset(u)?);
    let r = range(u, ty)?;
    let n = u.int_in_range(0..=200)?;
    let xs = values(u, n, s)?;
    let src = le_bytes_f32(&xs);
    let mut dst = vec![0xa5; n * ty.size()];
    match quant::quantize_per_tensor(&src, &mut dst, ty, s, o, r) {
        Ok(()) => {
            assert!(valid_scale(s) && valid_range(ty, r));
            let expected: Vec<u8> = xs
                .iter()
                .flat_map(|&x| store(quant::quantize_scalar(x, s, o, r), ty))
                .collect();
            assert_eq!(
                dst, expected,
                "quantize {ty:?} scale {s:e} offset {o} range {r:?}"
            );
        }
        Err(e) => {
            assert!(!valid_scale(s) || !valid_range(ty, r), "{e}");
            assert!(dst.iter().all(|&b| b == 0xa5), "written on error: {e}");
        }
    }

    // Dequantize any container bytes.
    let q: Vec<u8> = u.bytes(n * ty.size())?.to_vec();
    let mut out = vec![0; q.len() / ty.size() * 4];
    match quant::dequantize_per_tensor(&q, &mut out, ty, s, o) {
        Ok(()) => {
            let expected: Vec<u8> = q
                .chunks_exact(ty.size())
                .flat_map(|b| quant::dequantize_scalar(load(b, ty), s, o).to_le_bytes())
                .collect();
            assert_eq!(out, expected, "dequantize {ty:?} scale {s:e} offset {o}");
        }
        Err(e) => assert!(!valid_scale(s), "{e}"),
    }
    Ok(())
}

fn per_axis(u: &mut Unstructured) -> Result<()> {
    let ty = TYPES[u.choose_index(TYPES.len())?];
    let rank = u.int_in_range(1..=4)?;
    let dims: Vec<usize> = (0..rank)
        .map(|_| u.int_in_range(0..=20))
        .collect::<Result<_>>()?;
    let axis = u.int_in_range(0..=rank)?; // rank itself: out of bounds
    let layout = match AxisLayout::from_dims(&dims, axis) {
        Ok(l) => l,
        Err(QuantError::AxisOutOfBounds { .. }) => {
            assert_eq!(axis, rank);
            return Ok(());
        }
        Err(e) => panic!("small dims {dims:?} refused: {e}"),
    };
    let n = layout.len();
    // Sometimes a parameter count off by one, which must be refused.
    let count =
        (layout.axis_len as i64 + u.int_in_range(-1..=1)? * u.int_in_range(0..=1)?).max(0) as usize;
    let scales: Vec<f32> = (0..count).map(|_| scale(u)).collect::<Result<_>>()?;
    let offsets: Vec<i32> = (0..count).map(|_| offset(u)).collect::<Result<_>>()?;
    let r = range(u, ty)?;
    let xs = values(u, n, scales.first().copied().unwrap_or(1.0))?;
    let src = le_bytes_f32(&xs);
    let mut dst = vec![0xa5; n * ty.size()];
    let channel = |i: usize| (i / layout.inner) % layout.axis_len;
    let params_ok = count == layout.axis_len && scales.iter().all(|&s| valid_scale(s));
    match quant::quantize_per_axis(&src, &mut dst, ty, layout, &scales, &offsets, r) {
        Ok(()) => {
            assert!(params_ok && valid_range(ty, r));
            let expected: Vec<u8> = (0..n)
                .flat_map(|i| {
                    let c = channel(i);
                    store(quant::quantize_scalar(xs[i], scales[c], offsets[c], r), ty)
                })
                .collect();
            assert_eq!(dst, expected, "per-axis quantize {ty:?} {layout:?}");
        }
        Err(e) => {
            assert!(!params_ok || !valid_range(ty, r), "{e}");
            assert!(dst.iter().all(|&b| b == 0xa5), "written on error: {e}");
        }
    }
    let q: Vec<u8> = (0..n * ty.size())
        .map(|_| u.arbitrary())
        .collect::<Result<_>>()?;
    let mut out = vec![0; n * 4];
    match quant::dequantize_per_axis(&q, &mut out, ty, layout, &scales, &offsets) {
        Ok(()) => {
            assert!(params_ok);
            let expected: Vec<u8> = q
                .chunks_exact(ty.size())
                .enumerate()
                .flat_map(|(i, b)| {
                    let c = channel(i);
                    quant::dequantize_scalar(load(b, ty), scales[c], offsets[c]).to_le_bytes()
                })
                .collect();
            assert_eq!(out, expected, "per-axis dequantize {ty:?} {layout:?}");
        }
        Err(e) => assert!(!params_ok, "{e}"),
    }
    Ok(())
}

fn f16(u: &mut Unstructured) -> Result<()> {
    let n = u.int_in_range(0..=200)?;
    let xs = values(u, n, 1.0)?;
    let mut h = vec![0; n * 2];
    quant::f32_to_f16(&le_bytes_f32(&xs), &mut h).expect("matching lengths");
    let expected: Vec<u8> = xs
        .iter()
        .flat_map(|&x| quant::f32_to_f16_bits(x).to_le_bytes())
        .collect();
    assert_eq!(h, expected, "f32 -> f16");

    let hs: Vec<u16> = (0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?;
    let src: Vec<u8> = hs.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = vec![0; n * 4];
    quant::f16_to_f32(&src, &mut out).expect("matching lengths");
    let expected: Vec<u8> = hs
        .iter()
        .flat_map(|&x| quant::f16_bits_to_f32(x).to_le_bytes())
        .collect();
    assert_eq!(out, expected, "f16 -> f32");
    Ok(())
}

fn run(u: &mut Unstructured) -> Result<()> {
    match u.int_in_range(0..=2)? {
        0 => per_tensor(u),
        1 => per_axis(u),
        _ => f16(u),
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
