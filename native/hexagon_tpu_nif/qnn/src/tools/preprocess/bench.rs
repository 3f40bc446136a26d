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
        let mut times: Vec<f64> = (0..101)
            .map(|_| {
                let t = Instant::now();
                plan.run(&src, &mut dst).unwrap();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!("{name}: median {:.3} ms (min {:.3})", times[50], times[0]);
    }
}
