//! The bilinear pass in NEON (aarch64): the horizontal taps by `tbl`, the vertical blend, the
//! table lookup and the NHWC interleave.

use std::arch::aarch64::*;

/// A block of 8 output pixels as `tbl` reads them: their source values are the bytes
/// `base + idx[k]` (`k < 8`: `o0`, `k >= 8`: `o1` of pixel `k % 8`) of each channel, all
/// within 64 bytes of `base`; their weights are split as `a = 16 * wh + wl` (`wl < 16`), so
/// that `(p0 a0 + p1 a1) >> 4 = p0 wh0 + p1 wh1 + ((p0 wl0 + p1 wl1) >> 4)` is exact in
/// u16 arithmetic (modulo 2^16, as the portable `as i16`). `base == usize::MAX`: the block
/// reaches wider than 64 bytes (or has weights beyond 4095), the portable loop does it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Block {
    base: usize,
    idx: [u8; 16],
    wh: [u8; 16],
    wl: [u8; 16],
}

impl Block {
    /// The block of the 8 pixels whose offsets and packed weights these are.
    pub(super) fn new(o0: &[i32], o1: &[i32], a: &[i32]) -> Block {
        let mut b = Block {
            base: usize::MAX,
            idx: [0; 16],
            wh: [0; 16],
            wl: [0; 16],
        };
        let (o0, o1, a) = (&o0[..8], &o1[..8], &a[..8]);
        let all = || o0.iter().chain(o1);
        let (Some(&lo), Some(&hi)) = (all().min(), all().max()) else {
            return b;
        };
        let mut weights = a.iter().flat_map(|&a| [a & 0xffff, a >> 16]);
        if lo < 0 || hi - lo >= 64 || weights.any(|w| !(0..4096).contains(&w)) {
            return b;
        }
        for k in 0..8 {
            b.idx[k] = (o0[k] - lo) as u8;
            b.idx[k + 8] = (o1[k] - lo) as u8;
            let (a0, a1) = (a[k] & 0xffff, a[k] >> 16);
            (b.wh[k], b.wl[k]) = ((a0 >> 4) as u8, (a0 & 15) as u8);
            (b.wh[k + 8], b.wl[k + 8]) = ((a1 >> 4) as u8, (a1 & 15) as u8);
        }
        b.base = lo as usize;
        b
    }
}

/// The horizontal pass over the whole blocks of 8 pixels (the portable loop for those
/// [`Block`] leaves to it, or whose 64 bytes from `base` of a channel overrun `row`);
/// returns how many pixels it did (a prefix).
pub(super) fn horizontal(row: &[u8], taps: &super::HTaps, out: &mut [i16]) -> usize {
    let (w, cs) = (taps.len(), taps.channel.max(1));
    if out.len() < 3 * w {
        return 0;
    }
    // the last channel's 64 bytes from `base` inside `row`
    let fits = |base: usize| {
        (row.len().checked_sub(64))
            .is_some_and(|m| cs.checked_mul(2).is_some_and(|c| c <= m && base <= m - c))
    };
    for (k, b) in taps.blocks.iter().enumerate() {
        let j = 8 * k;
        if b.base == usize::MAX || !fits(b.base) {
            super::horizontal(row, taps, out, j..j + 8);
            continue;
        }
        // SAFETY: NEON is part of aarch64. Reads: `base + c * cs + 64 <= row.len()` for
        // c <= 2 (`fits`); the block's arrays are 16 bytes. Writes: `j + 8 <= w` (a whole
        // block) and `out.len() >= 3 * w`, so `c * w + j + 8 <= out.len()`.
        unsafe {
            let idx = vld1q_u8(b.idx.as_ptr());
            let (wh, wl) = (vld1q_u8(b.wh.as_ptr()), vld1q_u8(b.wl.as_ptr()));
            for c in 0..3 {
                let t = vld1q_u8_x4(row.as_ptr().add(b.base + c * cs));
                // p0 of the 8 pixels, then their p1
                let p = vqtbl4q_u8(t, idx);
                let hi = vmlal_high_u8(vmull_u8(vget_low_u8(p), vget_low_u8(wh)), p, wh);
                let lo = vmlal_high_u8(vmull_u8(vget_low_u8(p), vget_low_u8(wl)), p, wl);
                let h = vsraq_n_u16::<4>(hi, lo);
                vst1q_s16(out.as_mut_ptr().add(c * w + j), vreinterpretq_s16_u16(h));
            }
        }
    }
    8 * taps.blocks.len()
}

/// `out[k] = table[src[k]]`, 16 at a time; returns how many it did (all of them if there
/// are 16 or more).
pub(super) fn lookup(table: &[u8; 256], src: &[u8], out: &mut [u8]) -> usize {
    let n = out.len().min(src.len());
    if n < 16 {
        return 0;
    }
    // SAFETY: NEON is part of aarch64; the table is 256 bytes (four loads of 64), every
    // other access is inside `..n` of `src` and `out` (`at + 16 <= n`).
    unsafe {
        let t = [0, 64, 128, 192].map(|at| vld1q_u8_x4(table.as_ptr().add(at)));
        let step = vdupq_n_u8(64);
        for at in super::block_starts(n, 16, false) {
            // `tbl` gives 0 for an index beyond 63, `tbx` keeps what is there
            let x = vld1q_u8(src.as_ptr().add(at));
            let x1 = vsubq_u8(x, step);
            let x2 = vsubq_u8(x1, step);
            let x3 = vsubq_u8(x2, step);
            let v = vqtbl4q_u8(t[0], x);
            let v = vqtbx4q_u8(v, t[1], x1);
            let v = vqtbx4q_u8(v, t[2], x2);
            let v = vqtbx4q_u8(v, t[3], x3);
            vst1q_u8(out.as_mut_ptr().add(at), v);
        }
    }
    n
}

/// `out[3 k + c] = planes[c][k]` over whole blocks of 16 pixels; returns how many it did.
pub(super) fn interleave(planes: [&[u8]; 3], out: &mut [u8]) -> usize {
    let n = (out.len() / 3)
        .min(planes[0].len())
        .min(planes[1].len())
        .min(planes[2].len());
    let n = n / 16 * 16;
    // SAFETY: NEON is part of aarch64; reads inside `..n` of each plane, writes inside
    // `..3 n` of `out`.
    unsafe {
        for at in (0..n).step_by(16) {
            let v = uint8x16x3_t(
                vld1q_u8(planes[0].as_ptr().add(at)),
                vld1q_u8(planes[1].as_ptr().add(at)),
                vld1q_u8(planes[2].as_ptr().add(at)),
            );
            vst3q_u8(out.as_mut_ptr().add(3 * at), v);
        }
    }
    n
}

/// The vertical blend over whole blocks of 8 elements; returns how many it did.
/// `h0`, `h1` and `out` are equally long.
pub(super) fn vertical(h0: &[i16], h1: &[i16], b: [i16; 2], out: &mut [u8]) -> usize {
    let n = out.len() / 8 * 8;
    // SAFETY: NEON is part of aarch64; every access is inside `..n` of equally long slices.
    unsafe {
        let (b0, b1) = (vdup_n_s16(b[0]), vdup_n_s16(b[1]));
        for at in (0..n).step_by(8) {
            let x = vld1q_s16(h0.as_ptr().add(at));
            let y = vld1q_s16(h1.as_ptr().add(at));
            // (a * b) >> 16, as x86's mulhi: widen, multiply, narrowing shift
            let mulhi = |a: int16x8_t, b: int16x4_t| {
                let lo = vshrn_n_s32::<16>(vmull_s16(vget_low_s16(a), b));
                let hi = vshrn_n_s32::<16>(vmull_s16(vget_high_s16(a), b));
                vcombine_s16(lo, hi)
            };
            let v = vaddq_s16(mulhi(x, b0), mulhi(y, b1));
            // (v + 2) >> 2 saturated to u8
            vst1_u8(out.as_mut_ptr().add(at), vqrshrun_n_s16::<2>(v));
        }
    }
    n
}
