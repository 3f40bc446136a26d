//! The YUV -> RGB conversion in AVX2 (x86-64): whole rows, and the columns a resize reads.

use std::arch::x86_64::*;

use super::Coefficients;
use crate::tools::preprocess::linear::block_starts;

// The kernels enable AVX2; the pass calls them (in `unsafe`) only where `Kernels::best`
// chose Avx2 after `is_x86_feature_detected!("avx2")`. Their arithmetic is safe to call
// under the feature; every pointer access is checked against the slices' lengths.
//
// The products are exact in i32 lanes with `madd` (two i16 products summed): a
// coefficient `C` (up to 2^21) is `128 (C >> 7) + (C & 127)`, both halves i16, so
// `C x = madd((x, x << 7), (C & 127, C >> 7))` for x in 0..=255 or -128..=127 (x << 7
// fits i16). A sum `s = y' CY + chroma` (|s| < 2^30) gives
// `clamp((s + 2^19) >> 20, 0, 255)` as `(s >> 16)` (its high i16 half), then
// `mulhrs(x, 2^11) = (x + 8) >> 4` (exact: 2^19 is 8 times 2^16), then `packus`.

/// The constants of a conversion: luma's offset and `madd` pair, the chroma's per channel.
struct Consts {
    y0: __m256i,
    cy: __m256i,
    /// Per channel (R, G, B), the `madd` pairs of `(u, v)` lanes (in the lanes' order):
    /// the low halves of the coefficients, then the high ones (against `(u << 7, v << 7)`).
    lo: [__m256i; 3],
    hi: [__m256i; 3],
}

/// `(c & 127, c >> 7)` as a `madd` pair: `a` in the low i16, `b` in the high one.
fn pair(a: i32, b: i32) -> i32 {
    (a & 0xffff) | (b << 16)
}

impl Consts {
    /// `iu`: the lane of U in each `(u, v)` i16 pair (1 for NV21's V, U order).
    #[target_feature(enable = "avx2")]
    fn new(k: &Coefficients, iu: usize) -> Consts {
        let split = |c: i32| (c & 127, c >> 7);
        let (cy_lo, cy_hi) = split(k.cy);
        // per channel: the coefficients of U and of V
        let uv = [(0, k.cvr), (k.cug, k.cvg), (k.cub, 0)];
        let half = |c: (i32, i32), high: bool| {
            let (u, v) = (split(c.0), split(c.1));
            let (u, v) = if high { (u.1, v.1) } else { (u.0, v.0) };
            let p = if iu == 0 { pair(u, v) } else { pair(v, u) };
            _mm256_set1_epi32(p)
        };
        Consts {
            y0: _mm256_set1_epi8(k.y_offset as i8),
            cy: _mm256_set1_epi32(pair(cy_lo, cy_hi)),
            lo: uv.map(|c| half(c, false)),
            hi: uv.map(|c| half(c, true)),
        }
    }
}

/// The chroma terms of R, G and B of 8 `(u, v)` pairs (i16 lanes, uncentred), in i32.
#[target_feature(enable = "avx2")]
#[inline]
fn chroma(k: &Consts, uv: __m256i) -> [__m256i; 3] {
    let c = _mm256_sub_epi16(uv, _mm256_set1_epi16(128));
    let c7 = _mm256_slli_epi16::<7>(c);
    std::array::from_fn(|ch| {
        _mm256_add_epi32(
            _mm256_madd_epi16(c, k.lo[ch]),
            _mm256_madd_epi16(c7, k.hi[ch]),
        )
    })
}

/// `(s >> 16 + 8) >> 4` of i16 lanes holding `s >> 16` (see the module's note).
#[target_feature(enable = "avx2")]
#[inline]
fn round4(x: __m256i) -> __m256i {
    _mm256_mulhrs_epi16(x, _mm256_set1_epi16(1 << 11))
}

/// [`Coefficients::rgb`] of 32 pixels at a time of a 4:2:0 row from an even column
/// (pixels `2 i`, `2 i + 1` share the chroma pair `uv[2 i..2 i + 2]`, U at `iu`) into
/// three planes; returns how many it did (if there are 32 or more, all of them but the
/// last of an odd number: the last block starts at an even pixel, to pair as the others).
#[target_feature(enable = "avx2")]
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
    let k = Consts::new(k, iu);
    let zero = _mm256_setzero_si256();
    let [r, g, b] = out;
    for at in block_starts(n, 32, true) {
        // SAFETY: `at + 32 <= n`, within every slice: 32 Y samples, 16 pairs.
        let (y, c) = unsafe {
            (
                _mm256_loadu_si256(ys.as_ptr().add(at).cast()),
                _mm256_loadu_si256(uv.as_ptr().add(at).cast()),
            )
        };
        let y = _mm256_subs_epu8(y, k.y0);
        // i16 lanes; each i32 lane one pair: (even, odd) luma, (u, v) chroma. Half `a`
        // holds pairs 0..4 and 8..12 (pixels 0..8, 16..24), half `b` the others.
        let halves = [
            (_mm256_unpacklo_epi8(y, zero), _mm256_unpacklo_epi8(c, zero)),
            (_mm256_unpackhi_epi8(y, zero), _mm256_unpackhi_epi8(c, zero)),
        ];
        let [(ea, oa, ta), (eb, ob, tb)] = halves.map(|(w, c)| {
            // (y, y << 7) of the even pixel, then of the odd one
            let even = _mm256_blend_epi16::<0xaa>(w, _mm256_slli_epi32::<23>(w));
            let odd =
                _mm256_blend_epi16::<0xaa>(_mm256_srli_epi32::<16>(w), _mm256_slli_epi32::<7>(w));
            (
                _mm256_madd_epi16(even, k.cy),
                _mm256_madd_epi16(odd, k.cy),
                chroma(&k, c),
            )
        });
        // the high halves of the even and odd sums, in pixel order
        let pixels = |e: __m256i, o: __m256i, t: __m256i| {
            let e = _mm256_srli_epi32::<16>(_mm256_add_epi32(e, t));
            round4(_mm256_blend_epi16::<0xaa>(e, _mm256_add_epi32(o, t)))
        };
        for (ch, plane) in [&mut *r, &mut *g, &mut *b].into_iter().enumerate() {
            // half a: pixels 0..8 | 16..24, half b: 8..16 | 24..32: packus puts them in order
            let v = _mm256_packus_epi16(pixels(ea, oa, ta[ch]), pixels(eb, ob, tb[ch]));
            // SAFETY: as the loads.
            unsafe { _mm256_storeu_si256(plane.as_mut_ptr().add(at).cast(), v) };
        }
    }
    (n - 32) / 2 * 2 + 32
}

/// [`Coefficients::rgb`] of 16 pixels, each its own chroma: `y` their Y samples, `uv`
/// their chroma pairs as bytes in pixel order (in `k`'s order); R, G and B in order.
#[target_feature(enable = "avx2")]
#[inline]
fn convert16(k: &Consts, y: __m128i, uv: __m256i) -> [__m128i; 3] {
    let y = _mm_subs_epu8(y, _mm256_castsi256_si128(k.y0));
    // per pixel an i32 lane: (y, y << 7), and (u, v)
    let luma = |y: __m128i| {
        let y = _mm256_cvtepu8_epi32(y);
        _mm256_madd_epi16(_mm256_or_si256(y, _mm256_slli_epi32::<23>(y)), k.cy)
    };
    let l = [luma(y), luma(_mm_srli_si128::<8>(y))];
    let t = [
        chroma(k, _mm256_cvtepu8_epi16(_mm256_castsi256_si128(uv))),
        chroma(k, _mm256_cvtepu8_epi16(_mm256_extracti128_si256::<1>(uv))),
    ];
    // the i16 results of pixels 0..4, 8..12 | 4..8, 12..16 (packs), then in order
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    std::array::from_fn(|ch| {
        let high = |i: usize| _mm256_srai_epi32::<16>(_mm256_add_epi32(l[i], t[i][ch]));
        let x = round4(_mm256_packs_epi32(high(0), high(1)));
        let x = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(x, x), order);
        _mm256_castsi256_si128(x)
    })
}

/// [`Coefficients::rgb`] of 16 samples at a time (each pixel its own chroma) into three
/// planes; returns how many it did (all of them if there are 16 or more).
#[target_feature(enable = "avx2")]
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
    let k = Consts::new(k, 0);
    let [ys, us, vs] = yuv;
    let [r, g, b] = out;
    for at in block_starts(n, 16, false) {
        // SAFETY: `at + 16 <= n`, within every slice.
        let (y, u, v) = unsafe {
            (
                _mm_loadu_si128(ys.as_ptr().add(at).cast()),
                _mm_loadu_si128(us.as_ptr().add(at).cast()),
                _mm_loadu_si128(vs.as_ptr().add(at).cast()),
            )
        };
        let uv = _mm256_inserti128_si256::<1>(
            _mm256_castsi128_si256(_mm_unpacklo_epi8(u, v)),
            _mm_unpackhi_epi8(u, v),
        );
        let rgb = convert16(&k, y, uv);
        for (plane, x) in [&mut *r, &mut *g, &mut *b].into_iter().zip(rgb) {
            // SAFETY: as the loads.
            unsafe { _mm_storeu_si128(plane.as_mut_ptr().add(at).cast(), x) };
        }
    }
    n
}

/// 16 columns of a 4:2:0 row as `pshufb` gathers them (see [`Sparse`]): the Y samples from
/// `windows` of 16 bytes from `y_base` in the Y row, the chroma pairs (per 128-bit lane, 8
/// columns) from windows from `uv_base[l]` in the chroma row; `idx[w]`: where each byte
/// comes from in window `w`, 0x80 for a byte another window gives. `y_base == usize::MAX`:
/// the columns span more than 4 windows, they are converted one by one.
#[derive(Clone, Debug)]
struct Chunk {
    at: usize,
    y_base: usize,
    y_idx: [[u8; 16]; 4],
    uv_base: [usize; 2],
    uv_idx: [[u8; 32]; 4],
}

/// The columns of a 4:2:0 row (NV12/NV21) that the taps read, in increasing order, when
/// they are far apart (a downscale by 3 or more): gathered 16 at a time from the frame's
/// rows by `pshufb` and converted, each pixel with its chroma pair, into planes of those
/// columns only.
#[derive(Clone, Debug)]
pub(super) struct Sparse {
    /// Frame columns.
    cols: Vec<usize>,
    /// Whole blocks of 16 columns, the last one ending at the last column.
    chunks: Vec<Chunk>,
    /// The windows every chunk reads (1 to 4).
    windows: usize,
}

impl Sparse {
    /// The gathers of frame columns `cols` (increasing).
    pub(super) fn new(cols: Vec<usize>) -> Sparse {
        let mut sparse = Sparse {
            chunks: vec![],
            windows: 1,
            cols,
        };
        if sparse.cols.len() < 16 {
            return sparse;
        }
        for at in block_starts(sparse.cols.len(), 16, false) {
            let xs = &sparse.cols[at..at + 16];
            let mut c = Chunk {
                at,
                y_base: usize::MAX,
                y_idx: [[0x80; 16]; 4],
                uv_base: [0; 2],
                uv_idx: [[0x80; 32]; 4],
            };
            let (lo, hi) = (xs[0], xs[15]);
            let lanes = [0, 1].map(|l| (xs[8 * l] & !1, (xs[8 * l + 7] & !1) + 1));
            if hi - lo >= 64 || lanes.iter().any(|&(lo, hi)| hi - lo >= 64) {
                sparse.chunks.push(c);
                continue;
            }
            let mut windows = (hi - lo) / 16 + 1;
            for (k, &x) in xs.iter().enumerate() {
                c.y_idx[(x - lo) / 16][k] = ((x - lo) % 16) as u8;
                let (l, base) = (k / 8, lanes[k / 8].0);
                // the pair starts at an even offset from an even base: both bytes in one
                // window
                let p = (x & !1) - base;
                let at = 16 * l + 2 * (k % 8);
                c.uv_idx[p / 16][at] = (p % 16) as u8;
                c.uv_idx[p / 16][at + 1] = (p % 16 + 1) as u8;
                windows = windows.max(p / 16 + 1);
            }
            (c.y_base, c.uv_base) = (lo, lanes.map(|l| l.0));
            sparse.windows = sparse.windows.max(windows);
            sparse.chunks.push(c);
        }
        sparse
    }
}

/// The columns of `sparse` of a row whose Y samples start `y_row` and whose chroma pairs
/// start `uv_row` (U at `iu` in each), converted into three planes, a byte per column.
///
/// # Safety
///
/// The CPU must have AVX2 (lengths are checked here: a panic on a column outside the
/// rows, never a bad read).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn sparse(
    k: &Coefficients,
    sparse: &Sparse,
    (y_row, uv_row): (&[u8], &[u8]),
    iu: usize,
    out: [&mut [u8]; 3],
) {
    match sparse.windows {
        1 => gather::<1>(k, sparse, (y_row, uv_row), iu, out),
        2 => gather::<2>(k, sparse, (y_row, uv_row), iu, out),
        3 => gather::<3>(k, sparse, (y_row, uv_row), iu, out),
        _ => gather::<4>(k, sparse, (y_row, uv_row), iu, out),
    }
}

/// [`sparse`] reading `K` windows of every chunk.
#[target_feature(enable = "avx2")]
fn gather<const K: usize>(
    rgb: &Coefficients,
    sparse: &Sparse,
    (y_row, uv_row): (&[u8], &[u8]),
    iu: usize,
    out: [&mut [u8]; 3],
) {
    let n = out.iter().fold(sparse.cols.len(), |n, o| n.min(o.len()));
    let [r, g, b] = out;
    let pixel = |i: usize| {
        let (x, p) = (sparse.cols[i], sparse.cols[i] & !1);
        rgb.rgb(y_row[x], uv_row[p + iu], uv_row[p + 1 - iu])
    };
    if n < sparse.cols.len() || sparse.chunks.is_empty() {
        for i in 0..n {
            [r[i], g[i], b[i]] = pixel(i);
        }
        return;
    }
    let k = Consts::new(rgb, iu);
    // K windows from `base` inside `row`
    let fits = |row: &[u8], base: usize| base.checked_add(16 * K).is_some_and(|e| e <= row.len());
    for c in &sparse.chunks {
        let fit = c.y_base != usize::MAX
            && fits(y_row, c.y_base)
            && fits(uv_row, c.uv_base[0])
            && fits(uv_row, c.uv_base[1]);
        if !fit {
            for i in c.at..c.at + 16 {
                [r[i], g[i], b[i]] = pixel(i);
            }
            continue;
        }
        let (mut y, mut uv) = (_mm_setzero_si128(), _mm256_setzero_si256());
        for w in 0..K {
            // SAFETY: `base + 16 w + 16 <= base + 16 K <= len` (`fits`); the chunk's
            // arrays hold 4 windows (K <= 4).
            unsafe {
                let idx = _mm_loadu_si128(c.y_idx[w].as_ptr().cast());
                let v = _mm_loadu_si128(y_row.as_ptr().add(c.y_base + 16 * w).cast());
                y = _mm_or_si128(y, _mm_shuffle_epi8(v, idx));
                let idx = _mm256_loadu_si256(c.uv_idx[w].as_ptr().cast());
                let lo = _mm_loadu_si128(uv_row.as_ptr().add(c.uv_base[0] + 16 * w).cast());
                let hi = _mm_loadu_si128(uv_row.as_ptr().add(c.uv_base[1] + 16 * w).cast());
                let v = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi);
                uv = _mm256_or_si256(uv, _mm256_shuffle_epi8(v, idx));
            }
        }
        let rgb = convert16(&k, y, uv);
        for (plane, x) in [&mut *r, &mut *g, &mut *b].into_iter().zip(rgb) {
            // SAFETY: `c.at + 16 <= cols.len() == n <= plane.len()`.
            unsafe { _mm_storeu_si128(plane.as_mut_ptr().add(c.at).cast(), x) };
        }
    }
}

/// Packed RGB pixels `px` into three planes, 16 at a time; returns how many it did (all of
/// them if there are 16 or more).
#[target_feature(enable = "avx2")]
pub(super) fn deinterleave(px: &[u8], out: [&mut [u8]; 3]) -> usize {
    let n = out.iter().fold(px.len() / 3, |n, o| n.min(o.len()));
    if n < 16 {
        return 0;
    }
    // channel c's byte k comes from byte 3 k + c of the 48, in part (3 k + c) / 16
    let mask = |part: usize, c: usize| -> __m128i {
        let bytes: [u8; 16] = std::array::from_fn(|k| {
            let at = 3 * k + c;
            if at / 16 == part {
                (at % 16) as u8
            } else {
                0x80
            }
        });
        // SAFETY: 16 bytes.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    };
    let masks: [[__m128i; 3]; 3] =
        std::array::from_fn(|c| std::array::from_fn(|part| mask(part, c)));
    let [r, g, b] = out;
    for at in block_starts(n, 16, false) {
        // SAFETY: `at + 16 <= n`: 48 bytes of `px`, 16 of each plane.
        unsafe {
            let p: [__m128i; 3] = std::array::from_fn(|part| {
                _mm_loadu_si128(px.as_ptr().add(3 * at + 16 * part).cast())
            });
            for (plane, m) in [&mut *r, &mut *g, &mut *b].into_iter().zip(&masks) {
                let v = _mm_or_si128(
                    _mm_or_si128(_mm_shuffle_epi8(p[0], m[0]), _mm_shuffle_epi8(p[1], m[1])),
                    _mm_shuffle_epi8(p[2], m[2]),
                );
                _mm_storeu_si128(plane.as_mut_ptr().add(at).cast(), v);
            }
        }
    }
    n
}
