//! YOLOv8 and YOLOv5 heads decoded into NMS candidates, and the kept boxes mapped back to the
//! frame (the definitions are in the parent module's docs).

use super::nms::{BoxFormat, Candidate, greedy, push_row};
use super::{Detection, NmsOptions, PostprocessError, Result, check_len, check_no_nan, invalid};

/// The letterbox that made the model input from the frame: `model = frame * scale + offset`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Letterbox {
    pub scale: f32,
    pub x_offset: f32,
    pub y_offset: f32,
}

/// One head's geometry and what to do with its boxes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct YoloSpec {
    /// `N`, the candidate boxes (8400 for YOLOv8 at 640).
    pub candidates: usize,
    /// `C`, the classes (80 for COCO).
    pub classes: usize,
    pub nms: NmsOptions,
    /// Boxes mapped back to the frame: `frame = (model - offset) / scale`.
    pub letterbox: Option<Letterbox>,
    /// Boxes clipped to `[0, width] x [0, height]` (after the letterbox).
    pub clip: Option<(f32, f32)>,
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
        if let Some(l) = self.letterbox {
            if !(l.scale.is_finite() && l.scale > 0.0) {
                return invalid(
                    "letterbox",
                    format!("scale must be finite and > 0, got {}", l.scale),
                );
            }
            if !(l.x_offset.is_finite() && l.y_offset.is_finite()) {
                return invalid(
                    "letterbox",
                    format!(
                        "offsets must be finite, got {} and {}",
                        l.x_offset, l.y_offset
                    ),
                );
            }
        }
        if let Some((w, h)) = self.clip
            && !(w.is_finite() && h.is_finite() && w > 0.0 && h > 0.0)
        {
            return invalid(
                "clip",
                format!("the frame size must be finite and > 0, got {w}x{h}"),
            );
        }
        Ok((self.classes + extra).saturating_mul(self.candidates))
    }

    /// The kept detections mapped to the frame.
    fn finish(&self, mut kept: Vec<Detection>) -> Vec<Detection> {
        for d in &mut kept {
            if let Some(l) = self.letterbox {
                let b = &mut d.bbox;
                b[0] = (b[0] - l.x_offset) / l.scale;
                b[2] = (b[2] - l.x_offset) / l.scale;
                b[1] = (b[1] - l.y_offset) / l.scale;
                b[3] = (b[3] - l.y_offset) / l.scale;
            }
            if let Some((w, h)) = self.clip {
                let b = &mut d.bbox;
                b[0] = b[0].clamp(0.0, w);
                b[2] = b[2].clamp(0.0, w);
                b[1] = b[1].clamp(0.0, h);
                b[3] = b[3].clamp(0.0, h);
            }
        }
        kept
    }
}

/// The boxes of rows `0..4` as non-finite coordinates refused, for `output`'s messages.
fn check_box(i: usize, b: [f32; 4]) -> Result<[f32; 4]> {
    if b.iter().all(|v| v.is_finite()) {
        Ok(BoxFormat::Cxcywh.to_xyxy(b))
    } else {
        invalid(
            "output",
            format!("box {i} has a non-finite coordinate ({b:?})"),
        )
    }
}

/// YOLOv8's head, `[4 + C, N]` (`[1, 4 + C, N]`): rows 0..4 are `cx, cy, w, h`, rows `4..`
/// the class scores (no objectness). The kept detections, by score.
pub fn yolov8(output: &[f32], spec: &YoloSpec) -> Result<Vec<Detection>> {
    let expected = spec.check(4)?;
    let (n, c) = (spec.candidates, spec.classes);
    check_len("output", output, expected, &format!("[{}, {n}]", 4 + c))?;
    if let Some(p) = output[4 * n..].iter().position(|v| v.is_nan()) {
        let (k, i) = (p / n, p % n);
        return invalid("output", format!("box {i}'s score of class {k} is NaN"));
    }
    let thr = spec.nms.score_threshold;
    let mut candidates: Vec<Candidate> = Vec::new();
    let bbox = |i: usize| {
        [
            output[i],
            output[n + i],
            output[2 * n + i],
            output[3 * n + i],
        ]
    };
    if spec.nms.multi_label {
        for i in 0..n {
            let row = (0..c).map(|k| output[(4 + k) * n + i]);
            let start = candidates.len();
            push_row(&mut candidates, i, row, thr, true, || [0.0; 4]);
            if candidates.len() > start {
                let b = check_box(i, bbox(i))?;
                candidates[start..].iter_mut().for_each(|c| c.bbox = b);
            }
        }
    } else {
        // the best class of every box, a class row at a time (rows are contiguous)
        let mut best = output[4 * n..5 * n].to_vec();
        let mut class = vec![0u32; n];
        for k in 1..c {
            let row = &output[(4 + k) * n..(5 + k) * n];
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
                    bbox: check_box(i, bbox(i))?,
                    index: i as u32,
                    class: class[i],
                    score: best[i],
                });
            }
        }
    }
    Ok(spec.finish(greedy(candidates, &spec.nms)))
}

/// YOLOv5's head, `[N, 5 + C]` (`[1, N, 5 + C]`): `cx, cy, w, h, objectness`, then the class
/// scores; class `c` scores `objectness * class_score[c]`. The kept detections, by score.
pub fn yolov5(output: &[f32], spec: &YoloSpec) -> Result<Vec<Detection>> {
    let expected = spec.check(5)?;
    let (n, c) = (spec.candidates, spec.classes);
    check_len("output", output, expected, &format!("[{n}, {}]", 5 + c))?;
    let thr = spec.nms.score_threshold;
    let mut candidates: Vec<Candidate> = Vec::new();
    for (i, row) in output.chunks_exact(5 + c).enumerate() {
        check_no_nan("output", &row[4..]).map_err(|_| PostprocessError {
            argument: "output",
            message: format!("box {i}'s objectness or a class score is NaN"),
        })?;
        let obj = row[4];
        let scores = row[5..].iter().map(|&s| obj * s);
        let start = candidates.len();
        push_row(
            &mut candidates,
            i,
            scores,
            thr,
            spec.nms.multi_label,
            || [0.0; 4],
        );
        if candidates.len() > start {
            let b = check_box(i, [row[0], row[1], row[2], row[3]])?;
            candidates[start..].iter_mut().for_each(|c| c.bbox = b);
        }
    }
    Ok(spec.finish(greedy(candidates, &spec.nms)))
}
