//! A YOLOv8 head decoded and suppressed K times, for counting instructions:
//! `bench/aarch64/count.sh post` runs this program for aarch64 under `qemu-aarch64` with the
//! instruction-counting plugin, once with K1 and once with K2 decodes, and divides the
//! difference by `K2 - K1`: instructions per frame, start-up left out.
//!
//! `count_postprocess CASE PATH K`, with
//!
//! * CASE: `yolov8n640` (`[4, 8400]` boxes and `[80, 8400]` class scores: YOLOv8n at 640) or
//!   `yolov8n320` (`[4, 2100]` and `[18, 2100]`: nudenet's YOLOv8n at 320), each as the compile
//!   task leaves it, split and u8 (boxes at scale 2.5, scores at 1/255); the scores of a camera
//!   frame: low everywhere (levels below 40, under 0.16), and 12 objects whose anchor and
//!   neighbours score high in one class;
//! * PATH: `u8` (the head read as it is, [`yolov8_split`] on quantized values) or `f32` (the
//!   whole head dequantized first, as `predict/3` does by default, then [`yolov8_split`] on
//!   f32);
//! * K: how many decodes after one warm-up decode.
//!
//! It prints the detections kept, which the two paths agree on.

use std::hint::black_box;
use std::process::ExitCode;

use qnn::postprocess::{NmsOptions, Quantized, Values, YoloSpec, yolov8_split};
use qnn::quant::{QuantType, dequantize_per_tensor};

const BOX_SCALE: f32 = 2.5;
const SCORE_SCALE: f32 = 1.0 / 255.0;

/// The u8 boxes `[4, n]` and scores `[c, n]` of a frame with 12 objects.
fn head(n: usize, c: usize, side: f32) -> (Vec<u8>, Vec<u8>) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 32) as u32
    };
    let mut boxes = vec![0u8; 4 * n];
    for i in 0..n {
        let (cx, cy) = (next() % 256, next() % 256);
        let (w, h) = (4 + next() % 40, 4 + next() % 40);
        for (r, v) in [cx, cy, w, h].into_iter().enumerate() {
            boxes[r * n + i] = (v as f32 * side / 640.0) as u8;
        }
    }
    let mut scores: Vec<u8> = (0..c * n).map(|_| (next() % 40) as u8).collect();
    // each object seen by its anchor and the six around it, all with its box
    for object in 0..12 {
        let (anchor, class) = (next() as usize % n, object % c);
        for i in anchor.saturating_sub(3)..(anchor + 4).min(n) {
            scores[class * n + i] = 160 + (next() % 90) as u8;
            for r in 0..4 {
                boxes[r * n + i] = boxes[r * n + anchor];
            }
        }
    }
    (boxes, scores)
}

/// u8 levels at `scale`, zero point 0.
fn quantized(levels: &[u8], scale: f32) -> Values<'_> {
    Values::U8(Quantized {
        levels,
        scale,
        offset: 0,
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: count_postprocess yolov8n640|yolov8n320 u8|f32 K";
    let (Some((n, c, side)), Some(path), Some(k)) = (
        args.first().and_then(|c| match c.as_str() {
            "yolov8n640" => Some((8400, 80, 640.0)),
            "yolov8n320" => Some((2100, 18, 320.0)),
            _ => None,
        }),
        args.get(1).filter(|p| ["u8", "f32"].contains(&p.as_str())),
        args.get(2).and_then(|k| k.parse::<usize>().ok()),
    ) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let (boxes, scores) = head(n, c, side);
    let spec = YoloSpec {
        candidates: n,
        classes: c,
        nms: NmsOptions {
            score_threshold: 0.25,
            iou_threshold: 0.45,
            max_detections: Some(300),
            class_agnostic: false,
            multi_label: false,
        },
    };
    let mut box_f32 = vec![0u8; 4 * boxes.len()];
    let mut score_f32 = vec![0u8; 4 * scores.len()];
    let mut decode = || -> Result<usize, String> {
        let kept = if path == "u8" {
            yolov8_split(
                quantized(black_box(&boxes), BOX_SCALE),
                quantized(black_box(&scores), SCORE_SCALE),
                &spec,
            )
        } else {
            let deq = |src: &[u8], dst: &mut [u8], scale| {
                dequantize_per_tensor(src, dst, QuantType::U8, scale, 0).map_err(|e| e.to_string())
            };
            deq(black_box(&boxes), &mut box_f32, BOX_SCALE)?;
            deq(black_box(&scores), &mut score_f32, SCORE_SCALE)?;
            let values = |bytes: &[u8]| -> Vec<f32> {
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            };
            let (b, s) = (values(&box_f32), values(&score_f32));
            yolov8_split(&b, &s, &spec)
        };
        kept.map(|k| k.len()).map_err(|e| e.to_string())
    };
    let mut kept = 0;
    for _ in 0..=k {
        match decode() {
            Ok(n) => kept = n,
            Err(e) => {
                eprintln!("count_postprocess: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("kept {kept}");
    ExitCode::SUCCESS
}
