//! YOLOv5's head in the two parts the compile task splits it into: the same detections as the
//! head put back together, f32 or quantized, and errors naming the part.

use super::tests::{Levels, QUANTIZATIONS, spec_at, thresholds, yolo_spec};
use super::*;

/// The joined head `[N, 5 + C]` of boxes `[N, 4]` and scores `[N, 1 + C]`.
fn v5_joined(boxes: &[f32], scores: &[f32], n: usize) -> Vec<f32> {
    let s = scores.len() / n.max(1);
    (0..n)
        .flat_map(|i| {
            let b = &boxes[i * 4..i * 4 + 4];
            b.iter().chain(&scores[i * s..(i + 1) * s]).copied()
        })
        .collect()
}

#[test]
fn yolov5_split_answers_as_the_joined_head() {
    // the rows of yolov5_multiplies_objectness, split
    let boxes = [
        50.0, 50.0, 20.0, 20.0, //
        10.0, 10.0, 4.0, 4.0, //
        90.0, 90.0, 4.0, 4.0,
    ];
    let scores = [
        0.5, 0.9, 0.2, // 0.45, class 0
        0.9, 0.1, 0.3, // 0.27 (f32), class 1
        0.2, 1.0, 1.0, // 0.2: below
    ];
    let spec = yolo_spec(3, 2);
    let joined = v5_joined(&boxes, &scores, 3);
    let kept = yolov5_split(&boxes, &scores, &spec).unwrap();
    assert_eq!(kept, yolov5(&joined, &spec).unwrap());
    let got: Vec<_> = kept.iter().map(|d| (d.index, d.class, d.score)).collect();
    assert_eq!(got, vec![(0, 0, 0.5f32 * 0.9), (1, 1, 0.9f32 * 0.3)]);
    assert_eq!(kept[0].bbox, [40.0, 40.0, 60.0, 60.0]);
    let mut multi = spec;
    multi.nms.multi_label = true;
    multi.nms.score_threshold = 0.1;
    assert_eq!(
        yolov5_split(&boxes, &scores, &multi).unwrap(),
        yolov5(&joined, &multi).unwrap()
    );
    assert_eq!(yolov5_split(&[], &[], &yolo_spec(0, 2)).unwrap(), vec![]);
}

#[test]
fn yolov5_split_random_heads_answer_as_joined() {
    let (n, c) = (211, 4);
    for seed in 0..6 {
        let boxes = Levels::new(seed + 50, 4 * n, 255, 3.5, 0);
        let scores = Levels::new(seed, (1 + c) * n, 255, 1.0 / 255.0, 0);
        let joined = v5_joined(&boxes.f32, &scores.f32, n);
        for thr in [0.05, 0.25, 0.5] {
            for multi_label in [false, true] {
                let mut spec = yolo_spec(n, c);
                spec.nms.score_threshold = thr;
                spec.nms.multi_label = multi_label;
                let want = yolov5(&joined, &spec).unwrap();
                assert!(thr > 0.4 || !want.is_empty(), "seed {seed}: nothing kept");
                let got = yolov5_split(&boxes.f32, &scores.f32, &spec).unwrap();
                assert_eq!(got, want, "seed {seed} thr {thr} multi {multi_label}");
            }
        }
    }
}

#[test]
fn yolov5_quantized_parts_answer_as_their_dequantized_f32() {
    let (n, c) = (97, 5);
    for (seed, max, scale, offset) in QUANTIZATIONS {
        let boxes = Levels::new(seed + 100, 4 * n, max.min(255), 2.5, 0);
        let scores = Levels::new(seed, (1 + c) * n, max, scale, offset);
        let joined = v5_joined(&boxes.f32, &scores.f32, n);
        for thr in thresholds(&scores.f32) {
            for multi_label in [false, true] {
                let spec = spec_at(n, c, thr, multi_label);
                let want = yolov5(&joined, &spec).unwrap();
                let what = format!("seed {seed} thr {thr} multi {multi_label}");
                let got = yolov5_split(boxes.quantized(), scores.quantized(), &spec).unwrap();
                assert_eq!(got, want, "{what}");
                // a part in the model's own type beside one already dequantized
                let got = yolov5_split(&boxes.f32, scores.quantized(), &spec).unwrap();
                assert_eq!(got, want, "{what}: f32 boxes");
                let got = yolov5_split(boxes.quantized(), &scores.f32, &spec).unwrap();
                assert_eq!(got, want, "{what}: f32 scores");
            }
        }
    }
}

#[test]
fn yolov5_split_refuses_mismatched_parts_naming_them() {
    let spec = yolo_spec(3, 2);
    let (boxes, scores) = ([1.0f32; 12], [0.5f32; 9]);
    let err =
        |b: &[f32], s: &[f32], spec: &YoloSpec| yolov5_split(b, s, spec).unwrap_err().to_string();
    assert_eq!(
        err(&boxes[..11], &scores, &spec),
        "boxes: expected [3, 4] = 12 f32 values, got 11"
    );
    assert_eq!(
        err(&boxes, &scores[..8], &spec),
        "scores: expected [3, 3] = 9 f32 values, got 8"
    );
    // the candidates of another head: N differs
    assert_eq!(
        err(&boxes, &[0.5; 12], &spec),
        "scores: expected [3, 3] = 9 f32 values, got 12"
    );
    let mut nan = scores;
    nan[4] = f32::NAN;
    assert_eq!(
        err(&boxes, &nan, &spec),
        "scores: box 1's objectness or a class score is NaN"
    );
    // a candidate's box (0.5 * 0.5 is above 0.1)
    let mut inf = boxes;
    inf[5] = f32::INFINITY;
    let mut low = spec;
    low.nms.score_threshold = 0.1;
    assert_eq!(
        err(&inf, &scores, &low),
        "boxes: box 1 has a non-finite coordinate ([1.0, inf, 1.0, 1.0])"
    );
    let levels = [200u8; 9];
    let q = |scale| {
        Values::U8(Quantized {
            levels: &levels,
            scale,
            offset: 0,
        })
    };
    assert_eq!(
        yolov5_split(&boxes, q(0.0), &spec).unwrap_err().to_string(),
        "scores: the quantization scale must be finite and > 0, got 0"
    );
    let box_levels = [1u8; 12];
    let bad_boxes = Values::U8(Quantized {
        levels: &box_levels,
        scale: -1.0,
        offset: 0,
    });
    assert_eq!(
        yolov5_split(bad_boxes, &scores, &spec)
            .unwrap_err()
            .to_string(),
        "boxes: the quantization scale must be finite and > 0, got -1"
    );
}
