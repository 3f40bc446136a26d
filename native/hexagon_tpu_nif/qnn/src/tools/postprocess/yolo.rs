//! YOLOv8 and YOLOv5 heads, f32 or quantized, decoded into NMS candidates (the definitions are
//! in the parent module's docs).

use super::defs::{Detection, NmsOptions, PostprocessError, Result, check_no_nan, invalid};
use super::nms::{BoxFormat, Candidate, Grid, greedy, push_row, quantized_candidates};
use super::values::{Level, Quantized, Values};

/// One head's geometry and what to do with its boxes. The kept boxes are in the model
/// input's pixels; `HexagonTpu.Postprocess` maps them to the frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct YoloSpec {
    /// `N`, the candidate boxes (8400 for YOLOv8 at 640).
    pub candidates: usize,
    /// `C`, the classes (80 for COCO).
    pub classes: usize,
    pub nms: NmsOptions,
}

impl YoloSpec {
    fn check(&self, extra: usize) -> Result<usize> {
        self.nms.check()?;
        if self.classes == 0 || self.classes > u32::MAX as usize - extra {
            return invalid(
                "output",
                format!("{} classes: expected at least 1", self.classes),
            );
        }
        if self.candidates > u32::MAX as usize {
            return invalid("output", format!("{} boxes is too many", self.candidates));
        }
        Ok((self.classes + extra).saturating_mul(self.candidates))
    }
}

/// Box `i`'s `cx, cy, w, h` as corners, a non-finite coordinate refused as `argument`'s.
fn check_box(argument: &'static str, i: usize, b: [f32; 4]) -> Result<[f32; 4]> {
    if b.iter().all(|v| v.is_finite()) {
        Ok(BoxFormat::Cxcywh.to_xyxy(b))
    } else {
        invalid(
            argument,
            format!("box {i} has a non-finite coordinate ({b:?})"),
        )
    }
}

/// YOLOv8's head, `[4 + C, N]` (`[1, 4 + C, N]`): rows 0..4 are `cx, cy, w, h`, rows `4..`
/// the class scores (no objectness). The kept detections, by score.
pub fn yolov8<'a>(output: impl Into<Values<'a>>, spec: &YoloSpec) -> Result<Vec<Detection>> {
    let output = output.into();
    let expected = spec.check(4)?;
    let (n, c) = (spec.candidates, spec.classes);
    output.check_len("output", expected, &format!("[{}, {n}]", 4 + c))?;
    let (boxes, scores) = output.split_at(4 * n);
    decode_v8(boxes, scores, spec, ["output", "output"])
}

/// YOLOv8's head in the two parts the compile task splits it into, so that each has its own
/// quantization: boxes `[4, N]` and class scores `[C, N]`. The same detections as [`yolov8`]
/// on the two put together.
pub fn yolov8_split<'a>(
    boxes: impl Into<Values<'a>>,
    scores: impl Into<Values<'a>>,
    spec: &YoloSpec,
) -> Result<Vec<Detection>> {
    let (boxes, scores) = (boxes.into(), scores.into());
    spec.check(4)?;
    let (n, c) = (spec.candidates, spec.classes);
    boxes.check_len("boxes", 4 * n, &format!("[4, {n}]"))?;
    scores.check_len("scores", c * n, &format!("[{c}, {n}]"))?;
    decode_v8(boxes, scores, spec, ["boxes", "scores"])
}

/// YOLOv8's boxes `[4, N]` and scores `[C, N]`, checked for length; `arguments` name them.
fn decode_v8(
    boxes: Values,
    scores: Values,
    spec: &YoloSpec,
    [box_argument, score_argument]: [&'static str; 2],
) -> Result<Vec<Detection>> {
    let (n, c) = (spec.candidates, spec.classes);
    boxes.check_scale(box_argument)?;
    let bbox = |i: usize| {
        let b = [0, 1, 2, 3].map(|r| boxes.get(r * n + i));
        check_box(box_argument, i, b)
    };
    let mut candidates: Vec<Candidate> = Vec::new();
    match scores {
        Values::F32(scores) => {
            if let Some(p) = scores.iter().position(|v| v.is_nan()) {
                let (k, i) = (p / n, p % n);
                return invalid(
                    score_argument,
                    format!("box {i}'s score of class {k} is NaN"),
                );
            }
            v8_f32(scores, spec, bbox, &mut candidates)?;
        }
        Values::U8(q) => {
            let scores = Grid::ClassMajor {
                boxes: n,
                classes: c,
            };
            quantized_candidates(&q, scores, |x| x, &spec.nms, bbox, &mut candidates)?;
        }
        Values::U16(q) => {
            let scores = Grid::ClassMajor {
                boxes: n,
                classes: c,
            };
            quantized_candidates(&q, scores, |x| x, &spec.nms, bbox, &mut candidates)?;
        }
    }
    Ok(greedy(candidates, &spec.nms))
}

/// The candidates of f32 class scores `[C, N]` (no NaN).
fn v8_f32(
    scores: &[f32],
    spec: &YoloSpec,
    bbox: impl Fn(usize) -> Result<[f32; 4]>,
    candidates: &mut Vec<Candidate>,
) -> Result<()> {
    let (n, c) = (spec.candidates, spec.classes);
    let thr = spec.nms.score_threshold;
    if spec.nms.multi_label {
        for i in 0..n {
            let row = (0..c).map(|k| scores[k * n + i]);
            let start = candidates.len();
            push_row(candidates, i, row, thr, true, || [0.0; 4]);
            if candidates.len() > start {
                let b = bbox(i)?;
                candidates[start..].iter_mut().for_each(|c| c.bbox = b);
            }
        }
    } else {
        // the best class of every box, a class row at a time (rows are contiguous)
        let mut best = scores[..n].to_vec();
        let mut class = vec![0u32; n];
        for k in 1..c {
            let row = &scores[k * n..(k + 1) * n];
            for ((b, cl), &v) in best.iter_mut().zip(class.iter_mut()).zip(row) {
                if v > *b {
                    *b = v;
                    *cl = k as u32;
                }
            }
        }
        for i in 0..n {
            if best[i] > thr {
                candidates.push(Candidate {
                    bbox: bbox(i)?,
                    index: i as u32,
                    class: class[i],
                    score: best[i],
                });
            }
        }
    }
    Ok(())
}

/// YOLOv5's head, `[N, 5 + C]` (`[1, N, 5 + C]`): `cx, cy, w, h, objectness`, then the class
/// scores; class `c` scores `objectness * class_score[c]`. The kept detections, by score.
pub fn yolov5<'a>(output: impl Into<Values<'a>>, spec: &YoloSpec) -> Result<Vec<Detection>> {
    let output = output.into();
    let expected = spec.check(5)?;
    let (n, c) = (spec.candidates, spec.classes);
    output.check_len("output", expected, &format!("[{n}, {}]", 5 + c))?;
    // row i: its box at i * (5 + C), its objectness and class scores 4 further
    let scores = output.split_at(4.min(output.len())).1;
    let rows = V5Rows {
        boxes: output,
        scores,
        stride: [5 + c, 5 + c],
        arguments: ["output", "output"],
    };
    decode_v5(&rows, spec)
}

/// YOLOv5's head in the two parts the compile task splits it into, so that each has its own
/// quantization: boxes `[N, 4]` and scores `[N, 1 + C]` (objectness, then the class scores).
/// The same detections as [`yolov5`] on the two put together.
pub fn yolov5_split<'a>(
    boxes: impl Into<Values<'a>>,
    scores: impl Into<Values<'a>>,
    spec: &YoloSpec,
) -> Result<Vec<Detection>> {
    let (boxes, scores) = (boxes.into(), scores.into());
    spec.check(5)?;
    let (n, c) = (spec.candidates, spec.classes);
    boxes.check_len("boxes", 4 * n, &format!("[{n}, 4]"))?;
    scores.check_len("scores", (1 + c) * n, &format!("[{n}, {}]", 1 + c))?;
    let rows = V5Rows {
        boxes,
        scores,
        stride: [4, 1 + c],
        arguments: ["boxes", "scores"],
    };
    decode_v5(&rows, spec)
}

/// A YOLOv5 head's rows, whole or split: box `i` is `boxes[i * stride[0]..][..4]`, its
/// objectness and class scores `scores[i * stride[1]..][..1 + C]`; `arguments` name the two.
struct V5Rows<'a> {
    boxes: Values<'a>,
    scores: Values<'a>,
    stride: [usize; 2],
    arguments: [&'static str; 2],
}

impl V5Rows<'_> {
    /// Box `i` as corners, a non-finite coordinate refused.
    fn bbox(&self, i: usize) -> Result<[f32; 4]> {
        let at = i * self.stride[0];
        check_box(
            self.arguments[0],
            i,
            [0, 1, 2, 3].map(|r| self.boxes.get(at + r)),
        )
    }
}

fn decode_v5(rows: &V5Rows, spec: &YoloSpec) -> Result<Vec<Detection>> {
    rows.boxes.check_scale(rows.arguments[0])?;
    let mut candidates: Vec<Candidate> = Vec::new();
    match rows.scores {
        Values::F32(scores) => v5_f32(scores, rows, spec, &mut candidates)?,
        Values::U8(q) => v5_quantized(&q, rows, spec, &mut candidates)?,
        Values::U16(q) => v5_quantized(&q, rows, spec, &mut candidates)?,
    }
    Ok(greedy(candidates, &spec.nms))
}

/// Row `i`'s objectness and class scores in `scores` (`1 + C` of them).
fn v5_scores<'s, T>(scores: &'s [T], rows: &V5Rows, c: usize, i: usize) -> &'s [T] {
    let at = i * rows.stride[1];
    &scores[at..at + 1 + c]
}

fn v5_f32(
    scores: &[f32],
    rows: &V5Rows,
    spec: &YoloSpec,
    candidates: &mut Vec<Candidate>,
) -> Result<()> {
    let c = spec.classes;
    for i in 0..spec.candidates {
        let row = v5_scores(scores, rows, c, i);
        check_no_nan(rows.arguments[1], row).map_err(|_| PostprocessError {
            argument: rows.arguments[1],
            message: format!("box {i}'s objectness or a class score is NaN"),
        })?;
        let obj = row[0];
        v5_row(i, row[1..].iter().map(|&s| obj * s), rows, spec, candidates)?;
    }
    Ok(())
}

/// Quantized rows: a row is judged only when its best product can be above the threshold
/// (`obj * value` never decreases with the value for `obj >= 0`, never increases below), or
/// when that product is NaN.
fn v5_quantized<T: Level>(
    q: &Quantized<T>,
    rows: &V5Rows,
    spec: &YoloSpec,
    candidates: &mut Vec<Candidate>,
) -> Result<()> {
    q.check_scale(rows.arguments[1])?;
    let c = spec.classes;
    for i in 0..spec.candidates {
        let row = v5_scores(q.levels, rows, c, i);
        let obj = q.value(row[0]);
        let classes = row[1..].iter().copied();
        let extreme = if obj >= 0.0 {
            classes.max()
        } else {
            classes.min()
        };
        let best = extreme.map_or(f32::NEG_INFINITY, |l| obj * q.value(l));
        // NaN: 0 times an infinite value (a scale so large that levels overflow); the other
        // products of the row may still pass, so it is judged whole, as f32 rows are
        if best > spec.nms.score_threshold || best.is_nan() {
            let scores = row[1..].iter().map(|&s| obj * q.value(s));
            v5_row(i, scores, rows, spec, candidates)?;
        }
    }
    Ok(())
}

/// Row `i`'s candidates from its `scores`, its box read from `rows`.
fn v5_row(
    i: usize,
    scores: impl Iterator<Item = f32>,
    rows: &V5Rows,
    spec: &YoloSpec,
    candidates: &mut Vec<Candidate>,
) -> Result<()> {
    let start = candidates.len();
    let nms = &spec.nms;
    push_row(
        candidates,
        i,
        scores,
        nms.score_threshold,
        nms.multi_label,
        || [0.0; 4],
    );
    if candidates.len() > start {
        let b = rows.bbox(i)?;
        candidates[start..].iter_mut().for_each(|c| c.bbox = b);
    }
    Ok(())
}
