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
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (x0, cols);
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
mod neon;
#[cfg(target_arch = "x86_64")]
mod x86;

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
