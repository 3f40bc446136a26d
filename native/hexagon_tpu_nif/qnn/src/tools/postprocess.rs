//! A model's raw outputs to answers: a classifier's top k, a segmenter's class mask, and a
//! detector's boxes after a score
//! threshold and non-maximum suppression (YOLOv8 and YOLOv5 heads decoded first). Plain Rust
//! over `f32` slices or quantized levels: no QNN call, no allocation per candidate beyond the
//! candidate list.
//!
//! # Definitions (the ones the tests and `HexagonTpu.Postprocess`'s docs state)
//!
//! * **Order.** Scores are ordered descending; equal scores by the lower box index, then the
//!   lower class. Every result is in that order. NaN is refused wherever a score is read.
//! * **top k** ([`top_k`]): the `k` highest of `C` scores as `(class, score)`, or all `C` when
//!   `k >= C`. With `softmax`, the scores are first `p_i = exp(x_i - m) / sum_j exp(x_j - m)`
//!   with `m = max x` (so no `exp` overflows), computed in f64 and rounded to f32.
//! * **Boxes** are given as `xyxy` (corners), `xywh` (top-left corner and size: `x2 = x + w`) or
//!   `cxcywh` (centre and size: `x1 = cx - w * 0.5`, `x2 = cx + w * 0.5`), in f32, and are
//!   returned as `xyxy`. A box's width is `max(x2 - x1, 0)`, its height likewise.
//! * **IoU** (OpenCV's `dnn::NMSBoxes`, no `+1`): `inter / (area_a + area_b - inter)`, where
//!   `inter` is the intersection's area (0 when the boxes do not overlap); a pair whose union
//!   is 0 (both boxes of zero area) has IoU 0. All in f32.
//! * **Candidates.** A box whose score is `> score_threshold` (strictly, as OpenCV and
//!   Ultralytics). With per-class scores `[N, C]` a box takes its best class (the lowest index
//!   among equal maxima) and that score; with `multi_label` every `(box, class)` pair above the
//!   threshold is a candidate of its own. With one score per box, the class is given per box
//!   (or 0).
//! * **NMS** (greedy): candidates are visited in the order above; one is kept unless a kept
//!   candidate of the same class (any class, `class_agnostic`) overlaps it with
//!   `IoU > iou_threshold` (OpenCV keeps a box whose overlap is `<= threshold`). The visit stops
//!   once `max_detections` are kept.
//! * **YOLO** ([`yolov8`], [`yolov5`]): boxes are `cxcywh` in the model's input pixels. YOLOv8
//!   (`[4 + C, N]`, no objectness): the class scores as they are. YOLOv5 (`[N, 5 + C]`): class
//!   `c`'s score is `objectness * class_score[c]` (f32). NMS runs in the model's coordinates,
//!   and the kept boxes are returned in them (`HexagonTpu.Postprocess` maps them to the frame).
//! * **Quantized outputs** ([`Values`]): u8 or u16 levels with their scale and offset are read
//!   as they are; a value is `(q + offset) * scale` in f32, as `predict/3` dequantizes, and the
//!   answers are those of the f32 path on the dequantized output, bit for bit (how: the
//!   `values` module's docs).
//! * **SSD** ([`ssd_anchors`], [`ssd`]): MediaPipe's `SsdAnchorsCalculator` (anchors
//!   `[x_center, y_center, w, h]`, normalized) and `TensorsToDetectionsCalculator`'s box
//!   decoding (`cx = x / x_scale * anchor_w + anchor_cx`, the size linear or exponential,
//!   scores optionally `sigmoid(clamp(x, -t, t))` in f64), then the NMS above.
//! * **Masks** ([`argmax_mask`]): a `[H, W, C]` or `[C, H, W]` output's class per pixel, the
//!   argmax over `C` (the lowest class among equal maxima), u8 (or u16 past 256 classes).
//!
//! Every argument is checked before any work; nothing here panics on bad input.

use std::cmp::Ordering;

mod defs;
mod mask;
mod nms;
mod ssd;
mod values;
mod yolo;

use defs::invalid;
pub use defs::{Detection, NmsOptions, PostprocessError, Result};
pub use mask::{MaskLayout, argmax_mask};
pub use nms::{BoxFormat, Scores, iou, nms};
pub use ssd::{AnchorOptions, SsdSpec, ssd, ssd_anchors};
pub use values::{Quantized, Values};
pub use yolo::{YoloSpec, yolov5, yolov5_split, yolov8, yolov8_split};

#[cfg(test)]
mod split_tests;
#[cfg(test)]
mod tests;

/// The f32 little-endian values of `bytes`, for `argument`'s messages.
pub fn f32_values(argument: &'static str, bytes: &[u8]) -> Result<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return invalid(
            argument,
            format!(
                "{} bytes is not a whole number of f32 values (4 bytes each)",
                bytes.len()
            ),
        );
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// Descending score, then lower index (scores are never NaN here; -0.0 equals 0.0).
fn by_score(a: (f32, usize), b: (f32, usize)) -> Ordering {
    b.0.partial_cmp(&a.0)
        .unwrap_or(Ordering::Equal)
        .then(a.1.cmp(&b.1))
}

/// The `k` highest of `scores` as `(class, score)`, descending, ties by lower index; with
/// `softmax`, of the softmax of `scores` (see the module docs). Quantized scores are compared
/// as they are and dequantized where returned, save with `softmax`, whose sum needs them all.
pub fn top_k<'a>(
    scores: impl Into<Values<'a>>,
    k: usize,
    softmax: bool,
) -> Result<Vec<(usize, f32)>> {
    let scores = scores.into();
    scores.check("scores")?;
    if softmax {
        let values = scores.to_f32();
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return invalid(
                "scores",
                format!("value {i} is {}: softmax needs finite scores", values[i]),
            );
        }
        let probs = softmax_f32(&values);
        return Ok(highest(probs.len(), k, |i| probs[i]));
    }
    Ok(highest(scores.len(), k, |i| scores.get(i)))
}

/// The `k` highest of `n` values as `(index, value)`, descending, ties by lower index.
fn highest(n: usize, k: usize, value: impl Fn(usize) -> f32) -> Vec<(usize, f32)> {
    let mut order: Vec<usize> = (0..n).collect();
    let k = k.min(n);
    let cmp = |a: &usize, b: &usize| by_score((value(*a), *a), (value(*b), *b));
    if k == 0 {
        return Vec::new();
    }
    if k < order.len() {
        order.select_nth_unstable_by(k - 1, cmp);
        order.truncate(k);
    }
    order.sort_unstable_by(cmp);
    order.into_iter().map(|i| (i, value(i))).collect()
}

/// The numerically stable softmax, in f64, rounded to f32. `scores` are finite.
fn softmax_f32(scores: &[f32]) -> Vec<f32> {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let exps: Vec<f64> = scores.iter().map(|&x| (x as f64 - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.iter().map(|e| (e / sum) as f32).collect()
}
