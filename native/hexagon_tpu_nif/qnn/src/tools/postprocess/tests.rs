//! Each function on cases worked out by hand from the module docs' definitions.

use super::*;

fn opts(score: f32, iou: f32, max: Option<usize>) -> NmsOptions {
    NmsOptions {
        score_threshold: score,
        iou_threshold: iou,
        max_detections: max,
        class_agnostic: false,
        multi_label: false,
    }
}

fn per_box(values: &[f32]) -> Scores<'_> {
    Scores::PerBox {
        values,
        classes: None,
    }
}

fn indices(d: &[Detection]) -> Vec<usize> {
    d.iter().map(|d| d.index).collect()
}

// -- top_k --------------------------------------------------------------------------------------

#[test]
fn top_k_orders_by_score_then_lower_index() {
    let s = [0.1, 0.7, 0.3, 0.7, 0.0];
    assert_eq!(
        top_k(&s, 3, false).unwrap(),
        vec![(1, 0.7), (3, 0.7), (2, 0.3)]
    );
    // -0.0 and 0.0 are equal scores: the lower index first
    let zeros: Vec<usize> = top_k(&[0.0, -0.0, 0.0], 3, false)
        .unwrap()
        .iter()
        .map(|t| t.0)
        .collect();
    assert_eq!(zeros, vec![0, 1, 2]);
    // k past the end: all of them; k = 0: none; no scores: none
    assert_eq!(top_k(&s, 10, false).unwrap().len(), 5);
    assert_eq!(top_k(&s, 0, false).unwrap(), vec![]);
    assert_eq!(top_k(&[], 3, false).unwrap(), vec![]);
    // the selection agrees with a full sort for every k
    let many: Vec<f32> = (0..200).map(|i| ((i * 37) % 23) as f32).collect();
    let mut all: Vec<(usize, f32)> = many.iter().copied().enumerate().collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for k in [1, 2, 7, 23, 199, 200] {
        assert_eq!(
            top_k(&many, k, false).unwrap(),
            all[..k].to_vec(),
            "k = {k}"
        );
    }
}

#[test]
fn top_k_softmax_is_stable_and_sums_to_one() {
    // exp(1000) overflows f32 and f64: the max is subtracted first
    let got = top_k(&[1000.0, 1000.0, 999.0], 3, true).unwrap();
    let e = (-1.0f64).exp();
    let (p0, p2) = ((1.0 / (2.0 + e)) as f32, (e / (2.0 + e)) as f32);
    assert_eq!(got, vec![(0, p0), (1, p0), (2, p2)]);
    let sum: f32 = top_k(&[0.5, -3.0, 2.0, 7.5], 4, true)
        .unwrap()
        .iter()
        .map(|p| p.1)
        .sum();
    assert!((sum - 1.0).abs() < 1e-6);
}

#[test]
fn top_k_refuses_nan_and_softmax_of_infinity() {
    let e = top_k(&[0.0, f32::NAN], 1, false).unwrap_err();
    assert_eq!(e.to_string(), "scores: value 1 is NaN");
    let e = top_k(&[f32::INFINITY, 0.0], 1, true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "scores: value 0 is inf: softmax needs finite scores"
    );
    // without softmax infinities are ordinary scores
    assert_eq!(
        top_k(&[0.0, f32::INFINITY], 1, false).unwrap(),
        vec![(1, f32::INFINITY)]
    );
}

// -- IoU and box formats ------------------------------------------------------------------------

#[test]
fn iou_has_no_plus_one_and_zero_area_is_zero() {
    // two 2x2 boxes overlapping 1x2: 2 / (4 + 4 - 2)
    assert_eq!(iou([0.0, 0.0, 2.0, 2.0], [1.0, 0.0, 3.0, 2.0]), 2.0 / 6.0);
    assert_eq!(iou([0.0, 0.0, 2.0, 2.0], [0.0, 0.0, 2.0, 2.0]), 1.0);
    // touching edges, disjoint boxes
    assert_eq!(iou([0.0, 0.0, 1.0, 1.0], [1.0, 0.0, 2.0, 1.0]), 0.0);
    assert_eq!(iou([0.0, 0.0, 1.0, 1.0], [5.0, 5.0, 6.0, 6.0]), 0.0);
    // zero area: with itself, inside another, and an inverted box
    let point = [1.0, 1.0, 1.0, 1.0];
    assert_eq!(iou(point, point), 0.0);
    assert_eq!(iou(point, [0.0, 0.0, 2.0, 2.0]), 0.0);
    assert_eq!(iou([2.0, 2.0, 0.0, 0.0], [0.0, 0.0, 2.0, 2.0]), 0.0);
}

#[test]
fn box_formats_convert_to_corners() {
    let b = [10.0, 20.0, 4.0, 6.0];
    assert_eq!(BoxFormat::Xyxy.to_xyxy(b), b);
    assert_eq!(BoxFormat::Xywh.to_xyxy(b), [10.0, 20.0, 14.0, 26.0]);
    assert_eq!(BoxFormat::Cxcywh.to_xyxy(b), [8.0, 17.0, 12.0, 23.0]);
}

// -- NMS ------------------------------------------------------------------------------------------

#[test]
fn nms_empty_and_all_below_threshold() {
    assert_eq!(
        nms(&[], BoxFormat::Xyxy, per_box(&[]), &opts(0.0, 0.5, None)).unwrap(),
        vec![]
    );
    let boxes = [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0];
    // strictly above: a score equal to the threshold is not a candidate
    let kept = nms(
        &boxes,
        BoxFormat::Xyxy,
        per_box(&[0.5, 0.2]),
        &opts(0.5, 0.5, None),
    )
    .unwrap();
    assert_eq!(kept, vec![]);
}

#[test]
fn nms_suppresses_above_the_threshold_only() {
    // boxes 0 and 1 overlap with IoU 2/6 = 1/3; box 2 is far away
    let boxes = [
        0.0, 0.0, 2.0, 2.0, 1.0, 0.0, 3.0, 2.0, 10.0, 10.0, 11.0, 11.0,
    ];
    let scores = [0.9, 0.8, 0.7];
    let at = |thr: f32| {
        indices(
            &nms(
                &boxes,
                BoxFormat::Xyxy,
                per_box(&scores),
                &opts(0.0, thr, None),
            )
            .unwrap(),
        )
    };
    assert_eq!(at(0.3), vec![0, 2]);
    // IoU equal to the threshold keeps the box (OpenCV: kept when overlap <= threshold)
    assert_eq!(
        at(iou([0.0, 0.0, 2.0, 2.0], [1.0, 0.0, 3.0, 2.0])),
        vec![0, 1, 2]
    );
    assert_eq!(at(0.5), vec![0, 1, 2]);
    // threshold 0: any overlap suppresses; 1: nothing does
    assert_eq!(at(0.0), vec![0, 2]);
    assert_eq!(at(1.0), vec![0, 1, 2]);
}

#[test]
fn nms_identical_boxes_and_ties() {
    let b = [0.0, 0.0, 4.0, 4.0];
    let boxes: Vec<f32> = b.iter().chain(&b).chain(&b).copied().collect();
    // equal scores: the lower index wins and suppresses the others
    let kept = nms(
        &boxes,
        BoxFormat::Xyxy,
        per_box(&[0.5, 0.5, 0.5]),
        &opts(0.0, 0.5, None),
    )
    .unwrap();
    assert_eq!(indices(&kept), vec![0]);
    // a higher score later wins
    let kept = nms(
        &boxes,
        BoxFormat::Xyxy,
        per_box(&[0.5, 0.5, 0.6]),
        &opts(0.0, 0.5, None),
    )
    .unwrap();
    assert_eq!(indices(&kept), vec![2]);
    assert_eq!(kept[0].bbox, b);
    assert_eq!(kept[0].score, 0.6);
}

#[test]
fn nms_stops_at_max_detections() {
    // ten disjoint boxes, scores rising with the index
    let boxes: Vec<f32> = (0..10)
        .flat_map(|i| [i as f32 * 2.0, 0.0, i as f32 * 2.0 + 1.0, 1.0])
        .collect();
    let scores: Vec<f32> = (0..10).map(|i| i as f32 / 10.0).collect();
    let kept = nms(
        &boxes,
        BoxFormat::Xyxy,
        per_box(&scores),
        &opts(-1.0, 0.5, Some(3)),
    )
    .unwrap();
    assert_eq!(indices(&kept), vec![9, 8, 7]);
    let kept = nms(
        &boxes,
        BoxFormat::Xyxy,
        per_box(&scores),
        &opts(-1.0, 0.5, Some(0)),
    )
    .unwrap();
    assert_eq!(kept, vec![]);
}

#[test]
fn nms_zero_area_boxes_never_suppress() {
    let boxes = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 3.0, 0.0];
    let kept = nms(
        &boxes,
        BoxFormat::Xyxy,
        per_box(&[0.9, 0.8, 0.7]),
        &opts(0.0, 0.0, None),
    )
    .unwrap();
    assert_eq!(indices(&kept), vec![0, 1, 2]);
}

#[test]
fn nms_class_aware_and_agnostic() {
    // two identical boxes of different classes, and a third of class 0 overlapping both
    let boxes = [0.0, 0.0, 2.0, 2.0, 0.0, 0.0, 2.0, 2.0, 0.0, 0.0, 2.0, 1.9];
    let classes = [0u32, 1, 0];
    let scores = Scores::PerBox {
        values: &[0.9, 0.8, 0.7],
        classes: Some(&classes),
    };
    let mut o = opts(0.0, 0.5, None);
    let kept = nms(&boxes, BoxFormat::Xyxy, scores, &o).unwrap();
    assert_eq!(indices(&kept), vec![0, 1]);
    assert_eq!(kept.iter().map(|d| d.class).collect::<Vec<_>>(), vec![0, 1]);
    o.class_agnostic = true;
    assert_eq!(
        indices(&nms(&boxes, BoxFormat::Xyxy, scores, &o).unwrap()),
        vec![0]
    );
}

#[test]
fn nms_per_class_scores_best_class_or_multi_label() {
    // [3, 2]: box 0 best class 1 (0.6), box 1 equal classes (0.5, 0.5: class 0), box 2 none
    let values = [0.4, 0.6, 0.5, 0.5, 0.1, 0.2];
    let scores = Scores::PerClass {
        values: &values,
        classes: 2,
    };
    // xywh: three disjoint boxes
    let boxes = [0.0, 0.0, 1.0, 1.0, 5.0, 5.0, 1.0, 1.0, 9.0, 9.0, 1.0, 1.0];
    let mut o = opts(0.3, 0.5, None);
    let kept = nms(&boxes, BoxFormat::Xywh, scores, &o).unwrap();
    let got: Vec<_> = kept.iter().map(|d| (d.index, d.class, d.score)).collect();
    assert_eq!(got, vec![(0, 1, 0.6), (1, 0, 0.5)]);
    assert_eq!(kept[1].bbox, [5.0, 5.0, 6.0, 6.0]);
    o.multi_label = true;
    let kept = nms(&boxes, BoxFormat::Xywh, scores, &o).unwrap();
    let got: Vec<_> = kept.iter().map(|d| (d.index, d.class, d.score)).collect();
    assert_eq!(
        got,
        vec![(0, 1, 0.6), (1, 0, 0.5), (1, 1, 0.5), (0, 0, 0.4)]
    );
    // class-agnostic multi-label: a box's second label is suppressed by its first
    o.class_agnostic = true;
    let kept = nms(&boxes, BoxFormat::Xywh, scores, &o).unwrap();
    assert_eq!(indices(&kept), vec![0, 1]);
}

#[test]
fn nms_refuses_bad_input_naming_the_argument() {
    let o = opts(0.0, 0.5, None);
    let err = |r: Result<Vec<Detection>>| r.unwrap_err().to_string();
    assert_eq!(
        err(nms(&[0.0; 6], BoxFormat::Xyxy, per_box(&[0.0]), &o)),
        "boxes: expected [N, 4] f32 values, got 6 (not a multiple of 4)"
    );
    assert_eq!(
        err(nms(&[0.0; 8], BoxFormat::Xyxy, per_box(&[0.0]), &o)),
        "scores: expected [2] = 2 f32 values, got 1"
    );
    let s = Scores::PerClass {
        values: &[0.0; 5],
        classes: 3,
    };
    assert_eq!(
        err(nms(&[0.0; 8], BoxFormat::Xyxy, s, &o)),
        "scores: expected [2, 3] = 6 f32 values, got 5"
    );
    assert_eq!(
        err(nms(
            &[0.0; 8],
            BoxFormat::Xyxy,
            per_box(&[0.0, f32::NAN]),
            &o
        )),
        "scores: value 1 is NaN"
    );
    let mut boxes = [0.0; 8];
    boxes[5] = f32::INFINITY;
    assert_eq!(
        err(nms(&boxes, BoxFormat::Xyxy, per_box(&[0.0, 0.0]), &o)),
        "boxes: box 1 has a non-finite coordinate (inf)"
    );
    let classes = [0u32];
    let s = Scores::PerBox {
        values: &[0.0, 0.0],
        classes: Some(&classes),
    };
    assert_eq!(
        err(nms(&[0.0; 8], BoxFormat::Xyxy, s, &o)),
        "classes: expected one class per box (2), got 1"
    );
    assert_eq!(
        err(nms(
            &[],
            BoxFormat::Xyxy,
            per_box(&[]),
            &opts(0.0, 1.5, None)
        )),
        "iou_threshold: must be in [0, 1], got 1.5"
    );
    assert_eq!(
        err(nms(
            &[],
            BoxFormat::Xyxy,
            per_box(&[]),
            &opts(f32::NAN, 0.5, None)
        )),
        "score_threshold: must be a finite number, got NaN"
    );
    assert_eq!(
        f32_values("boxes", &[0; 6]).unwrap_err().to_string(),
        "boxes: 6 bytes is not a whole number of f32 values (4 bytes each)"
    );
    assert_eq!(f32_values("x", &1.5f32.to_le_bytes()).unwrap(), vec![1.5]);
}

// -- YOLO -----------------------------------------------------------------------------------------

pub(super) fn yolo_spec(n: usize, c: usize) -> YoloSpec {
    YoloSpec {
        candidates: n,
        classes: c,
        nms: opts(0.25, 0.45, None),
    }
}

/// `[4 + C, N]` from per-box rows `(cx, cy, w, h, scores...)`.
fn v8_output(rows: &[Vec<f32>]) -> Vec<f32> {
    let n = rows.len();
    let width = rows[0].len();
    let mut out = vec![0.0; n * width];
    for (i, row) in rows.iter().enumerate() {
        for (r, &v) in row.iter().enumerate() {
            out[r * n + i] = v;
        }
    }
    out
}

#[test]
fn yolov8_decodes_best_class_and_suppresses() {
    let rows = vec![
        vec![50.0, 50.0, 20.0, 20.0, 0.1, 0.9],  // class 1, 0.9
        vec![51.0, 50.0, 20.0, 20.0, 0.8, 0.85], // class 1, overlaps box 0: suppressed
        vec![10.0, 10.0, 4.0, 4.0, 0.3, 0.2],    // class 0, 0.3
        vec![90.0, 90.0, 4.0, 4.0, 0.2, 0.25],   // 0.25: not above the threshold
    ];
    let out = v8_output(&rows);
    let kept = yolov8(&out, &yolo_spec(4, 2)).unwrap();
    let got: Vec<_> = kept
        .iter()
        .map(|d| (d.index, d.class, d.score, d.bbox))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 1, 0.9, [40.0, 40.0, 60.0, 60.0]),
            (2, 0, 0.3, [8.0, 8.0, 12.0, 12.0])
        ]
    );
    // multi-label: box 1's class 0 (0.8) is a candidate of its own, box 0 has no class 0
    let mut spec = yolo_spec(4, 2);
    spec.nms.multi_label = true;
    let kept = yolov8(&out, &spec).unwrap();
    let got: Vec<_> = kept.iter().map(|d| (d.index, d.class)).collect();
    assert_eq!(got, vec![(0, 1), (1, 0), (2, 0)]);
    // no candidates at all
    assert_eq!(yolov8(&[], &yolo_spec(0, 2)).unwrap(), vec![]);
}

#[test]
fn yolov5_multiplies_objectness() {
    // [N, 5 + C]
    let out = [
        50.0, 50.0, 20.0, 20.0, 0.5, 0.9, 0.2, // 0.45, class 0
        10.0, 10.0, 4.0, 4.0, 0.9, 0.1, 0.3, // 0.27 (f32), class 1
        90.0, 90.0, 4.0, 4.0, 0.2, 1.0, 1.0, // 0.2: below
    ];
    let kept = yolov5(&out, &yolo_spec(3, 2)).unwrap();
    let got: Vec<_> = kept.iter().map(|d| (d.index, d.class, d.score)).collect();
    assert_eq!(got, vec![(0, 0, 0.5f32 * 0.9), (1, 1, 0.9f32 * 0.3)]);
    assert_eq!(kept[0].bbox, [40.0, 40.0, 60.0, 60.0]);
    assert_eq!(
        yolov5(&out[..20], &yolo_spec(3, 2))
            .unwrap_err()
            .to_string(),
        "output: expected [3, 7] = 21 f32 values, got 20"
    );
    let mut bad = out;
    bad[11] = f32::NAN;
    assert_eq!(
        yolov5(&bad, &yolo_spec(3, 2)).unwrap_err().to_string(),
        "output: box 1's objectness or a class score is NaN"
    );
}

#[test]
fn yolov8_refuses_bad_output() {
    let out = v8_output(&[vec![0.0, 0.0, 1.0, 1.0, f32::NAN]]);
    assert_eq!(
        yolov8(&out, &yolo_spec(1, 1)).unwrap_err().to_string(),
        "output: box 0's score of class 0 is NaN"
    );
    assert_eq!(
        yolov8(&[0.0; 9], &yolo_spec(2, 1)).unwrap_err().to_string(),
        "output: expected [5, 2] = 10 f32 values, got 9"
    );
    let out = v8_output(&[vec![f32::NAN, 0.0, 1.0, 1.0, 0.9]]);
    assert!(
        yolov8(&out, &yolo_spec(1, 1))
            .unwrap_err()
            .to_string()
            .starts_with("output: box 0")
    );
}

// -- masks -------------------------------------------------------------------------------------

#[test]
fn argmax_mask_both_layouts_ties_and_wide_classes() {
    // 1 x 3 pixels, 3 classes: [0.1 0.9 0.2] [0.5 0.5 0.1] [0 0 1]
    let hwc = [0.1, 0.9, 0.2, 0.5, 0.5, 0.1, 0.0, 0.0, 1.0];
    assert_eq!(
        argmax_mask(&hwc, 1, 3, 3, MaskLayout::Hwc).unwrap(),
        vec![1, 0, 2]
    );
    let chw = [0.1, 0.5, 0.0, 0.9, 0.5, 0.0, 0.2, 0.1, 1.0];
    assert_eq!(
        argmax_mask(&chw, 1, 3, 3, MaskLayout::Chw).unwrap(),
        vec![1, 0, 2]
    );
    // 300 classes: u16, the best is the last class
    let mut wide = vec![0.0; 300];
    wide[299] = 1.0;
    assert_eq!(
        argmax_mask(&wide, 1, 1, 300, MaskLayout::Hwc).unwrap(),
        299u16.to_le_bytes().to_vec()
    );
    assert_eq!(argmax_mask(&[], 0, 5, 2, MaskLayout::Chw).unwrap(), vec![]);
    assert_eq!(
        argmax_mask(&hwc[..8], 1, 3, 3, MaskLayout::Hwc)
            .unwrap_err()
            .to_string(),
        "output: expected [1, 3, 3] = 9 f32 values, got 8"
    );
    let mut bad = chw;
    bad[4] = f32::NAN;
    assert_eq!(
        argmax_mask(&bad, 1, 3, 3, MaskLayout::Chw)
            .unwrap_err()
            .to_string(),
        "output: value 4 is NaN"
    );
}

// -- SSD ----------------------------------------------------------------------------------------

fn blazeface_front() -> AnchorOptions {
    AnchorOptions {
        input_width: 128,
        input_height: 128,
        min_scale: 0.1484375,
        max_scale: 0.75,
        anchor_offset_x: 0.5,
        anchor_offset_y: 0.5,
        strides: vec![8, 16, 16, 16],
        aspect_ratios: vec![1.0],
        reduce_boxes_in_lowest_layer: false,
        interpolated_scale_aspect_ratio: 1.0,
        fixed_anchor_size: true,
    }
}

#[test]
fn ssd_anchors_blazeface_and_sizes() {
    // BlazeFace's front model: 16x16 cells x 2 anchors, then 8x8 x 6 (three layers of stride 16)
    let a = ssd_anchors(&blazeface_front()).unwrap();
    assert_eq!(a.len(), 896);
    assert_eq!(a[0], [0.03125, 0.03125, 1.0, 1.0]);
    assert_eq!(a[1], [0.03125, 0.03125, 1.0, 1.0]);
    assert_eq!(a[2], [0.09375, 0.03125, 1.0, 1.0]);
    assert_eq!(a[512], [0.0625, 0.0625, 1.0, 1.0]);
    assert_eq!(a[895], [0.9375, 0.9375, 1.0, 1.0]);
    // one layer (scale (min + max) / 2 = 0.5), ratios 1 and 2, the interpolated anchor at
    // sqrt(0.5 * 1.0): 2x2 cells x 3 anchors
    let o = AnchorOptions {
        input_width: 16,
        input_height: 16,
        min_scale: 0.2,
        max_scale: 0.8,
        strides: vec![8],
        aspect_ratios: vec![1.0, 2.0],
        fixed_anchor_size: false,
        ..blazeface_front()
    };
    let a = ssd_anchors(&o).unwrap();
    assert_eq!(a.len(), 12);
    let r2 = 2f32.sqrt();
    assert_eq!(a[0], [0.25, 0.25, 0.5, 0.5]);
    assert_eq!(a[1], [0.25, 0.25, 0.5 * r2, 0.5 / r2]);
    assert_eq!(a[2], [0.25, 0.25, 0.5f32.sqrt(), 0.5f32.sqrt()]);
    assert_eq!(a[3][..2], [0.75, 0.25]);
    let bad = AnchorOptions {
        strides: vec![],
        ..blazeface_front()
    };
    assert!(
        ssd_anchors(&bad)
            .unwrap_err()
            .to_string()
            .starts_with("anchors: strides")
    );
}

fn ssd_spec() -> SsdSpec {
    SsdSpec {
        coords: 4,
        classes: 1,
        x_scale: 128.0,
        y_scale: 128.0,
        w_scale: 128.0,
        h_scale: 128.0,
        reverse_output_order: true,
        apply_exponential_on_box_size: false,
        sigmoid_score: true,
        score_clipping_thresh: Some(100.0),
        nms: opts(0.4, 0.3, None),
    }
}

#[test]
fn ssd_decodes_against_anchors() {
    let anchors = [
        [0.5, 0.5, 1.0, 1.0],
        [0.5, 0.5, 1.0, 1.0],
        [0.1, 0.1, 1.0, 1.0],
    ];
    // x, y, w, h in 1/128ths of the anchor
    let boxes = [
        12.8, 0.0, 64.0, 32.0, 12.8, 0.0, 64.0, 32.0, 0.0, 0.0, 12.8, 12.8,
    ];
    // logits: sigmoid(0) = 0.5, sigmoid(-1) is below 0.4, sigmoid(200) clipped to sigmoid(100)
    let scores = [0.0, 200.0, -1.0];
    let kept = ssd(&boxes, &scores, &anchors, &ssd_spec()).unwrap();
    let got: Vec<_> = kept.iter().map(|d| (d.index, d.score)).collect();
    // box 1 scores 1.0 and suppresses box 0 (the same box)
    assert_eq!(got, vec![(1, 1.0)]);
    assert_eq!(
        kept[0].bbox,
        [0.6 - 0.25, 0.5 - 0.125, 0.6 + 0.25, 0.5 + 0.125]
    );
    // y, x, h, w order and exponential sizes: exp(0) = 1 anchor
    let mut spec = ssd_spec();
    spec.reverse_output_order = false;
    spec.apply_exponential_on_box_size = true;
    spec.sigmoid_score = false;
    let kept = ssd(
        &[0.0, 12.8, 0.0, 0.0],
        &[0.9],
        &[[0.5, 0.5, 0.2, 0.4]],
        &spec,
    )
    .unwrap();
    // x offset in units of the anchor's width (0.2)
    let cx = 12.8f32 / 128.0 * 0.2 + 0.5;
    assert_eq!(kept[0].bbox, [cx - 0.1, 0.5 - 0.2, cx + 0.1, 0.5 + 0.2]);
    assert_eq!(
        ssd(&boxes[..11], &scores, &anchors, &ssd_spec())
            .unwrap_err()
            .to_string(),
        "boxes: expected [3, 4] (one row per anchor) = 12 f32 values, got 11"
    );
}

/// Found by the `postprocess` fuzz target (fuzz/corpus/postprocess/crash-ssd-negative-score-clipping):
/// a negative or NaN clipping threshold reached `f64::clamp(-t, t)`, which panics.
#[test]
fn ssd_refuses_a_clipping_threshold_that_is_not_positive() {
    let anchors = [[0.5, 0.5, 1.0, 1.0]];
    for t in [-6.8e9, -1.0, 0.0, -0.0, f32::NAN] {
        let mut spec = ssd_spec();
        spec.score_clipping_thresh = Some(t);
        let err = ssd(&[0.0; 4], &[3.0], &anchors, &spec).unwrap_err();
        assert_eq!(err.argument, "score_clipping_thresh", "{t}");
        assert_eq!(err.message, format!("must be a number > 0, got {t}"));
    }
    let mut spec = ssd_spec();
    spec.score_clipping_thresh = Some(f32::INFINITY);
    assert_eq!(ssd(&[0.0; 4], &[3.0], &anchors, &spec).unwrap().len(), 1);
}

// -- quantized outputs -----------------------------------------------------------------------------

/// Deterministic levels in `0..=max` (a 64-bit LCG's high bits), biased to the top so that some
/// scores pass the thresholds.
fn levels(seed: u64, len: usize, max: u32) -> Vec<u32> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let r = (x >> 33) as u32 % (max + 1);
            if (x >> 20).is_multiple_of(4) {
                max - r / 8
            } else {
                r
            }
        })
        .collect()
}

fn dequantized(levels: &[u32], scale: f32, offset: i32) -> Vec<f32> {
    levels
        .iter()
        .map(|&q| crate::model::quant::dequantize_scalar(q.into(), scale, offset))
        .collect()
}

/// The same levels as u8 and u16 `Values` (u8 only when they fit).
pub(super) struct Levels {
    u8: Vec<u8>,
    u16: Vec<u16>,
    scale: f32,
    offset: i32,
    pub(super) f32: Vec<f32>,
}

impl Levels {
    pub(super) fn new(seed: u64, len: usize, max: u32, scale: f32, offset: i32) -> Levels {
        let l = levels(seed, len, max);
        Levels {
            u8: l.iter().map(|&q| q.min(255) as u8).collect(),
            u16: l.iter().map(|&q| q as u16).collect(),
            scale,
            offset,
            f32: dequantized(&l, scale, offset),
        }
    }

    pub(super) fn quantized(&self) -> Values<'_> {
        if self.u16.iter().all(|&q| q <= 255) {
            Values::U8(Quantized {
                levels: &self.u8,
                scale: self.scale,
                offset: self.offset,
            })
        } else {
            Values::U16(Quantized {
                levels: &self.u16,
                scale: self.scale,
                offset: self.offset,
            })
        }
    }
}

/// Thresholds around the values: exactly at some, between, below all and above all.
pub(super) fn thresholds(values: &[f32]) -> Vec<f32> {
    let mut t = vec![-1e9, 1e9, 0.0, -0.5];
    t.extend(values.iter().step_by(7).take(6));
    t.extend(values.iter().step_by(11).take(4).map(|v| v + 1e-3));
    t
}

/// The quantizations the quantized-levels tests run: (seed, largest level, scale, offset).
pub(super) const QUANTIZATIONS: [(u64, u32, f32, i32); 7] = [
    (1, 255, 0.004, 0),
    (2, 255, 1.0 / 255.0, -128),
    (3, 65_535, 1.5e-5, 0),
    (4, 65_535, 0.02, -30_000),
    (5, 15, 0.25, -3),
    // levels + offset past 2^24: neighbouring levels dequantize to one f32 value
    (6, 255, 1e-9, 1 << 30),
    (7, 65_535, 3e-10, i32::MAX - 70_000),
];

/// `yolo_spec(n, c)` at score threshold `thr`, `multi_label`, IoU 0.3.
pub(super) fn spec_at(n: usize, c: usize, thr: f32, multi_label: bool) -> YoloSpec {
    let mut spec = yolo_spec(n, c);
    spec.nms.score_threshold = thr;
    spec.nms.multi_label = multi_label;
    spec.nms.iou_threshold = 0.3;
    spec
}

#[test]
fn quantized_heads_answer_as_their_dequantized_f32() {
    let (n, c) = (97, 5);
    for (seed, max, scale, offset) in QUANTIZATIONS {
        let boxes = Levels::new(seed + 100, 4 * n, max.min(255), 2.5, 0);
        let scores = Levels::new(seed, c * n, max, scale, offset);
        let head = Levels::new(seed + 200, (5 + c) * n, max, scale, offset);
        let joined: Vec<f32> = boxes.f32.iter().chain(&scores.f32).copied().collect();
        for thr in thresholds(&scores.f32) {
            for multi_label in [false, true] {
                let spec = spec_at(n, c, thr, multi_label);
                let want = yolov8(&joined, &spec).unwrap();
                let got = yolov8_split(boxes.quantized(), scores.quantized(), &spec).unwrap();
                assert_eq!(
                    got, want,
                    "yolov8 seed {seed} thr {thr} multi {multi_label}"
                );
                let want = yolov5(&head.f32, &spec).unwrap();
                let got = yolov5(head.quantized(), &spec).unwrap();
                assert_eq!(
                    got, want,
                    "yolov5 seed {seed} thr {thr} multi {multi_label}"
                );
                let mut ssd_spec = ssd_spec();
                ssd_spec.classes = c;
                ssd_spec.nms = spec.nms;
                ssd_spec.sigmoid_score = multi_label;
                let anchors = vec![[0.5, 0.5, 0.2, 0.3]; n];
                let want = ssd(&boxes.f32, &scores.f32, &anchors, &ssd_spec).unwrap();
                let got = ssd(boxes.quantized(), scores.quantized(), &anchors, &ssd_spec);
                assert_eq!(got.unwrap(), want, "ssd seed {seed} thr {thr}");
            }
        }
        for k in [0, 1, 5, 1000] {
            for softmax in [false, true] {
                let want = top_k(&scores.f32, k, softmax).unwrap();
                let got = top_k(scores.quantized(), k, softmax).unwrap();
                assert_eq!(got, want, "top_k seed {seed} k {k} softmax {softmax}");
            }
        }
    }
    // a joined quantized head (one scale for boxes and scores) answers as the split one
    let head = Levels::new(9, 9 * n, 255, 0.5, -20);
    let spec = yolo_spec(n, 5);
    let (boxes, scores) = head.quantized().split_at(4 * n);
    assert_eq!(
        yolov8(head.quantized(), &spec).unwrap(),
        yolov8_split(boxes, scores, &spec).unwrap()
    );
}

#[test]
fn first_above_is_the_lowest_level_scoring_above() {
    let levels: Vec<u8> = (0..=255).collect();
    for (scale, offset) in [(0.1, -100), (1e-3, 0), (7.0, -255), (0.5, 300)] {
        let q = Quantized {
            levels: &levels[..],
            scale,
            offset,
        };
        let sigmoid = |x: f32| (1.0 / (1.0 + (-(x as f64)).exp())) as f32;
        for thr in [-1e9, -3.0, 0.0, 0.5, 0.7, 2.5, 1e9] {
            for score in [&(|x| x) as &dyn Fn(f32) -> f32, &sigmoid] {
                let scan = levels.iter().copied().find(|&l| score(q.value(l)) > thr);
                assert_eq!(q.first_above(score, thr), scan, "{scale} {offset} {thr}");
            }
        }
    }
}

#[test]
fn quantized_values_refuse_a_scale_that_is_not_positive() {
    let levels = [200u8; 5];
    for scale in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let q = Values::U8(Quantized {
            levels: &levels,
            scale,
            offset: 0,
        });
        assert_eq!(
            yolov8(q, &yolo_spec(1, 1)).unwrap_err().to_string(),
            format!("output: the quantization scale must be finite and > 0, got {scale}")
        );
        assert_eq!(
            top_k(q, 1, false).unwrap_err().to_string(),
            format!("scores: the quantization scale must be finite and > 0, got {scale}")
        );
    }
    let q = Values::U16(Quantized {
        levels: &[1, 2, 3],
        scale: 1.0,
        offset: 0,
    });
    assert_eq!(
        yolov5(q, &yolo_spec(1, 1)).unwrap_err().to_string(),
        "output: expected [1, 6] = 6 u16 values, got 3"
    );
}

/// Found by the `postprocess` fuzz target (its hour in issue 31): a YOLOv5 row whose objectness
/// dequantizes to 0 and whose best class to infinity (a scale so large that levels overflow
/// f32) has a NaN best product; the row's other products (0 for a finite class) may still pass
/// a negative threshold, as they do on the f32 path.
#[test]
fn yolov5_quantized_row_with_a_nan_best_product_is_judged_whole() {
    // levels 0 and 255 at offset -1 and scale 1e37: values 0 (level 1), -1e37 (0), inf (255)
    let levels = [10u8, 10, 2, 2, 1, 2, 255];
    let q = Quantized {
        levels: &levels[..],
        scale: 1e37,
        offset: -1,
    };
    let f32s: Vec<f32> = levels.iter().map(|&l| q.value(l)).collect();
    assert!(f32s[6].is_infinite() && f32s[4] == 0.0);
    let mut spec = yolo_spec(1, 2);
    spec.nms.score_threshold = -0.5;
    let want = yolov5(&f32s, &spec);
    assert_eq!(
        format!("{:?}", yolov5(Values::U8(q), &spec)),
        format!("{want:?}")
    );
    assert_eq!(want.unwrap().len(), 1);
}
