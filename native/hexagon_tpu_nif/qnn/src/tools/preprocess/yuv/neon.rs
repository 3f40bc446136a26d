//! The YUV -> RGB conversion in NEON (aarch64): whole rows, and the columns a resize reads.

use std::arch::aarch64::*;

use super::Coefficients;
use crate::tools::preprocess::linear::block_starts;

// The functions enable NEON, which every aarch64 CPU has: their arithmetic is safe to call
// (it holds no pointer), and the rest of the pass calls them in `unsafe` for that alone.

/// `max(Y - y0, 0) * CY` of 16 pixels, in 4 vectors of 4 (in order).
#[target_feature(enable = "neon")]
#[inline]
fn luma(k: &Coefficients, y: uint8x16_t) -> [int32x4_t; 4] {
    let y = vqsubq_u8(y, vdupq_n_u8(k.y_offset as u8));
    let (lo, hi) = (vmovl_u8(vget_low_u8(y)), vmovl_high_u8(y));
    let wide = [
        vmovl_u16(vget_low_u16(lo)),
        vmovl_high_u16(lo),
        vmovl_u16(vget_low_u16(hi)),
        vmovl_high_u16(hi),
    ];
    wide.map(|x| vmulq_n_s32(vreinterpretq_s32_u32(x), k.cy))
}

/// `x - 128` of 16 samples, in 4 vectors of 4.
#[target_feature(enable = "neon")]
#[inline]
fn centred(x: uint8x16_t) -> [int32x4_t; 4] {
    let c = vdupq_n_u8(128);
    let lo = vreinterpretq_s16_u16(vsubl_u8(vget_low_u8(x), vget_low_u8(c)));
    let hi = vreinterpretq_s16_u16(vsubl_high_u8(x, c));
    [
        vmovl_s16(vget_low_s16(lo)),
        vmovl_high_s16(lo),
        vmovl_s16(vget_low_s16(hi)),
        vmovl_high_s16(hi),
    ]
}

/// The chroma terms of R, G and B (`CVR v`, `CVG v + CUG u`, `CUB u`) of 16 samples.
#[target_feature(enable = "neon")]
#[inline]
fn chroma(k: &Coefficients, u: uint8x16_t, v: uint8x16_t) -> [[int32x4_t; 4]; 3] {
    let (u, v) = (centred(u), centred(v));
    let r = v.map(|v| vmulq_n_s32(v, k.cvr));
    let g = std::array::from_fn(|i| vmlaq_n_s32(vmulq_n_s32(v[i], k.cvg), u[i], k.cug));
    let b = u.map(|u| vmulq_n_s32(u, k.cub));
    [r, g, b]
}

/// `clamp((yy + t + 2^19) >> 20, 0, 255)` of 16 pixels: `(yy + t) >> 16` (the high half
/// of the sum, which fits i16: |yy + t| < 2^30), then `(x + 8) >> 4` saturated to u8,
/// which is the same floor (2^19 is 8 times 2^16). A macro: as a function LLVM keeps it
/// out of line (six calls a block).
macro_rules! channel {
    ($yy:expr, $t:expr) => {{
        let (yy, t): (&[int32x4_t; 4], &[int32x4_t; 4]) = ($yy, $t);
        let lo = vaddhn_high_s32(vaddhn_s32(yy[0], t[0]), yy[1], t[1]);
        let hi = vaddhn_high_s32(vaddhn_s32(yy[2], t[2]), yy[3], t[3]);
        vqrshrun_high_n_s16::<4>(vqrshrun_n_s16::<4>(lo), hi)
    }};
}

/// [`Coefficients::rgb`] of 16 samples at a time (each pixel its own chroma) into three
/// planes; returns how many it did (all of them if there are 16 or more).
#[target_feature(enable = "neon")]
pub(super) fn planes(k: &Coefficients, yuv: [&[u8]; 3], out: [&mut [u8]; 3]) -> usize {
    let n = yuv
        .iter()
        .map(|s| s.len())
        .chain(out.iter().map(|o| o.len()))
        .min();
    let n = n.unwrap_or(0);
    if n < 16 {
        return 0;
    }
    let [ys, us, vs] = yuv;
    let [r, g, b] = out;
    for at in block_starts(n, 16, false) {
        // SAFETY: `at + 16 <= n`, within every slice.
        let (y, u, v) = unsafe {
            (
                vld1q_u8(ys.as_ptr().add(at)),
                vld1q_u8(us.as_ptr().add(at)),
                vld1q_u8(vs.as_ptr().add(at)),
            )
        };
        let yy = luma(k, y);
        let [tr, tg, tb] = chroma(k, u, v);
        // SAFETY: as the loads.
        unsafe {
            vst1q_u8(r.as_mut_ptr().add(at), channel!(&yy, &tr));
            vst1q_u8(g.as_mut_ptr().add(at), channel!(&yy, &tg));
            vst1q_u8(b.as_mut_ptr().add(at), channel!(&yy, &tb));
        }
    }
    n
}

/// [`Coefficients::rgb`] of 32 pixels at a time of a 4:2:0 row from an even column
/// (pixels `2 i`, `2 i + 1` share the chroma pair `uv[2 i..2 i + 2]`, U at `iu`) into
/// three planes; returns how many it did (if there are 32 or more, all of them but the
/// last of an odd number: the last block starts at an even pixel, to pair as the others).
#[target_feature(enable = "neon")]
pub(super) fn nv_planes(
    k: &Coefficients,
    ys: &[u8],
    uv: &[u8],
    iu: usize,
    out: [&mut [u8]; 3],
) -> usize {
    let n = out
        .iter()
        .fold(ys.len().min(uv.len()), |n, o| n.min(o.len()));
    if n < 32 {
        return 0;
    }
    let [r, g, b] = out;
    for at in block_starts(n, 32, true) {
        // SAFETY: `at + 32 <= n`, within every slice: 32 Y samples, 16 pairs, 32 bytes of
        // each plane.
        let (y, c) = unsafe { (vld2q_u8(ys.as_ptr().add(at)), vld2q_u8(uv.as_ptr().add(at))) };
        let (u, v) = if iu == 0 { (c.0, c.1) } else { (c.1, c.0) };
        // even pixels in y.0, odd ones in y.1, both with the same 16 pairs
        let (even, odd) = (luma(k, y.0), luma(k, y.1));
        let [tr, tg, tb] = chroma(k, u, v);
        let pr = uint8x16x2_t(channel!(&even, &tr), channel!(&odd, &tr));
        let pg = uint8x16x2_t(channel!(&even, &tg), channel!(&odd, &tg));
        let pb = uint8x16x2_t(channel!(&even, &tb), channel!(&odd, &tb));
        // SAFETY: as the loads; the stores interleave the even and odd pixels back.
        unsafe {
            vst2q_u8(r.as_mut_ptr().add(at), pr);
            vst2q_u8(g.as_mut_ptr().add(at), pg);
            vst2q_u8(b.as_mut_ptr().add(at), pb);
        }
    }
    (n - 32) / 2 * 2 + 32
}

/// Packed RGB pixels `px` into three planes, 16 at a time; returns how many it did (all of
/// them if there are 16 or more).
#[target_feature(enable = "neon")]
pub(super) fn deinterleave(px: &[u8], out: [&mut [u8]; 3]) -> usize {
    let n = out.iter().fold(px.len() / 3, |n, o| n.min(o.len()));
    if n < 16 {
        return 0;
    }
    let [r, g, b] = out;
    for at in block_starts(n, 16, false) {
        // SAFETY: `at + 16 <= n`: 48 bytes of `px`, 16 of each plane.
        unsafe {
            let v = vld3q_u8(px.as_ptr().add(3 * at));
            vst1q_u8(r.as_mut_ptr().add(at), v.0);
            vst1q_u8(g.as_mut_ptr().add(at), v.1);
            vst1q_u8(b.as_mut_ptr().add(at), v.2);
        }
    }
    n
}
