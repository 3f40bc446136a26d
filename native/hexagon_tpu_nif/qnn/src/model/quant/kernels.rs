//! The loops behind the public kernels in `quant.rs`: rounding, the quantize and dequantize
//! bodies LLVM vectorizes, and the run-time choice of their AVX2 / AVX-512 builds (and of the
//! intrinsic paths in `quant/x86.rs`) on x86-64. See the module
//! documentation of `quant` for the arithmetic and why it is exact.

use super::*;

// ---------------------------------------------------------------------------
// Rounding
// ---------------------------------------------------------------------------

/// Round half to even in f32. Uses the native instruction where one exists
/// (aarch64 `frintn`, x86 SSE4.1 `roundps`); baseline x86-64 (SSE2) would
/// otherwise call `roundevenf` per element and not vectorize, so there we use
/// the exact add/subtract-2^23 trick.
#[inline(always)]
pub(super) fn round_even(v: f32) -> f32 {
    #[cfg(any(target_arch = "aarch64", target_feature = "sse4.1"))]
    {
        v.round_ties_even()
    }
    #[cfg(not(any(target_arch = "aarch64", target_feature = "sse4.1")))]
    {
        round_even_magic(v)
    }
}

/// Round half to even via `(v + 2^23) - 2^23` (sign-matched). For
/// `|v| < 2^23` the sum lies in `[2^23, 2^24]` where the f32 ulp is 1, so the
/// (round-to-nearest-even) addition performs the rounding and the subtraction
/// is exact; `2^23` is even, so ties go to the even integer. `|v| >= 2^23`,
/// ±Inf and NaN are already integral and returned unchanged. Only the sign of
/// a zero result may differ from `round_ties_even`, which is irrelevant here.
#[inline(always)]
#[cfg_attr(
    any(target_arch = "aarch64", target_feature = "sse4.1"),
    allow(dead_code)
)]
pub(super) fn round_even_magic(v: f32) -> f32 {
    const TWO23: f32 = 8_388_608.0;
    let m = TWO23.copysign(v);
    let r = (v + m) - m;
    if v.abs() < TWO23 { r } else { v }
}

// ---------------------------------------------------------------------------
// Quantize kernels
// ---------------------------------------------------------------------------

/// Arithmetic type in which the zero point is added and the clamp is done.
pub(super) trait Acc: Copy + PartialOrd + core::ops::Add<Output = Self> {
    fn from_f32(r: f32) -> Self;
    fn from_i64(v: i64) -> Self;
    fn is_nan(self) -> bool;
    /// Low `N` bytes (little-endian two's complement) of the integer value.
    fn to_le<const N: usize>(self) -> [u8; N];
}

impl Acc for f32 {
    #[inline(always)]
    fn from_f32(r: f32) -> Self {
        r
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    #[inline(always)]
    fn to_le<const N: usize>(self) -> [u8; N] {
        // `self` is integer valued with |self| <= 65535 < 2^22 (f32 path only
        // serves 8/16-bit containers). Adding 1.5 * 2^23 lands in
        // [2^23, 2^24), where the f32 ulp is 1: the sum is exact and its low
        // 22 mantissa bits are `self + 2^22`, i.e. its low 16 bits are `self`
        // in two's complement. Unlike `as i32` (saturating, NaN-checking),
        // this is a plain add + bit cast, which vectorizes everywhere.
        let b = (self + 12_582_912.0).to_bits().to_le_bytes();
        core::array::from_fn(|k| b[k])
    }
}

impl Acc for f64 {
    #[inline(always)]
    fn from_f32(r: f32) -> Self {
        r as f64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f64
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    #[inline(always)]
    fn to_le<const N: usize>(self) -> [u8; N] {
        // Integer valued and within a 32-bit container's range: exact.
        let b = (self as i64).to_le_bytes();
        core::array::from_fn(|k| b[k])
    }
}

/// Per-tensor parameters, prepared for the inner loop.
#[derive(Clone, Copy)]
pub(super) struct QParams<A> {
    pub(super) scale: f32,
    /// Zero point `-offset`.
    pub(super) z: A,
    /// Clamped zero point, the result for NaN.
    pub(super) nan_q: A,
    pub(super) lo: A,
    pub(super) hi: A,
}

impl<A: Acc> QParams<A> {
    pub(super) fn new(scale: f32, offset: i32, (qmin, qmax): (i64, i64)) -> Self {
        QParams {
            scale,
            z: A::from_i64(-(offset as i64)),
            nan_q: A::from_i64((-(offset as i64)).clamp(qmin, qmax)),
            lo: A::from_i64(qmin),
            hi: A::from_i64(qmax),
        }
    }
}

#[inline(always)]
pub(super) fn qcore<A: Acc>(x: f32, scale: f32, z: A, nan_q: A, lo: A, hi: A) -> A {
    let v = A::from_f32(round_even(x / scale)) + z;
    let v = if v < lo { lo } else { v };
    let v = if v > hi { hi } else { v };
    if v.is_nan() { nan_q } else { v }
}

/// One run of elements sharing (scale, offset).
#[inline(always)]
pub(super) fn qrun<A: Acc, const N: usize>(src: &[[u8; 4]], dst: &mut [[u8; N]], p: QParams<A>) {
    for (s, d) in src.iter().zip(dst.iter_mut()) {
        let x = f32::from_le_bytes(*s);
        *d = qcore(x, p.scale, p.z, p.nan_q, p.lo, p.hi).to_le::<N>();
    }
}

/// Per-element parameters (struct of arrays), for channel-last layouts.
pub(super) struct QRowParams<A> {
    pub(super) scale: Vec<f32>,
    pub(super) z: Vec<A>,
    pub(super) nan_q: Vec<A>,
    pub(super) lo: A,
    pub(super) hi: A,
}

/// One row whose element `j` uses parameters `j` (rows repeat along `src`).
#[inline(always)]
pub(super) fn qrows<A: Acc, const N: usize>(
    src: &[[u8; 4]],
    dst: &mut [[u8; N]],
    p: &QRowParams<A>,
) {
    let row = p.scale.len();
    let (lo, hi) = (p.lo, p.hi);
    for (s, d) in src.chunks(row).zip(dst.chunks_mut(row)) {
        let it = s.iter().zip(d.iter_mut());
        let it = it.zip(p.scale.iter().zip(p.z.iter().zip(p.nan_q.iter())));
        for ((s, d), (&scale, (&z, &nan_q))) in it {
            let x = f32::from_le_bytes(*s);
            *d = qcore(x, scale, z, nan_q, lo, hi).to_le::<N>();
        }
    }
}

// Monomorphic entry points (keep each instantiation a separate, inlinable
// loop so LLVM vectorizes it for the concrete element width).
#[inline(always)]
pub(super) fn qrun_any<A: Acc>(src: &[[u8; 4]], dst: &mut [u8], n: usize, p: QParams<A>) {
    match n {
        1 => qrun::<A, 1>(src, dst.as_chunks_mut::<1>().0, p),
        2 => qrun::<A, 2>(src, dst.as_chunks_mut::<2>().0, p),
        _ => qrun::<A, 4>(src, dst.as_chunks_mut::<4>().0, p),
    }
}

#[inline(always)]
pub(super) fn qrows_any<A: Acc>(src: &[[u8; 4]], dst: &mut [u8], n: usize, p: &QRowParams<A>) {
    match n {
        1 => qrows::<A, 1>(src, dst.as_chunks_mut::<1>().0, p),
        2 => qrows::<A, 2>(src, dst.as_chunks_mut::<2>().0, p),
        _ => qrows::<A, 4>(src, dst.as_chunks_mut::<4>().0, p),
    }
}

// Runtime dispatch for x86-64 hosts. The baseline build targets SSE2, whose 4-wide division
// bounds quantize at about a third of what AVX2's 8-wide division reaches; the same loops,
// compiled again with AVX2 enabled, run when the CPU has it. aarch64 needs none of this: NEON
// is part of its baseline. The arithmetic is identical (IEEE division, the same rounding), so
// results do not depend on the path.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) fn qrun_avx2<A: Acc>(src: &[[u8; 4]], dst: &mut [u8], n: usize, p: QParams<A>) {
    qrun_any(src, dst, n, p)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) fn qrows_avx2<A: Acc>(src: &[[u8; 4]], dst: &mut [u8], n: usize, p: &QRowParams<A>) {
    qrows_any(src, dst, n, p)
}

pub(super) fn qrun_best<A: Acc>(src: &[[u8; 4]], dst: &mut [u8], n: usize, p: QParams<A>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above), the one requirement of
        // `qrun_avx2`'s target feature.
        return unsafe { qrun_avx2(src, dst, n, p) };
    }
    qrun_any(src, dst, n, p)
}

pub(super) fn qrows_best<A: Acc>(src: &[[u8; 4]], dst: &mut [u8], n: usize, p: &QRowParams<A>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above), the one requirement of
        // `qrows_avx2`'s target feature.
        return unsafe { qrows_avx2(src, dst, n, p) };
    }
    qrows_any(src, dst, n, p)
}

/// Whether the f32 fast path is exact for this container and these offsets
/// (see the module docs).
pub(super) fn use_f32_path(ty: QuantType, offsets: &[i32]) -> bool {
    ty.size() <= 2 && offsets.iter().all(|&o| o.unsigned_abs() <= 1 << 24)
}

// ---------------------------------------------------------------------------
// Dequantize kernels
// ---------------------------------------------------------------------------

/// Integer type in which `q + offset` is formed before the f32 conversion.
pub(super) trait IAcc: Copy + core::ops::Add<Output = Self> {
    fn to_f32(self) -> f32;
}
impl IAcc for i32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
}
impl IAcc for i64 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
}

/// Loads one little-endian element of a container as the accumulator type.
pub(super) trait Load<I, const N: usize> {
    fn load(b: [u8; N]) -> I;
}
pub(super) struct LU8;
pub(super) struct LI8;
pub(super) struct LU16;
pub(super) struct LI16;
pub(super) struct LU32;
pub(super) struct LI32;
macro_rules! load_impl {
    ($l:ident, $n:literal, $t:ty) => {
        impl Load<i32, $n> for $l {
            #[inline(always)]
            fn load(b: [u8; $n]) -> i32 {
                <$t>::from_le_bytes(b) as i32
            }
        }
        impl Load<i64, $n> for $l {
            #[inline(always)]
            fn load(b: [u8; $n]) -> i64 {
                <$t>::from_le_bytes(b) as i64
            }
        }
    };
}
load_impl!(LU8, 1, u8);
load_impl!(LI8, 1, i8);
load_impl!(LU16, 2, u16);
load_impl!(LI16, 2, i16);
load_impl!(LU32, 4, u32);
load_impl!(LI32, 4, i32);

#[inline(always)]
pub(super) fn drun<I: IAcc, L: Load<I, N>, const N: usize>(
    src: &[[u8; N]],
    dst: &mut [[u8; 4]],
    scale: f32,
    off: I,
) {
    for (s, d) in src.iter().zip(dst.iter_mut()) {
        *d = ((L::load(*s) + off).to_f32() * scale).to_le_bytes();
    }
}

#[inline(always)]
pub(super) fn drows<I: IAcc, L: Load<I, N>, const N: usize>(
    src: &[[u8; N]],
    dst: &mut [[u8; 4]],
    scales: &[f32],
    offs: &[I],
) {
    let row = scales.len();
    for (s, d) in src.chunks(row).zip(dst.chunks_mut(row)) {
        let it = s.iter().zip(d.iter_mut()).zip(scales.iter().zip(offs));
        for ((s, d), (&scale, &off)) in it {
            *d = ((L::load(*s) + off).to_f32() * scale).to_le_bytes();
        }
    }
}

/// Calls `$f::<I, Loader, N>` for the container `$ty`, with the source bytes
/// viewed as `[u8; N]` chunks.
macro_rules! dispatch_load {
    ($ty:expr, $i:ty, $f:ident, $src:expr, $($args:expr),*) => {
        match $ty {
            QuantType::U8 => $f::<$i, LU8, 1>($src.as_chunks::<1>().0, $($args),*),
            QuantType::I8 => $f::<$i, LI8, 1>($src.as_chunks::<1>().0, $($args),*),
            QuantType::U16 => $f::<$i, LU16, 2>($src.as_chunks::<2>().0, $($args),*),
            QuantType::I16 => $f::<$i, LI16, 2>($src.as_chunks::<2>().0, $($args),*),
            QuantType::U32 => $f::<$i, LU32, 4>($src.as_chunks::<4>().0, $($args),*),
            QuantType::I32 => $f::<$i, LI32, 4>($src.as_chunks::<4>().0, $($args),*),
        }
    };
}

/// `q + offset` cannot overflow i32 for 8/16-bit containers when
/// `|offset| <= 2^30`; otherwise (and for 32-bit containers) use i64. Both
/// give the exact integer sum, so the result is the same.
pub(super) fn use_i32_path(ty: QuantType, offsets: &[i32]) -> bool {
    ty.size() <= 2 && offsets.iter().all(|&o| o.unsigned_abs() <= 1 << 30)
}

#[inline(always)]
pub(super) fn dq_run(ty: QuantType, src: &[u8], dst: &mut [[u8; 4]], scale: f32, offset: i32) {
    if use_i32_path(ty, &[offset]) {
        dispatch_load!(ty, i32, drun, src, dst, scale, offset);
    } else {
        dispatch_load!(ty, i64, drun, src, dst, scale, offset as i64);
    }
}

// The same loop compiled again for AVX-512 and for AVX2 (the baseline build has SSE2 only):
// LLVM widens the loads, the int->f32 conversion and the multiply; the arithmetic per element
// is the same, so the result does not depend on the path.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) fn dq_run_avx512(
    ty: QuantType,
    src: &[u8],
    dst: &mut [[u8; 4]],
    scale: f32,
    offset: i32,
) {
    dq_run(ty, src, dst, scale, offset)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) fn dq_run_avx2(ty: QuantType, src: &[u8], dst: &mut [[u8; 4]], scale: f32, offset: i32) {
    dq_run(ty, src, dst, scale, offset)
}

/// [`dq_run`] on the widest vectors this CPU has.
pub(super) fn dq_run_best(ty: QuantType, src: &[u8], dst: &mut [[u8; 4]], scale: f32, offset: i32) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx512bw") {
            // SAFETY: the CPU has AVX-512F and AVX-512BW (checked just above), the target
            // features of `dq_run_avx512`.
            return unsafe { dq_run_avx512(ty, src, dst, scale, offset) };
        }
        if has!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above), the target feature of
            // `dq_run_avx2`.
            return unsafe { dq_run_avx2(ty, src, dst, scale, offset) };
        }
    }
    dq_run(ty, src, dst, scale, offset)
}

/// Quantizes one run of elements sharing `scale` and `offset` on a vector path chosen at run
/// time (x86-64: AVX-512 or AVX2, see `quant/x86.rs`); `false`, with nothing written, where
/// none applies and the caller runs the portable loop. aarch64 has none: its baseline is NEON,
/// which the portable loops are vectorized for.
#[inline]
pub(super) fn quantize_fast(
    src: &[[u8; 4]],
    dst: &mut [u8],
    ty: QuantType,
    scale: f32,
    offset: i32,
    range: (i64, i64),
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = super::x86::FastQ::new(ty, scale, offset, range) {
        return super::x86::quantize(src, dst, ty.size(), p, super::x86::Level::Avx512);
    }
    let _ = (src, dst, ty, scale, offset, range);
    false
}
