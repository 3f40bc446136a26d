//! Host-side quantization kernels: affine (de)quantization per tensor and per
//! axis, and IEEE binary16 <-> binary32 conversion.
//!
//! # Conventions
//!
//! * QNN stores affine quantization as `float = (q + offset) * scale`, so
//!   `offset` is the *negated* zero point (`zero_point = -offset`).
//! * Quantize: `q = saturate(round_half_to_even(x / scale) - offset)`. We
//!   divide by `scale` (never multiply by a reciprocal) so results are bit-exact
//!   with the ONNX `QuantizeLinear` definition and onnxruntime's MLAS kernels,
//!   which divide. NaN maps to the zero point (`-offset`, itself clamped into
//!   `[qmin, qmax]`), `+Inf` to `qmax`, `-Inf` to `qmin`.
//! * Dequantize: `x = ((q + offset) as f32) * scale`: the integer add is exact,
//!   then one rounding int->f32 conversion, then one f32 multiply.
//! * All buffers are little-endian byte slices with no alignment guarantee
//!   (they come from Erlang binaries). The loops read them through
//!   `as_chunks` + `from_le_bytes` / `to_le_bytes`, which LLVM turns into plain
//!   unaligned vector loads/stores.
//!
//! # Exactness of the quantize arithmetic
//!
//! `r = round_ties_even(x / scale)` is computed in f32; `r` is an integer
//! valued f32 (or ±Inf / NaN) and the rounding itself is exact. For 8- and
//! 16-bit containers with `|offset| <= 2^24` the zero point is added and the
//! result clamped in f32 as well:
//!
//! * `-offset` is exactly representable (`|offset| <= 2^24`);
//! * `qmin`/`qmax` and every integer in between are exactly representable
//!   (`|value| <= 65535 < 2^24`);
//! * f32 addition is correctly rounded, hence monotone: if the exact sum
//!   `r - offset` lies in `[qmin, qmax]` it is an integer of magnitude
//!   `< 2^24` and the f32 sum is exact; if it lies above `qmax` (below `qmin`)
//!   the rounded sum is still `>= qmax` (`<= qmin`) and the clamp yields `qmax`
//!   (`qmin`).
//!
//! So after the clamp the f32 holds exactly `saturate(r - offset)`, and the
//! final float->int conversion is exact. For 32-bit containers (or larger
//! offsets) the same argument is made in f64 (`|qmin|, |qmax| < 2^53`), which
//! is what the kernels do in that case. Both paths therefore compute the
//! mathematical definition exactly and agree with [`quantize_scalar`].
//!
//! # Errors and vectorization
//!
//! The slice kernels validate every argument before writing anything (on
//! `Err` the destination is untouched) and never panic. The portable loops
//! (`quant/kernels.rs`) are plain safe Rust written so LLVM vectorizes them:
//! the quantize body is `divps`/`fdiv.4s` + rounding + min/max + selects, the
//! f32 -> int conversion uses an exact add-1.5*2^23-and-take-the-bits trick
//! (see `Acc::to_le`) instead of a saturating `as` cast, and rounding uses
//! `round_ties_even` where it is a single instruction (aarch64, x86 with
//! SSE4.1) and an exact add/subtract-2^23 trick on baseline x86-64. aarch64
//! runs them as NEON, its baseline. On x86-64, whose release build is
//! baseline (SSE2), `quant/x86.rs` holds intrinsic paths chosen at run time
//! (AVX-512 / AVX2 quantize, AVX-512F / F16C f16 conversions) that compute
//! the same bits; the tests force each against the scalar forms.

use std::borrow::Cow;

use thiserror::Error;

// The loops themselves (and the macro that picks a loader), in quant/kernels.rs.
#[macro_use]
mod kernels;
use kernels::*;
mod params;
pub use params::{PerAxis, PerTensor};
// The element type, below the kernels (quant/x86.rs names it; quant.rs is above them).
mod qtype;
pub use qtype::QuantType;
// The x86-64 paths chosen at run time (AVX-512, AVX2, F16C).
#[cfg(target_arch = "x86_64")]
mod x86;

/// Errors reported by the kernels. No kernel panics on bad arguments.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum QuantError {
    /// A byte buffer's length is not a whole number of elements.
    #[error(
        "{what}: expected a byte length that is a multiple of the element size {elem_size}, got {len} bytes"
    )]
    ByteLength {
        what: &'static str,
        elem_size: usize,
        len: usize,
    },
    /// Two buffers (or a buffer and a layout) disagree on the element count.
    #[error("{what}: expected {expected} elements, got {got}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// The scale is zero, negative, NaN or infinite.
    #[error("invalid scale{}: expected a finite value > 0, got {scale}", channel_suffix(*.channel))]
    InvalidScale { scale: f32, channel: Option<usize> },
    /// `qmin > qmax`.
    #[error("invalid range: expected qmin <= qmax, got qmin = {qmin}, qmax = {qmax}")]
    InvalidRange { qmin: i64, qmax: i64 },
    /// The requested range does not fit the container.
    #[error(
        "range does not fit {ty:?}: expected a sub-range of [{type_min}, {type_max}], got [{qmin}, {qmax}]"
    )]
    RangeOutsideType {
        ty: QuantType,
        qmin: i64,
        qmax: i64,
        type_min: i64,
        type_max: i64,
    },
    /// `axis >= dims.len()` in [`AxisLayout::from_dims`].
    #[error("axis out of bounds: expected axis < rank {rank}, got axis {axis}")]
    AxisOutOfBounds { axis: usize, rank: usize },
    /// The element count of a shape/layout does not fit in `usize`.
    #[error("element count overflows usize: {what}")]
    SizeOverflow { what: String },
    /// Number of per-axis scales/offsets differs from the axis length.
    #[error("{what}: expected {expected} per-axis values (the axis length), got {got}")]
    ParamCount {
        what: &'static str,
        expected: usize,
        got: usize,
    },
}

fn channel_suffix(channel: Option<usize>) -> String {
    match channel {
        Some(c) => format!(" for channel {c}"),
        None => String::new(),
    }
}

/// Row-major layout split around the quantization axis: element `i` has
/// axis index `(i / inner) % axis_len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisLayout {
    pub outer: usize,
    pub axis_len: usize,
    pub inner: usize,
}

impl AxisLayout {
    /// Layout of a row-major tensor of shape `dims` quantized along `axis`.
    pub fn from_dims(dims: &[usize], axis: usize) -> Result<Self, QuantError> {
        if axis >= dims.len() {
            return Err(QuantError::AxisOutOfBounds {
                axis,
                rank: dims.len(),
            });
        }
        let overflow = || QuantError::SizeOverflow {
            what: format!("dims {dims:?}"),
        };
        let prod = |d: &[usize]| d.iter().try_fold(1usize, |acc, &x| acc.checked_mul(x));
        let outer = prod(&dims[..axis]).ok_or_else(overflow)?;
        let inner = prod(&dims[axis + 1..]).ok_or_else(overflow)?;
        let layout = AxisLayout {
            outer,
            axis_len: dims[axis],
            inner,
        };
        layout.checked_len().ok_or_else(overflow)?;
        Ok(layout)
    }

    /// Total number of elements, `outer * axis_len * inner` (saturating at
    /// `usize::MAX`; the kernels reject layouts whose product overflows).
    pub fn len(&self) -> usize {
        self.checked_len().unwrap_or(usize::MAX)
    }

    /// `true` when the layout has no elements.
    pub fn is_empty(&self) -> bool {
        self.outer == 0 || self.axis_len == 0 || self.inner == 0
    }

    fn checked_len(&self) -> Option<usize> {
        self.outer
            .checked_mul(self.axis_len)?
            .checked_mul(self.inner)
    }
}

// ---------------------------------------------------------------------------
// Scalar reference forms
// ---------------------------------------------------------------------------

/// Quantize one value: `saturate(round_half_to_even(x / scale) - offset)` to
/// `[range.0, range.1]`; NaN maps to the clamped zero point `-offset`.
///
/// Never panics. Arguments are not validated (the slice kernels do that);
/// with `range.0 > range.1` the result is `range.1`.
pub fn quantize_scalar(x: f32, scale: f32, offset: i32, range: (i64, i64)) -> i64 {
    let (qmin, qmax) = range;
    let r = (x / scale).round_ties_even();
    if r.is_nan() {
        return (-(offset as i64)).max(qmin).min(qmax);
    }
    // Exact (see the module docs): r is integer valued, -offset and the
    // bounds are exact in f64, and addition is monotone.
    let v = r as f64 - offset as f64;
    let v = v.max(qmin as f64).min(qmax as f64);
    (v as i64).max(qmin).min(qmax)
}

/// Dequantize one value: `((q + offset) as f32) * scale` (exact integer add,
/// one rounding conversion, one f32 multiply).
pub fn dequantize_scalar(q: i64, scale: f32, offset: i32) -> f32 {
    ((q as i128 + offset as i128) as f32) * scale
}

/// f32 -> IEEE binary16 bits, round to nearest even; subnormals exact,
/// overflow to ±Inf, NaN stays a (quiet) NaN with its sign and the top
/// payload bits.
#[inline(always)]
pub fn f32_to_f16_bits(x: f32) -> u16 {
    let f = x.to_bits();
    let sign = (f >> 16) & 0x8000;
    let a = f & 0x7fff_ffff;
    // NaN: quiet bit set, top 9 payload bits kept.
    let nan = 0x7e00 | ((a >> 13) & 0x03ff);
    // Normal f16 range: rebias the exponent (127 -> 15) and round the 13
    // dropped mantissa bits to nearest even; a carry propagates into the
    // exponent, up to 0x7c00 (Inf) for values in [65520, 65536).
    let normal = a
        .wrapping_sub(112 << 23)
        .wrapping_add(0x0fff + ((a >> 13) & 1))
        >> 13;
    // Subnormal f16 (|x| < 2^-14): adding 0.5 puts the f16 subnormal unit
    // 2^-24 at the f32 ulp, so the hardware add rounds to nearest even for us.
    // `a` is below 2^-14, the sum is below 0.5 + 2^-14: no overflow.
    let sub = (f32::from_bits(a) + 0.5)
        .to_bits()
        .wrapping_sub(0x3f00_0000);
    let o = if a > 0x7f80_0000 {
        nan
    } else if a >= 0x4780_0000 {
        // |x| >= 65536 (including Inf): overflow.
        0x7c00
    } else if a < 0x3880_0000 {
        sub
    } else {
        normal
    };
    (o | sign) as u16
}

/// IEEE binary16 bits -> f32 (exact; NaN payload and sign kept).
#[inline(always)]
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let a = h & 0x7fff;
    let e = a & 0x7c00;
    let shifted = a << 13;
    let normal = shifted + ((127 - 15) << 23);
    let infnan = shifted | 0x7f80_0000;
    // Subnormal / zero: 2^-14 * (1 + m/1024) - 2^-14 = m * 2^-24, exactly.
    let sub = (f32::from_bits(shifted + (113 << 23)) - f32::from_bits(113 << 23)).to_bits();
    let o = if e == 0x7c00 {
        infnan
    } else if e == 0 {
        sub
    } else {
        normal
    };
    f32::from_bits(o | sign)
}

// ---------------------------------------------------------------------------
// Validation helpers
// ---------------------------------------------------------------------------

fn elems(what: &'static str, bytes: &[u8], elem_size: usize) -> Result<usize, QuantError> {
    if !bytes.len().is_multiple_of(elem_size) {
        return Err(QuantError::ByteLength {
            what,
            elem_size,
            len: bytes.len(),
        });
    }
    Ok(bytes.len() / elem_size)
}

/// Checks `src` holds whole `src_size` elements and `dst` holds exactly as
/// many `dst_size` elements; returns the element count.
fn pair(
    src: &[u8],
    src_size: usize,
    dst: &[u8],
    dst_size: usize,
    src_what: &'static str,
    dst_what: &'static str,
) -> Result<usize, QuantError> {
    let n = elems(src_what, src, src_size)?;
    let m = elems(dst_what, dst, dst_size)?;
    if n != m {
        return Err(QuantError::LengthMismatch {
            what: dst_what,
            expected: n,
            got: m,
        });
    }
    Ok(n)
}

fn check_scale(scale: f32, channel: Option<usize>) -> Result<(), QuantError> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(QuantError::InvalidScale { scale, channel })
    }
}

fn check_range(ty: QuantType, (qmin, qmax): (i64, i64)) -> Result<(), QuantError> {
    if qmin > qmax {
        return Err(QuantError::InvalidRange { qmin, qmax });
    }
    let (type_min, type_max) = ty.full_range();
    if qmin < type_min || qmax > type_max {
        return Err(QuantError::RangeOutsideType {
            ty,
            qmin,
            qmax,
            type_min,
            type_max,
        });
    }
    Ok(())
}

fn check_layout(layout: AxisLayout, n: usize) -> Result<(), QuantError> {
    let expected = layout
        .checked_len()
        .ok_or_else(|| QuantError::SizeOverflow {
            what: format!("{layout:?}"),
        })?;
    if expected != n {
        return Err(QuantError::LengthMismatch {
            what: "axis layout (outer * axis_len * inner)",
            expected,
            got: n,
        });
    }
    Ok(())
}

fn check_params(layout: AxisLayout, scales: &[f32], offsets: &[i32]) -> Result<(), QuantError> {
    if scales.len() != layout.axis_len {
        return Err(QuantError::ParamCount {
            what: "scales",
            expected: layout.axis_len,
            got: scales.len(),
        });
    }
    if offsets.len() != layout.axis_len {
        return Err(QuantError::ParamCount {
            what: "offsets",
            expected: layout.axis_len,
            got: offsets.len(),
        });
    }
    for (c, &s) in scales.iter().enumerate() {
        check_scale(s, Some(c))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Public quantize API
// ---------------------------------------------------------------------------

/// Quantize little-endian f32 `src_f32` into `dst` (elements of `ty`,
/// little-endian), saturating to `range` (use [`QuantType::full_range`] for
/// the whole container).
pub fn quantize_per_tensor(
    src_f32: &[u8],
    dst: &mut [u8],
    ty: QuantType,
    scale: f32,
    offset: i32,
    range: (i64, i64),
) -> Result<(), QuantError> {
    pair(src_f32, 4, dst, ty.size(), "src_f32", "dst")?;
    PerTensor::new(ty, scale, offset, range)?.quantize(src_f32, dst)
}

/// Below this run length, per-axis kernels expand the parameters to one per
/// element of an `axis_len * inner` row instead of looping over short runs.
const SHORT_INNER: usize = 16;

/// Minimum row length (in elements) for the expanded-parameter per-axis path,
/// so that the zipped inner loop is long enough to vectorize even when
/// `axis_len * inner` is tiny (e.g. 3 channels, channel-last).
const MIN_ROW: usize = 256;

/// Channel index of each element of one expanded parameter row: whole periods
/// of `axis_len * inner` elements, repeated to at least [`MIN_ROW`] elements.
/// Rows start at multiples of the period, so row element `j` of every row has
/// the same channel. The last row of a tensor may be shorter (a whole number
/// of periods); the loops zip it with a prefix of the parameters.
fn row_channels(layout: AxisLayout) -> Vec<usize> {
    let period = layout.axis_len * layout.inner; // <= len(), checked
    let reps = MIN_ROW.div_ceil(period).min(layout.outer).max(1);
    let each = |c: usize| std::iter::repeat_n(c, layout.inner);
    (0..reps)
        .flat_map(|_| (0..layout.axis_len).flat_map(each))
        .collect()
}

/// Quantize along an axis: element `i` uses `scales[c]`, `offsets[c]` with
/// `c = (i / layout.inner) % layout.axis_len`.
pub fn quantize_per_axis(
    src_f32: &[u8],
    dst: &mut [u8],
    ty: QuantType,
    layout: AxisLayout,
    scales: &[f32],
    offsets: &[i32],
    range: (i64, i64),
) -> Result<(), QuantError> {
    let n = pair(src_f32, 4, dst, ty.size(), "src_f32", "dst")?;
    check_layout(layout, n)?;
    PerAxis::new(ty, layout, scales.into(), offsets.into(), range)?.quantize(src_f32, dst)
}

fn quantize_axis_with<A: Acc>(
    src: &[[u8; 4]],
    dst: &mut [u8],
    ty: QuantType,
    layout: AxisLayout,
    scales: &[f32],
    offsets: &[i32],
    range: (i64, i64),
) {
    let size = ty.size();
    let inner = layout.inner;
    if inner >= SHORT_INNER {
        // Long contiguous runs: reuse the per-tensor loop for each run.
        let params: Vec<QParams<A>> = scales
            .iter()
            .zip(offsets)
            .map(|(&s, &o)| QParams::new(s, o, range))
            .collect();
        let runs = src
            .chunks_exact(inner)
            .zip(dst.chunks_exact_mut(inner * size));
        let channels = params.iter().zip(scales.iter().zip(offsets)).cycle();
        for ((s, d), (&p, (&scale, &offset))) in runs.zip(channels) {
            if !quantize_fast(s, d, ty, scale, offset, range) {
                qrun_best(s, d, size, p);
            }
        }
    } else {
        // Channel-last (inner == 1) or short runs: one parameter per element
        // of an `axis_len * inner` row, zipped with the data.
        let chans = row_channels(layout);
        let p: QParams<A> = QParams::new(1.0, 0, range);
        let rows = QRowParams {
            scale: chans.iter().map(|&c| scales[c]).collect(),
            z: chans
                .iter()
                .map(|&c| QParams::<A>::new(1.0, offsets[c], range).z)
                .collect(),
            nan_q: chans
                .iter()
                .map(|&c| QParams::<A>::new(1.0, offsets[c], range).nan_q)
                .collect(),
            lo: p.lo,
            hi: p.hi,
        };
        qrows_best(src, dst, size, &rows);
    }
}

/// Dequantize `src` (elements of `ty`, little-endian) into little-endian f32
/// `dst_f32`: `x = ((q + offset) as f32) * scale`.
pub fn dequantize_per_tensor(
    src: &[u8],
    dst_f32: &mut [u8],
    ty: QuantType,
    scale: f32,
    offset: i32,
) -> Result<(), QuantError> {
    pair(src, ty.size(), dst_f32, 4, "src", "dst_f32")?;
    PerTensor::new(ty, scale, offset, ty.full_range())?.dequantize(src, dst_f32)
}

/// Dequantize along an axis: element `i` uses `scales[c]`, `offsets[c]` with
/// `c = (i / layout.inner) % layout.axis_len`.
pub fn dequantize_per_axis(
    src: &[u8],
    dst_f32: &mut [u8],
    ty: QuantType,
    layout: AxisLayout,
    scales: &[f32],
    offsets: &[i32],
) -> Result<(), QuantError> {
    let n = pair(src, ty.size(), dst_f32, 4, "src", "dst_f32")?;
    check_layout(layout, n)?;
    PerAxis::new(ty, layout, scales.into(), offsets.into(), ty.full_range())?
        .dequantize(src, dst_f32)
}

// ---------------------------------------------------------------------------
// f16 <-> f32
// ---------------------------------------------------------------------------

/// Convert little-endian f32 to little-endian IEEE binary16 (round to
/// nearest even, see [`f32_to_f16_bits`]).
pub fn f32_to_f16(src_f32: &[u8], dst_f16: &mut [u8]) -> Result<(), QuantError> {
    pair(src_f32, 4, dst_f16, 2, "src_f32", "dst_f16")?;
    let src = src_f32.as_chunks::<4>().0;
    let dst = dst_f16.as_chunks_mut::<2>().0;
    #[cfg(target_arch = "x86_64")]
    let (src, dst) = {
        let done = x86::f32_to_f16(src, dst, x86::Level::Avx512);
        (&src[done..], &mut dst[done..])
    };
    for (s, d) in src.iter().zip(dst.iter_mut()) {
        *d = f32_to_f16_bits(f32::from_le_bytes(*s)).to_le_bytes();
    }
    Ok(())
}

/// Convert little-endian IEEE binary16 to little-endian f32 (exact).
pub fn f16_to_f32(src_f16: &[u8], dst_f32: &mut [u8]) -> Result<(), QuantError> {
    pair(src_f16, 2, dst_f32, 4, "src_f16", "dst_f32")?;
    let src = src_f16.as_chunks::<2>().0;
    let dst = dst_f32.as_chunks_mut::<4>().0;
    #[cfg(target_arch = "x86_64")]
    let (src, dst) = {
        let done = x86::f16_to_f32(src, dst, x86::Level::Avx512);
        (&src[done..], &mut dst[done..])
    };
    for (s, d) in src.iter().zip(dst.iter_mut()) {
        *d = f16_bits_to_f32(u16::from_le_bytes(*s)).to_le_bytes();
    }
    Ok(())
}

#[cfg(test)]
mod splitmix;
#[cfg(test)]
mod tests;
