//! Bilinear resizing in OpenCV's fixed point (what `cv2.resize(INTER_LINEAR)` computes on u8
//! images, OpenCV 4.12 on x86-64, checked byte for byte against it): the taps, the horizontal
//! pass over one source row, and the vertical blend of two resampled rows, each in a portable
//! loop (the definition) and in vector loops that equal it, over rows in three planes: AVX2
//! (chosen at run time: its horizontal pass shuffles a block of 16 output pixels' source
//! values out of 1 to 4 windows of 16 bytes per 128-bit lane with `pshufb`, and multiplies
//! them with `maddubs`) and NEON (a block of 8 pixels looked up in the 64 bytes from its first
//! one with `tbl`); and in both the u8 table lookup of the blended values and the NHWC
//! interleave.
//!
//! Per axis, with `scale = 1 / (dst / src)` in f64, destination index `d`:
//!
//! ```text
//! f = ((d + 0.5) * scale - 0.5) as f32,  s = floor(f),  f = f - s     (f32)
//! a0 = round_half_even((1 - f) * 2048),  a1 = round_half_even(f * 2048)   (f32 products)
//! ```
//!
//! Columns: `s < 0` gives `s = 0, f = 0`, `s >= src - 1` gives `s = src - 1, f = 0`; the
//! neighbours are `s` and `min(s + 1, src - 1)`. Rows keep `f` as it is and clamp both
//! neighbours, `clamp(s, 0, src - 1)` and `clamp(s + 1, 0, src - 1)`. Then, per channel:
//!
//! ```text
//! h = (p0 * a0 + p1 * a1) >> 4                            (i32, fits i16)
//! v = sat_u8((((h0 * b0) >> 16) + ((h1 * b1) >> 16) + 2) >> 2)
//! ```
//!
//! `h0`, `h1` being the rows' horizontal values. The vertical step is OpenCV's SIMD one
//! (`VResizeLinearVec_32s8u`: 16-bit `mulhi`, rounding shift by 2), which x86-64 builds apply
//! to every element of a row; OpenCV's scalar variant on the unshifted sums,
//! `(H0 b0 + H1 b1 + 2^21) >> 22`, differs from cv2's output by 1 in some pixels (most
//! sizes tried), so it is not the definition. OpenCV's own NEON build may differ from x86's.

use std::ops::Range;

/// The horizontal taps of a row, one per output pixel: byte offsets of its two source pixels
/// in the row that [`horizontal`] reads (the pixel's channel `c` is `c * channel` bytes
/// further: packed pixels have `channel` 1, planar rows their plane's stride), and their
/// weights packed as `a0 | a1 << 16` (the vector blocks split them). Private fields: only `push`
/// makes them, keeping the invariants the vector passes rely on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct HTaps {
    o0: Vec<i32>,
    o1: Vec<i32>,
    a: Vec<i32>,
    /// Bytes from a channel's value to the next channel's of the same pixel (0 taken as 1).
    channel: usize,
    /// NEON: per whole block of 8 pixels, its lookup (`neon::Block`).
    #[cfg(target_arch = "aarch64")]
    blocks: Vec<neon::Block>,
    /// AVX2: per whole block of 16 pixels, its shuffles (`x86::Block`).
    #[cfg(target_arch = "x86_64")]
    blocks: Vec<x86::Block>,
    /// AVX2: the 16-byte windows every block reads (the most any block needs, 1 to 4).
    #[cfg(target_arch = "x86_64")]
    windows: usize,
}

impl HTaps {
    /// No taps yet, over rows whose channels are `channel` bytes apart.
    pub(super) fn new(channel: usize) -> HTaps {
        HTaps {
            channel: channel.max(1),
            ..HTaps::default()
        }
    }

    /// Adds a pixel; offsets beyond `i32::MAX - 4` are refused (a panic: `Plan::new` refuses
    /// crops wide enough to make them).
    pub(super) fn push(&mut self, o0: usize, o1: usize, a: [i16; 2]) {
        let max = i32::try_from(o0.max(o1))
            .ok()
            .filter(|&m| m <= i32::MAX - 4);
        max.expect("a row offset beyond i32");
        self.o0.push(o0 as i32);
        self.o1.push(o1 as i32);
        self.a.push(a[0] as i32 | (a[1] as i32) << 16);
        #[cfg(target_arch = "aarch64")]
        if self.len().is_multiple_of(8) {
            let j = self.len() - 8;
            let block = neon::Block::new(&self.o0[j..], &self.o1[j..], &self.a[j..]);
            self.blocks.push(block);
        }
        #[cfg(target_arch = "x86_64")]
        if self.len().is_multiple_of(16) {
            let j = self.len() - 16;
            let block = x86::Block::new(&self.o0[j..], &self.o1[j..], &self.a[j..]);
            self.windows = self.windows.max(block.windows());
            self.blocks.push(block);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.a.len()
    }
}

/// `floor` and fraction of the source position of destination index `d`.
fn position(d: usize, src: usize, dst: usize) -> (i64, f32) {
    let scale = 1.0 / (dst as f64 / src as f64);
    let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
    let s = f.floor();
    (s as i64, f - s)
}

fn weights(f: f32) -> [i16; 2] {
    [
        ((1.0 - f) * 2048.0).round_ties_even() as i16,
        (f * 2048.0).round_ties_even() as i16,
    ]
}

/// Source columns `i0`, `i1` and weights of output column `d`.
pub(super) fn column(d: usize, src: usize, dst: usize) -> (usize, usize, [i16; 2]) {
    let (s, f) = position(d, src, dst);
    let last = src as i64 - 1;
    let (s, f) = if s < 0 {
        (0, 0.0)
    } else if s >= last {
        (last, 0.0)
    } else {
        (s, f)
    };
    let i0 = s as usize;
    (i0, (i0 + 1).min(src - 1), weights(f))
}

/// Source rows `r0`, `r1` and weights of output row `d`.
pub(super) fn row(d: usize, src: usize, dst: usize) -> (usize, usize, [i16; 2]) {
    let (s, f) = position(d, src, dst);
    let clamp = |i: i64| i.clamp(0, src as i64 - 1) as usize;
    (clamp(s), clamp(s + 1), weights(f))
}

/// The kernels a pass uses, chosen once per run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernels {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "aarch64")]
    Neon,
}

impl Kernels {
    /// The fastest the CPU runs.
    pub(super) fn best() -> Kernels {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Kernels::Avx2;
        }
        #[cfg(target_arch = "aarch64")]
        return Kernels::Neon;
        #[allow(unreachable_code)]
        Kernels::Scalar
    }

    /// Every kernel set this CPU runs (the tests compare them).
    #[cfg(test)]
    pub(super) fn available() -> Vec<Kernels> {
        let mut all = vec![Kernels::Scalar];
        if Kernels::best() != Kernels::Scalar {
            all.push(Kernels::best());
        }
        all
    }

    /// `out[c * w + j] = h` of channel `c` of output pixel `j` (`w` pixels; see the module
    /// docs). Offsets must fit `row` (checked: a panic otherwise, never a bad read).
    pub(super) fn horizontal(self, row: &[u8], taps: &HTaps, out: &mut [i16]) {
        let done = match self {
            // SAFETY: `best` chose Avx2 after `is_x86_feature_detected!("avx2")`.
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2 => unsafe { x86::horizontal(row, taps, out) },
            #[cfg(target_arch = "aarch64")]
            Kernels::Neon => neon::horizontal(row, taps, out),
            _ => 0,
        };
        horizontal(row, taps, out, done..taps.len())
    }

    /// Whether the bilinear pass reads rows as three planes (the vector horizontal passes)
    /// rather than packed pixels (the portable loop).
    pub(super) fn planar(self) -> bool {
        self != Kernels::Scalar
    }

    /// `out[k] = table[src[k]]`, as many as both hold.
    pub(super) fn lookup(self, table: &[u8; 256], src: &[u8], out: &mut [u8]) {
        let n = out.len().min(src.len());
        let (src, out) = (&src[..n], &mut out[..n]);
        let done = match self {
            #[cfg(target_arch = "aarch64")]
            Kernels::Neon => neon::lookup(table, src, out),
            // SAFETY: `best` chose Avx2 after `is_x86_feature_detected!("avx2")`.
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2 => unsafe { x86::lookup(table, src, out) },
            _ => 0,
        };
        for (o, &x) in out[done..].iter_mut().zip(&src[done..]) {
            *o = table[x as usize];
        }
    }

    /// `out[3 k + c] = planes[c][k]`, as many pixels as all hold.
    pub(super) fn interleave(self, planes: [&[u8]; 3], out: &mut [u8]) {
        let done = match self {
            #[cfg(target_arch = "aarch64")]
            Kernels::Neon => neon::interleave(planes, out),
            // SAFETY: `best` chose Avx2 after `is_x86_feature_detected!("avx2")`.
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2 => unsafe { x86::interleave(planes, out) },
            _ => 0,
        };
        let [p0, p1, p2] = planes.map(|p| p.get(done..).unwrap_or_default());
        for (((o, &x), &y), &z) in out[3 * done..].chunks_exact_mut(3).zip(p0).zip(p1).zip(p2) {
            o.copy_from_slice(&[x, y, z]);
        }
    }

    /// `out[k] = v` of the rows' elements `k` (see the module docs).
    pub(super) fn vertical(self, h0: &[i16], h1: &[i16], b: [i16; 2], out: &mut [u8]) {
        let n = out.len().min(h0.len()).min(h1.len());
        let done = match self {
            Kernels::Scalar => 0,
            // SAFETY: `best` chose Avx2 after `is_x86_feature_detected!("avx2")`.
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2 => unsafe { x86::vertical(&h0[..n], &h1[..n], b, &mut out[..n]) },
            #[cfg(target_arch = "aarch64")]
            Kernels::Neon => neon::vertical(&h0[..n], &h1[..n], b, &mut out[..n]),
        };
        vertical(&h0[done..n], &h1[done..n], b, &mut out[done..n]);
    }
}

/// The horizontal pass, portable (the definition), over output pixels `pixels`.
pub(super) fn horizontal(row: &[u8], taps: &HTaps, out: &mut [i16], pixels: Range<usize>) {
    let (w, cs) = (taps.len(), taps.channel.max(1));
    for j in pixels {
        let (p0, p1) = (taps.o0[j] as usize, taps.o1[j] as usize);
        let (a0, a1) = (taps.a[j] & 0xffff, taps.a[j] >> 16);
        for c in 0..3 {
            let (x0, x1) = (row[p0 + c * cs] as i32, row[p1 + c * cs] as i32);
            out[c * w + j] = ((x0 * a0 + x1 * a1) >> 4) as i16;
        }
    }
}

/// The vertical blend of one element, portable: the definition.
#[inline(always)]
fn blend(h0: i16, h1: i16, b: [i16; 2]) -> u8 {
    let v = ((h0 as i32 * b[0] as i32) >> 16) + ((h1 as i32 * b[1] as i32) >> 16);
    ((v + 2) >> 2).clamp(0, 255) as u8
}

pub(super) fn vertical(h0: &[i16], h1: &[i16], b: [i16; 2], out: &mut [u8]) {
    for ((o, &x), &y) in out.iter_mut().zip(h0).zip(h1) {
        *o = blend(x, y, b);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
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
                    std::array::from_fn::<_, K, _>(|w| {
                        _mm256_loadu_si256(b.idx[w].as_ptr().cast())
                    }),
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
}

/// Where the vector loops' blocks of `step` items start over `n >= step` items: the whole
/// blocks, then one ending at `n` (doing some items again: each is written the same), its
/// start rounded down to even if `even` (then it ends at `(n - step) / 2 * 2 + step`, one
/// short of an odd `n`).
#[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
pub(super) fn block_starts(n: usize, step: usize, even: bool) -> BlockStarts {
    let last = (n - step) & if even { !1 } else { !0 };
    BlockStarts {
        at: Some(0),
        step,
        last,
    }
}

/// [`block_starts`]' iterator (a `chain` of two costs the loops more than they do).
#[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
pub(super) struct BlockStarts {
    at: Option<usize>,
    step: usize,
    last: usize,
}

#[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
impl Iterator for BlockStarts {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        let at = self.at?;
        self.at = (at < self.last).then(|| (at + self.step).min(self.last));
        Some(at)
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
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
}
