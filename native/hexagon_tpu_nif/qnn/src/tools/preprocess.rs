//! Camera frame to model input in one pass: an HWC u8 frame (3 channels) is resized, its
//! channels reordered (RGB <-> BGR), laid out as the model wants it (NHWC or NCHW), normalized
//! with per-channel mean and std, and converted to the input's own type (quantized with its
//! per-tensor parameters, or f32, or f16), straight into the destination buffer.
//!
//! # Arithmetic (the definition the tests hold the pass to)
//!
//! For output channel `c` reading source channel `s(c)` (`s(c) = c`, or `2 - c` with
//! `swap_rb`), all in f32:
//!
//! * normalize: `x = (v / divisor - mean[c]) / std[c]` where `v` is the resized pixel value
//!   (`divisor` is 255 for mean and std in the 0..1 scale, 1 for the 0..255 scale);
//! * quantize: [`PerTensor::quantize`] (`saturate(round_half_to_even(x / scale) - offset)`,
//!   the kernels of [`crate::quant`]); f16: [`f32_to_f16_bits`] (round to nearest even).
//!
//! Resizing uses pixel centres (OpenCV's `INTER_LINEAR` / `INTER_NEAREST_EXACT`, PyTorch's
//! `align_corners=False`), without an antialiasing filter:
//!
//! * nearest: source index `floor((d + 0.5) * src / dst)`, in exact integer arithmetic,
//!   capped at `src - 1`. `v` is a source pixel, so `x` takes one of 256 values per channel:
//!   the pass builds a 256-entry table per channel (with the very arithmetic above) and only
//!   looks values up;
//! * bilinear: `t = max((d + 0.5) * (src / dst) - 0.5, 0)` in f64, `i0 = floor(t)`,
//!   `i1 = min(i0 + 1, src - 1)`, `w1 = (t - i0) as f32`, `w0 = 1 - w1`; then
//!   `v = (p00 * wx0 + p01 * wx1) * wy0 + (p10 * wx0 + p11 * wx1) * wy1` in f32, each
//!   product and sum rounded in that order.
//!
//! Every argument is checked when the [`Plan`] is made and every length when it runs; nothing
//! here panics on bad input.

use thiserror::Error;

use crate::model::quant::{PerTensor, QuantError, QuantType, f32_to_f16_bits};

/// How the frame is resized to the model's height and width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resize {
    Nearest,
    Bilinear,
}

/// The model input's layout (a leading batch dimension of 1, if any, changes no byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Nhwc,
    Nchw,
}

/// The element type the model input takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Output {
    /// Affine per-tensor quantization, QNN's convention: `float = (q + offset) * scale`.
    Quantized {
        ty: QuantType,
        scale: f32,
        offset: i32,
        range: (i64, i64),
    },
    F32,
    F16,
}

/// What one pass does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spec {
    pub src_width: usize,
    pub src_height: usize,
    pub dst_width: usize,
    pub dst_height: usize,
    pub resize: Resize,
    pub layout: Layout,
    /// Output channel `c` reads source channel `2 - c` (RGB <-> BGR).
    pub swap_rb: bool,
    /// 255.0 (mean and std in the 0..1 scale) or 1.0 (the 0..255 scale); any finite value > 0.
    pub divisor: f32,
    /// Per output channel (the model's channel order).
    pub mean: [f32; 3],
    /// Per output channel; finite and non-zero.
    pub std: [f32; 3],
    pub output: Output,
}

/// Why a pass cannot run.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum PreprocessError {
    #[error("{what} must be at least 1, got 0")]
    ZeroDimension { what: &'static str },
    #[error("the frame is {width}x{height}: its byte size overflows")]
    TooLarge { width: usize, height: usize },
    #[error("expected a frame of {width}x{height}x3 = {expected} bytes, got {got} bytes")]
    FrameSize {
        width: usize,
        height: usize,
        expected: usize,
        got: usize,
    },
    #[error("expected an output buffer of {expected} bytes, got {got}")]
    OutputSize { expected: usize, got: usize },
    #[error("{what} must be a finite number{extra}, got {value}")]
    InvalidParameter {
        what: String,
        extra: &'static str,
        value: f32,
    },
    #[error("{0}")]
    Quant(#[from] QuantError),
}

/// A checked [`Spec`], with its conversion and (for nearest) its tables made.
#[derive(Clone, Debug)]
pub struct Plan {
    spec: Spec,
    conv: Conv,
    elem: usize,
    src_len: usize,
    dst_len: usize,
    /// Nearest only: per output channel, 256 entries of `elem` bytes each.
    luts: Option<[Vec<u8>; 3]>,
}

#[derive(Clone, Debug)]
enum Conv {
    Quantized(PerTensor),
    F32,
    F16,
}

impl Conv {
    /// Converts little-endian f32 values into `dst` (elements of the output type).
    fn emit(&self, src: &[[u8; 4]], dst: &mut [u8]) -> Result<(), PreprocessError> {
        match self {
            Conv::Quantized(p) => p.quantize(src.as_flattened(), dst)?,
            Conv::F32 => dst.copy_from_slice(src.as_flattened()),
            Conv::F16 => {
                for (d, s) in dst.as_chunks_mut::<2>().0.iter_mut().zip(src) {
                    *d = f32_to_f16_bits(f32::from_le_bytes(*s)).to_le_bytes();
                }
            }
        }
        Ok(())
    }
}

fn check_finite(what: String, value: f32, non_zero: bool) -> Result<(), PreprocessError> {
    if value.is_finite() && !(non_zero && value == 0.0) {
        Ok(())
    } else {
        Err(PreprocessError::InvalidParameter {
            what,
            extra: if non_zero { " other than 0" } else { "" },
            value,
        })
    }
}

impl Plan {
    /// Checks `spec` and makes the tables.
    pub fn new(spec: Spec) -> Result<Plan, PreprocessError> {
        for (what, v) in [
            ("the frame width", spec.src_width),
            ("the frame height", spec.src_height),
            ("the model input's width", spec.dst_width),
            ("the model input's height", spec.dst_height),
        ] {
            if v == 0 {
                return Err(PreprocessError::ZeroDimension { what });
            }
        }
        check_finite("the divisor".into(), spec.divisor, true)?;
        if spec.divisor < 0.0 {
            return Err(PreprocessError::InvalidParameter {
                what: "the divisor".into(),
                extra: " > 0",
                value: spec.divisor,
            });
        }
        for c in 0..3 {
            check_finite(format!("mean[{c}]"), spec.mean[c], false)?;
            check_finite(format!("std[{c}]"), spec.std[c], true)?;
        }
        let (conv, elem) = match spec.output {
            Output::Quantized {
                ty,
                scale,
                offset,
                range,
            } => (
                Conv::Quantized(PerTensor::new(ty, scale, offset, range)?),
                ty.size(),
            ),
            Output::F32 => (Conv::F32, 4),
            Output::F16 => (Conv::F16, 2),
        };
        let pixels = |w: usize, h: usize| {
            w.checked_mul(h)
                .and_then(|n| n.checked_mul(3))
                .ok_or(PreprocessError::TooLarge {
                    width: w,
                    height: h,
                })
        };
        let src_len = pixels(spec.src_width, spec.src_height)?;
        let dst_len = pixels(spec.dst_width, spec.dst_height)?
            .checked_mul(elem)
            .ok_or(PreprocessError::TooLarge {
                width: spec.dst_width,
                height: spec.dst_height,
            })?;
        let mut plan = Plan {
            spec,
            conv,
            elem,
            src_len,
            dst_len,
            luts: None,
        };
        if spec.resize == Resize::Nearest {
            plan.luts = Some(plan.tables()?);
        }
        Ok(plan)
    }

    /// The frame's byte size: `width * height * 3`.
    pub fn src_len(&self) -> usize {
        self.src_len
    }

    /// The model input's byte size.
    pub fn dst_len(&self) -> usize {
        self.dst_len
    }

    /// The checked spec.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// `x` for pixel value `v` (already resized) on output channel `c`.
    #[inline(always)]
    fn normalize(&self, v: f32, c: usize) -> f32 {
        (v / self.spec.divisor - self.spec.mean[c]) / self.spec.std[c]
    }

    /// Source channel read by output channel `c`.
    #[inline(always)]
    fn source_channel(&self, c: usize) -> usize {
        if self.spec.swap_rb { 2 - c } else { c }
    }

    /// The output bytes of every u8 value, per output channel: the same normalize and
    /// conversion as the bilinear path, applied once to 0..=255.
    fn tables(&self) -> Result<[Vec<u8>; 3], PreprocessError> {
        let mut luts: [Vec<u8>; 3] = Default::default();
        for (c, lut) in luts.iter_mut().enumerate() {
            let xs: Vec<[u8; 4]> = (0..=255u8)
                .map(|p| self.normalize(p as f32, c).to_le_bytes())
                .collect();
            lut.resize(256 * self.elem, 0);
            self.conv.emit(&xs, lut)?;
        }
        Ok(luts)
    }

    /// Runs the pass: `src` is the HWC u8 frame, `dst` receives exactly [`Plan::dst_len`]
    /// bytes in the model input's type and layout.
    pub fn run(&self, src: &[u8], dst: &mut [u8]) -> Result<(), PreprocessError> {
        if src.len() != self.src_len {
            return Err(PreprocessError::FrameSize {
                width: self.spec.src_width,
                height: self.spec.src_height,
                expected: self.src_len,
                got: src.len(),
            });
        }
        if dst.len() != self.dst_len {
            return Err(PreprocessError::OutputSize {
                expected: self.dst_len,
                got: dst.len(),
            });
        }
        match (&self.luts, self.elem) {
            (Some(luts), 1) => self.nearest::<1>(luts, src, dst),
            (Some(luts), 2) => self.nearest::<2>(luts, src, dst),
            (Some(luts), _) => self.nearest::<4>(luts, src, dst),
            (None, _) => return self.bilinear(src, dst),
        }
        Ok(())
    }

    /// A new buffer holding the pass's output.
    pub fn run_to_vec(&self, src: &[u8]) -> Result<Vec<u8>, PreprocessError> {
        let mut dst = vec![0; self.dst_len];
        self.run(src, &mut dst)?;
        Ok(dst)
    }

    fn nearest<const N: usize>(&self, luts: &[Vec<u8>; 3], src: &[u8], dst: &mut [u8]) {
        let s = &self.spec;
        let tables: [&[[u8; N]]; 3] = [0, 1, 2].map(|c| luts[c].as_chunks::<N>().0);
        let xs: Vec<usize> = (0..s.dst_width)
            .map(|d| nearest_index(d, s.src_width, s.dst_width) * 3)
            .collect();
        let chans = [0, 1, 2].map(|c| self.source_channel(c));
        let dst = dst.as_chunks_mut::<N>().0;
        let row_len = s.src_width * 3;
        for dy in 0..s.dst_height {
            let sy = nearest_index(dy, s.src_height, s.dst_height);
            let row = &src[sy * row_len..(sy + 1) * row_len];
            match s.layout {
                Layout::Nhwc => {
                    let out = &mut dst[dy * s.dst_width * 3..(dy + 1) * s.dst_width * 3];
                    for (px, &x) in out.chunks_exact_mut(3).zip(&xs) {
                        let p = &row[x..x + 3];
                        px[0] = tables[0][p[chans[0]] as usize];
                        px[1] = tables[1][p[chans[1]] as usize];
                        px[2] = tables[2][p[chans[2]] as usize];
                    }
                }
                Layout::Nchw => {
                    for c in 0..3 {
                        let at = (c * s.dst_height + dy) * s.dst_width;
                        let out = &mut dst[at..at + s.dst_width];
                        let (table, sc) = (tables[c], chans[c]);
                        for (o, &x) in out.iter_mut().zip(&xs) {
                            *o = table[row[x + sc] as usize];
                        }
                    }
                }
            }
        }
    }

    fn bilinear(&self, src: &[u8], dst: &mut [u8]) -> Result<(), PreprocessError> {
        let s = &self.spec;
        let xs = taps(s.src_width, s.dst_width);
        let chans = [0, 1, 2].map(|c| self.source_channel(c));
        let row_len = s.src_width * 3;
        let (w, e) = (s.dst_width, self.elem);
        // One output row of normalized f32 values, in the output's order (NHWC: pixel by
        // pixel; NCHW: channel by channel), then converted into `dst` in one call.
        let mut row = vec![[0u8; 4]; w * 3];
        for dy in 0..s.dst_height {
            let ty = tap(dy, s.src_height, s.dst_height);
            let r0 = &src[ty.i0 * row_len..(ty.i0 + 1) * row_len];
            let r1 = &src[ty.i1 * row_len..(ty.i1 + 1) * row_len];
            for (dx, tx) in xs.iter().enumerate() {
                let (a, b) = (tx.i0 * 3, tx.i1 * 3);
                for (c, &sc) in chans.iter().enumerate() {
                    let top = r0[a + sc] as f32 * tx.w0 + r0[b + sc] as f32 * tx.w1;
                    let bottom = r1[a + sc] as f32 * tx.w0 + r1[b + sc] as f32 * tx.w1;
                    let v = top * ty.w0 + bottom * ty.w1;
                    let at = match s.layout {
                        Layout::Nhwc => dx * 3 + c,
                        Layout::Nchw => c * w + dx,
                    };
                    row[at] = self.normalize(v, c).to_le_bytes();
                }
            }
            match s.layout {
                Layout::Nhwc => {
                    let at = dy * w * 3 * e;
                    self.conv.emit(&row, &mut dst[at..at + w * 3 * e])?;
                }
                Layout::Nchw => {
                    for c in 0..3 {
                        let at = ((c * s.dst_height + dy) * w) * e;
                        self.conv
                            .emit(&row[c * w..(c + 1) * w], &mut dst[at..at + w * e])?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Nearest source index of destination index `d`: `floor((d + 0.5) * src / dst)`, exactly.
fn nearest_index(d: usize, src: usize, dst: usize) -> usize {
    let i = ((2 * d as u128 + 1) * src as u128) / (2 * dst as u128);
    (i as usize).min(src - 1)
}

/// The two source indices and weights of one destination index (bilinear).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tap {
    i0: usize,
    i1: usize,
    w0: f32,
    w1: f32,
}

fn tap(d: usize, src: usize, dst: usize) -> Tap {
    let ratio = src as f64 / dst as f64;
    let t = ((d as f64 + 0.5) * ratio - 0.5).max(0.0);
    let i0 = (t.floor() as usize).min(src - 1);
    let i1 = (i0 + 1).min(src - 1);
    let w1 = (t - i0 as f64) as f32;
    Tap {
        i0,
        i1,
        w0: 1.0 - w1,
        w1,
    }
}

fn taps(src: usize, dst: usize) -> Vec<Tap> {
    (0..dst).map(|d| tap(d, src, dst)).collect()
}

#[cfg(test)]
mod tests;
