//! Greedy non-maximum suppression over boxes and scores (the definitions are in the parent
//! module's docs).

use std::cmp::Ordering;

use super::defs::{Detection, NmsOptions, Result, check_len, check_no_nan, invalid};
use super::values::{Level, Quantized};

/// How a box's four numbers read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoxFormat {
    /// `x1, y1, x2, y2`.
    Xyxy,
    /// `x, y` (top-left corner), `w, h`.
    Xywh,
    /// `cx, cy` (centre), `w, h`.
    Cxcywh,
}

impl BoxFormat {
    /// `b` as `[x1, y1, x2, y2]`, in f32.
    pub fn to_xyxy(self, b: [f32; 4]) -> [f32; 4] {
        match self {
            BoxFormat::Xyxy => b,
            BoxFormat::Xywh => [b[0], b[1], b[0] + b[2], b[1] + b[3]],
            BoxFormat::Cxcywh => {
                let (hw, hh) = (b[2] * 0.5, b[3] * 0.5);
                [b[0] - hw, b[1] - hh, b[0] + hw, b[1] + hh]
            }
        }
    }
}

/// The scores of `N` boxes.
#[derive(Clone, Copy, Debug)]
pub enum Scores<'a> {
    /// `[N, C]`, row-major: one score per box and class.
    PerClass { values: &'a [f32], classes: usize },
    /// `[N]`: one score per box, with its class (`None`: all class 0).
    PerBox {
        values: &'a [f32],
        classes: Option<&'a [u32]>,
    },
}

/// A candidate of the NMS: its box (`xyxy`), box index, class and score.
#[derive(Clone, Copy, Debug)]
pub(super) struct Candidate {
    pub bbox: [f32; 4],
    pub index: u32,
    pub class: u32,
    pub score: f32,
}

/// IoU of two `xyxy` boxes, OpenCV's (no `+1`): 0 when the union is 0.
pub fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = iw * ih;
    let area = |r: [f32; 4]| (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0);
    let union = area(a) + area(b) - inter;
    if union > 0.0 { inter / union } else { 0.0 }
}

/// Greedy NMS of `boxes` (`[N, 4]` in `format`) with `scores`: the kept boxes, by score.
pub fn nms(
    boxes: &[f32],
    format: BoxFormat,
    scores: Scores<'_>,
    opts: &NmsOptions,
) -> Result<Vec<Detection>> {
    opts.check()?;
    if !boxes.len().is_multiple_of(4) {
        return invalid(
            "boxes",
            format!(
                "expected [N, 4] f32 values, got {} (not a multiple of 4)",
                boxes.len()
            ),
        );
    }
    let n = boxes.len() / 4;
    if let Some(i) = boxes.iter().position(|v| !v.is_finite()) {
        return invalid(
            "boxes",
            format!("box {} has a non-finite coordinate ({})", i / 4, boxes[i]),
        );
    }
    let bbox = |i: usize| {
        format.to_xyxy([
            boxes[4 * i],
            boxes[4 * i + 1],
            boxes[4 * i + 2],
            boxes[4 * i + 3],
        ])
    };
    if n > u32::MAX as usize {
        return invalid(
            "boxes",
            format!("{n} boxes: at most {} are taken", u32::MAX),
        );
    }
    let thr = opts.score_threshold;
    let mut candidates = Vec::new();
    match scores {
        Scores::PerClass { values, classes } => {
            if classes == 0 || classes > u32::MAX as usize {
                return invalid("scores", format!("{classes} classes: expected at least 1"));
            }
            let expected = n.saturating_mul(classes);
            check_len("scores", values, expected, &format!("[{n}, {classes}]"))?;
            check_no_nan("scores", values)?;
            for (i, row) in values.chunks_exact(classes).enumerate() {
                push_row(
                    &mut candidates,
                    i,
                    row.iter().copied(),
                    thr,
                    opts.multi_label,
                    || bbox(i),
                );
            }
        }
        Scores::PerBox { values, classes } => {
            check_len("scores", values, n, &format!("[{n}]"))?;
            check_no_nan("scores", values)?;
            if let Some(classes) = classes
                && classes.len() != n
            {
                return invalid(
                    "classes",
                    format!("expected one class per box ({n}), got {}", classes.len()),
                );
            }
            for (i, &score) in values.iter().enumerate() {
                if score > thr {
                    candidates.push(Candidate {
                        bbox: bbox(i),
                        index: i as u32,
                        class: classes.map_or(0, |c| c[i]),
                        score,
                    });
                }
            }
        }
    }
    Ok(greedy(candidates, opts))
}

/// The candidates of box `i` from its class scores `row`: its best class (first among equal
/// maxima), or every class above `thr` with `multi_label`.
pub(super) fn push_row(
    out: &mut Vec<Candidate>,
    i: usize,
    row: impl Iterator<Item = f32>,
    thr: f32,
    multi_label: bool,
    bbox: impl FnOnce() -> [f32; 4],
) {
    if multi_label {
        let start = out.len();
        for (c, score) in row.enumerate() {
            if score > thr {
                out.push(Candidate {
                    bbox: [0.0; 4],
                    index: i as u32,
                    class: c as u32,
                    score,
                });
            }
        }
        if out.len() > start {
            let b = bbox();
            out[start..].iter_mut().for_each(|c| c.bbox = b);
        }
    } else {
        let (mut best, mut class) = (f32::NEG_INFINITY, 0usize);
        for (c, score) in row.enumerate() {
            if score > best || c == 0 {
                (best, class) = (score, c);
            }
        }
        if best > thr {
            out.push(Candidate {
                bbox: bbox(),
                index: i as u32,
                class: class as u32,
                score: best,
            });
        }
    }
}

/// Where score `(box, class)` sits in a grid of `boxes x classes` scores.
#[derive(Clone, Copy, Debug)]
pub(super) enum Grid {
    /// `[C, N]`: a row per class (YOLOv8's head).
    ClassMajor { boxes: usize, classes: usize },
    /// `[N, C]`: a row per box.
    BoxMajor { boxes: usize, classes: usize },
}

/// The candidates of quantized scores laid out as `grid`, each score `score(value)` (never
/// decreasing): only the boxes whose highest level reaches the first level scoring above the
/// threshold are dequantized, then judged by [`push_row`] as f32 rows are; their boxes come
/// from `bbox`.
pub(super) fn quantized_candidates<T: Level>(
    q: &Quantized<T>,
    grid: Grid,
    score: impl Fn(f32) -> f32,
    opts: &NmsOptions,
    bbox: impl Fn(usize) -> Result<[f32; 4]>,
    out: &mut Vec<Candidate>,
) -> Result<()> {
    q.check_scale("scores")?;
    let Some(first) = q.first_above(&score, opts.score_threshold) else {
        return Ok(());
    };
    let (n, c, at): (usize, usize, &dyn Fn(usize, usize) -> T) = match grid {
        Grid::ClassMajor { boxes, classes } => {
            (boxes, classes, &move |i, k| q.levels[k * boxes + i])
        }
        Grid::BoxMajor { boxes, classes } => {
            (boxes, classes, &move |i, k| q.levels[i * classes + k])
        }
    };
    if n == 0 || c == 0 {
        return Ok(());
    }
    if let (Grid::ClassMajor { .. }, false) = (grid, opts.multi_label) {
        return best_of_columns(q, n, c, score, first, bbox, out);
    }
    let reaching: Vec<usize> = match grid {
        Grid::ClassMajor { .. } => {
            // the highest level of every box, a class row at a time (rows are contiguous)
            let mut best = q.levels[..n].to_vec();
            for row in q.levels[n..].chunks_exact(n) {
                best.iter_mut()
                    .zip(row)
                    .for_each(|(b, &l)| *b = (*b).max(l));
            }
            (0..n).filter(|&i| best[i] >= first).collect()
        }
        Grid::BoxMajor { .. } => (q.levels.chunks_exact(c).enumerate())
            .filter(|(_, row)| row.iter().any(|&l| l >= first))
            .map(|(i, _)| i)
            .collect(),
    };
    for i in reaching {
        let start = out.len();
        let row = (0..c).map(|k| score(q.value(at(i, k))));
        push_row(out, i, row, opts.score_threshold, opts.multi_label, || {
            [0.0; 4]
        });
        if out.len() > start {
            let b = bbox(i)?;
            out[start..].iter_mut().for_each(|c| c.bbox = b);
        }
    }
    Ok(())
}

/// [`quantized_candidates`] of `[C, N]` scores, one per box: each box's highest level in one
/// sweep of the rows (a max of bytes, which vectorizes), then, for the boxes that reach
/// `first` only, the first class at that level. That class is the f32 path's (the first of the
/// highest scores) unless the level below scores the same (a scale or offset so extreme that
/// levels collapse): then the box's column is judged as f32 rows are.
fn best_of_columns<T: Level>(
    q: &Quantized<T>,
    n: usize,
    c: usize,
    score: impl Fn(f32) -> f32,
    first: T,
    bbox: impl Fn(usize) -> Result<[f32; 4]>,
    out: &mut Vec<Candidate>,
) -> Result<()> {
    let mut best = q.levels[..n].to_vec();
    for row in q.levels[n..].chunks_exact(n) {
        best.iter_mut()
            .zip(row)
            .for_each(|(b, &l)| *b = (*b).max(l));
    }
    for i in (0..n).filter(|&i| best[i] >= first) {
        let top = score(q.value(best[i]));
        let collapsed = T::below(best[i]).is_some_and(|l| score(q.value(l)) == top);
        if collapsed {
            let row = (0..c).map(|k| score(q.value(q.levels[k * n + i])));
            let start = out.len();
            push_row(out, i, row, f32::NEG_INFINITY, false, || [0.0; 4]);
            out[start].bbox = bbox(i)?;
        } else {
            let class = (0..c)
                .position(|k| q.levels[k * n + i] == best[i])
                .unwrap_or(0);
            out.push(Candidate {
                bbox: bbox(i)?,
                index: i as u32,
                class: class as u32,
                score: top,
            });
        }
    }
    Ok(())
}

/// Descending score, then lower box index, then lower class (no NaN here; -0.0 equals 0.0).
fn order(a: &Candidate, b: &Candidate) -> Ordering {
    b.score
        .partial_cmp(&a.score)
        .unwrap_or(Ordering::Equal)
        .then(a.index.cmp(&b.index))
        .then(a.class.cmp(&b.class))
}

/// The greedy visit of `candidates` (see the module docs).
pub(super) fn greedy(mut candidates: Vec<Candidate>, opts: &NmsOptions) -> Vec<Detection> {
    candidates.sort_unstable_by(order);
    let limit = opts.max_detections.unwrap_or(usize::MAX);
    let mut kept: Vec<Candidate> = Vec::new();
    for c in candidates {
        if kept.len() >= limit {
            break;
        }
        let suppressed = kept.iter().any(|k| {
            (opts.class_agnostic || k.class == c.class) && iou(k.bbox, c.bbox) > opts.iou_threshold
        });
        if !suppressed {
            kept.push(c);
        }
    }
    kept.into_iter()
        .map(|c| Detection {
            index: c.index as usize,
            class: c.class as usize,
            score: c.score,
            bbox: c.bbox,
        })
        .collect()
}
