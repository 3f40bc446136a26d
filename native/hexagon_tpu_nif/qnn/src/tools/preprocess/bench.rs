//! `Plan::run`'s time on the bilinear cases (ignored: a measurement, not a check).
//! `cargo test -p qnn --release bench_bilinear -- --ignored --nocapture`

use std::time::Instant;

use super::*;

fn case(sw: usize, sh: usize, dw: usize, dh: usize, letterbox: bool, layout: Layout) -> Spec {
    let (ty, scale, offset) = (QuantType::U8, 0.018_658, -114);
    let content = letterbox.then(|| {
        // the width binds for these frames: round(h * W / w) high, centred
        let ch = ((sh * dw) as f64 / sw as f64).round() as usize;
        Rect {
            x: 0,
            y: (dh - ch) / 2,
            width: dw,
            height: ch,
        }
    });
    Spec {
        src_width: sw,
        src_height: sh,
        dst_width: dw,
        dst_height: dh,
        resize: Resize::Bilinear,
        layout,
        swap_rb: false,
        divisor: 255.0,
        mean: if letterbox {
            [0.0; 3]
        } else {
            [0.485, 0.456, 0.406]
        },
        std: if letterbox {
            [1.0; 3]
        } else {
            [0.229, 0.224, 0.225]
        },
        output: Output::Quantized {
            ty,
            scale: if letterbox { 1.0 / 255.0 } else { scale },
            offset: if letterbox { 0 } else { offset },
            range: (0, 255),
        },
        frame: FrameFormat {
            format: PixelFormat::Nv12,
            ..FrameFormat::default()
        },
        crop: None,
        content,
        pad: [114; 3],
    }
}

#[test]
#[ignore]
fn bench_bilinear() {
    let cases = [
        (
            "nv12 1280x720 -> 640x640 letterbox nchw",
            case(1280, 720, 640, 640, true, Layout::Nchw),
        ),
        (
            "nv12 1920x1080 -> 640x640 letterbox nchw",
            case(1920, 1080, 640, 640, true, Layout::Nchw),
        ),
        (
            "nv12 1280x720 -> 224x224 nhwc imagenet",
            case(1280, 720, 224, 224, false, Layout::Nhwc),
        ),
    ];
    for (name, s) in cases {
        let plan = Plan::new(s).unwrap();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let src: Vec<u8> = (0..plan.src_len())
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as u8
            })
            .collect();
        let mut dst = vec![0; plan.dst_len()];
        plan.run(&src, &mut dst).unwrap();
        for (what, kernels) in [
            ("best", linear::Kernels::best()),
            ("portable", linear::Kernels::Scalar),
        ] {
            let mut times: Vec<f64> = (0..101)
                .map(|_| {
                    let t = Instant::now();
                    plan.pad(&mut dst); // as `run` does (every case here has a letterbox or none)
                    plan.run_with(&src, &mut dst, kernels);
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            times.sort_by(f64::total_cmp);
            println!(
                "{name} ({what}, {kernels:?}): median {:.3} ms (min {:.3})",
                times[50], times[0]
            );
        }
    }
}

/// The pass on frames written by an outside reference (the OpenCV cross-check of issue 31,
/// run by hand): `$PREPROCESS_CASES/cases.txt` has one case a line, `format width height
/// stride crop_x crop_y crop_w crop_h dst_w dst_h [content_x content_y content_w content_h
/// pad]`, `frame<i>` its bytes (chroma right after the Y plane); writes `out<i>`, the u8 RGB
/// pixels of the resized crop (NHWC, identity normalization; the content rectangle, if given,
/// padded around with `pad`).
#[test]
#[ignore]
fn run_cases_from_dir() {
    let Ok(dir) = std::env::var("PREPROCESS_CASES") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    let cases = std::fs::read_to_string(dir.join("cases.txt")).unwrap();
    for (i, line) in cases.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let n: Vec<usize> = f[1..].iter().map(|v| v.parse().unwrap()).collect();
        let format = match f[0] {
            "rgb" => PixelFormat::Rgb,
            "nv12" => PixelFormat::Nv12,
            "nv21" => PixelFormat::Nv21,
            "i420" => PixelFormat::I420,
            _ => PixelFormat::Yuyv,
        };
        let s = Spec {
            src_width: n[0],
            src_height: n[1],
            dst_width: n[7],
            dst_height: n[8],
            resize: Resize::Bilinear,
            layout: Layout::Nhwc,
            swap_rb: false,
            divisor: 1.0,
            mean: [0.0; 3],
            std: [1.0; 3],
            output: Output::Quantized {
                ty: QuantType::U8,
                scale: 1.0,
                offset: 0,
                range: (0, 255),
            },
            frame: FrameFormat {
                format,
                stride: Some(n[2]),
                ..FrameFormat::default()
            },
            crop: Some(Rect {
                x: n[3],
                y: n[4],
                width: n[5],
                height: n[6],
            }),
            content: (n.len() >= 14).then(|| Rect {
                x: n[9],
                y: n[10],
                width: n[11],
                height: n[12],
            }),
            pad: [n.get(13).map_or(0, |&p| p as u8); 3],
        };
        let frame = std::fs::read(dir.join(format!("frame{i}"))).unwrap();
        let out = Plan::new(s).unwrap().run_to_vec(&frame).unwrap();
        std::fs::write(dir.join(format!("out{i}")), out).unwrap();
    }
}
