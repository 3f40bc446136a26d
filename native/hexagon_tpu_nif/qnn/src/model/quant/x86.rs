//! x86-64 paths chosen at run time: the release build targets baseline x86-64 (SSE2), so the
//! kernels here are compiled with AVX-512 / AVX2 / F16C enabled per function and called only
//! after `is_x86_feature_detected!` says the CPU has them. Each computes exactly what the
//! portable loops in `kernels.rs` compute (tested against them on edge values in
//! `quant/tests.rs`); a caller falls back to those loops when a function here declines.
//!
//! # Quantize
//!
//! `q = clamp(x / scale, lo, hi)` rounded half to even by `cvtps2dq`, plus the zero point in
//! i32, with `lo = qmin + offset` and `hi = qmax + offset` as f32 and NaN lanes set to 0 before
//! the clamp. For integer `lo <= hi`, clamping then rounding equals rounding then clamping
//! (rounding is monotone and keeps integers), so the result is
//! `saturate(round_half_to_even(x / scale) - offset)`, and a NaN gives the clamped zero point,
//! as the module docs of `quant` define. It needs `lo` and `hi` exact in f32
//! (`|qmin + offset|, |qmax + offset| <= 2^24`) and an 8- or 16-bit container; otherwise
//! [`quantize`] declines. This is the instruction sequence of MLAS's `QuantizeLinear` (ONNX
//! Runtime), with the NaN rule added.
//!
//! # f16
//!
//! F16C's `vcvtps2ph` (round to nearest even) equals `f32_to_f16_bits` for every input,
//! NaN included (quiet bit set, top payload bits kept). `vcvtph2ps` quiets a signalling NaN
//! where `f16_bits_to_f32` keeps it as it is, so that path clears the quiet bit again in the
//! lanes whose input was a signalling NaN.

use std::arch::x86_64::*;

use super::qtype::QuantType;

/// Per-tensor quantize parameters of the fast path.
#[derive(Clone, Copy, Debug)]
pub(super) struct FastQ {
    scale: f32,
    lo: f32,
    hi: f32,
    zero_point: i32,
    signed: bool,
}

impl FastQ {
    /// The fast path's parameters, or `None` when it does not apply (see the module docs).
    pub(super) fn new(
        ty: QuantType,
        scale: f32,
        offset: i32,
        (qmin, qmax): (i64, i64),
    ) -> Option<Self> {
        const EXACT: i64 = 1 << 24;
        let (lo, hi) = (qmin + offset as i64, qmax + offset as i64);
        let fits = ty.size() <= 2 && lo.abs() <= EXACT && hi.abs() <= EXACT && lo <= hi;
        // With `lo` and `hi` within 2^24 and the bounds within 16 bits, `-offset` fits in i32.
        fits.then(|| FastQ {
            scale,
            lo: lo as f32,
            hi: hi as f32,
            zero_point: (-(offset as i64)) as i32,
            signed: matches!(ty, QuantType::I8 | QuantType::I16),
        })
    }
}

/// The best path this CPU has, for tests to name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Level {
    Avx512,
    Avx2,
    Portable,
}

/// Which quantize path [`quantize`] takes on this CPU.
pub(super) fn level() -> Level {
    if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
        Level::Avx512
    } else if is_x86_feature_detected!("avx2") {
        Level::Avx2
    } else {
        Level::Portable
    }
}

/// Quantizes `src` into `dst` (`src.len()` elements of `size` bytes) on the best path `at` most;
/// `false` (nothing written) when no vector path applies.
pub(super) fn quantize(src: &[[u8; 4]], dst: &mut [u8], size: usize, p: FastQ, at: Level) -> bool {
    debug_assert_eq!(dst.len(), src.len() * size);
    if dst.len() != src.len() * size {
        return false;
    }
    match (at.min_with(level()), size) {
        // SAFETY: `level()` found AVX-512F and AVX-512BW on this CPU, the target features of
        // `quantize_avx512`.
        (Level::Avx512, 1 | 2) => unsafe { quantize_avx512(src, dst, size, p) },
        // SAFETY: `level()` found AVX2 on this CPU, the target feature of `quantize_avx2`.
        (Level::Avx2, 1 | 2) => unsafe { quantize_avx2(src, dst, size, p) },
        _ => return false,
    }
    true
}

impl Level {
    /// The lesser of two levels.
    fn min_with(self, other: Level) -> Level {
        let rank = |l: Level| match l {
            Level::Avx512 => 2,
            Level::Avx2 => 1,
            Level::Portable => 0,
        };
        if rank(self) <= rank(other) {
            self
        } else {
            other
        }
    }
}

/// Elements from which a quantize to bytes streams its output past the caches: 1 Mi f32 (4 MiB
/// of input), more than a core's L2 holds.
pub(super) const STREAM_FROM: usize = 1 << 20;

#[target_feature(enable = "avx512f,avx512bw")]
fn quantize_avx512(src: &[[u8; 4]], dst: &mut [u8], size: usize, p: FastQ) {
    let scale = _mm512_set1_ps(p.scale);
    let (lo, hi) = (_mm512_set1_ps(p.lo), _mm512_set1_ps(p.hi));
    let zero_point = _mm512_set1_epi32(p.zero_point);
    let core = |x: __m512| {
        let r = _mm512_div_ps(x, scale);
        let r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_ORD_Q>(r, r), r);
        let r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
        let q = _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(r);
        _mm512_add_epi32(q, zero_point)
    };
    let n = src.len();
    let (s, d) = (src.as_ptr().cast::<f32>(), dst.as_mut_ptr());
    let store = |i: usize, mask: __mmask16, q: __m512i| {
        if size == 1 {
            // SAFETY: the lanes under `mask` are bytes `i..` of `dst` below `n` (the callers
            // below pass a mask covering only elements `< n`), and `dst` holds `n` one-byte
            // elements; masked-off lanes are not written and cannot fault.
            unsafe { _mm512_mask_cvtepi32_storeu_epi8(d.add(i).cast(), mask, q) };
        } else {
            // SAFETY: as above, for `n` two-byte elements; no alignment requirement.
            unsafe { _mm512_mask_cvtepi32_storeu_epi16(d.add(2 * i).cast(), mask, q) };
        }
    };
    // Elements `from..to` (`to <= n`) under masks, 16 at a time; returns `to`.
    let masked = |from: usize, to: usize| {
        let mut i = from;
        while i < to {
            let left = to - i;
            let mask: __mmask16 = if left >= 16 {
                0xffff
            } else {
                (1u16 << left) - 1
            };
            // SAFETY: the lanes under `mask` are elements `i..min(i + 16, to)` of `src`, and
            // `to <= n`; masked-off lanes are not read and cannot fault.
            let x = unsafe { _mm512_maskz_loadu_ps(mask, s.add(i)) };
            store(i, mask, core(x));
            i += left.min(16);
        }
        to
    };
    let mut i = 0;
    if size == 1 {
        // Four vectors an iteration, narrowed in registers and stored as one: a narrowing store
        // to memory costs several micro-ops each. Past the caches (a large frame), the stores
        // bypass them: the bytes go to QNN, not back to this core.
        let streaming = n >= STREAM_FROM;
        if streaming {
            // Up to the first 64-byte boundary of `dst` under masks (a streaming store must be
            // aligned).
            i = masked(0, d.align_offset(64).min(n));
        }
        let whole = i + (n - i) / 64 * 64;
        while i < whole {
            // SAFETY: elements `i..i + 64` are inside `src` (`i + 64 <= whole <= n`).
            let x = unsafe { [0, 16, 32, 48].map(|k| core(_mm512_loadu_ps(s.add(i + k)))) };
            let bytes = x.map(|q| _mm512_cvtepi32_epi8(q));
            let v = _mm512_inserti32x4::<3>(
                _mm512_inserti32x4::<2>(
                    _mm512_inserti32x4::<1>(_mm512_castsi128_si512(bytes[0]), bytes[1]),
                    bytes[2],
                ),
                bytes[3],
            );
            if streaming {
                // SAFETY: bytes `i..i + 64` are inside `dst`, 64-byte aligned (`i` started at
                // `dst`'s first boundary and moves by 64).
                unsafe { _mm512_stream_si512(d.add(i).cast(), v) };
            } else {
                // SAFETY: bytes `i..i + 64` are inside `dst`; no alignment requirement.
                unsafe { _mm512_storeu_si512(d.add(i).cast(), v) };
            }
            i += 64;
        }
        if streaming {
            // The streamed stores are ordered before anything after this function.
            _mm_sfence();
        }
    }
    // Two vectors an iteration, then what is left under a mask.
    while i + 32 <= n {
        // SAFETY: elements `i..i + 32` are inside `src` (`i + 32 <= n`).
        let (a, b) = unsafe { (_mm512_loadu_ps(s.add(i)), _mm512_loadu_ps(s.add(i + 16))) };
        let (a, b) = (core(a), core(b));
        store(i, 0xffff, a);
        store(i + 16, 0xffff, b);
        i += 32;
    }
    masked(i, n);
}

#[target_feature(enable = "avx2")]
fn quantize_avx2(src: &[[u8; 4]], dst: &mut [u8], size: usize, p: FastQ) {
    let scale = _mm256_set1_ps(p.scale);
    let (lo, hi) = (_mm256_set1_ps(p.lo), _mm256_set1_ps(p.hi));
    let zero_point = _mm256_set1_epi32(p.zero_point);
    let core = |x: __m256| {
        let r = _mm256_div_ps(x, scale);
        let r = _mm256_and_ps(r, _mm256_cmp_ps::<_CMP_ORD_Q>(r, r));
        let r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
        // `cvtps2dq` rounds as MXCSR says: to nearest even, which Rust code never changes.
        _mm256_add_epi32(_mm256_cvtps_epi32(r), zero_point)
    };
    let signed = p.signed;
    let n = src.len();
    let s = src.as_ptr().cast::<f32>();
    let whole = n / 16 * 16;
    let mut i = 0;
    while i < whole {
        // SAFETY: elements `i..i + 16` are inside `src` (`i + 16 <= whole <= n`).
        let (a, b) = unsafe { (_mm256_loadu_ps(s.add(i)), _mm256_loadu_ps(s.add(i + 8))) };
        let (a, b) = (core(a), core(b));
        // Every lane is in the container's range: the packs below do not saturate. They work
        // per 128-bit half; the permute puts the halves back in order.
        if size == 1 {
            let w = _mm256_packs_epi32(a, b); // a0-3 b0-3 | a4-7 b4-7 as i16
            let w = _mm256_permute4x64_epi64::<0b11_01_10_00>(w); // a0-7 | b0-7
            let h = _mm256_castsi256_si128(w);
            let l = _mm256_extracti128_si256::<1>(w);
            let bytes = if signed {
                _mm_packs_epi16(h, l)
            } else {
                _mm_packus_epi16(h, l)
            };
            // SAFETY: bytes `i..i + 16` of `dst` (one byte per element, `n` elements) exist;
            // `storeu` has no alignment requirement.
            unsafe { _mm_storeu_si128(dst.as_mut_ptr().add(i).cast(), bytes) };
        } else {
            let w = if signed {
                _mm256_packs_epi32(a, b)
            } else {
                _mm256_packus_epi32(a, b)
            };
            let w = _mm256_permute4x64_epi64::<0b11_01_10_00>(w);
            // SAFETY: bytes `2i..2i + 32` of `dst` (two bytes per element, `n` elements)
            // exist; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_si256(dst.as_mut_ptr().add(2 * i).cast(), w) };
        }
        i += 16;
    }
    for k in whole..n {
        let x = f32::from_le_bytes(src[k]);
        let r = x / p.scale;
        // NaN to 0, then the clamp (which may move it, when the zero point is outside
        // the range).
        let r = if r.is_nan() { 0.0 } else { r };
        let r = r.max(p.lo).min(p.hi);
        let q = r.round_ties_even() as i32 + p.zero_point;
        dst[k * size..(k + 1) * size].copy_from_slice(&q.to_le_bytes()[..size]);
    }
}

/// Whether the F16C paths may run.
pub(super) fn has_f16c() -> bool {
    is_x86_feature_detected!("f16c") && is_x86_feature_detected!("avx2")
}

/// f32 -> f16 with AVX-512F or F16C (the best `at` most) over a prefix of whole vectors;
/// returns how many elements it did (0 where neither applies).
pub(super) fn f32_to_f16(src: &[[u8; 4]], dst: &mut [[u8; 2]], at: Level) -> usize {
    if src.len() != dst.len() {
        return 0;
    }
    if at == Level::Avx512 && is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked just above), the target feature of
        // `f32_to_f16_avx512`.
        return unsafe { f32_to_f16_avx512(src, dst) };
    }
    if at != Level::Portable && has_f16c() {
        // SAFETY: `has_f16c()` found F16C and AVX2 on this CPU, the target features of
        // `f32_to_f16_f16c`.
        return unsafe { f32_to_f16_f16c(src, dst) };
    }
    0
}

#[target_feature(enable = "avx512f")]
fn f32_to_f16_avx512(src: &[[u8; 4]], dst: &mut [[u8; 2]]) -> usize {
    let whole = src.len().min(dst.len()) / 16 * 16;
    let (s, d) = (src.as_ptr().cast::<f32>(), dst.as_mut_ptr());
    let mut i = 0;
    while i < whole {
        // SAFETY: elements `i..i + 16` of `src` and of `dst` exist (`i + 16 <= whole`); the
        // unaligned load and store have no alignment requirement.
        unsafe {
            let h = _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm512_loadu_ps(s.add(i)));
            _mm256_storeu_si256(d.add(i).cast(), h);
        }
        i += 16;
    }
    whole
}

#[target_feature(enable = "avx2,f16c")]
fn f32_to_f16_f16c(src: &[[u8; 4]], dst: &mut [[u8; 2]]) -> usize {
    let whole = src.len().min(dst.len()) / 8 * 8;
    let (s, d) = (src.as_ptr().cast::<f32>(), dst.as_mut_ptr());
    let mut i = 0;
    while i < whole {
        // SAFETY: elements `i..i + 8` of `src` and of `dst` exist (`i + 8 <= whole`); the
        // unaligned load and store have no alignment requirement.
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(s.add(i)));
            _mm_storeu_si128(d.add(i).cast(), h);
        }
        i += 8;
    }
    whole
}

/// f16 -> f32 with AVX-512F or F16C (the best `at` most) over a prefix of whole vectors;
/// returns how many elements it did (0 where neither applies).
pub(super) fn f16_to_f32(src: &[[u8; 2]], dst: &mut [[u8; 4]], at: Level) -> usize {
    if src.len() != dst.len() {
        return 0;
    }
    if at == Level::Avx512 && is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked just above), the target feature of
        // `f16_to_f32_avx512`.
        return unsafe { f16_to_f32_avx512(src, dst) };
    }
    if at != Level::Portable && has_f16c() {
        // SAFETY: `has_f16c()` found F16C and AVX2 on this CPU, the target features of
        // `f16_to_f32_f16c`.
        return unsafe { f16_to_f32_f16c(src, dst) };
    }
    0
}

#[target_feature(enable = "avx512f")]
fn f16_to_f32_avx512(src: &[[u8; 2]], dst: &mut [[u8; 4]]) -> usize {
    let whole = src.len().min(dst.len()) / 16 * 16;
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr().cast::<f32>());
    let abs = _mm512_set1_epi32(0x7fff);
    let (inf, quiet) = (_mm512_set1_epi32(0x7c00), _mm512_set1_epi32(0x7e00));
    let quiet_f32 = _mm512_set1_epi32(0x0040_0000);
    let mut i = 0;
    while i < whole {
        // SAFETY: elements `i..i + 16` of `src` exist (`i + 16 <= whole`); unaligned load.
        let h = unsafe { _mm256_loadu_si256(s.add(i).cast()) };
        let f = _mm512_castps_si512(_mm512_cvtph_ps(h));
        // Signalling NaN inputs (0x7c01..=0x7dff, either sign): clear the quiet bit
        // vcvtph2ps set.
        let a = _mm512_and_si512(_mm512_cvtepu16_epi32(h), abs);
        let snan = _mm512_cmpgt_epi32_mask(a, inf) & _mm512_cmplt_epi32_mask(a, quiet);
        let f = _mm512_mask_xor_epi32(f, snan, f, quiet_f32);
        // SAFETY: elements `i..i + 16` of `dst` exist (`i + 16 <= whole`); unaligned store.
        unsafe { _mm512_storeu_si512(d.add(i).cast(), f) };
        i += 16;
    }
    whole
}

#[target_feature(enable = "avx2,f16c")]
fn f16_to_f32_f16c(src: &[[u8; 2]], dst: &mut [[u8; 4]]) -> usize {
    let whole = src.len().min(dst.len()) / 8 * 8;
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr().cast::<f32>());
    let abs = _mm256_set1_epi32(0x7fff);
    let inf = _mm256_set1_epi32(0x7c00);
    let quiet = _mm256_set1_epi32(0x7e00);
    let quiet_f32 = _mm256_set1_epi32(0x0040_0000);
    let mut i = 0;
    while i < whole {
        // SAFETY: elements `i..i + 8` of `src` exist (`i + 8 <= whole`); unaligned load.
        let h = unsafe { _mm_loadu_si128(s.add(i).cast()) };
        let f = _mm256_castps_si256(_mm256_cvtph_ps(h));
        // Signalling NaN inputs (0x7c01..=0x7dff, either sign): clear the quiet bit
        // vcvtph2ps set.
        let a = _mm256_and_si256(_mm256_cvtepu16_epi32(h), abs);
        let snan = _mm256_and_si256(_mm256_cmpgt_epi32(a, inf), _mm256_cmpgt_epi32(quiet, a));
        let f = _mm256_andnot_si256(_mm256_and_si256(snan, quiet_f32), f);
        // SAFETY: elements `i..i + 8` of `dst` exist (`i + 8 <= whole`); unaligned store.
        unsafe { _mm256_storeu_si256(d.add(i).cast(), f) };
        i += 8;
    }
    whole
}
