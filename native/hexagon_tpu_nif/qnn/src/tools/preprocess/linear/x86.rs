//! The bilinear pass in AVX2 (x86-64): the horizontal taps by `pshufb` and `maddubs`, the
//! vertical blend, the table lookup and the NHWC interleave.

use std::arch::x86_64::*;

/// The vertical blend over whole blocks of 32 elements; returns how many it did.
///
/// # Safety
///
/// The CPU must have AVX2; `h0`, `h1` and `out` must be equally long.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn vertical(h0: &[i16], h1: &[i16], b: [i16; 2], out: &mut [u8]) -> usize {
    let n = out.len() / 32 * 32;
    let (b0, b1) = (_mm256_set1_epi16(b[0]), _mm256_set1_epi16(b[1]));
    let one = |at: usize| {
        // SAFETY: `at + 16 <= n <= h0.len(), h1.len()`: 16 i16 each, unaligned loads.
        let (x, y) = unsafe {
            (
                _mm256_loadu_si256(h0.as_ptr().add(at).cast()),
                _mm256_loadu_si256(h1.as_ptr().add(at).cast()),
            )
        };
        blend16(x, y, b0, b1)
    };
    for at in (0..n).step_by(32) {
        // packus interleaves 128-bit lanes; the permute puts them back in order
        let v = _mm256_packus_epi16(one(at), one(at + 16));
        let v = _mm256_permute4x64_epi64::<0b11_01_10_00>(v);
        // SAFETY: `at + 32 <= n <= out.len()`: 32 bytes, unaligned store.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(at).cast(), v) };
    }
    n
}

/// A block of 16 output pixels as `pshufb` reads them, 8 in each 128-bit lane: lane `l`'s
/// source values (per channel) are the bytes `base[l] + 16 w + i` of its windows
/// (`w < windows`), byte `2 k` / `2 k + 1` of the lane being `p0` / `p1` of its pixel `k`
/// (`idx[w]`: 0x80 for a byte another window gives). Weights split as `a = 32 wh + wl`
/// (`wl < 32`, `wh <= 64`: signed bytes for `maddubs`), so that
/// `(p0 a0 + p1 a1) >> 4 = 2 (p0 wh0 + p1 wh1) + ((p0 wl0 + p1 wl1) >> 4)`, exact modulo
/// 2^16 as the portable `as i16` (neither `maddubs` saturates: 255 * 128 < 2^15).
/// `base[0] == usize::MAX`: the block reaches wider than 4 windows (or has weights outside
/// 0..=2048), the portable loop does it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Block {
    base: [usize; 2],
    idx: [[u8; 32]; 4],
    wh: [u8; 32],
    wl: [u8; 32],
    windows: usize,
}

impl Block {
    /// The block of the 16 pixels whose offsets and packed weights these are.
    pub(super) fn new(o0: &[i32], o1: &[i32], a: &[i32]) -> Block {
        let mut b = Block {
            base: [usize::MAX; 2],
            idx: [[0x80; 32]; 4],
            wh: [0; 32],
            wl: [0; 32],
            windows: 0,
        };
        let (o0, o1, a) = (&o0[..16], &o1[..16], &a[..16]);
        let mut weights = a.iter().flat_map(|&a| [a & 0xffff, a >> 16]);
        if weights.any(|w| !(0..=2048).contains(&w)) {
            return b;
        }
        let mut base = [0; 2];
        for (l, base) in base.iter_mut().enumerate() {
            let k = 8 * l..8 * l + 8;
            let all = || o0[k.clone()].iter().chain(&o1[k.clone()]);
            let (Some(&lo), Some(&hi)) = (all().min(), all().max()) else {
                return b;
            };
            if lo < 0 || hi - lo >= 64 {
                return b;
            }
            *base = lo as usize;
            b.windows = b.windows.max((hi - lo) as usize / 16 + 1);
        }
        for (i, ((&o0, &o1), &a)) in o0.iter().zip(o1).zip(a).enumerate() {
            let (l, at) = (i / 8, 16 * (i / 8) + 2 * (i % 8));
            for (d, o, a) in [(0, o0, a & 0xffff), (1, o1, a >> 16)] {
                let off = o as usize - base[l];
                b.idx[off / 16][at + d] = (off % 16) as u8;
                (b.wh[at + d], b.wl[at + d]) = ((a >> 5) as u8, (a & 31) as u8);
            }
        }
        b.base = base;
        b
    }

    /// The windows this block reads (0 if the portable loop does it).
    pub(super) fn windows(&self) -> usize {
        self.windows
    }
}

/// The horizontal pass over the whole blocks of 16 pixels of planar rows (the portable loop
/// for those [`Block`] leaves to it, or whose windows of a channel overrun `row`); returns
/// how many pixels it did (a prefix).
///
/// # Safety
///
/// The CPU must have AVX2 (offsets and lengths are checked here).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn horizontal(row: &[u8], taps: &super::HTaps, out: &mut [i16]) -> usize {
    match taps.windows {
        1 => blocks::<1>(row, taps, out),
        2 => blocks::<2>(row, taps, out),
        3 => blocks::<3>(row, taps, out),
        4 => blocks::<4>(row, taps, out),
        _ => 0,
    }
}

/// [`horizontal`] reading `K` windows of every block.
#[target_feature(enable = "avx2")]
fn blocks<const K: usize>(row: &[u8], taps: &super::HTaps, out: &mut [i16]) -> usize {
    let (w, cs) = (taps.len(), taps.channel.max(1));
    if out.len() < 3 * w || K > 4 {
        return 0;
    }
    // the last channel's K windows from `base` inside `row`
    let fits = |base: usize| {
        (row.len().checked_sub(16 * K))
            .is_some_and(|m| cs.checked_mul(2).is_some_and(|c| c <= m && base <= m - c))
    };
    for (n, b) in taps.blocks.iter().enumerate() {
        let j = 16 * n;
        if b.base[0] == usize::MAX || !fits(b.base[0]) || !fits(b.base[1]) {
            super::horizontal(row, taps, out, j..j + 16);
            continue;
        }
        // SAFETY: the block's arrays are 32 bytes each (K <= 4 windows of `idx`).
        let (idx, wh, wl) = unsafe {
            (
                std::array::from_fn::<_, K, _>(|w| _mm256_loadu_si256(b.idx[w].as_ptr().cast())),
                _mm256_loadu_si256(b.wh.as_ptr().cast()),
                _mm256_loadu_si256(b.wl.as_ptr().cast()),
            )
        };
        for c in 0..3 {
            let mut p = _mm256_setzero_si256();
            for (w, &idx) in idx.iter().enumerate() {
                let at = |l: usize| b.base[l] + c * cs + 16 * w;
                // SAFETY: `at(l) + 16 <= base[l] + 2 cs + 16 K <= row.len()` (`fits`).
                let v = unsafe {
                    let lo = _mm_loadu_si128(row.as_ptr().add(at(0)).cast());
                    let hi = _mm_loadu_si128(row.as_ptr().add(at(1)).cast());
                    _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi)
                };
                p = _mm256_or_si256(p, _mm256_shuffle_epi8(v, idx));
            }
            let high = _mm256_maddubs_epi16(p, wh);
            let low = _mm256_maddubs_epi16(p, wl);
            let h = _mm256_add_epi16(_mm256_add_epi16(high, high), _mm256_srli_epi16::<4>(low));
            // SAFETY: `j + 16 <= w` (a whole block) and `out.len() >= 3 w`.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(c * w + j).cast(), h) };
        }
    }
    16 * taps.blocks.len()
}

/// `out[k] = table[src[k]]`, 32 at a time: the table's 16 rows of 16 entries each looked
/// up by the low nibble (`pshufb`), then one chosen by the high nibble, a `blendv` level
/// per bit (bit 4 first); returns how many it did (all of them if there are 32 or more).
///
/// # Safety
///
/// The CPU must have AVX2 (lengths are checked here).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn lookup(table: &[u8; 256], src: &[u8], out: &mut [u8]) -> usize {
    let n = out.len().min(src.len());
    if n < 32 {
        return 0;
    }
    // SAFETY: row `r` is the table's bytes 16 r..16 r + 16 (r < 16), in both lanes.
    let rows: [__m256i; 16] = std::array::from_fn(|r| unsafe {
        _mm256_broadcastsi128_si256(_mm_loadu_si128(table.as_ptr().add(16 * r).cast()))
    });
    let nibble = _mm256_set1_epi8(0x0f);
    for at in super::block_starts(n, 32, false) {
        // SAFETY: `at + 32 <= n`, within both slices.
        let x = unsafe { _mm256_loadu_si256(src.as_ptr().add(at).cast()) };
        let low = _mm256_and_si256(x, nibble);
        let mut v: [__m256i; 16] = std::array::from_fn(|r| _mm256_shuffle_epi8(rows[r], low));
        // bit 4 + b of each byte moved to its bit 7, which `blendv` reads
        let bits = [
            _mm256_slli_epi16::<3>(x),
            _mm256_slli_epi16::<2>(x),
            _mm256_slli_epi16::<1>(x),
            x,
        ];
        let mut len = 16;
        for bit in bits {
            len /= 2;
            for r in 0..len {
                v[r] = _mm256_blendv_epi8(v[2 * r], v[2 * r + 1], bit);
            }
        }
        // SAFETY: as the load.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(at).cast(), v[0]) };
    }
    n
}

/// `out[3 k + c] = planes[c][k]` over whole blocks of 16 pixels; returns how many it did.
///
/// # Safety
///
/// The CPU must have AVX2 (lengths are checked here).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn interleave(planes: [&[u8]; 3], out: &mut [u8]) -> usize {
    let n = (out.len() / 3)
        .min(planes[0].len())
        .min(planes[1].len())
        .min(planes[2].len());
    let n = n / 16 * 16;
    // byte k of each 16-byte output comes from plane k % 3 (one shuffle each, 0x80 elsewhere)
    let mask = |part: usize, c: usize| -> __m128i {
        let bytes: [u8; 16] = std::array::from_fn(|k| {
            let at = 16 * part + k;
            if at % 3 == c { (at / 3) as u8 } else { 0x80 }
        });
        // SAFETY: 16 bytes.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    };
    let masks: [[__m128i; 3]; 3] =
        std::array::from_fn(|part| std::array::from_fn(|c| mask(part, c)));
    for at in (0..n).step_by(16) {
        // SAFETY: `at + 16 <= n`: 16 bytes of each plane, 48 of `out` from `3 at`.
        unsafe {
            let p = planes.map(|p| _mm_loadu_si128(p.as_ptr().add(at).cast()));
            for (part, m) in masks.iter().enumerate() {
                let v = _mm_or_si128(
                    _mm_or_si128(_mm_shuffle_epi8(p[0], m[0]), _mm_shuffle_epi8(p[1], m[1])),
                    _mm_shuffle_epi8(p[2], m[2]),
                );
                _mm_storeu_si128(out.as_mut_ptr().add(3 * at + 16 * part).cast(), v);
            }
        }
    }
    n
}

/// `blend` of 16 elements.
#[target_feature(enable = "avx2")]
fn blend16(x: __m256i, y: __m256i, b0: __m256i, b1: __m256i) -> __m256i {
    let v = _mm256_add_epi16(_mm256_mulhi_epi16(x, b0), _mm256_mulhi_epi16(y, b1));
    _mm256_srai_epi16::<2>(_mm256_add_epi16(v, _mm256_set1_epi16(2)))
}
