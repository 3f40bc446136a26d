//! The pass against a naive reference: every output element computed on its own, straight
//! from the definition in the module docs (quantized with `quantize_scalar`).

use super::*;
use crate::model::quant::{f32_to_f16_bits, quantize_scalar};

/// A deterministic frame: every byte value occurs.
fn frame(w: usize, h: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (w * 131 + h) as u64;
    (0..w * h * 3)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

pub(super) fn spec(sw: usize, sh: usize, dw: usize, dh: usize, output: Output) -> Spec {
    Spec {
        src_width: sw,
        src_height: sh,
        dst_width: dw,
        dst_height: dh,
        resize: Resize::Nearest,
        layout: Layout::Nhwc,
        swap_rb: false,
        divisor: 255.0,
        mean: [0.485, 0.456, 0.406],
        std: [0.229, 0.224, 0.225],
        output,
        frame: FrameFormat::default(),
        crop: None,
        content: None,
        pad: [0; 3],
    }
}

fn u8_out(scale: f32, zero_point: i32) -> Output {
    Output::Quantized {
        ty: QuantType::U8,
        scale,
        offset: -zero_point,
        range: (0, 255),
    }
}

/// OpenCV's INTER_LINEAR tap for u8 (`resize.cpp`'s `resizeGeneric` set-up, written out
/// here on its own): the two source indices and the 11-bit weights. Columns (`column`) clamp
/// the position and zero the fraction at the borders; rows clamp the indices only.
fn opencv_tap(d: usize, src: usize, dst: usize, column: bool) -> (usize, usize, [i32; 2]) {
    let inv_scale = dst as f64 / src as f64;
    let mut f = ((d as f64 + 0.5) * (1.0 / inv_scale) - 0.5) as f32;
    let mut s = f.floor() as i64;
    f -= s as f32;
    let last = src as i64 - 1;
    if column && s < 0 {
        (s, f) = (0, 0.0);
    }
    if column && s >= last {
        (s, f) = (last, 0.0);
    }
    let w = |x: f32| (x * 2048.0).round_ties_even() as i32;
    let (i0, i1) = (s.clamp(0, last) as usize, (s + 1).clamp(0, last) as usize);
    (i0, i1, [w(1.0 - f), w(f)])
}

/// The definition, one element at a time.
fn reference(s: &Spec, src: &[u8]) -> Vec<u8> {
    let pixel = |x: usize, y: usize, c: usize| src[(y * s.src_width + x) * 3 + c];
    let mut out = Vec::new();
    let mut push = |x: f32| match s.output {
        Output::Quantized {
            ty,
            scale,
            offset,
            range,
        } => {
            let q = quantize_scalar(x, scale, offset, range);
            out.extend_from_slice(&q.to_le_bytes()[..ty.size()]);
        }
        Output::F32 => out.extend_from_slice(&x.to_le_bytes()),
        Output::F16 => out.extend_from_slice(&f32_to_f16_bits(x).to_le_bytes()),
    };
    let value = |dx: usize, dy: usize, c: usize| {
        let sc = if s.swap_rb { 2 - c } else { c };
        let v = match s.resize {
            Resize::Nearest => {
                let nx = ((dx as f64 + 0.5) * s.src_width as f64 / s.dst_width as f64) as usize;
                let ny = ((dy as f64 + 0.5) * s.src_height as f64 / s.dst_height as f64) as usize;
                pixel(nx.min(s.src_width - 1), ny.min(s.src_height - 1), sc) as f32
            }
            Resize::Bilinear => {
                let (x0, x1, a) = opencv_tap(dx, s.src_width, s.dst_width, true);
                let (y0, y1, b) = opencv_tap(dy, s.src_height, s.dst_height, false);
                let h = |y: usize| {
                    (pixel(x0, y, sc) as i32 * a[0] + pixel(x1, y, sc) as i32 * a[1]) >> 4
                };
                let v = ((h(y0) * b[0]) >> 16) + ((h(y1) * b[1]) >> 16);
                ((v + 2) >> 2).clamp(0, 255) as f32
            }
        };
        (v / s.divisor - s.mean[c]) / s.std[c]
    };
    match s.layout {
        Layout::Nhwc => {
            for dy in 0..s.dst_height {
                for dx in 0..s.dst_width {
                    for c in 0..3 {
                        push(value(dx, dy, c));
                    }
                }
            }
        }
        Layout::Nchw => {
            for c in 0..3 {
                for dy in 0..s.dst_height {
                    for dx in 0..s.dst_width {
                        push(value(dx, dy, c));
                    }
                }
            }
        }
    }
    out
}

fn outputs() -> Vec<Output> {
    vec![
        u8_out(0.018_658_003, 114),
        Output::Quantized {
            ty: QuantType::I8,
            scale: 0.02,
            offset: 3,
            range: (-128, 127),
        },
        Output::Quantized {
            ty: QuantType::U16,
            scale: 0.000_1,
            offset: -32768,
            range: (0, 65535),
        },
        Output::Quantized {
            ty: QuantType::I16,
            scale: 0.000_07,
            offset: 0,
            range: (-32768, 32767),
        },
        // a 4-bit range inside a u8 container saturates at 15
        Output::Quantized {
            ty: QuantType::U8,
            scale: 0.25,
            offset: -8,
            range: (0, 15),
        },
        Output::F32,
        Output::F16,
    ]
}

#[test]
fn every_combination_matches_the_definition_bit_for_bit() {
    // downscale, upscale, odd ratios, and one axis each way
    let sizes = [
        (37, 23, 16, 12),
        (8, 6, 19, 13),
        (64, 36, 22, 22),
        (5, 40, 30, 7),
    ];
    for (sw, sh, dw, dh) in sizes {
        let src = frame(sw, sh);
        let imagenet = spec(sw, sh, dw, dh, outputs()[0]);
        // u8 with scale 1/255 and no mean: tables that map values to themselves (the pass
        // skips their lookup), on every channel or on two
        let identity = u8_out(1.0 / 255.0, 0);
        let norms = |output| {
            let mut norms = vec![(imagenet.mean, imagenet.std)];
            if output == identity {
                norms.extend([([0.0; 3], [1.0; 3]), ([0.0, 0.1, 0.0], [1.0; 3])]);
            }
            norms
        };
        for output in outputs().into_iter().chain([identity]) {
            for (mean, std) in norms(output) {
                for resize in [Resize::Nearest, Resize::Bilinear] {
                    for layout in [Layout::Nhwc, Layout::Nchw] {
                        for swap_rb in [false, true] {
                            for divisor in [255.0, 1.0] {
                                let s = Spec {
                                    resize,
                                    layout,
                                    swap_rb,
                                    divisor,
                                    mean,
                                    std,
                                    ..spec(sw, sh, dw, dh, output)
                                };
                                let got = Plan::new(s).unwrap().run_to_vec(&src).unwrap();
                                assert_eq!(got, reference(&s, &src), "{s:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_same_size_bilinear_is_the_identity_resize() {
    let src = frame(13, 9);
    for output in outputs() {
        let s = spec(13, 9, 13, 9, output);
        let nearest = Plan::new(s).unwrap().run_to_vec(&src).unwrap();
        let bilinear = Plan::new(Spec {
            resize: Resize::Bilinear,
            ..s
        })
        .unwrap()
        .run_to_vec(&src)
        .unwrap();
        assert_eq!(nearest, bilinear, "{output:?}");
    }
}

#[test]
fn known_values() {
    // 2x2 -> 1x1 bilinear is the mean of the four pixels; byte scale, identity normalize
    let src = [0, 10, 20, 2, 12, 22, 4, 14, 24, 6, 16, 26];
    let s = Spec {
        resize: Resize::Bilinear,
        divisor: 1.0,
        mean: [0.0; 3],
        std: [1.0; 3],
        ..spec(2, 2, 1, 1, Output::F32)
    };
    let out = Plan::new(s).unwrap().run_to_vec(&src).unwrap();
    let vals: Vec<f32> = out
        .as_chunks::<4>()
        .0
        .iter()
        .map(|b| f32::from_le_bytes(*b))
        .collect();
    assert_eq!(vals, [3.0, 13.0, 23.0]);

    // NCHW with the channels swapped: planes B, G, R
    let s = Spec {
        layout: Layout::Nchw,
        swap_rb: true,
        ..spec(2, 2, 2, 2, u8_out(1.0, 0))
    };
    let s = Spec {
        divisor: 1.0,
        mean: [0.0; 3],
        std: [1.0; 3],
        ..s
    };
    let out = Plan::new(s).unwrap().run_to_vec(&src).unwrap();
    assert_eq!(out, [20, 22, 24, 26, 10, 12, 14, 16, 0, 2, 4, 6]);
}

#[test]
fn ties_round_half_to_even_and_saturate() {
    // x = p - 100, scale 2: odd x are ties; zero point 10 makes x < -20 saturate at 0
    let src: Vec<u8> = (0..=255u8).flat_map(|p| [p, p, p]).collect();
    let s = Spec {
        divisor: 1.0,
        mean: [100.0; 3],
        std: [1.0; 3],
        ..spec(256, 1, 256, 1, u8_out(2.0, 10))
    };
    let out = Plan::new(s).unwrap().run_to_vec(&src).unwrap();
    for p in 0..=255i64 {
        let x = (p - 100) as f64 / 2.0;
        let r = x.round_ties_even() as i64;
        let q = (r + 10).clamp(0, 255) as u8;
        assert_eq!(out[p as usize * 3], q, "p = {p}");
    }
    assert_eq!(out[101 * 3], 10); // 0.5 -> 0
    assert_eq!(out[103 * 3], 12); // 1.5 -> 2
    assert_eq!(out[0], 0); // -50 + 10 saturates
}

#[test]
fn refuses_bad_arguments_without_panicking() {
    let ok = spec(4, 4, 2, 2, u8_out(0.02, 128));
    let plan = Plan::new(ok).unwrap();
    assert_eq!(plan.src_len(), 48);
    assert_eq!(plan.dst_len(), 12);
    assert_eq!(
        plan.run(&[0; 47], &mut [0; 12]),
        Err(PreprocessError::FrameSize {
            format: "rgb",
            width: 4,
            height: 4,
            stride: 12,
            chroma: String::new(),
            expected: 48,
            got: 47
        })
    );
    assert_eq!(
        plan.run(&[0; 48], &mut [0; 13]),
        Err(PreprocessError::OutputSize {
            expected: 12,
            got: 13
        })
    );
    let bad = |s: Spec| Plan::new(s).unwrap_err().to_string();
    assert!(bad(Spec { src_width: 0, ..ok }).contains("frame width"));
    assert!(
        bad(Spec {
            dst_height: 0,
            ..ok
        })
        .contains("input's height")
    );
    assert!(
        bad(Spec {
            std: [1.0, 0.0, 1.0],
            ..ok
        })
        .contains("std[1]")
    );
    assert!(
        bad(Spec {
            mean: [f32::NAN, 0.0, 0.0],
            ..ok
        })
        .contains("mean[0]")
    );
    assert!(
        bad(Spec {
            divisor: -1.0,
            ..ok
        })
        .contains("divisor")
    );
    assert!(
        bad(Spec {
            output: u8_out(0.0, 0),
            ..ok
        })
        .contains("scale")
    );
    assert!(
        bad(Spec {
            src_width: usize::MAX,
            ..ok
        })
        .contains("overflows")
    );
    // bilinear's row offsets are i32
    assert!(
        bad(Spec {
            src_width: 1 << 29,
            resize: Resize::Bilinear,
            ..ok
        })
        .contains("overflows")
    );
}
