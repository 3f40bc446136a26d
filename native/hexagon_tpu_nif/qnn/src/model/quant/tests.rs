//! The kernels against independent references: ties, extremes, NaN/Inf, denormals, every f16
//! pattern, per-axis with the axis first, middle and last, and the SIMD builds against the
//! scalar one.

use super::splitmix::Rng;
use super::*;

const ALL: [QuantType; 6] = [
    QuantType::U8,
    QuantType::I8,
    QuantType::U16,
    QuantType::I16,
    QuantType::U32,
    QuantType::I32,
];

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f64, hi: f64) -> f32 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (lo + (hi - lo) * u) as f32
    }
}

// ----- independent references ------------------------------------------

/// Round half to even by the definition, on an exact f64 copy of `t`.
fn ref_round_half_even(t: f64) -> f64 {
    let fl = t.floor();
    let frac = t - fl; // exact: t and fl share the exponent range
    // Above the midpoint, or exactly on it with an odd floor: round up.
    if frac > 0.5 || (frac == 0.5 && fl % 2.0 != 0.0) {
        fl + 1.0
    } else {
        fl
    }
}

/// Quantize by the definition, in f64 / i128.
fn ref_quant(x: f32, scale: f32, offset: i32, (qmin, qmax): (i64, i64)) -> i64 {
    let (qmin, qmax) = (qmin as i128, qmax as i128);
    let zp = -(offset as i128);
    if x.is_nan() {
        return zp.max(qmin).min(qmax) as i64;
    }
    // f64 quotient rounded once to f32 == the correctly rounded f32
    // quotient (53 >= 2 * 24 + 2, so no double-rounding error).
    let t = ((x as f64) / (scale as f64)) as f32;
    if t == f32::INFINITY {
        return qmax as i64;
    }
    if t == f32::NEG_INFINITY {
        return qmin as i64;
    }
    let r = ref_round_half_even(t as f64);
    let ri = r as i128; // saturating; |r| <= f32::MAX
    ri.saturating_add(zp).max(qmin).min(qmax) as i64
}

fn ref_dequant(q: i64, scale: f32, offset: i32) -> f32 {
    let s = (q as i128 + offset as i128) as f32; // correctly rounded
    // 24 x 24-bit product is exact in f64; one rounding to f32.
    ((s as f64) * (scale as f64)) as f32
}

fn ref_f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 31) as i32;
    let m = (h & 1023) as f64;
    match e {
        0 => sign * m * 2f64.powi(-24),
        31 if m == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

/// f32 -> f16 bits by the definition, via f64 (non-NaN inputs).
fn ref_f32_to_f16(x: f32) -> u16 {
    assert!(!x.is_nan());
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let ax = (x as f64).abs();
    if ax.is_infinite() {
        return sign | 0x7c00;
    }
    if ax < 2f64.powi(-14) {
        let units = ref_round_half_even(ax / 2f64.powi(-24));
        return sign | units as u16; // 1024 == smallest normal, correct
    }
    let mut e = ((ax.to_bits() >> 52) as i32) - 1023;
    let mut mant = ref_round_half_even((ax / 2f64.powi(e) - 1.0) * 1024.0);
    if mant == 1024.0 {
        mant = 0.0;
        e += 1;
    }
    if e + 15 >= 31 {
        return sign | 0x7c00;
    }
    sign | (((e + 15) as u16) << 10) | mant as u16
}

// ----- helpers -----------------------------------------------------------

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_q(ty: QuantType, b: &[u8]) -> Vec<i64> {
    b.chunks_exact(ty.size())
        .map(|c| match ty {
            QuantType::U8 => c[0] as i64,
            QuantType::I8 => c[0] as i8 as i64,
            QuantType::U16 => u16::from_le_bytes([c[0], c[1]]) as i64,
            QuantType::I16 => i16::from_le_bytes([c[0], c[1]]) as i64,
            QuantType::U32 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
            QuantType::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
        })
        .collect()
}

fn write_q(ty: QuantType, q: &[i64]) -> Vec<u8> {
    q.iter()
        .flat_map(|&v| v.to_le_bytes()[..ty.size()].to_vec())
        .collect()
}

fn read_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Quantizes `xs` with the slice kernel (from a deliberately misaligned
/// buffer) and checks every element against the reference and the
/// scalar form.
fn check_tensor(xs: &[f32], ty: QuantType, scale: f32, offset: i32, range: (i64, i64)) {
    let mut src = vec![0u8];
    src.extend(f32_bytes(xs));
    let mut dst = vec![0xa5u8; xs.len() * ty.size() + 1];
    quantize_per_tensor(&src[1..], &mut dst[1..], ty, scale, offset, range).unwrap();
    let got = read_q(ty, &dst[1..]);
    for (i, (&x, &q)) in xs.iter().zip(&got).enumerate() {
        let want = ref_quant(x, scale, offset, range);
        assert_eq!(
            q,
            want,
            "elem {i}: x={x:e} ({:#x}) scale={scale:e} offset={offset} {ty:?} {range:?}",
            x.to_bits()
        );
        assert_eq!(
            quantize_scalar(x, scale, offset, range),
            want,
            "scalar x={x:e}"
        );
    }
    // Dequantize the result and compare with the reference.
    let qb = write_q(ty, &got);
    let mut out = vec![0u8; xs.len() * 4];
    dequantize_per_tensor(&qb, &mut out, ty, scale, offset).unwrap();
    for (&q, y) in got.iter().zip(read_f32(&out)) {
        let want = ref_dequant(q, scale, offset);
        assert_eq!(y.to_bits(), want.to_bits(), "dequant q={q}");
        assert_eq!(
            dequantize_scalar(q, scale, offset).to_bits(),
            want.to_bits()
        );
    }
}

/// A few interesting (offset, range) combinations per type.
fn configs(ty: QuantType) -> Vec<(i32, (i64, i64))> {
    let (lo, hi) = ty.full_range();
    let mid = -(((lo + hi) / 2) as i32);
    let mut v = vec![
        (0, (lo, hi)),
        (mid, (lo, hi)),
        ((lo as i32).wrapping_neg(), (lo, hi)),
        (7, (lo, hi)),
        (-3, (lo + 1, hi - 1)),
    ];
    if ty == QuantType::U8 {
        v.push((-8, (0, 15))); // 4-bit in a u8 container
        v.push((-100, (0, 15))); // zero point outside the narrow range
    }
    if ty == QuantType::I8 {
        v.push((0, (-8, 7)));
    }
    // Large offsets exercise the f64 / i64 paths on small containers.
    v.push((1 << 25, (lo, hi)));
    v.push((-(1 << 25) - 1, (lo, hi)));
    v.push((i32::MAX, (lo, hi)));
    v.push((i32::MIN, (lo, hi)));
    v
}

// ----- quantize / dequantize --------------------------------------------

#[test]
fn quantize_known_values() {
    let r = QuantType::I8.full_range();
    let cases = [
        (0.5, 0),
        (1.5, 2),
        (2.5, 2),
        (3.5, 4),
        (-0.5, 0),
        (-1.5, -2),
        (-2.5, -2),
        (0.49999997, 0),
        (126.5, 126),
        (127.5, 127),
        (1000.0, 127),
        (-1000.0, -128),
        (f32::NAN, 0),
        (f32::INFINITY, 127),
        (f32::NEG_INFINITY, -128),
        (-0.0, 0),
    ];
    for (x, want) in cases {
        assert_eq!(quantize_scalar(x, 1.0, 0, r), want, "x={x}");
        assert_eq!(ref_quant(x, 1.0, 0, r), want, "ref x={x}");
        let mut d = [0u8];
        quantize_per_tensor(&x.to_le_bytes(), &mut d, QuantType::I8, 1.0, 0, r).unwrap();
        assert_eq!(d[0] as i8 as i64, want, "kernel x={x}");
    }
    // offset is the negated zero point.
    assert_eq!(quantize_scalar(0.0, 0.5, -128, (0, 255)), 128);
    assert_eq!(quantize_scalar(f32::NAN, 0.5, -128, (0, 255)), 128);
    assert_eq!(quantize_scalar(f32::NAN, 0.5, -128, (0, 15)), 15);
    assert_eq!(dequantize_scalar(128, 0.5, -128), 0.0);
    assert_eq!(dequantize_scalar(130, 0.5, -128), 1.0);
}

#[test]
fn quantize_ties() {
    for ty in ALL {
        for (offset, range) in configs(ty) {
            for scale in [1.0f32, 0.5, 0.25, 3.0, 0.375, 1024.0] {
                let xs: Vec<f32> = (-70_000i32..70_000)
                    .step_by(7)
                    .chain(-300..300)
                    .map(|k| (k as f32 + 0.5) * scale)
                    .collect();
                check_tensor(&xs, ty, scale, offset, range);
            }
        }
    }
    // Large integers around 2^23/2^24 (where f32 spacing becomes >= 1).
    let big: Vec<f32> = (0..64u32)
        .flat_map(|k| {
            let a = f32::from_bits(0x4b00_0000 - 32 + k); // around 2^23
            let b = f32::from_bits(0x4b80_0000 - 32 + k); // around 2^24
            [a, -a, b, -b]
        })
        .collect();
    for ty in ALL {
        for (offset, range) in configs(ty) {
            check_tensor(&big, ty, 1.0, offset, range);
        }
    }
}

#[test]
fn quantize_extremes_and_specials() {
    for ty in ALL {
        for (offset, (lo, hi)) in configs(ty) {
            let zp = -(offset as i64);
            let mut xs = vec![
                f32::MAX,
                -f32::MAX,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                -f32::NAN,
                f32::from_bits(0x7fc1_2345),
                f32::from_bits(0x7f80_0001), // signalling NaN
                0.0,
                -0.0,
                f32::MIN_POSITIVE,
                -f32::MIN_POSITIVE,
                f32::from_bits(1),
                f32::from_bits(0x8000_0001),
                f32::from_bits(0x007f_ffff),
                1e30,
                -1e30,
                4294967296.0,
                -4294967296.0,
            ];
            // Just around qmin / qmax (in x units with scale 1): q = v - offset.
            for edge in [lo, hi] {
                let v = (edge - zp) as f64;
                for d in [-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.5] {
                    xs.push((v + d) as f32);
                }
            }
            check_tensor(&xs, ty, 1.0, offset, (lo, hi));
            check_tensor(&xs, ty, 0.0625, offset, (lo, hi));
            // Denormal scale: almost everything overflows to ±Inf.
            check_tensor(&xs, ty, f32::from_bits(3), offset, (lo, hi));
            check_tensor(&xs, ty, f32::MAX, offset, (lo, hi));
        }
    }
}

#[test]
fn dispatched_and_baseline_kernels_agree() {
    // The public kernels pick an AVX2 build at run time on x86-64; the baseline loops must
    // give the same bytes (the tests above check the dispatched ones against references).
    let mut rng = Rng(0xd15);
    let xs: Vec<f32> = (0..50_000)
        .map(|i| match i % 4 {
            0 => f32::from_bits(rng.next() as u32),
            1 => (rng.below(512) as f32 - 256.0 + 0.5) * 0.25,
            _ => rng.uniform(-80.0, 80.0),
        })
        .collect();
    let src: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    let src = src.as_chunks::<4>().0;
    for ty in ALL {
        let n = ty.size();
        let range = ty.full_range();
        for offset in [0, -3, 128] {
            let p = QParams::<f32>::new(0.25, offset, range);
            let (mut base, mut best) = (vec![0u8; xs.len() * n], vec![0u8; xs.len() * n]);
            if use_f32_path(ty, &[offset]) {
                qrun_any(src, &mut base, n, p);
                qrun_best(src, &mut best, n, p);
            } else {
                let p = QParams::<f64>::new(0.25, offset, range);
                qrun_any(src, &mut base, n, p);
                qrun_best(src, &mut best, n, p);
            }
            assert_eq!(base, best, "{ty:?} offset {offset}");
        }
    }
}

#[test]
fn quantize_random() {
    let mut rng = Rng(0x5eed);
    for ty in ALL {
        for (offset, range) in configs(ty) {
            let (lo, hi) = range;
            let scale = rng.uniform(1e-4, 1.0);
            let zp = -(offset as i64) as f64;
            let span = (hi - lo) as f64 * scale as f64;
            let xs: Vec<f32> = (0..12_000)
                .map(|i| match i % 8 {
                    // Arbitrary bit patterns (NaN, Inf, denormals, huge).
                    0 => f32::from_bits(rng.next() as u32),
                    // Exact ties in range.
                    1 => {
                        let k = (lo as f64 + rng.below((hi - lo + 1) as u64) as f64) - zp;
                        ((k + 0.5) * 0.5) as f32
                    }
                    // Dense around the representable range.
                    _ => rng.uniform(
                        (lo as f64 - zp) * scale as f64 - span * 0.1,
                        (hi as f64 - zp) * scale as f64 + span * 0.1,
                    ),
                })
                .collect();
            check_tensor(&xs, ty, scale, offset, range);
            // scale 0.5 makes category 1 exact ties.
            check_tensor(&xs, ty, 0.5, offset, range);
        }
    }
}

#[test]
fn dequantize_all_values() {
    let mut rng = Rng(7);
    for ty in ALL {
        let (lo, hi) = ty.full_range();
        let mut qs: Vec<i64> = if ty.size() <= 2 {
            (lo..=hi).collect()
        } else {
            (0..50_000)
                .map(|_| lo + rng.below((hi - lo + 1) as u64) as i64)
                .collect()
        };
        qs.extend([lo, hi, 0, 1, (-1i64).max(lo)]);
        let qb = write_q(ty, &qs);
        for (offset, _) in configs(ty) {
            for scale in [1.0f32, 0.1, 3.3e-5, 1e30, f32::from_bits(1), f32::MAX] {
                let mut out = vec![0u8; qs.len() * 4 + 1];
                dequantize_per_tensor(&qb, &mut out[1..], ty, scale, offset).unwrap();
                for (&q, y) in qs.iter().zip(read_f32(&out[1..])) {
                    let want = ref_dequant(q, scale, offset);
                    assert_eq!(
                        y.to_bits(),
                        want.to_bits(),
                        "{ty:?} q={q} s={scale} o={offset}"
                    );
                }
            }
        }
    }
}

#[test]
fn round_even_magic_matches_round_ties_even() {
    let check = |v: f32| {
        let a = round_even_magic(v);
        let b = v.round_ties_even();
        // Only the sign of a zero may differ.
        assert!(a == b || (a.is_nan() && b.is_nan()), "v={v:e}: {a} vs {b}");
    };
    for k in -100_000i32..100_000 {
        check(k as f32 * 0.25);
        check(k as f32 + 0.5);
    }
    // Every 251st bit pattern: covers all exponents, NaNs, Infs.
    for bits in (0..=u32::MAX).step_by(251) {
        check(f32::from_bits(bits));
    }
    for bits in 0x4afff000u32..0x4b801000 {
        check(f32::from_bits(bits));
        check(-f32::from_bits(bits));
    }
}

// ----- per axis -----------------------------------------------------------

fn check_axis(dims: &[usize], axis: usize, ty: QuantType, seed: u64) {
    let layout = AxisLayout::from_dims(dims, axis).unwrap();
    let n = layout.len();
    assert_eq!(n, dims.iter().product::<usize>());
    let mut rng = Rng(seed);
    let (lo, hi) = ty.full_range();
    let range = if ty == QuantType::U8 {
        (0, 15)
    } else {
        (lo, hi)
    };
    let scales: Vec<f32> = (0..layout.axis_len)
        .map(|_| rng.uniform(1e-3, 2.0))
        .collect();
    let offsets: Vec<i32> = (0..layout.axis_len)
        .map(|c| match c % 4 {
            0 => 0,
            1 => -(lo.max(-1000) as i32),
            2 => -7,
            _ => 11,
        })
        .collect();
    let xs: Vec<f32> = (0..n)
        .map(|i| match i % 13 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => {
                ((rng.below(2000) as f32 - 1000.0) + 0.5)
                    * scales[(i / layout.inner) % layout.axis_len]
            }
            _ => rng.uniform(-300.0, 300.0),
        })
        .collect();
    let src = f32_bytes(&xs);
    let mut dst = vec![0u8; n * ty.size()];
    quantize_per_axis(&src, &mut dst, ty, layout, &scales, &offsets, range).unwrap();
    let got = read_q(ty, &dst);
    for i in 0..n {
        let c = (i / layout.inner) % layout.axis_len;
        let want = ref_quant(xs[i], scales[c], offsets[c], range);
        assert_eq!(
            got[i], want,
            "{dims:?} axis {axis} {ty:?} elem {i} chan {c}"
        );
    }
    let mut out = vec![0u8; n * 4];
    dequantize_per_axis(&dst, &mut out, ty, layout, &scales, &offsets).unwrap();
    for (i, y) in read_f32(&out).into_iter().enumerate() {
        let c = (i / layout.inner) % layout.axis_len;
        let want = ref_dequant(got[i], scales[c], offsets[c]);
        assert_eq!(
            y.to_bits(),
            want.to_bits(),
            "dequant {dims:?} axis {axis} elem {i}"
        );
    }
    // Large offsets force the f64 / i64 paths for every container.
    let big: Vec<i32> = offsets.iter().map(|&o| o + (1 << 25)).collect();
    quantize_per_axis(&src, &mut dst, ty, layout, &scales, &big, range).unwrap();
    let got = read_q(ty, &dst);
    dequantize_per_axis(&dst, &mut out, ty, layout, &scales, &big).unwrap();
    let ys = read_f32(&out);
    for i in 0..n {
        let c = (i / layout.inner) % layout.axis_len;
        assert_eq!(got[i], ref_quant(xs[i], scales[c], big[c], range));
        assert_eq!(
            ys[i].to_bits(),
            ref_dequant(got[i], scales[c], big[c]).to_bits()
        );
    }
}

#[test]
fn per_axis_layouts() {
    let shapes: &[(&[usize], usize)] = &[
        (&[4, 6, 5], 0),  // axis first, inner 30 (runs)
        (&[4, 6, 5], 1),  // axis middle, inner 5 (expanded rows)
        (&[4, 6, 5], 2),  // axis last, inner 1
        (&[2, 3, 40], 1), // middle, inner 40
        (&[3, 7, 7], 0),  // channel-first, inner 49
        (&[7, 7, 3], 2),  // channel-last, 3 channels
        (&[16, 17], 0),   // inner 17
        (&[17, 16], 0),   // inner 16 (threshold)
        (&[17, 15], 0),   // inner 15
        (&[5], 0),        // 1-D
        (&[1, 1, 1], 1),  // single element
        (&[33, 1, 2], 1), // axis of length 1
        // Expanded rows shorter than the tensor, with a partial last row:
        (&[200, 3], 1),    // channel-last, period 3
        (&[100, 5, 2], 1), // inner 2, period 10
        (&[300, 1], 1),    // period 1
        (&[3, 130, 2], 2), // inner 1, axis 2, period 2
        (&[2, 300], 1),    // period 300 > MIN_ROW
    ];
    for (k, &(dims, axis)) in shapes.iter().enumerate() {
        for ty in ALL {
            check_axis(dims, axis, ty, k as u64);
        }
    }
}

#[test]
fn per_axis_matches_per_tensor_with_uniform_params() {
    let mut rng = Rng(99);
    let xs: Vec<f32> = (0..3 * 50 * 21).map(|_| rng.uniform(-40.0, 40.0)).collect();
    let src = f32_bytes(&xs);
    for (dims, axis) in [([3usize, 50, 21], 0), ([3, 50, 21], 1), ([3, 50, 21], 2)] {
        let layout = AxisLayout::from_dims(&dims, axis).unwrap();
        let scales = vec![0.3f32; dims[axis]];
        let offsets = vec![-128; dims[axis]];
        let mut a = vec![0u8; xs.len()];
        let mut b = vec![0u8; xs.len()];
        quantize_per_axis(
            &src,
            &mut a,
            QuantType::U8,
            layout,
            &scales,
            &offsets,
            (0, 255),
        )
        .unwrap();
        quantize_per_tensor(&src, &mut b, QuantType::U8, 0.3, -128, (0, 255)).unwrap();
        assert_eq!(a, b);
    }
}

#[test]
fn axis_layout_from_dims() {
    let l = AxisLayout::from_dims(&[2, 3, 4, 5], 2).unwrap();
    assert_eq!(
        l,
        AxisLayout {
            outer: 6,
            axis_len: 4,
            inner: 5
        }
    );
    assert_eq!(l.len(), 120);
    assert!(!l.is_empty());
    let l = AxisLayout::from_dims(&[2, 0, 4], 0).unwrap();
    assert_eq!((l.len(), l.is_empty()), (0, true));
    assert_eq!(
        AxisLayout::from_dims(&[2, 3], 2),
        Err(QuantError::AxisOutOfBounds { axis: 2, rank: 2 })
    );
    assert!(matches!(
        AxisLayout::from_dims(&[usize::MAX, 2], 1),
        Err(QuantError::SizeOverflow { .. })
    ));
    assert!(matches!(
        AxisLayout::from_dims(&[usize::MAX, 2, 1], 2),
        Err(QuantError::SizeOverflow { .. })
    ));
    let huge = AxisLayout {
        outer: usize::MAX,
        axis_len: 2,
        inner: 1,
    };
    assert_eq!(huge.len(), usize::MAX);
}

// ----- empty --------------------------------------------------------------

#[test]
fn empty_inputs() {
    for ty in ALL {
        let r = ty.full_range();
        quantize_per_tensor(&[], &mut [], ty, 1.0, 0, r).unwrap();
        dequantize_per_tensor(&[], &mut [], ty, 1.0, 0).unwrap();
        for layout in [
            AxisLayout {
                outer: 0,
                axis_len: 3,
                inner: 4,
            },
            AxisLayout {
                outer: 2,
                axis_len: 3,
                inner: 0,
            },
        ] {
            let (s, o) = ([1.0f32; 3], [0i32; 3]);
            quantize_per_axis(&[], &mut [], ty, layout, &s, &o, r).unwrap();
            dequantize_per_axis(&[], &mut [], ty, layout, &s, &o).unwrap();
        }
        let layout = AxisLayout {
            outer: 2,
            axis_len: 0,
            inner: 4,
        };
        quantize_per_axis(&[], &mut [], ty, layout, &[], &[], r).unwrap();
        dequantize_per_axis(&[], &mut [], ty, layout, &[], &[]).unwrap();
    }
    f32_to_f16(&[], &mut []).unwrap();
    f16_to_f32(&[], &mut []).unwrap();
}

// ----- f16 ----------------------------------------------------------------

#[test]
fn f16_all_patterns_roundtrip_and_widen_exactly() {
    for h in 0..=u16::MAX {
        let f = f16_bits_to_f32(h);
        let r = ref_f16_to_f64(h);
        let is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
        if is_nan {
            assert!(f.is_nan(), "{h:#06x}");
            assert_eq!(f.is_sign_negative(), h & 0x8000 != 0, "NaN sign {h:#06x}");
            let back = f32_to_f16_bits(f);
            assert_eq!(back & 0x7c00, 0x7c00);
            assert_ne!(back & 0x3ff, 0, "NaN stays NaN {h:#06x}");
            assert_eq!(back & 0x0200, 0x0200, "quiet NaN {h:#06x}");
            assert_eq!(back & 0x8000, h & 0x8000, "NaN sign {h:#06x}");
            if h & 0x0200 != 0 {
                assert_eq!(back, h, "quiet NaN payload kept {h:#06x}");
            }
        } else {
            assert_eq!(f as f64, r, "{h:#06x}");
            assert_eq!(f.is_sign_negative(), h & 0x8000 != 0, "{h:#06x}");
            assert_eq!(f32_to_f16_bits(f), h, "roundtrip {h:#06x}");
        }
    }
    // The slice form over all patterns.
    let src: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    let mut dst = vec![0u8; src.len() * 2];
    f16_to_f32(&src, &mut dst).unwrap();
    let mut back = vec![0u8; src.len()];
    f32_to_f16(&dst, &mut back).unwrap();
    for (h, (w, b)) in (0..=u16::MAX).zip(read_f32(&dst).iter().zip(back.chunks_exact(2))) {
        assert_eq!(w.to_bits(), f16_bits_to_f32(h).to_bits());
        let b = u16::from_le_bytes([b[0], b[1]]);
        if !w.is_nan() {
            assert_eq!(b, h);
        }
    }
}

fn check_narrow(x: f32) {
    let got = f32_to_f16_bits(x);
    if x.is_nan() {
        assert!(got & 0x7c00 == 0x7c00 && got & 0x3ff != 0, "{x:e}");
        assert_eq!(got & 0x8000 != 0, x.is_sign_negative());
    } else {
        assert_eq!(got, ref_f32_to_f16(x), "x={x:e} ({:#010x})", x.to_bits());
    }
}

#[test]
fn f32_to_f16_known_values() {
    let cases: [(f32, u16); 16] = [
        (0.0, 0x0000),
        (-0.0, 0x8000),
        (1.0, 0x3c00),
        (-2.0, 0xc000),
        (65504.0, 0x7bff),
        (65519.99, 0x7bff),
        (65520.0, 0x7c00),
        (-65520.0, 0xfc00),
        (1e10, 0x7c00),
        (f32::INFINITY, 0x7c00),
        (f32::NEG_INFINITY, 0xfc00),
        (5.960_464_5e-8, 0x0001), // 2^-24
        (2.980_232_2e-8, 0x0000), // 2^-25: tie to even (0)
        (8.940_697e-8, 0x0002),   // 3 * 2^-25: tie to even (2)
        (2.980_232_5e-8, 0x0001), // just above 2^-25
        (6.097_555e-5, 0x03ff),   // largest subnormal
    ];
    for (x, want) in cases {
        assert_eq!(f32_to_f16_bits(x), want, "x={x:e}");
        assert_eq!(ref_f32_to_f16(x), want, "ref x={x:e}");
    }
    // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even is 1.
    assert_eq!(f32_to_f16_bits(1.0 + 2f32.powi(-11)), 0x3c00);
    assert_eq!(f32_to_f16_bits(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
    // Tie between the largest subnormal and the smallest normal.
    assert_eq!(f32_to_f16_bits(2f32.powi(-14) - 2f32.powi(-25)), 0x0400);
    assert_eq!(f32_to_f16_bits(f32::MIN_POSITIVE), 0);
    assert_eq!(f32_to_f16_bits(f32::NAN) & 0x7e00, 0x7e00);
}

#[test]
fn f32_to_f16_ties_and_neighbours() {
    // Every midpoint between consecutive f16 values (exact in f32) and its
    // f32 neighbours, both signs, including the overflow threshold.
    for h in 0..0x7c00u16 {
        let a = ref_f16_to_f64(h);
        let b = if h == 0x7bff {
            65536.0
        } else {
            ref_f16_to_f64(h + 1)
        };
        let mid = ((a + b) / 2.0) as f32;
        assert_eq!(mid as f64, (a + b) / 2.0);
        for x in [
            a as f32,
            mid,
            f32::from_bits(mid.to_bits() - 1),
            f32::from_bits(mid.to_bits() + 1),
        ] {
            check_narrow(x);
            check_narrow(-x);
        }
    }
}

#[test]
fn f32_to_f16_sweep_and_random() {
    for bits in (0..=u32::MAX).step_by(997) {
        check_narrow(f32::from_bits(bits));
    }
    let mut rng = Rng(1234);
    for _ in 0..100_000 {
        check_narrow(f32::from_bits(rng.next() as u32));
        check_narrow(rng.uniform(-70_000.0, 70_000.0));
        check_narrow(rng.uniform(-1e-4, 1e-4));
    }
    // Slice form on random data.
    let xs: Vec<f32> = (0..10_001)
        .map(|_| f32::from_bits(rng.next() as u32))
        .collect();
    let src = f32_bytes(&xs);
    let mut dst = vec![0u8; xs.len() * 2];
    f32_to_f16(&src, &mut dst).unwrap();
    for (x, d) in xs.iter().zip(dst.chunks_exact(2)) {
        assert_eq!(u16::from_le_bytes([d[0], d[1]]), f32_to_f16_bits(*x));
    }
}

// ----- the x86-64 paths chosen at run time, each against the scalar forms ------------------

/// Edge inputs for a quantize with `scale` (a power of two, so `k * scale` is exact) into
/// `[lo, hi]` with zero point `zp`: ties at .5 and their f32 neighbours, both ends of the range
/// and beyond, NaN (quiet, signalling, negative), ±Inf, ±0, denormals, huge values, random.
#[cfg(target_arch = "x86_64")]
fn x86_edge_inputs(scale: f32, (lo, hi): (i64, i64), zp: i64, rng: &mut Rng) -> Vec<f32> {
    let mut xs = vec![
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc1_2345),
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::from_bits(0x007f_ffff),
        f32::MIN_POSITIVE,
        f32::MAX,
        -f32::MAX,
        1e30,
        -1e30,
    ];
    for k in [
        lo - zp - 2,
        lo - zp - 1,
        lo - zp,
        0,
        1,
        2,
        3,
        hi - zp - 1,
        hi - zp,
        hi - zp + 1,
    ] {
        for d in [-0.5f64, 0.5, -0.25, 0.0] {
            let x = ((k as f64 + d) * scale as f64) as f32;
            xs.extend([x, x.next_up(), x.next_down()]);
        }
    }
    for _ in 0..200 {
        let tie = (rng.below((hi - lo + 20) as u64) as i64 + lo - zp - 10) as f32 + 0.5;
        xs.push(tie * scale);
        xs.push(rng.uniform((lo - zp - 40) as f64, (hi - zp + 40) as f64) * scale);
        xs.push(f32::from_bits(rng.next() as u32));
    }
    xs
}

#[cfg(target_arch = "x86_64")]
fn x86_levels() -> Vec<x86::Level> {
    use std::arch::is_x86_feature_detected as has;
    let mut levels = vec![x86::Level::Portable];
    if has!("avx2") {
        levels.push(x86::Level::Avx2);
    }
    if has!("avx512f") && has!("avx512bw") {
        levels.push(x86::Level::Avx512);
    }
    levels
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x86_quantize_paths_match_scalar() {
    let mut rng = Rng(0x86);
    let small = [QuantType::U8, QuantType::I8, QuantType::U16, QuantType::I16];
    for ty in small {
        let n = ty.size();
        for (offset, range) in configs(ty) {
            for scale in [1.0f32, 0.0625, 2.0 / 255.0, 3.0e-5, 1e-30, 7.0] {
                let Some(p) = x86::FastQ::new(ty, scale, offset, range) else {
                    continue;
                };
                let zp = -(offset as i64);
                let xs = x86_edge_inputs(scale, range, zp, &mut rng);
                let want: Vec<i64> = xs
                    .iter()
                    .map(|&x| quantize_scalar(x, scale, offset, range))
                    .collect();
                for &level in &x86_levels() {
                    // Every length up to a few vectors, then all of it; slices at 1..=3 bytes
                    // past an allocation's start.
                    for len in (0..=40).chain([xs.len()]) {
                        let len = len.min(xs.len());
                        let skew = len % 3 + 1;
                        let mut src = vec![0u8; skew];
                        src.extend(f32_bytes(&xs[..len]));
                        let src = src[skew..].as_chunks::<4>().0;
                        let mut dst = vec![0xa5u8; len * n + skew];
                        let done = x86::quantize(src, &mut dst[skew..], n, p, level);
                        if level == x86::Level::Portable {
                            assert!(!done, "the portable level has no x86 path");
                            continue;
                        }
                        assert!(done, "{level:?} {ty:?}");
                        assert!(dst[..skew].iter().all(|&b| b == 0xa5), "wrote before dst");
                        let got = read_q(ty, &dst[skew..]);
                        for (i, (&q, &w)) in got.iter().zip(&want[..len]).enumerate() {
                            assert_eq!(
                                q,
                                w,
                                "{level:?} {ty:?} offset {offset} {range:?} scale {scale:e}: \
                                 x[{i}] = {:e} ({:#010x}), len {len}",
                                xs[i],
                                xs[i].to_bits()
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x86_quantize_of_a_large_frame_streams_bit_exact() {
    // Past `STREAM_FROM` elements the byte quantize stores around the caches from `dst`'s first
    // 64-byte boundary: every alignment of `dst`, a length that ends off a vector, and nothing
    // written outside `dst`.
    let mut rng = Rng(0x5742);
    let (scale, offset, range) = (0.018_658_f32, -114, (0, 255));
    let p = x86::FastQ::new(QuantType::U8, scale, offset, range).expect("u8 fast path");
    let len = x86::STREAM_FROM + 101;
    let mut xs: Vec<f32> = (0..len).map(|_| rng.uniform(-3.0, 3.0)).collect();
    let edges = x86_edge_inputs(scale, range, 114, &mut rng);
    xs[..edges.len()].copy_from_slice(&edges);
    let want: Vec<i64> = xs
        .iter()
        .map(|&x| quantize_scalar(x, scale, offset, range))
        .collect();
    let src = f32_bytes(&xs);
    let src = src.as_chunks::<4>().0;
    for &level in x86_levels().iter().filter(|&&l| l != x86::Level::Portable) {
        for skew in [0, 1, 17, 63] {
            let mut dst = vec![0xa5u8; skew + len + 64];
            assert!(x86::quantize(src, &mut dst[skew..skew + len], 1, p, level));
            assert!(dst[..skew].iter().all(|&b| b == 0xa5), "wrote before dst");
            assert!(
                dst[skew + len..].iter().all(|&b| b == 0xa5),
                "wrote past dst"
            );
            let got = read_q(QuantType::U8, &dst[skew..skew + len]);
            if let Some(i) = (0..len).find(|&i| got[i] != want[i]) {
                panic!(
                    "{level:?}, skew {skew}: x[{i}] = {:e} gave {}, not {}",
                    xs[i], got[i], want[i]
                );
            }
        }
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x86_fast_quantize_declines_where_f32_is_not_exact() {
    // lo/hi beyond 2^24 in f32, 32-bit containers: the portable loops serve them.
    assert!(x86::FastQ::new(QuantType::U8, 1.0, 1 << 25, (0, 255)).is_none());
    assert!(x86::FastQ::new(QuantType::I16, 1.0, i32::MIN, (-32768, 32767)).is_none());
    assert!(x86::FastQ::new(QuantType::U32, 1.0, 0, (0, 255)).is_none());
    assert!(x86::FastQ::new(QuantType::U8, 1.0, (1 << 24) - 255, (0, 255)).is_some());
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x86_f16_paths_match_scalar() {
    // Every f16 pattern (signalling NaNs included) widened, and f32 edge values, ties and
    // random bits narrowed, on each path, at lengths that are not a multiple of a vector and
    // through unaligned slices.
    let halves: Vec<u16> = (0..=u16::MAX).collect();
    let mut rng = Rng(0xf16);
    let mut singles: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xff80_0001),
        f32::from_bits(0x7fff_ffff),
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(1),
        f32::MIN_POSITIVE,
        65504.0,
        65519.99,
        65520.0,
        -65520.0,
        2f32.powi(-25),
        3.0 * 2f32.powi(-25),
        2f32.powi(-14) - 2f32.powi(-25),
        1.0 + 2f32.powi(-11),
    ];
    for h in (0..0x7c00u16).step_by(7) {
        let mid = ((ref_f16_to_f64(h) + ref_f16_to_f64(h + 1)) / 2.0) as f32;
        singles.extend([mid, mid.next_up(), mid.next_down(), -mid]);
    }
    singles.extend((0..20_000).map(|_| f32::from_bits(rng.next() as u32)));
    for &level in &x86_levels() {
        for len in (0..=40).chain([halves.len()]) {
            let skew = len % 2 + 1;
            let mut src = vec![0u8; skew];
            src.extend(halves[..len].iter().flat_map(|h| h.to_le_bytes()));
            let src = src[skew..].as_chunks::<2>().0;
            let mut dst = vec![[0u8; 4]; len];
            let done = x86::f16_to_f32(src, &mut dst, level);
            assert!(done <= len && (level != x86::Level::Portable || done == 0));
            for (i, d) in dst[..done].iter().enumerate() {
                let want = f16_bits_to_f32(halves[i]).to_bits();
                assert_eq!(
                    u32::from_le_bytes(*d),
                    want,
                    "{level:?} f16 {:#06x}",
                    halves[i]
                );
            }
        }
        for len in (0..=40).chain([singles.len()]) {
            let len = len.min(singles.len());
            let skew = len % 3 + 1;
            let mut src = vec![0u8; skew];
            src.extend(f32_bytes(&singles[..len]));
            let src = src[skew..].as_chunks::<4>().0;
            let mut dst = vec![[0u8; 2]; len];
            let done = x86::f32_to_f16(src, &mut dst, level);
            assert!(done <= len && (level != x86::Level::Portable || done == 0));
            for (i, d) in dst[..done].iter().enumerate() {
                let x = singles[i];
                let want = f32_to_f16_bits(x);
                assert_eq!(
                    u16::from_le_bytes(*d),
                    want,
                    "{level:?} x={x:e} ({:#010x})",
                    x.to_bits()
                );
            }
        }
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x86_dequantize_builds_match_baseline() {
    use std::arch::is_x86_feature_detected as has;
    let mut rng = Rng(0xde9);
    let bytes: Vec<u8> = (0..4 * 1000 + 3).map(|_| rng.next() as u8).collect();
    for ty in ALL {
        for offset in [0, -128, 5, 1 << 30, i32::MIN, i32::MAX] {
            for scale in [1.0f32, 2.0 / 255.0, 1e-30, f32::MAX] {
                for len in [0, 1, 7, 15, 16, 17, 33, 1000] {
                    let src = &bytes[3..3 + len * ty.size()];
                    let mut base = vec![[0u8; 4]; len];
                    dq_run(ty, src, &mut base, scale, offset);
                    if has!("avx2") {
                        let mut d = vec![[0u8; 4]; len];
                        // SAFETY: the CPU has AVX2 (checked just above).
                        unsafe { dq_run_avx2(ty, src, &mut d, scale, offset) };
                        assert_eq!(
                            d, base,
                            "avx2 {ty:?} offset {offset} scale {scale:e} len {len}"
                        );
                    }
                    if has!("avx512f") && has!("avx512bw") {
                        let mut d = vec![[0u8; 4]; len];
                        // SAFETY: the CPU has AVX-512F and AVX-512BW (checked just above).
                        unsafe { dq_run_avx512(ty, src, &mut d, scale, offset) };
                        assert_eq!(
                            d, base,
                            "avx512 {ty:?} offset {offset} scale {scale:e} len {len}"
                        );
                    }
                }
            }
        }
    }
}

// ----- errors -------------------------------------------------------------

#[test]
fn errors() {
    use QuantError as E;
    let u8r = (0, 255);
    let l3 = AxisLayout {
        outer: 1,
        axis_len: 3,
        inner: 1,
    };
    let s3 = [1.0f32; 3];
    let o3 = [0i32; 3];
    let src = [0u8; 12];

    // ByteLength
    let e = quantize_per_tensor(&[0u8; 5], &mut [0u8; 1], QuantType::U8, 1.0, 0, u8r);
    assert_eq!(
        e,
        Err(E::ByteLength {
            what: "src_f32",
            elem_size: 4,
            len: 5
        })
    );
    let e = dequantize_per_tensor(&[0u8; 3], &mut [0u8; 4], QuantType::U16, 1.0, 0);
    assert_eq!(
        e,
        Err(E::ByteLength {
            what: "src",
            elem_size: 2,
            len: 3
        })
    );
    assert!(matches!(
        f32_to_f16(&[0u8; 4], &mut [0u8; 3]),
        Err(E::ByteLength { .. })
    ));
    assert!(matches!(
        f16_to_f32(&[0u8; 1], &mut []),
        Err(E::ByteLength { .. })
    ));

    // LengthMismatch (buffers)
    let e = quantize_per_tensor(&src, &mut [0u8; 2], QuantType::U8, 1.0, 0, u8r);
    assert_eq!(
        e,
        Err(E::LengthMismatch {
            what: "dst",
            expected: 3,
            got: 2
        })
    );
    let e = dequantize_per_tensor(&[0u8; 3], &mut [0u8; 16], QuantType::U8, 1.0, 0);
    assert_eq!(
        e,
        Err(E::LengthMismatch {
            what: "dst_f32",
            expected: 3,
            got: 4
        })
    );
    assert!(matches!(
        f32_to_f16(&src, &mut [0u8; 4]),
        Err(E::LengthMismatch { .. })
    ));
    assert!(matches!(
        f16_to_f32(&[0u8; 4], &mut [0u8; 4]),
        Err(E::LengthMismatch { .. })
    ));

    // LengthMismatch (layout)
    let l4 = AxisLayout {
        outer: 2,
        axis_len: 3,
        inner: 1,
    };
    for e in [
        quantize_per_axis(&src, &mut [0u8; 3], QuantType::U8, l4, &s3, &o3, u8r),
        dequantize_per_axis(&[0u8; 3], &mut [0u8; 12], QuantType::U8, l4, &s3, &o3),
    ] {
        assert!(
            matches!(
                e,
                Err(E::LengthMismatch {
                    expected: 6,
                    got: 3,
                    ..
                })
            ),
            "{e:?}"
        );
    }

    // SizeOverflow (layout product)
    let lo = AxisLayout {
        outer: usize::MAX,
        axis_len: 3,
        inner: 1,
    };
    let e = quantize_per_axis(&src, &mut [0u8; 3], QuantType::U8, lo, &s3, &o3, u8r);
    assert!(matches!(e, Err(E::SizeOverflow { .. })), "{e:?}");

    // InvalidScale
    for bad in [
        0.0f32,
        -0.0,
        -1.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ] {
        let e = quantize_per_tensor(&src, &mut [0u8; 3], QuantType::U8, bad, 0, u8r);
        assert!(
            matches!(e, Err(E::InvalidScale { channel: None, .. })),
            "{bad}"
        );
        let e = dequantize_per_tensor(&[0u8; 3], &mut [0u8; 12], QuantType::U8, bad, 0);
        assert!(
            matches!(e, Err(E::InvalidScale { channel: None, .. })),
            "{bad}"
        );
        let s = [1.0, bad, 1.0];
        let e = quantize_per_axis(&src, &mut [0u8; 3], QuantType::U8, l3, &s, &o3, u8r);
        assert!(
            matches!(
                e,
                Err(E::InvalidScale {
                    channel: Some(1),
                    ..
                })
            ),
            "{bad}"
        );
        let e = dequantize_per_axis(&[0u8; 3], &mut [0u8; 12], QuantType::U8, l3, &s, &o3);
        assert!(
            matches!(
                e,
                Err(E::InvalidScale {
                    channel: Some(1),
                    ..
                })
            ),
            "{bad}"
        );
    }

    // InvalidRange
    let e = quantize_per_tensor(&src, &mut [0u8; 3], QuantType::U8, 1.0, 0, (10, 5));
    assert_eq!(e, Err(E::InvalidRange { qmin: 10, qmax: 5 }));
    let e = quantize_per_axis(&src, &mut [0u8; 3], QuantType::U8, l3, &s3, &o3, (10, 5));
    assert_eq!(e, Err(E::InvalidRange { qmin: 10, qmax: 5 }));

    // RangeOutsideType
    for (ty, r) in [
        (QuantType::U8, (-1, 255)),
        (QuantType::U8, (0, 256)),
        (QuantType::I8, (-129, 0)),
        (QuantType::I16, (0, 32768)),
        (QuantType::U32, (0, 1 << 32)),
        (QuantType::I32, (i64::MIN, 0)),
    ] {
        let mut d = vec![0u8; 3 * ty.size()];
        let e = quantize_per_tensor(&src, &mut d, ty, 1.0, 0, r);
        let (type_min, type_max) = ty.full_range();
        let want = E::RangeOutsideType {
            ty,
            qmin: r.0,
            qmax: r.1,
            type_min,
            type_max,
        };
        assert_eq!(e, Err(want.clone()));
        let e = quantize_per_axis(&src, &mut d, ty, l3, &s3, &o3, r);
        assert_eq!(e, Err(want));
    }

    // AxisOutOfBounds
    assert_eq!(
        AxisLayout::from_dims(&[], 0),
        Err(E::AxisOutOfBounds { axis: 0, rank: 0 })
    );

    // ParamCount
    let e = quantize_per_axis(&src, &mut [0u8; 3], QuantType::U8, l3, &s3[..2], &o3, u8r);
    assert_eq!(
        e,
        Err(E::ParamCount {
            what: "scales",
            expected: 3,
            got: 2
        })
    );
    let e = quantize_per_axis(&src, &mut [0u8; 3], QuantType::U8, l3, &s3, &[0; 4], u8r);
    assert_eq!(
        e,
        Err(E::ParamCount {
            what: "offsets",
            expected: 3,
            got: 4
        })
    );
    let e = dequantize_per_axis(&[0u8; 3], &mut [0u8; 12], QuantType::U8, l3, &[1.0; 4], &o3);
    assert_eq!(
        e,
        Err(E::ParamCount {
            what: "scales",
            expected: 3,
            got: 4
        })
    );
    let e = dequantize_per_axis(&[0u8; 3], &mut [0u8; 12], QuantType::U8, l3, &s3, &[]);
    assert_eq!(
        e,
        Err(E::ParamCount {
            what: "offsets",
            expected: 3,
            got: 0
        })
    );
}

#[test]
fn error_messages_say_expected_and_given() {
    let msgs = [
        QuantError::ByteLength {
            what: "src_f32",
            elem_size: 4,
            len: 5,
        }
        .to_string(),
        QuantError::LengthMismatch {
            what: "dst",
            expected: 3,
            got: 2,
        }
        .to_string(),
        QuantError::InvalidScale {
            scale: -1.0,
            channel: Some(2),
        }
        .to_string(),
        QuantError::InvalidRange { qmin: 10, qmax: 5 }.to_string(),
        QuantError::RangeOutsideType {
            ty: QuantType::U8,
            qmin: -1,
            qmax: 255,
            type_min: 0,
            type_max: 255,
        }
        .to_string(),
        QuantError::AxisOutOfBounds { axis: 2, rank: 2 }.to_string(),
        QuantError::ParamCount {
            what: "scales",
            expected: 3,
            got: 2,
        }
        .to_string(),
    ];
    for m in &msgs {
        assert!(m.contains("expected"), "{m}");
        assert!(m.contains("got"), "{m}");
    }
    assert_eq!(
        msgs[2],
        "invalid scale for channel 2: expected a finite value > 0, got -1"
    );
    assert_eq!(
        QuantError::SizeOverflow {
            what: "dims [1, 2]".into()
        }
        .to_string(),
        "element count overflows usize: dims [1, 2]"
    );
}
