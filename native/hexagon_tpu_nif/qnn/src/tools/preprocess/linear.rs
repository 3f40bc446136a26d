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
mod x86;

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
mod neon;
