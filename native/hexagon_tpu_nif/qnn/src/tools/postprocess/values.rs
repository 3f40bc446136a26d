//! A model output's values in the type the graph wrote them: f32, or u8/u16 quantized per
//! tensor (QNN's `float = (q + offset) * scale`). The decoders read quantized scores as they
//! are: a score function of one value (the value itself, or a sigmoid of it) never decreases
//! as `q` grows, so "score above the threshold" is "`q` at least the first level whose score
//! is", found once per call by bisection. Only the rows that reach it are dequantized, with
//! [`dequantize_scalar`], the formula `predict/3`'s dequantization uses, and are then judged
//! by the same code as f32 rows: the answers equal the f32 path's on the dequantized output,
//! bit for bit.

use crate::model::quant::dequantize_scalar;

use super::defs::{Result, check_count, invalid};

/// A tensor's values: f32, or quantized levels with their scale and offset.
#[derive(Clone, Copy, Debug)]
pub enum Values<'a> {
    F32(&'a [f32]),
    U8(Quantized<'a, u8>),
    U16(Quantized<'a, u16>),
}

/// Quantized levels: `value = (q + offset) * scale` (QNN's offset, the negated zero point).
#[derive(Clone, Copy, Debug)]
pub struct Quantized<'a, T> {
    pub levels: &'a [T],
    pub scale: f32,
    pub offset: i32,
}

impl<'a> From<&'a [f32]> for Values<'a> {
    fn from(values: &'a [f32]) -> Self {
        Values::F32(values)
    }
}

impl<'a> From<&'a Vec<f32>> for Values<'a> {
    fn from(values: &'a Vec<f32>) -> Self {
        Values::F32(values)
    }
}

impl<'a, const N: usize> From<&'a [f32; N]> for Values<'a> {
    fn from(values: &'a [f32; N]) -> Self {
        Values::F32(values)
    }
}

/// A quantized level type: u8 or u16 (the ones [`Values`] holds).
pub trait Level: Copy + Ord + Into<i64> + TryFrom<u32> + Into<u32> {
    const MAX: u32;

    /// The level below, if any.
    fn below(self) -> Option<Self> {
        let l: u32 = self.into();
        l.checked_sub(1).and_then(|l| Self::try_from(l).ok())
    }
}

impl Level for u8 {
    const MAX: u32 = u8::MAX as u32;
}

impl Level for u16 {
    const MAX: u32 = u16::MAX as u32;
}

impl<T> Quantized<'_, T> {
    /// The scale is finite and > 0, so values grow with levels.
    pub(super) fn check_scale(&self, argument: &'static str) -> Result<()> {
        if self.scale.is_finite() && self.scale > 0.0 {
            Ok(())
        } else {
            invalid(
                argument,
                format!(
                    "the quantization scale must be finite and > 0, got {}",
                    self.scale
                ),
            )
        }
    }
}

impl<T: Level> Quantized<'_, T> {
    /// The value of level `q`.
    pub(super) fn value(&self, q: T) -> f32 {
        dequantize_scalar(q.into(), self.scale, self.offset)
    }

    /// The lowest level whose `score(value)` is above `threshold` (`score` never decreases),
    /// or `None` when no level's is.
    pub(super) fn first_above(&self, score: impl Fn(f32) -> f32, threshold: f32) -> Option<T> {
        let (mut lo, mut hi) = (0u32, T::MAX + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let q = T::try_from(mid).ok()?;
            if score(self.value(q)) > threshold {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        T::try_from(lo).ok()
    }
}

impl<'a> Values<'a> {
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::U8(q) => q.levels.len(),
            Values::U16(q) => q.levels.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn type_name(&self) -> &'static str {
        match self {
            Values::F32(_) => "f32",
            Values::U8(_) => "u8",
            Values::U16(_) => "u16",
        }
    }

    /// Value `i`, dequantized where quantized.
    pub fn get(&self, i: usize) -> f32 {
        match self {
            Values::F32(v) => v[i],
            Values::U8(q) => q.value(q.levels[i]),
            Values::U16(q) => q.value(q.levels[i]),
        }
    }

    /// The values `[0, mid)` and `[mid, len)` (`mid <= len`).
    pub fn split_at(&self, mid: usize) -> (Values<'a>, Values<'a>) {
        fn halves<'a, T>(q: &Quantized<'a, T>, mid: usize) -> [Quantized<'a, T>; 2] {
            let (a, b) = q.levels.split_at(mid);
            [a, b].map(|levels| Quantized {
                levels,
                scale: q.scale,
                offset: q.offset,
            })
        }
        match self {
            Values::F32(v) => {
                let (a, b) = v.split_at(mid);
                (Values::F32(a), Values::F32(b))
            }
            Values::U8(q) => {
                let [a, b] = halves(q, mid);
                (Values::U8(a), Values::U8(b))
            }
            Values::U16(q) => {
                let [a, b] = halves(q, mid);
                (Values::U16(a), Values::U16(b))
            }
        }
    }

    /// `argument`'s values are usable: no NaN among f32 values, a quantization scale finite
    /// and > 0 (so values grow with levels).
    pub(super) fn check(&self, argument: &'static str) -> Result<()> {
        match self {
            Values::F32(v) => match v.iter().position(|x| x.is_nan()) {
                Some(i) => invalid(argument, format!("value {i} is NaN")),
                None => Ok(()),
            },
            _ => self.check_scale(argument),
        }
    }

    /// [`Quantized::check_scale`] where quantized.
    pub(super) fn check_scale(&self, argument: &'static str) -> Result<()> {
        match self {
            Values::F32(_) => Ok(()),
            Values::U8(q) => q.check_scale(argument),
            Values::U16(q) => q.check_scale(argument),
        }
    }

    /// `values` has `expected` elements (the product of `shape`, shown in the message).
    pub(super) fn check_len(
        &self,
        argument: &'static str,
        expected: usize,
        shape: &str,
    ) -> Result<()> {
        check_count(argument, self.len(), self.type_name(), expected, shape)
    }

    /// The values as f32, all of them (where every value is needed, as softmax's sum).
    pub(super) fn to_f32(self) -> Vec<f32> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
}
