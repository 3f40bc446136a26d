//! Post-processing on arbitrary shapes and options: top k, NMS over per-class and per-box
//! scores, the YOLOv8 and YOLOv5 heads, SSD anchors and the SSD head, argmax masks.
//!
//! Properties: nothing panics; a refusal names one of the call's arguments; every kept box's
//! index and class are in range; results are in the documented order (score descending, then
//! box index, then class); at most `max_detections`; no two kept boxes that may suppress each
//! other overlap above the IoU threshold; and `nms` keeps exactly what a plain re-statement of
//! the greedy definition keeps; quantized heads (u8, u16) answer as the f32 path does on their
//! dequantized values, bit for bit.

#![no_main]

use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use qnn::postprocess::{
    self, AnchorOptions, BoxFormat, Detection, MaskLayout, NmsOptions, PostprocessError, Quantized,
    Scores, SsdSpec, Values, YoloSpec,
};
use qnn::quant::dequantize_scalar;

fn float(u: &mut Unstructured) -> Result<f32> {
    Ok(match u.int_in_range(0..=7)? {
        0 => f32::from_bits(u.arbitrary()?),
        1 => [0.0, -0.0, 1.0, 0.5, f32::INFINITY, f32::MAX, 1e-40][u.choose_index(7)?],
        _ => u.int_in_range(-64..=64i32)? as f32 / 4.0,
    })
}

fn floats(u: &mut Unstructured, n: usize) -> Result<Vec<f32>> {
    (0..n).map(|_| float(u)).collect()
}

/// `floats` of `len(n)` values: usually `n`, sometimes one off.
fn floats_about(u: &mut Unstructured, n: usize) -> Result<Vec<f32>> {
    let m = len(u, n)?;
    floats(u, m)
}

/// `floats` of up to `max` values.
fn floats_upto(u: &mut Unstructured, max: usize) -> Result<Vec<f32>> {
    let m = u.int_in_range(0..=max)?;
    floats(u, m)
}

/// A length that is usually right (`n`), sometimes off by one.
fn len(u: &mut Unstructured, n: usize) -> Result<usize> {
    Ok(match u.int_in_range(0..=15)? {
        0 => n + 1,
        1 => n.saturating_sub(1),
        _ => n,
    })
}

fn opts(u: &mut Unstructured) -> Result<NmsOptions> {
    Ok(NmsOptions {
        score_threshold: if u.ratio(1, 8)? {
            float(u)?
        } else {
            u.int_in_range(-4..=4i32)? as f32 / 8.0
        },
        iou_threshold: if u.ratio(1, 8)? {
            float(u)?
        } else {
            u.int_in_range(0..=8)? as f32 / 8.0
        },
        max_detections: if bool::arbitrary(u)? {
            Some(u.int_in_range(0..=8)?)
        } else {
            None
        },
        class_agnostic: bool::arbitrary(u)?,
        multi_label: bool::arbitrary(u)?,
    })
}

/// The arguments each call may name in a refusal.
fn check_refusal(e: &PostprocessError, arguments: &[&str]) {
    assert!(
        arguments.contains(&e.argument) && !e.message.is_empty(),
        "refusal names {:?}, not one of {arguments:?}: {e}",
        e.argument
    );
}

/// Order, ranges, the limit and (when `suppressed_in_place`: the boxes are the ones the NMS
/// compared) the suppression of kept boxes.
fn check_kept(
    kept: &[Detection],
    boxes: usize,
    classes: usize,
    o: &NmsOptions,
    suppressed_in_place: bool,
) {
    for d in kept {
        assert!(d.index < boxes, "index {} of {boxes} boxes", d.index);
        assert!(d.class < classes.max(1), "class {} of {classes}", d.class);
        assert!(!d.score.is_nan() && d.score > o.score_threshold, "{d:?}");
    }
    for w in kept.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let ordered =
            a.score > b.score || (a.score == b.score && (a.index, a.class) < (b.index, b.class));
        assert!(ordered, "out of order: {a:?} then {b:?}");
    }
    if let Some(max) = o.max_detections {
        assert!(kept.len() <= max);
    }
    if suppressed_in_place {
        for (i, a) in kept.iter().enumerate() {
            for b in &kept[i + 1..] {
                if o.class_agnostic || a.class == b.class {
                    let iou = postprocess::iou(a.bbox, b.bbox);
                    assert!(
                        iou <= o.iou_threshold,
                        "kept both {a:?} and {b:?}: IoU {iou}"
                    );
                }
            }
        }
    }
}

/// The greedy NMS restated from the module docs, for `nms`'s inputs (already checked).
fn reference_nms(
    boxes: &[[f32; 4]],
    scores: &[Vec<(usize, f32)>],
    o: &NmsOptions,
) -> Vec<(usize, usize)> {
    let mut candidates: Vec<(f32, usize, usize)> = Vec::new();
    for (i, row) in scores.iter().enumerate() {
        if o.multi_label {
            candidates.extend(
                row.iter()
                    .filter(|(_, s)| *s > o.score_threshold)
                    .map(|&(c, s)| (s, i, c)),
            );
        } else if let Some(&(c, s)) = row
            .iter()
            .reduce(|best, x| if x.1 > best.1 { x } else { best })
            && s > o.score_threshold
        {
            candidates.push((s, i, c));
        }
    }
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    // -0.0 and 0.0 are equal scores: total_cmp splits them, so merge them back in order.
    candidates.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap()
            .then((a.1, a.2).cmp(&(b.1, b.2)))
    });
    let mut kept: Vec<(f32, usize, usize)> = Vec::new();
    for c in candidates {
        if kept.len() >= o.max_detections.unwrap_or(usize::MAX) {
            break;
        }
        if !kept.iter().any(|k| {
            (o.class_agnostic || k.2 == c.2)
                && postprocess::iou(boxes[k.1], boxes[c.1]) > o.iou_threshold
        }) {
            kept.push(c);
        }
    }
    kept.into_iter().map(|(_, i, c)| (i, c)).collect()
}

fn nms(u: &mut Unstructured) -> Result<()> {
    let n = u.int_in_range(0..=24)?;
    let format = [BoxFormat::Xyxy, BoxFormat::Xywh, BoxFormat::Cxcywh][u.choose_index(3)?];
    let raw = floats_about(u, n * 4)?;
    let o = opts(u)?;
    let per_class = bool::arbitrary(u)?;
    let classes = u.int_in_range(0..=5)?;
    let values = floats_about(u, if per_class { n * classes } else { n })?;
    let labels: Option<Vec<u32>> = if !per_class && bool::arbitrary(u)? {
        let m = len(u, n)?;
        Some(
            (0..m)
                .map(|_| u.int_in_range(0..=3))
                .collect::<Result<_>>()?,
        )
    } else {
        None
    };
    let scores = if per_class {
        Scores::PerClass {
            values: &values,
            classes,
        }
    } else {
        Scores::PerBox {
            values: &values,
            classes: labels.as_deref(),
        }
    };
    let kept = match postprocess::nms(&raw, format, scores, &o) {
        Ok(kept) => kept,
        Err(e) => {
            check_refusal(
                &e,
                &[
                    "boxes",
                    "scores",
                    "classes",
                    "score_threshold",
                    "iou_threshold",
                ],
            );
            return Ok(());
        }
    };
    let class_count = if per_class { classes } else { 4 };
    check_kept(&kept, n, class_count, &o, true);
    // The reference.
    let boxes: Vec<[f32; 4]> = raw
        .chunks_exact(4)
        .map(|b| format.to_xyxy([b[0], b[1], b[2], b[3]]))
        .collect();
    for d in &kept {
        assert_eq!(d.bbox, boxes[d.index]);
    }
    let rows: Vec<Vec<(usize, f32)>> = if per_class {
        values
            .chunks_exact(classes)
            .map(|r| r.iter().copied().enumerate().collect())
            .collect()
    } else {
        (0..n)
            .map(|i| vec![(labels.as_ref().map_or(0, |l| l[i] as usize), values[i])])
            .collect()
    };
    let got: Vec<(usize, usize)> = kept.iter().map(|d| (d.index, d.class)).collect();
    assert_eq!(
        got,
        reference_nms(&boxes, &rows, &o),
        "nms differs from its definition"
    );
    Ok(())
}

fn yolo(u: &mut Unstructured) -> Result<()> {
    let v8 = bool::arbitrary(u)?;
    let (candidates, classes) = (u.int_in_range(0..=16)?, u.int_in_range(0..=4)?);
    let extra = if v8 { 4 } else { 5 };
    let spec = YoloSpec {
        candidates,
        classes,
        nms: opts(u)?,
    };
    let output = floats_about(u, (classes + extra) * candidates)?;
    let result = if v8 {
        postprocess::yolov8(&output, &spec)
    } else {
        postprocess::yolov5(&output, &spec)
    };
    match result {
        Ok(kept) => check_kept(&kept, candidates, classes, &spec.nms, true),
        Err(e) => check_refusal(&e, &["output", "score_threshold", "iou_threshold"]),
    }
    Ok(())
}

fn ssd(u: &mut Unstructured) -> Result<()> {
    let anchor_options = AnchorOptions {
        input_width: u.int_in_range(0..=64)?,
        input_height: u.int_in_range(0..=64)?,
        min_scale: float(u)?,
        max_scale: float(u)?,
        anchor_offset_x: float(u)?,
        anchor_offset_y: float(u)?,
        strides: (0..u.int_in_range(0..=4)?)
            .map(|_| u.int_in_range(0..=32))
            .collect::<Result<_>>()?,
        aspect_ratios: floats_upto(u, 3)?,
        reduce_boxes_in_lowest_layer: bool::arbitrary(u)?,
        interpolated_scale_aspect_ratio: float(u)?,
        fixed_anchor_size: bool::arbitrary(u)?,
    };
    let mut anchors = match postprocess::ssd_anchors(&anchor_options) {
        Ok(a) => a,
        Err(e) => {
            check_refusal(&e, &["anchors"]);
            return Ok(());
        }
    };
    anchors.truncate(u.int_in_range(0..=64)?);
    let spec = SsdSpec {
        coords: u.int_in_range(0..=6)?,
        classes: u.int_in_range(0..=3)?,
        x_scale: float(u)?,
        y_scale: float(u)?,
        w_scale: float(u)?,
        h_scale: float(u)?,
        reverse_output_order: bool::arbitrary(u)?,
        apply_exponential_on_box_size: bool::arbitrary(u)?,
        sigmoid_score: bool::arbitrary(u)?,
        score_clipping_thresh: if bool::arbitrary(u)? {
            Some(float(u)?)
        } else {
            None
        },
        nms: opts(u)?,
    };
    let n = anchors.len();
    let raw_boxes = floats_about(u, n * spec.coords)?;
    let raw_scores = floats_about(u, n * spec.classes)?;
    match postprocess::ssd(&raw_boxes, &raw_scores, &anchors, &spec) {
        Ok(kept) => check_kept(&kept, n, spec.classes, &spec.nms, true),
        Err(e) => check_refusal(
            &e,
            &[
                "boxes",
                "scores",
                "anchors",
                "score_clipping_thresh",
                "score_threshold",
                "iou_threshold",
            ],
        ),
    }
    Ok(())
}

fn top_k(u: &mut Unstructured) -> Result<()> {
    let scores = floats_upto(u, 40)?;
    let k = u.int_in_range(0..=45)?;
    let softmax = bool::arbitrary(u)?;
    match postprocess::top_k(&scores, k, softmax) {
        Ok(top) => {
            assert_eq!(top.len(), k.min(scores.len()));
            for w in top.windows(2) {
                assert!(
                    w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0),
                    "{top:?}"
                );
            }
            for &(i, s) in &top {
                assert!(i < scores.len());
                if !softmax {
                    assert_eq!(s.to_bits(), scores[i].to_bits());
                }
            }
            // Nothing left out beats the last one kept.
            if let (Some(&(last_i, last)), false) = (top.last(), softmax) {
                for (i, &s) in scores.iter().enumerate() {
                    if !top.iter().any(|&(j, _)| j == i) {
                        assert!(s < last || (s == last && i > last_i), "{i}: {s} left out");
                    }
                }
            }
        }
        Err(e) => check_refusal(&e, &["scores"]),
    }
    Ok(())
}

fn mask(u: &mut Unstructured) -> Result<()> {
    let (h, w) = (u.int_in_range(0..=8)?, u.int_in_range(0..=8)?);
    let classes = if u.ratio(1, 16)? {
        [0, 256, 257, 65_536, 65_537][u.choose_index(5)?]
    } else {
        u.int_in_range(0..=6)?
    };
    let layout = if bool::arbitrary(u)? {
        MaskLayout::Hwc
    } else {
        MaskLayout::Chw
    };
    let n = (h * w * classes).min(1 << 16);
    let output = floats_about(u, n)?;
    match postprocess::argmax_mask(&output, h, w, classes, layout) {
        Ok(m) => {
            let wide = classes > 256;
            assert_eq!(m.len(), h * w * if wide { 2 } else { 1 });
            for p in 0..h * w {
                let class = if wide {
                    u16::from_le_bytes([m[2 * p], m[2 * p + 1]]) as usize
                } else {
                    m[p] as usize
                };
                assert!(class < classes);
                let at = |k: usize| match layout {
                    MaskLayout::Hwc => output[p * classes + k],
                    MaskLayout::Chw => output[k * h * w + p],
                };
                // The first maximum.
                assert!((0..classes).all(|k| at(k) <= at(class)));
                assert!((0..class).all(|k| at(k) < at(class)));
            }
        }
        Err(e) => check_refusal(&e, &["output"]),
    }
    Ok(())
}

/// Quantized levels (u8 or u16) with a scale and an offset, and their dequantized f32 values.
struct Levels {
    u8: Vec<u8>,
    u16: Vec<u16>,
    wide: bool,
    scale: f32,
    offset: i32,
}

impl Levels {
    /// About `n` levels (see [`len`]).
    fn arbitrary(u: &mut Unstructured, n: usize, scale: f32, offset: i32) -> Result<Levels> {
        let n = len(u, n)?;
        let wide = bool::arbitrary(u)?;
        let max = if wide { u16::MAX as u32 } else { 255 };
        let levels: Vec<u32> = (0..n)
            .map(|_| u.int_in_range(0..=max))
            .collect::<Result<_>>()?;
        Ok(Levels {
            u8: levels.iter().map(|&l| l as u8).collect(),
            u16: levels.iter().map(|&l| l as u16).collect(),
            wide,
            scale,
            offset,
        })
    }

    fn values(&self) -> Values<'_> {
        let (scale, offset) = (self.scale, self.offset);
        if self.wide {
            Values::U16(Quantized {
                levels: &self.u16,
                scale,
                offset,
            })
        } else {
            Values::U8(Quantized {
                levels: &self.u8,
                scale,
                offset,
            })
        }
    }

    fn f32(&self) -> Vec<f32> {
        let value = |q: i64| dequantize_scalar(q, self.scale, self.offset);
        if self.wide {
            self.u16.iter().map(|&q| value(q.into())).collect()
        } else {
            self.u8.iter().map(|&q| value(q.into())).collect()
        }
    }
}

/// Quantized heads against the f32 path on their dequantized values: the same answer, or the
/// same refusal; a scale that is not finite and > 0 refused by the quantized path.
fn quantized(u: &mut Unstructured) -> Result<()> {
    let (n, c) = (u.int_in_range(0..=24)?, u.int_in_range(0..=4)?);
    let scale = if u.ratio(1, 8)? {
        float(u)?
    } else {
        f32::from_bits(u.int_in_range(0x0080_0000..=0x7149_f2ca)?) // up to 1e30: values stay finite
    };
    // now and then an offset so large that neighbouring levels dequantize to one value
    let offset = if u.ratio(1, 8)? {
        i32::arbitrary(u)?
    } else {
        u.int_in_range(-70_000..=70_000)?
    };
    let good_scale = scale.is_finite() && scale > 0.0;
    let spec = YoloSpec {
        candidates: n,
        classes: c,
        nms: opts(u)?,
    };
    let boxes = Levels::arbitrary(u, 4 * n, scale, offset)?;
    let scores = Levels::arbitrary(u, c * n, scale, offset)?;
    let head = Levels::arbitrary(u, (5 + c) * n, scale, offset)?;
    let v5_scores = Levels::arbitrary(u, (1 + c) * n, scale, offset)?;
    let pairs = [
        (
            postprocess::yolov8_split(boxes.values(), scores.values(), &spec),
            postprocess::yolov8_split(&boxes.f32(), &scores.f32(), &spec),
        ),
        (
            postprocess::yolov5(head.values(), &spec),
            postprocess::yolov5(&head.f32(), &spec),
        ),
        (
            postprocess::yolov5_split(boxes.values(), v5_scores.values(), &spec),
            postprocess::yolov5_split(&boxes.f32(), &v5_scores.f32(), &spec),
        ),
    ];
    for (got, want) in pairs {
        compare(got, want, good_scale);
    }
    let k = u.int_in_range(0..=30)?;
    let softmax = bool::arbitrary(u)?;
    let got = postprocess::top_k(scores.values(), k, softmax);
    let want = postprocess::top_k(&scores.f32(), k, softmax);
    compare(got, want, good_scale);
    let anchors: Vec<[f32; 4]> = (0..n)
        .map(|_| Ok([float(u)?, float(u)?, float(u)?, float(u)?]))
        .collect::<Result<_>>()?;
    let ssd_spec = SsdSpec {
        coords: 4,
        classes: c,
        x_scale: 1.0 + u.int_in_range(0..=4)? as f32,
        y_scale: 1.0,
        w_scale: 2.0,
        h_scale: 2.0,
        reverse_output_order: bool::arbitrary(u)?,
        apply_exponential_on_box_size: bool::arbitrary(u)?,
        sigmoid_score: bool::arbitrary(u)?,
        score_clipping_thresh: if bool::arbitrary(u)? {
            Some(float(u)?)
        } else {
            None
        },
        nms: spec.nms,
    };
    let got = postprocess::ssd(boxes.values(), scores.values(), &anchors, &ssd_spec);
    let want = postprocess::ssd(&boxes.f32(), &scores.f32(), &anchors, &ssd_spec);
    compare(got, want, good_scale);
    Ok(())
}

/// The quantized path's answer against the f32 path's, bit for bit: by their `Debug` text, which
/// writes every f32 so that it reads back exactly (and a NaN box, from anchors the fuzzer made,
/// equals itself).
fn compare<T: std::fmt::Debug>(
    got: std::result::Result<T, PostprocessError>,
    want: std::result::Result<T, PostprocessError>,
    good_scale: bool,
) {
    match (got, want) {
        (Err(e), _) if e.message.starts_with("the quantization scale") => {
            assert!(!good_scale, "a good scale refused: {e}")
        }
        (_, _) if !good_scale => {}
        // the lengths' messages name the type ("u8 values", "f32 values")
        (Err(a), Err(b)) => assert_eq!(a.argument, b.argument, "{a} / {b}"),
        (got, want) => assert_eq!(
            format!("{got:?}"),
            format!("{want:?}"),
            "quantized and f32 paths differ"
        ),
    }
}

fn run(u: &mut Unstructured) -> Result<()> {
    match u.int_in_range(0..=5)? {
        0 => nms(u),
        1 => yolo(u),
        2 => ssd(u),
        3 => top_k(u),
        4 => quantized(u),
        _ => mask(u),
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
