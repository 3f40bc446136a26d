//! The pass on frames an outside reference wrote (ignored: run by hand). The pass's own time
//! is `examples/count_preprocess.rs`'s to measure.

use super::*;

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
