//! The frame's bytes: where each pixel of each pixel format lies (planes, strides), and the
//! YUV -> RGB conversion of one pixel to u8 (the fixed-point formulas of the module docs).

use super::linear::Kernels;
use super::{PreprocessError, Rect};

/// How the frame's pixels are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixelFormat {
    /// Three interleaved u8 per pixel (RGB, or BGR: see [`super::Spec::swap_rb`]).
    Rgb,
    /// 4:2:0: a Y plane, then one plane of interleaved U, V pairs (V4L2 `NV12`).
    Nv12,
    /// 4:2:0: a Y plane, then one plane of interleaved V, U pairs (V4L2 `NV21`).
    Nv21,
    /// 4:2:0: a Y plane, a U plane, a V plane (V4L2 `YUV420`, `I420`).
    I420,
    /// 4:2:2 packed: `Y0 U Y1 V` per two pixels (V4L2 `YUYV`).
    Yuyv,
}

impl PixelFormat {
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Rgb => "rgb",
            PixelFormat::Nv12 => "nv12",
            PixelFormat::Nv21 => "nv21",
            PixelFormat::I420 => "i420",
            PixelFormat::Yuyv => "yuyv",
        }
    }

    fn planar(self) -> bool {
        matches!(
            self,
            PixelFormat::Nv12 | PixelFormat::Nv21 | PixelFormat::I420
        )
    }

    /// Bytes of one row of the first plane, without padding.
    fn row_bytes(self, width: usize) -> Option<usize> {
        match self {
            PixelFormat::Rgb => width.checked_mul(3),
            PixelFormat::Yuyv => width.checked_mul(2),
            _ => Some(width),
        }
    }
}

/// The YUV matrix (ignored for [`PixelFormat::Rgb`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorMatrix {
    Bt601,
    Bt709,
}

/// The YUV range (ignored for [`PixelFormat::Rgb`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorRange {
    /// Y in 16..235, chroma 16..240 (video range).
    Limited,
    /// Y in 0..255, chroma centred at 128, no 219/224 scaling.
    Full,
}

/// Where the frame's bytes are: the pixel format and the strides and offsets of its planes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameFormat {
    pub format: PixelFormat,
    pub matrix: ColorMatrix,
    pub range: ColorRange,
    /// Bytes per row of the first plane; `None`: packed (no row padding).
    pub stride: Option<usize>,
    /// Bytes per row of a chroma plane (NV12/NV21: the stride; I420: the stride / 2).
    pub chroma_stride: Option<usize>,
    /// Where the chroma plane(s) start; `None`: right after the Y plane, `height * stride`.
    /// I420's V plane follows its U plane: `chroma_offset + height / 2 * chroma_stride`.
    pub chroma_offset: Option<usize>,
}

impl Default for FrameFormat {
    fn default() -> Self {
        FrameFormat {
            format: PixelFormat::Rgb,
            matrix: ColorMatrix::Bt601,
            range: ColorRange::Limited,
            stride: None,
            chroma_stride: None,
            chroma_offset: None,
        }
    }
}

/// The fixed-point coefficients, scaled by 2^20 (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Coefficients {
    pub y_offset: i32,
    pub cy: i32,
    pub cvr: i32,
    pub cvg: i32,
    pub cug: i32,
    pub cub: i32,
}

pub(super) const SHIFT: u32 = 20;

impl Coefficients {
    pub(super) fn of(matrix: ColorMatrix, range: ColorRange) -> Coefficients {
        use ColorMatrix::*;
        use ColorRange::*;
        let [cy, cvr, cvg, cug, cub] = match (matrix, range) {
            // OpenCV's ITUR_BT_601_* (COLOR_YUV2RGB_NV12 and the others)
            (Bt601, Limited) => [1220542, 1673527, -852492, -409993, 2116026],
            (Bt601, Full) => [1048576, 1470104, -748826, -360853, 1858077],
            (Bt709, Limited) => [1220945, 1879825, -558796, -223607, 2215014],
            (Bt709, Full) => [1048576, 1651297, -490864, -196424, 1945738],
        };
        Coefficients {
            y_offset: if range == Limited { 16 } else { 0 },
            cy,
            cvr,
            cvg,
            cug,
            cub,
        }
    }

    /// One pixel to u8 RGB.
    #[inline(always)]
    pub(super) fn rgb(&self, y: u8, u: u8, v: u8) -> [u8; 3] {
        let yy = (y as i32 - self.y_offset).max(0) * self.cy;
        let (u, v) = (u as i32 - 128, v as i32 - 128);
        let half = 1 << (SHIFT - 1);
        let ruv = half + self.cvr * v;
        let guv = half + self.cvg * v + self.cug * u;
        let buv = half + self.cub * u;
        // clamp(x >> 20, 0, 255) without branches (random chroma would mispredict them)
        let sat = |x: i32| {
            let v = x >> SHIFT;
            let v = v & !(v >> 31);
            ((v | ((255 - v) >> 31)) & 255) as u8
        };
        [sat(yy + ruv), sat(yy + guv), sat(yy + buv)]
    }
}

impl Coefficients {
    /// [`Coefficients::rgb`] over a row of samples, in place (Y, U, V become R, G, B), in a
    /// loop the compiler vectorizes; then interleaved into `out`'s first 3 bytes of each `P`.
    /// Inlined: the AVX2 gather compiles it for AVX2.
    #[inline(always)]
    pub(super) fn rgb_row<const P: usize>(&self, samples: &mut [Vec<u8>; 3], out: &mut [[u8; P]]) {
        let [ys, us, vs] = samples;
        let n = out.len().min(ys.len()).min(us.len()).min(vs.len());
        let (ys, us, vs) = (&mut ys[..n], &mut us[..n], &mut vs[..n]);
        for i in 0..n {
            let [r, g, b] = self.rgb(ys[i], us[i], vs[i]);
            (ys[i], us[i], vs[i]) = (r, g, b);
        }
        for (i, o) in out[..n].iter_mut().enumerate() {
            o[..3].copy_from_slice(&[ys[i], us[i], vs[i]]);
        }
    }
}

impl Coefficients {
    /// [`Coefficients::rgb`] over a row of samples into `R, G, B, 0` pixels: one loop the
    /// compiler vectorizes whole (each pixel a u32 store). Inlined, as `rgb_row`.
    #[inline(always)]
    pub(super) fn rgbx_row(&self, samples: &[Vec<u8>; 3], out: &mut [[u8; 4]]) {
        let [ys, us, vs] = samples;
        let n = out.len().min(ys.len()).min(us.len()).min(vs.len());
        let (ys, us, vs, out) = (&ys[..n], &us[..n], &vs[..n], &mut out[..n]);
        for i in 0..n {
            let [r, g, b] = self.rgb(ys[i], us[i], vs[i]);
            out[i] = (r as u32 | (g as u32) << 8 | (b as u32) << 16).to_le_bytes();
        }
    }
}

/// How [`Planes::gather`] lays a row's converted pixels out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RowLayout {
    /// `px` bytes a pixel (3, or 4 with a zero fourth byte): R, G, B.
    Packed(usize),
    /// Three planes, R at 0, G at `stride`, B at `2 * stride`, a byte a pixel.
    Planar(usize),
}

/// The R, G and B planes of a planar row `out` whose planes are `stride` bytes apart.
fn split_planes(out: &mut [u8], stride: usize) -> [&mut [u8]; 3] {
    let (r, rest) = out.split_at_mut(stride.min(out.len()));
    let (g, b) = rest.split_at_mut(stride.min(rest.len()));
    [r, g, b]
}

impl Coefficients {
    /// [`Coefficients::rgb`] over a row of samples into three planes (NEON where chosen).
    pub(super) fn planes_row(&self, samples: &[Vec<u8>; 3], out: [&mut [u8]; 3], kernels: Kernels) {
        let [ys, us, vs] = samples;
        let n = ys.len().min(us.len()).min(vs.len());
        let n = out.iter().fold(n, |n, o| n.min(o.len()));
        let [r, g, b] = out;
        let (ys, us, vs, r, g, b) = (
            &ys[..n],
            &us[..n],
            &vs[..n],
            &mut r[..n],
            &mut g[..n],
            &mut b[..n],
        );
        let done = match kernels {
            #[cfg(target_arch = "aarch64")]
            // SAFETY: NEON is part of aarch64 (the function checks its lengths).
            Kernels::Neon => unsafe {
                neon::planes(self, [ys, us, vs], [&mut *r, &mut *g, &mut *b])
            },
            // SAFETY: `Kernels::best` chose Avx2 after `is_x86_feature_detected!("avx2")`
            // (the function checks its lengths).
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2 => unsafe {
                x86::planes(self, [ys, us, vs], [&mut *r, &mut *g, &mut *b])
            },
            _ => 0,
        };
        for i in done..n {
            [r[i], g[i], b[i]] = self.rgb(ys[i], us[i], vs[i]);
        }
    }

    /// The pixels of `ys` (a 4:2:0 row's Y samples from frame column `first`, NV12/NV21) into
    /// three planes; `uv` holds the chroma pairs from that of `first` on, U at `iu` in each.
    pub(super) fn nv_planes(
        &self,
        ys: &[u8],
        uv: &[u8],
        first: usize,
        iu: usize,
        out: [&mut [u8]; 3],
        kernels: Kernels,
    ) {
        let n = ys.len();
        let [r, g, b] = out;
        let (r, g, b) = (&mut r[..n], &mut g[..n], &mut b[..n]);
        let odd = first & 1;
        let pixel = |i: usize| {
            let p = (i + odd) / 2 * 2;
            self.rgb(ys[i], uv[p + iu], uv[p + 1 - iu])
        };
        // an odd first column: its pixel alone, then pairs of pixels
        let start = odd.min(n);
        if start == 1 {
            [r[0], g[0], b[0]] = pixel(0);
        }
        let done = match kernels {
            #[cfg(target_arch = "aarch64")]
            Kernels::Neon => {
                let uv = uv.get(start + odd..).unwrap_or_default();
                let out = [&mut r[start..], &mut g[start..], &mut b[start..]];
                // SAFETY: NEON is part of aarch64 (the function checks its lengths).
                start + unsafe { neon::nv_planes(self, &ys[start..], uv, iu, out) }
            }
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2 => {
                let uv = uv.get(start + odd..).unwrap_or_default();
                let out = [&mut r[start..], &mut g[start..], &mut b[start..]];
                // SAFETY: `Kernels::best` chose Avx2 after `is_x86_feature_detected!("avx2")`
                // (the function checks its lengths).
                start + unsafe { x86::nv_planes(self, &ys[start..], uv, iu, out) }
            }
            _ => start,
        };
        for i in done..n {
            [r[i], g[i], b[i]] = pixel(i);
        }
    }
}

/// Sparse columns of NV12/NV21 rows as the vector kernels gather them ([`Planes::sparse`]):
/// only AVX2 has them.
#[derive(Clone, Debug)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) struct Sparse {
    #[cfg(target_arch = "x86_64")]
    kernel: x86::Sparse,
}

/// A checked frame layout: the byte offset of every plane row.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planes {
    pub format: PixelFormat,
    pub stride: usize,
    pub chroma_stride: usize,
    /// NV12/NV21: the UV plane; I420: the U plane.
    pub chroma: usize,
    /// I420 only: the V plane.
    pub chroma2: usize,
    pub min_len: usize,
    pub coefficients: Coefficients,
}

impl Planes {
    /// Checks the layout of a `width` x `height` frame and how many bytes it needs.
    pub(super) fn new(
        f: &FrameFormat,
        width: usize,
        height: usize,
    ) -> Result<Planes, PreprocessError> {
        let too_large = PreprocessError::TooLarge { width, height };
        let name = f.format.name();
        let odd = match f.format {
            PixelFormat::Rgb => false,
            PixelFormat::Yuyv => !width.is_multiple_of(2),
            _ => !width.is_multiple_of(2) || !height.is_multiple_of(2),
        };
        if odd {
            return Err(PreprocessError::OddSize {
                format: name,
                width,
                height,
                what: if f.format == PixelFormat::Yuyv {
                    "an even width (4:2:2)"
                } else {
                    "an even width and height (4:2:0)"
                },
            });
        }
        let row = f.format.row_bytes(width).ok_or(too_large.clone())?;
        let stride = f.stride.unwrap_or(row);
        if stride < row {
            return Err(PreprocessError::Stride {
                what: "stride",
                format: name,
                width,
                stride,
                min: row,
            });
        }
        if !f.format.planar() && (f.chroma_stride.is_some() || f.chroma_offset.is_some()) {
            return Err(PreprocessError::NoChromaPlane { format: name });
        }
        let chroma_row = if f.format == PixelFormat::I420 {
            width / 2
        } else {
            width
        };
        let chroma_stride = match (f.chroma_stride, f.format) {
            (Some(s), _) => s,
            (None, PixelFormat::I420) => stride / 2,
            (None, _) => stride,
        };
        if f.format.planar() && chroma_stride < chroma_row {
            return Err(PreprocessError::Stride {
                what: "chroma stride",
                format: name,
                width,
                stride: chroma_stride,
                min: chroma_row,
            });
        }
        // the last plane's last row needs only its pixels, not its padding
        let plane_end = |start: usize, rows: usize, stride: usize, row: usize| {
            (rows - 1)
                .checked_mul(stride)
                .and_then(|n| n.checked_add(row))
                .and_then(|n| n.checked_add(start))
                .ok_or(too_large.clone())
        };
        let y_end = plane_end(0, height, stride, row)?;
        let (chroma, chroma2, min_len) = if f.format.planar() {
            let start = match f.chroma_offset {
                Some(o) => o,
                None => height.checked_mul(stride).ok_or(too_large.clone())?,
            };
            let rows = height / 2;
            let (second, end) = if f.format == PixelFormat::I420 {
                let v = rows
                    .checked_mul(chroma_stride)
                    .and_then(|n| n.checked_add(start))
                    .ok_or(too_large.clone())?;
                (v, plane_end(v, rows, chroma_stride, chroma_row)?)
            } else {
                (start, plane_end(start, rows, chroma_stride, chroma_row)?)
            };
            (start, second, y_end.max(end))
        } else {
            (0, 0, y_end)
        };
        Ok(Planes {
            format: f.format,
            stride,
            chroma_stride,
            chroma,
            chroma2,
            min_len,
            coefficients: Coefficients::of(f.matrix, f.range),
        })
    }

    /// The RGB values of frame row `y` at columns `x0 + cols[j]`, into `out` as `layout`
    /// says. `src` is at least `min_len` bytes long. The same code compiled for AVX2 where the CPU
    /// has it (the conversion's i32 products are slow in baseline SSE2).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gather(
        &self,
        src: &[u8],
        y: usize,
        x0: usize,
        cols: &[usize],
        samples: &mut [Vec<u8>; 3],
        out: (&mut [u8], RowLayout),
        kernels: Kernels,
    ) {
        match kernels {
            // SAFETY: `Kernels::best` chose Avx2 after `is_x86_feature_detected!("avx2")`.
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2 => unsafe { self.gather_avx2(src, y, x0, cols, samples, out) },
            _ => self.gather_any(src, y, x0, cols, samples, out, kernels),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn gather_avx2(
        &self,
        src: &[u8],
        y: usize,
        x0: usize,
        cols: &[usize],
        samples: &mut [Vec<u8>; 3],
        out: (&mut [u8], RowLayout),
    ) {
        self.gather_any(src, y, x0, cols, samples, out, Kernels::Avx2)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn gather_any(
        &self,
        src: &[u8],
        y: usize,
        x0: usize,
        cols: &[usize],
        samples: &mut [Vec<u8>; 3],
        (out, layout): (&mut [u8], RowLayout),
        kernels: Kernels,
    ) {
        let k = &self.coefficients;
        let row = y * self.stride;
        for s in samples.iter_mut() {
            s.resize(cols.len(), 0);
        }
        let n = cols.len();
        // bilinear's columns are sorted and often all of a range: read that range as slices
        let contiguous = n > 0 && cols[n - 1] - cols[0] + 1 == n;
        match (self.format, layout) {
            (PixelFormat::Rgb, RowLayout::Packed(px)) => {
                for (o, &x) in out.chunks_exact_mut(px).zip(cols) {
                    let at = row + (x0 + x) * 3;
                    o[..3].copy_from_slice(&src[at..at + 3]);
                }
                return;
            }
            (PixelFormat::Rgb, RowLayout::Planar(stride)) => {
                let [r, g, b] = split_planes(out, stride);
                let done = match kernels {
                    #[cfg(target_arch = "aarch64")]
                    Kernels::Neon if contiguous => {
                        let first = x0 + cols[0];
                        let px = &src[row + first * 3..row + (first + n) * 3];
                        // SAFETY: NEON is part of aarch64 (the function checks its lengths).
                        unsafe { neon::deinterleave(px, [&mut *r, &mut *g, &mut *b]) }
                    }
                    #[cfg(target_arch = "x86_64")]
                    Kernels::Avx2 if contiguous => {
                        let first = x0 + cols[0];
                        let px = &src[row + first * 3..row + (first + n) * 3];
                        // SAFETY: `Kernels::best` chose Avx2 after
                        // `is_x86_feature_detected!("avx2")` (the function checks its lengths).
                        unsafe { x86::deinterleave(px, [&mut *r, &mut *g, &mut *b]) }
                    }
                    _ => 0,
                };
                for (i, &x) in cols.iter().enumerate().skip(done) {
                    let at = row + (x0 + x) * 3;
                    [r[i], g[i], b[i]] = [src[at], src[at + 1], src[at + 2]];
                }
                return;
            }
            (PixelFormat::Nv12 | PixelFormat::Nv21, _) if contiguous => {
                let (iu, iv) = if self.format == PixelFormat::Nv12 {
                    (0, 1)
                } else {
                    (1, 0)
                };
                let first = x0 + cols[0];
                let ys = &src[row + first..row + first + n];
                // the UV pairs from that of `first` to that of the last column
                let c = self.chroma + (y / 2) * self.chroma_stride + (first & !1);
                let uv = &src[c..c + ((first + n - 1) & !1) - (first & !1) + 2];
                if let RowLayout::Planar(stride) = layout {
                    let out = split_planes(out, stride);
                    return k.nv_planes(ys, uv, first, iu, out, kernels);
                }
                samples[0].copy_from_slice(ys);
                let [_, us, vs] = samples;
                let (mut us, mut vs, mut uv) = (&mut us[..n], &mut vs[..n], uv);
                if first & 1 == 1 {
                    (us[0], vs[0]) = (uv[iu], uv[iv]);
                    (us, vs, uv) = (&mut us[1..], &mut vs[1..], &uv[2..]);
                }
                // then whole pairs of columns, each pair one U, V
                let (u2, u1) = us.as_chunks_mut::<2>();
                let (v2, v1) = vs.as_chunks_mut::<2>();
                let pairs = uv.as_chunks::<2>().0;
                for ((u, v), p) in u2.iter_mut().zip(v2.iter_mut()).zip(pairs) {
                    (*u, *v) = ([p[iu]; 2], [p[iv]; 2]);
                }
                if let (Some(u), Some(v), Some(p)) =
                    (u1.first_mut(), v1.first_mut(), pairs.get(u2.len()))
                {
                    (*u, *v) = (p[iu], p[iv]);
                }
            }
            (PixelFormat::Nv12 | PixelFormat::Nv21, _) => {
                let (iu, iv) = if self.format == PixelFormat::Nv12 {
                    (0, 1)
                } else {
                    (1, 0)
                };
                let c = self.chroma + (y / 2) * self.chroma_stride;
                for (i, &x) in cols.iter().enumerate() {
                    let x = x0 + x;
                    let uv = c + (x & !1);
                    samples[0][i] = src[row + x];
                    samples[1][i] = src[uv + iu];
                    samples[2][i] = src[uv + iv];
                }
            }
            (PixelFormat::I420, _) => {
                let cu = self.chroma + (y / 2) * self.chroma_stride;
                let cv = self.chroma2 + (y / 2) * self.chroma_stride;
                for (i, &x) in cols.iter().enumerate() {
                    let x = x0 + x;
                    samples[0][i] = src[row + x];
                    samples[1][i] = src[cu + x / 2];
                    samples[2][i] = src[cv + x / 2];
                }
            }
            (PixelFormat::Yuyv, _) => {
                for (i, &x) in cols.iter().enumerate() {
                    let x = x0 + x;
                    let pair = row + (x & !1) * 2;
                    samples[0][i] = src[pair + (x & 1) * 2];
                    samples[1][i] = src[pair + 1];
                    samples[2][i] = src[pair + 3];
                }
            }
        }
        match layout {
            RowLayout::Packed(3) => k.rgb_row(samples, out.as_chunks_mut::<3>().0),
            RowLayout::Packed(_) => k.rgbx_row(samples, out.as_chunks_mut::<4>().0),
            RowLayout::Planar(stride) => k.planes_row(samples, split_planes(out, stride), kernels),
        }
    }

    /// The gathers of crop columns `cols` (increasing) of this frame's rows from crop column
    /// `x0` on, if the kernels have them: AVX2, NV12 or NV21.
    pub(super) fn sparse(&self, kernels: Kernels, x0: usize, cols: &[usize]) -> Option<Sparse> {
        match (kernels, self.format) {
            #[cfg(target_arch = "x86_64")]
            (Kernels::Avx2, PixelFormat::Nv12 | PixelFormat::Nv21) => Some(Sparse {
                kernel: x86::Sparse::new(cols.iter().map(|&c| x0 + c).collect()),
            }),
            _ => None,
        }
    }

    /// Frame row `y`'s columns of `sparse` converted into planes `stride` bytes apart.
    pub(super) fn gather_sparse(
        &self,
        src: &[u8],
        y: usize,
        sparse: &Sparse,
        (out, stride): (&mut [u8], usize),
    ) {
        let iu = if self.format == PixelFormat::Nv21 {
            1
        } else {
            0
        };
        let y_row = &src[y * self.stride..];
        let uv_row = &src[self.chroma + (y / 2) * self.chroma_stride..];
        let out = split_planes(out, stride);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a `Sparse` is made for Avx2 alone, which `Kernels::best` chose after
        // `is_x86_feature_detected!("avx2")` (the function checks its lengths).
        unsafe {
            x86::sparse(&self.coefficients, &sparse.kernel, (y_row, uv_row), iu, out)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (sparse, y_row, uv_row, iu, out);
    }

    /// Whether a frame row is already packed RGB the pass reads in place.
    pub(super) fn direct(&self) -> bool {
        self.format == PixelFormat::Rgb
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
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
}

#[cfg(target_arch = "x86_64")]
mod x86 {
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
                let odd = _mm256_blend_epi16::<0xaa>(
                    _mm256_srli_epi32::<16>(w),
                    _mm256_slli_epi32::<7>(w),
                );
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
        let fits =
            |row: &[u8], base: usize| base.checked_add(16 * K).is_some_and(|e| e <= row.len());
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
}

/// Checks that `r` lies inside a `width` x `height` area and is not empty.
pub(super) fn check_rect(
    what: &'static str,
    r: Rect,
    width: usize,
    height: usize,
) -> Result<(), PreprocessError> {
    let inside = r.width > 0
        && r.height > 0
        && r.x.checked_add(r.width).is_some_and(|e| e <= width)
        && r.y.checked_add(r.height).is_some_and(|e| e <= height);
    if inside {
        Ok(())
    } else {
        Err(PreprocessError::Rect {
            what,
            rect: r,
            width,
            height,
        })
    }
}
