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
//! `align_corners=False`), without an antialiasing filter, and gives a u8 pixel value `v`:
//!
//! * nearest: source index `floor((d + 0.5) * src / dst)`, in exact integer arithmetic,
//!   capped at `src - 1`; `v` is a source pixel;
//! * bilinear: OpenCV's fixed point for u8, byte for byte `cv2.resize(INTER_LINEAR)`
//!   (OpenCV 4.12, x86-64): 11-bit weights from f32 positions, a horizontal pass per source
//!   row, then a 16-bit vertical blend (the formulas: `preprocess/linear.rs`).
//!
//! Either way `x` takes one of 256 values per channel: the pass builds a 256-entry table per
//! channel (with the very arithmetic above) and only looks values up.
//!
//! The frame is read where it lies (see [`FrameFormat`]): packed RGB/BGR, or YUV (NV12,
//! NV21, I420, YUYV) with padded rows. A YUV pixel is first converted to u8 RGB on its own,
//! and the pass above proceeds on that value, so the result is the pass on the frame
//! converted whole (OpenCV's `cvtColor(COLOR_YUV2RGB_NV12)` and its siblings for BT.601
//! limited range). With `K = 2^20` and coefficients from [`FrameFormat::matrix`] and
//! [`FrameFormat::range`]:
//!
//! ```text
//! y' = max(Y - y0, 0) * CY                      (y0 = 16 limited, 0 full)
//! u = U - 128, v = V - 128, h = K / 2
//! R = clamp((y' + h + CVR v) >> 20, 0, 255)
//! G = clamp((y' + h + CVG v + CUG u) >> 20, 0, 255)
//! B = clamp((y' + h + CUB u) >> 20, 0, 255)     (>> is the arithmetic shift: floor)
//! ```
//!
//! | matrix, range   | CY      | CVR     | CVG     | CUG     | CUB     |
//! |-----------------|---------|---------|---------|---------|---------|
//! | BT.601 limited  | 1220542 | 1673527 | -852492 | -409993 | 2116026 |
//! | BT.601 full     | 1048576 | 1470104 | -748826 | -360853 | 1858077 |
//! | BT.709 limited  | 1220945 | 1879825 | -558796 | -223607 | 2215014 |
//! | BT.709 full     | 1048576 | 1651297 | -490864 | -196424 | 1945738 |
//!
//! BT.601 limited is OpenCV's `ITUR_BT_601_*` (1.164, 1.596, -0.813, -0.391, 2.018 times K).
//! The others are `round(c * K)` of the standard's coefficients (BT.601: Kr = 0.299,
//! Kb = 0.114; BT.709: Kr = 0.2126, Kb = 0.0722; Kg = 1 - Kr - Kb): `CY = 255/219`,
//! `CVR = 2 (1 - Kr) s`, `CUB = 2 (1 - Kb) s`, `CVG = -2 (1 - Kr) Kr / Kg s`,
//! `CUG = -2 (1 - Kb) Kb / Kg s` with `s = 255/224` (limited); `CY = 1`, `s = 1` (full). The
//! chroma of a 4:2:0 pixel `(x, y)` is the sample of its 2x2 block, `(x / 2, y / 2)`; of a
//! 4:2:2 pixel, that of its pair, `x / 2` (frame coordinates, whatever the crop).
//!
//! The crop ([`Spec::crop`], any rectangle inside the frame, odd offsets included: it is a
//! crop of the converted frame) is resized into the content rectangle ([`Spec::content`],
//! default the whole input); the rest of the input (letterbox) takes the pad value
//! ([`Spec::pad`], a u8 pixel value per output channel, normalized and converted like a
//! pixel). Resizing maps the crop's size to the content's size with the formulas above.
//!
//! Every argument is checked when the [`Plan`] is made and every length when it runs; nothing
//! here panics on bad input.

use thiserror::Error;

use crate::model::quant::{PerTensor, QuantError, QuantType, f32_to_f16_bits};

mod linear;
mod resize;
mod yuv;

pub use yuv::{ColorMatrix, ColorRange, FrameFormat, PixelFormat};
use yuv::{Planes, check_rect};

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

/// A rectangle of pixels: its top-left corner and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: usize,
    pub y: usize,
    pub width: usize,
    pub height: usize,
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
    /// How the frame's bytes are laid out.
    pub frame: FrameFormat,
    /// The part of the frame that is resized; `None`: all of it.
    pub crop: Option<Rect>,
    /// Where in the model input the crop lands; `None`: all of it (stretch).
    pub content: Option<Rect>,
    /// The pixel value around the content rectangle, per output channel.
    pub pad: [u8; 3],
}

/// Why a pass cannot run.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum PreprocessError {
    #[error("{what} must be at least 1, got 0")]
    ZeroDimension { what: &'static str },
    #[error("the frame is {width}x{height}: its byte size overflows")]
    TooLarge { width: usize, height: usize },
    #[error(
        "expected a {format} frame of {width}x{height} (stride {stride}{chroma}) of at least \
         {expected} bytes, got {got} bytes"
    )]
    FrameSize {
        format: &'static str,
        width: usize,
        height: usize,
        stride: usize,
        chroma: String,
        expected: usize,
        got: usize,
    },
    #[error("a {format} frame needs {what}, got {width}x{height}")]
    OddSize {
        format: &'static str,
        width: usize,
        height: usize,
        what: &'static str,
    },
    #[error(
        "the {what} of a {format} frame {width} pixels wide must be at least {min}, got {stride}"
    )]
    Stride {
        what: &'static str,
        format: &'static str,
        width: usize,
        stride: usize,
        min: usize,
    },
    #[error("a {format} frame has no chroma plane: chroma_stride and chroma_offset do not apply")]
    NoChromaPlane { format: &'static str },
    #[error(
        "{what} {{x: {}, y: {}, w: {}, h: {}}} is not a non-empty rectangle inside {width}x{height}",
        rect.x, rect.y, rect.width, rect.height
    )]
    Rect {
        what: &'static str,
        rect: Rect,
        width: usize,
        height: usize,
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
    planes: Planes,
    crop: Rect,
    content: Rect,
    /// The pad value's bytes per output channel (`elem` each).
    pad_bytes: [Vec<u8>; 3],
    /// Per output channel, 256 entries of `elem` bytes each: the output of every u8 value.
    luts: [Vec<u8>; 3],
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
        let planes = Planes::new(&spec.frame, spec.src_width, spec.src_height)?;
        let whole = |width, height| Rect {
            x: 0,
            y: 0,
            width,
            height,
        };
        let crop = spec.crop.unwrap_or(whole(spec.src_width, spec.src_height));
        check_rect("the crop", crop, spec.src_width, spec.src_height)?;
        // bilinear's row offsets are i32 (`linear::HTaps`): 4 bytes a pixel at most
        if spec.resize == Resize::Bilinear && crop.width > (i32::MAX as usize - 8) / 4 {
            return Err(PreprocessError::TooLarge {
                width: spec.src_width,
                height: spec.src_height,
            });
        }
        let content = spec
            .content
            .unwrap_or(whole(spec.dst_width, spec.dst_height));
        check_rect("the content", content, spec.dst_width, spec.dst_height)?;
        let dst_len = spec
            .dst_width
            .checked_mul(spec.dst_height)
            .and_then(|n| n.checked_mul(3 * elem))
            .ok_or(PreprocessError::TooLarge {
                width: spec.dst_width,
                height: spec.dst_height,
            })?;
        let mut plan = Plan {
            spec,
            conv,
            elem,
            src_len: planes.min_len,
            dst_len,
            planes,
            crop,
            content,
            pad_bytes: Default::default(),
            luts: Default::default(),
        };
        for c in 0..3 {
            let mut bytes = vec![0; elem];
            let x = plan.normalize(spec.pad[c] as f32, c).to_le_bytes();
            plan.conv.emit(&[x], &mut bytes)?;
            plan.pad_bytes[c] = bytes;
        }
        plan.luts = plan.tables()?;
        Ok(plan)
    }

    /// The frame's minimum byte size (its last row needs no padding); longer frames are fine.
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

    /// The output bytes of every u8 value, per output channel: normalize and convert applied
    /// once to 0..=255 (both resizings produce u8 pixel values).
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

    /// Runs the pass: `src` is the frame (at least [`Plan::src_len`] bytes), `dst` receives exactly [`Plan::dst_len`]
    /// bytes in the model input's type and layout.
    pub fn run(&self, src: &[u8], dst: &mut [u8]) -> Result<(), PreprocessError> {
        self.run_using(src, dst, linear::Kernels::best())
    }

    /// [`Plan::run`] with the portable bilinear kernels only: the definition the vectorized
    /// ones must equal byte for byte (the `preprocess` fuzz target compares the two).
    pub fn run_portable(&self, src: &[u8], dst: &mut [u8]) -> Result<(), PreprocessError> {
        self.run_using(src, dst, linear::Kernels::Scalar)
    }

    fn run_using(
        &self,
        src: &[u8],
        dst: &mut [u8],
        kernels: linear::Kernels,
    ) -> Result<(), PreprocessError> {
        if src.len() < self.src_len {
            let p = &self.planes;
            let chroma = match self.spec.frame.format {
                PixelFormat::Rgb | PixelFormat::Yuyv => String::new(),
                _ => format!(
                    ", chroma at byte {} with stride {}",
                    p.chroma, p.chroma_stride
                ),
            };
            return Err(PreprocessError::FrameSize {
                format: self.spec.frame.format.name(),
                width: self.spec.src_width,
                height: self.spec.src_height,
                stride: p.stride,
                chroma,
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
        if self.content
            != (Rect {
                x: 0,
                y: 0,
                width: self.spec.dst_width,
                height: self.spec.dst_height,
            })
        {
            self.pad(dst);
        }
        self.run_with(src, dst, kernels);
        Ok(())
    }

    /// The sweep, with the bilinear kernels given (checked lengths).
    fn run_with(&self, src: &[u8], dst: &mut [u8], kernels: linear::Kernels) {
        let luts = &self.luts;
        match (self.spec.resize, self.elem) {
            (Resize::Nearest, 1) => self.nearest::<1>(luts, src, dst),
            (Resize::Nearest, 2) => self.nearest::<2>(luts, src, dst),
            (Resize::Nearest, _) => self.nearest::<4>(luts, src, dst),
            (Resize::Bilinear, 1) => self.bilinear::<1>(luts, src, dst, kernels),
            (Resize::Bilinear, 2) => self.bilinear::<2>(luts, src, dst, kernels),
            (Resize::Bilinear, _) => self.bilinear::<4>(luts, src, dst, kernels),
        }
    }

    /// A new buffer holding the pass's output.
    pub fn run_to_vec(&self, src: &[u8]) -> Result<Vec<u8>, PreprocessError> {
        let mut dst = vec![0; self.dst_len];
        self.run(src, &mut dst)?;
        Ok(dst)
    }
}

#[cfg(test)]
mod frame_tests;
#[cfg(test)]
mod reference_cases;
#[cfg(test)]
mod tests;
