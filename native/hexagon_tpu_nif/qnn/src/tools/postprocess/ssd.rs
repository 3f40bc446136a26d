//! SSD-style heads (MediaPipe's BlazeFace and its kin): anchors generated as MediaPipe's
//! `SsdAnchorsCalculator` does, raw boxes decoded against them as its
//! `TensorsToDetectionsCalculator` does, then the NMS of the parent module.

use super::defs::{Detection, NmsOptions, Result, invalid};
use super::nms::{Candidate, Grid, greedy, push_row, quantized_candidates};
use super::values::Values;

/// `SsdAnchorsCalculatorOptions`, the fields this generator reads (`num_layers` is the number
/// of strides; feature maps are `ceil(input / stride)`).
#[derive(Clone, Debug, PartialEq)]
pub struct AnchorOptions {
    pub input_width: usize,
    pub input_height: usize,
    pub min_scale: f32,
    pub max_scale: f32,
    pub anchor_offset_x: f32,
    pub anchor_offset_y: f32,
    pub strides: Vec<usize>,
    pub aspect_ratios: Vec<f32>,
    pub reduce_boxes_in_lowest_layer: bool,
    /// An extra anchor of this aspect ratio at `sqrt(scale * next_scale)`; `<= 0`: none.
    pub interpolated_scale_aspect_ratio: f32,
    /// Every anchor 1 x 1 (BlazeFace).
    pub fixed_anchor_size: bool,
}

/// MediaPipe's `CalculateScale`: linear from `min` to `max` over the strides (in f64, as its
/// `1.0 *` makes it), rounded to f32.
fn scale(min: f32, max: f32, index: usize, count: usize) -> f32 {
    if count == 1 {
        (min + max) * 0.5
    } else {
        (min as f64 + (max - min) as f64 * index as f64 / (count as f64 - 1.0)) as f32
    }
}

/// The anchors as `[x_center, y_center, width, height]`, normalized to the input, in
/// MediaPipe's order (layer, row, column, anchor).
pub fn ssd_anchors(o: &AnchorOptions) -> Result<Vec<[f32; 4]>> {
    if o.strides.is_empty() || o.strides.contains(&0) {
        return invalid(
            "anchors",
            format!("strides must be positive, got {:?}", o.strides),
        );
    }
    if o.input_width == 0 || o.input_height == 0 {
        return invalid("anchors", "the input size must be at least 1x1");
    }
    let finite = [
        o.min_scale,
        o.max_scale,
        o.anchor_offset_x,
        o.anchor_offset_y,
    ];
    if !finite.iter().all(|v| v.is_finite())
        || o.aspect_ratios.iter().any(|a| !(*a > 0.0 && a.is_finite()))
    {
        return invalid(
            "anchors",
            "scales and offsets must be finite, aspect ratios finite and > 0",
        );
    }
    let n = o.strides.len();
    let mut anchors = Vec::new();
    let mut layer = 0;
    while layer < n {
        let (mut ratios, mut scales) = (Vec::new(), Vec::new());
        let mut last = layer;
        while last < n && o.strides[last] == o.strides[layer] {
            let s = scale(o.min_scale, o.max_scale, last, n);
            if last == 0 && o.reduce_boxes_in_lowest_layer {
                ratios.extend([1.0, 2.0, 0.5]);
                scales.extend([0.1, s, s]);
            } else {
                for &r in &o.aspect_ratios {
                    ratios.push(r);
                    scales.push(s);
                }
                if o.interpolated_scale_aspect_ratio > 0.0 {
                    let next = if last == n - 1 {
                        1.0
                    } else {
                        scale(o.min_scale, o.max_scale, last + 1, n)
                    };
                    scales.push((s * next).sqrt());
                    ratios.push(o.interpolated_scale_aspect_ratio);
                }
            }
            last += 1;
        }
        let sizes: Vec<(f32, f32)> = ratios
            .iter()
            .zip(&scales)
            .map(|(&r, &s)| {
                let root = r.sqrt();
                (s * root, s / root)
            })
            .collect();
        let stride = o.strides[layer];
        let fh = o.input_height.div_ceil(stride);
        let fw = o.input_width.div_ceil(stride);
        for y in 0..fh {
            for x in 0..fw {
                for &(w, h) in &sizes {
                    let cx = (x as f32 + o.anchor_offset_x) / fw as f32;
                    let cy = (y as f32 + o.anchor_offset_y) / fh as f32;
                    let (w, h) = if o.fixed_anchor_size {
                        (1.0, 1.0)
                    } else {
                        (w, h)
                    };
                    anchors.push([cx, cy, w, h]);
                }
            }
        }
        layer = last;
    }
    Ok(anchors)
}

/// How an SSD head's raw numbers read (`TensorsToDetectionsCalculatorOptions`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SsdSpec {
    /// Values per box (at least 4; BlazeFace's 16 add keypoints, which are not decoded here).
    pub coords: usize,
    pub classes: usize,
    pub x_scale: f32,
    pub y_scale: f32,
    pub w_scale: f32,
    pub h_scale: f32,
    /// `x, y, w, h` (BlazeFace); else `y, x, h, w`.
    pub reverse_output_order: bool,
    pub apply_exponential_on_box_size: bool,
    /// Scores are logits: `sigmoid(clamp(x, -clip, clip))` (f64, rounded to f32).
    pub sigmoid_score: bool,
    pub score_clipping_thresh: Option<f32>,
    pub nms: NmsOptions,
}

/// An SSD head decoded against `anchors` (`[x_center, y_center, width, height]` each) and
/// suppressed. Boxes come out as `xyxy` in the anchors' units (normalized for MediaPipe's).
/// Boxes and scores may each be f32 or quantized ([`Values`]).
pub fn ssd<'a>(
    raw_boxes: impl Into<Values<'a>>,
    raw_scores: impl Into<Values<'a>>,
    anchors: &[[f32; 4]],
    s: &SsdSpec,
) -> Result<Vec<Detection>> {
    let (raw_boxes, raw_scores) = (raw_boxes.into(), raw_scores.into());
    s.nms.check()?;
    let n = anchors.len();
    if s.coords < 4 {
        return invalid(
            "boxes",
            format!("{} values per box: expected at least 4", s.coords),
        );
    }
    if s.classes == 0 {
        return invalid("scores", "0 classes: expected at least 1");
    }
    let scales = [s.x_scale, s.y_scale, s.w_scale, s.h_scale];
    if !scales.iter().all(|v| v.is_finite() && *v != 0.0) {
        return invalid(
            "boxes",
            format!("x, y, w and h scales must be finite and non-zero, got {scales:?}"),
        );
    }
    // `clamp(-t, t)` panics for a negative or NaN `t`.
    if let Some(t) = s.score_clipping_thresh
        && (t.is_nan() || t <= 0.0)
    {
        return invalid(
            "score_clipping_thresh",
            format!("must be a number > 0, got {t}"),
        );
    }
    raw_boxes.check_len(
        "boxes",
        n.saturating_mul(s.coords),
        &format!("[{n}, {}] (one row per anchor)", s.coords),
    )?;
    raw_scores.check_len(
        "scores",
        n.saturating_mul(s.classes),
        &format!("[{n}, {}] (one row per anchor)", s.classes),
    )?;
    raw_scores.check("scores")?;
    raw_boxes.check_scale("boxes")?;
    if let Some(i) = anchors
        .iter()
        .position(|a| !a.iter().all(|v| v.is_finite()))
    {
        return invalid("anchors", format!("anchor {i} has a non-finite value"));
    }
    let clip = s.score_clipping_thresh.map(f64::from);
    let score = |x: f32| -> f32 {
        if !s.sigmoid_score {
            return x;
        }
        let x = match clip {
            Some(t) => (x as f64).clamp(-t, t),
            None => x as f64,
        };
        (1.0 / (1.0 + (-x).exp())) as f32
    };
    let bbox = |i: usize| -> Result<[f32; 4]> {
        let r = [0, 1, 2, 3].map(|j| raw_boxes.get(i * s.coords + j));
        if !r.iter().all(|v| v.is_finite()) {
            return invalid("boxes", format!("box {i} has a non-finite value ({r:?})"));
        }
        let a = &anchors[i];
        let (x, y, w, h) = if s.reverse_output_order {
            (r[0], r[1], r[2], r[3])
        } else {
            (r[1], r[0], r[3], r[2])
        };
        let cx = x / s.x_scale * a[2] + a[0];
        let cy = y / s.y_scale * a[3] + a[1];
        let (w, h) = if s.apply_exponential_on_box_size {
            ((w / s.w_scale).exp() * a[2], (h / s.h_scale).exp() * a[3])
        } else {
            (w / s.w_scale * a[2], h / s.h_scale * a[3])
        };
        Ok([cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0])
    };
    let mut candidates: Vec<Candidate> = Vec::new();
    let grid = Grid::BoxMajor {
        boxes: n,
        classes: s.classes,
    };
    match raw_scores {
        Values::F32(raw_scores) => {
            for (i, row) in raw_scores.chunks_exact(s.classes).enumerate() {
                let start = candidates.len();
                push_row(
                    &mut candidates,
                    i,
                    row.iter().map(|&x| score(x)),
                    s.nms.score_threshold,
                    s.nms.multi_label,
                    || [0.0; 4],
                );
                if candidates.len() > start {
                    let b = bbox(i)?;
                    candidates[start..].iter_mut().for_each(|c| c.bbox = b);
                }
            }
        }
        Values::U8(q) => quantized_candidates(&q, grid, score, &s.nms, bbox, &mut candidates)?,
        Values::U16(q) => quantized_candidates(&q, grid, score, &s.nms, bbox, &mut candidates)?,
    }
    Ok(greedy(candidates, &s.nms))
}
