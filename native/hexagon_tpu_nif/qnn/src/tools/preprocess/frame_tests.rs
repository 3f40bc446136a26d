//! YUV frames, strides, crops and letterbox against the definition: each YUV pixel converted
//! on its own with coefficients derived here from the standards (BT.601 limited: OpenCV's
//! literals), and the RGB pass of `tests.rs` (held to its own reference) on the result.

use super::*;

fn rng(seed: u64) -> impl FnMut() -> u8 {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 24) as u8
    }
}

/// The fixed-point coefficients [CY, CVR, CVG, CUG, CUB], from Kr and Kb.
fn coefficients(matrix: ColorMatrix, range: ColorRange) -> [i64; 5] {
    if (matrix, range) == (ColorMatrix::Bt601, ColorRange::Limited) {
        return [1220542, 1673527, -852492, -409993, 2116026]; // OpenCV's ITUR_BT_601_*
    }
    let (kr, kb) = match matrix {
        ColorMatrix::Bt601 => (0.299f64, 0.114),
        ColorMatrix::Bt709 => (0.2126, 0.0722),
    };
    let kg = 1.0 - kr - kb;
    let (sy, sc) = match range {
        ColorRange::Limited => (255.0 / 219.0, 255.0 / 224.0),
        ColorRange::Full => (1.0, 1.0),
    };
    let k = |c: f64| (c * 1048576.0).round() as i64;
    [
        k(sy),
        k(2.0 * (1.0 - kr) * sc),
        k(-2.0 * (1.0 - kr) * kr / kg * sc),
        k(-2.0 * (1.0 - kb) * kb / kg * sc),
        k(2.0 * (1.0 - kb) * sc),
    ]
}

fn to_rgb(y: u8, u: u8, v: u8, matrix: ColorMatrix, range: ColorRange) -> [u8; 3] {
    let [cy, cvr, cvg, cug, cub] = coefficients(matrix, range);
    let y0 = if range == ColorRange::Limited { 16 } else { 0 };
    let yy = (y as i64 - y0).max(0) * cy;
    let (u, v) = (u as i64 - 128, v as i64 - 128);
    let f = |x: i64| ((x + (1 << 19)).div_euclid(1 << 20)).clamp(0, 255) as u8;
    [f(yy + cvr * v), f(yy + cvg * v + cug * u), f(yy + cub * u)]
}

/// A YUV frame with padded rows (padding bytes 0xA5) and its RGB frame, converted per pixel.
fn yuv_frame(f: &FrameFormat, w: usize, h: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut next = rng(seed);
    let ys: Vec<u8> = (0..w * h).map(|_| next()).collect();
    let ch = if f.format == PixelFormat::Yuyv {
        h
    } else {
        h / 2
    };
    let us: Vec<u8> = (0..w / 2 * ch).map(|_| next()).collect();
    let vs: Vec<u8> = (0..w / 2 * ch).map(|_| next()).collect();
    let chroma = |x: usize, y: usize| {
        let i = if f.format == PixelFormat::Yuyv {
            y * (w / 2) + x / 2
        } else {
            (y / 2) * (w / 2) + x / 2
        };
        (us[i], vs[i])
    };
    let mut rgb = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let (u, v) = chroma(x, y);
            rgb.extend(to_rgb(ys[y * w + x], u, v, f.matrix, f.range));
        }
    }
    let stride = f.stride.unwrap();
    let mut buf = vec![0xA5u8; 0];
    let put = |at: usize, b: u8, buf: &mut Vec<u8>| {
        if buf.len() <= at {
            buf.resize(at + 1, 0xA5);
        }
        buf[at] = b;
    };
    let cstride = f.chroma_stride.unwrap_or(if f.format == PixelFormat::I420 {
        stride / 2
    } else {
        stride
    });
    let coff = f.chroma_offset.unwrap_or(h * stride);
    for y in 0..h {
        for x in 0..w {
            let (u, v) = chroma(x, y);
            match f.format {
                PixelFormat::Yuyv => {
                    put(y * stride + x * 2, ys[y * w + x], &mut buf);
                    put(y * stride + (x & !1) * 2 + 1, u, &mut buf);
                    put(y * stride + (x & !1) * 2 + 3, v, &mut buf);
                }
                _ => {
                    put(y * stride + x, ys[y * w + x], &mut buf);
                    let (cx, cy) = (x / 2, y / 2);
                    match f.format {
                        PixelFormat::Nv12 => {
                            put(coff + cy * cstride + cx * 2, u, &mut buf);
                            put(coff + cy * cstride + cx * 2 + 1, v, &mut buf);
                        }
                        PixelFormat::Nv21 => {
                            put(coff + cy * cstride + cx * 2, v, &mut buf);
                            put(coff + cy * cstride + cx * 2 + 1, u, &mut buf);
                        }
                        _ => {
                            put(coff + cy * cstride + cx, u, &mut buf);
                            put(coff + (h / 2) * cstride + cy * cstride + cx, v, &mut buf);
                        }
                    }
                }
            }
        }
    }
    (buf, rgb)
}

/// `tests.rs`'s spec, bilinear.
fn base(sw: usize, sh: usize, dw: usize, dh: usize, output: Output) -> Spec {
    Spec {
        resize: Resize::Bilinear,
        ..super::tests::spec(sw, sh, dw, dh, output)
    }
}

fn u8_out() -> Output {
    Output::Quantized {
        ty: QuantType::U8,
        scale: 0.0187,
        offset: -114,
        range: (0, 255),
    }
}

const YUV: [PixelFormat; 4] = [
    PixelFormat::Nv12,
    PixelFormat::Nv21,
    PixelFormat::I420,
    PixelFormat::Yuyv,
];

fn format(format: PixelFormat, matrix: ColorMatrix, range: ColorRange, w: usize) -> FrameFormat {
    let row = if format == PixelFormat::Yuyv {
        2 * w
    } else {
        w
    };
    FrameFormat {
        format,
        matrix,
        range,
        stride: Some(row + 6), // padded rows (I420: chroma stride row / 2 + 3)
        chroma_stride: None,
        chroma_offset: None,
    }
}

#[test]
fn the_conversion_is_the_formula_and_within_one_of_the_float_formula() {
    for matrix in [ColorMatrix::Bt601, ColorMatrix::Bt709] {
        for range in [ColorRange::Limited, ColorRange::Full] {
            let k = yuv::Coefficients::of(matrix, range);
            let (kr, kb) = if matrix == ColorMatrix::Bt601 {
                (0.299, 0.114)
            } else {
                (0.2126, 0.0722)
            };
            let (sy, sc, y0) = if range == ColorRange::Limited {
                (255.0 / 219.0, 255.0 / 224.0, 16.0)
            } else {
                (1.0, 1.0, 0.0)
            };
            for (y, u, v) in (0..=255u8).step_by(3).flat_map(|y| {
                (0..=255u8)
                    .step_by(5)
                    .flat_map(move |u| (0..=255u8).step_by(7).map(move |v| (y, u, v)))
            }) {
                let got = k.rgb(y, u, v);
                assert_eq!(got, to_rgb(y, u, v, matrix, range), "{matrix:?} {range:?}");
                let l = ((y as f64 - y0) * sy).max(0.0);
                let (cb, cr) = ((u as f64 - 128.0) * sc, (v as f64 - 128.0) * sc);
                let kg = 1.0 - kr - kb;
                let r = l + 2.0 * (1.0 - kr) * cr;
                let b = l + 2.0 * (1.0 - kb) * cb;
                let g = l - 2.0 * (1.0 - kb) * kb / kg * cb - 2.0 * (1.0 - kr) * kr / kg * cr;
                for (i, f) in [r, g, b].into_iter().enumerate() {
                    let f = f.round().clamp(0.0, 255.0);
                    assert!((got[i] as f64 - f).abs() <= 1.0, "{y} {u} {v}: {got:?} {f}");
                }
            }
        }
    }
    // black and white of limited and full range
    let k = yuv::Coefficients::of(ColorMatrix::Bt601, ColorRange::Limited);
    assert_eq!(k.rgb(235, 128, 128), [255, 255, 255]);
    assert_eq!(k.rgb(16, 128, 128), [0, 0, 0]);
    assert_eq!(k.rgb(0, 128, 128), [0, 0, 0]);
    let k = yuv::Coefficients::of(ColorMatrix::Bt709, ColorRange::Full);
    assert_eq!(k.rgb(255, 128, 128), [255, 255, 255]);
    assert_eq!(k.rgb(128, 128, 128), [128, 128, 128]);
}

#[test]
fn yuv_frames_give_the_rgb_pass_on_the_converted_frame() {
    for (w, h, dw, dh) in [(18, 10, 7, 5), (8, 6, 13, 11)] {
        for fmt in YUV {
            for matrix in [ColorMatrix::Bt601, ColorMatrix::Bt709] {
                for range in [ColorRange::Limited, ColorRange::Full] {
                    let f = format(fmt, matrix, range, w);
                    let (buf, rgb) = yuv_frame(&f, w, h, (w * 7 + h) as u64);
                    for resize in [Resize::Nearest, Resize::Bilinear] {
                        for layout in [Layout::Nhwc, Layout::Nchw] {
                            for output in [u8_out(), Output::F32] {
                                let s = Spec {
                                    resize,
                                    layout,
                                    swap_rb: layout == Layout::Nchw,
                                    ..base(w, h, dw, dh, output)
                                };
                                let want = Plan::new(s).unwrap().run_to_vec(&rgb).unwrap();
                                let yuv = Spec { frame: f, ..s };
                                let got = Plan::new(yuv).unwrap().run_to_vec(&buf).unwrap();
                                assert_eq!(got, want, "{yuv:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn strides_and_offsets_follow_the_conventions() {
    let (w, h) = (10, 6);
    // I420 with its own chroma stride and a chroma plane further on; NV12 likewise
    for (fmt, cs) in [(PixelFormat::I420, 9), (PixelFormat::Nv12, 14)] {
        let f = FrameFormat {
            chroma_stride: Some(cs),
            chroma_offset: Some(h * 16 + 5),
            ..format(fmt, ColorMatrix::Bt601, ColorRange::Limited, w)
        };
        let (buf, rgb) = yuv_frame(&f, w, h, 3);
        let s = base(w, h, 4, 4, u8_out());
        let want = Plan::new(s).unwrap().run_to_vec(&rgb).unwrap();
        let got = Plan::new(Spec { frame: f, ..s }).unwrap().run_to_vec(&buf);
        assert_eq!(got.unwrap(), want, "{f:?}");
    }
    // padded RGB rows, and a longer buffer than needed
    let (w, h) = (5, 4);
    let mut next = rng(9);
    let rgb: Vec<u8> = (0..w * h * 3).map(|_| next()).collect();
    let mut padded = Vec::new();
    for row in rgb.chunks(w * 3) {
        padded.extend_from_slice(row);
        padded.extend_from_slice(&[7, 7]);
    }
    let s = base(w, h, 3, 3, u8_out());
    let want = Plan::new(s).unwrap().run_to_vec(&rgb).unwrap();
    let strided = Spec {
        frame: FrameFormat {
            stride: Some(w * 3 + 2),
            ..FrameFormat::default()
        },
        ..s
    };
    let plan = Plan::new(strided).unwrap();
    assert_eq!(plan.src_len(), 3 * 17 + 15); // the last row needs no padding
    assert_eq!(plan.run_to_vec(&padded).unwrap(), want);
    let mut longer = rgb.clone();
    longer.extend_from_slice(&[1, 2, 3]);
    assert_eq!(Plan::new(s).unwrap().run_to_vec(&longer).unwrap(), want);
}

#[test]
fn a_crop_is_the_pass_on_the_cropped_converted_frame() {
    let (w, h) = (16, 12);
    for fmt in [PixelFormat::Rgb, PixelFormat::Nv12, PixelFormat::Yuyv] {
        let f = if fmt == PixelFormat::Rgb {
            FrameFormat {
                stride: Some(w * 3 + 1),
                ..FrameFormat::default()
            }
        } else {
            format(fmt, ColorMatrix::Bt709, ColorRange::Full, w)
        };
        let (buf, rgb) = if fmt == PixelFormat::Rgb {
            let mut next = rng(5);
            let rgb: Vec<u8> = (0..w * h * 3).map(|_| next()).collect();
            let buf: Vec<u8> = rgb
                .chunks(w * 3)
                .flat_map(|r| r.iter().copied().chain([0]))
                .collect();
            (buf, rgb)
        } else {
            yuv_frame(&f, w, h, 11)
        };
        // odd offsets too: the crop of the converted frame
        for crop in [(3, 1, 9, 7), (0, 0, 16, 12), (15, 11, 1, 1), (4, 2, 12, 10)] {
            let (x, y, cw, ch) = crop;
            let cropped: Vec<u8> = (y..y + ch)
                .flat_map(|r| rgb[(r * w + x) * 3..(r * w + x + cw) * 3].to_vec())
                .collect();
            for resize in [Resize::Nearest, Resize::Bilinear] {
                let s = Spec {
                    resize,
                    ..base(cw, ch, 5, 6, Output::F32)
                };
                let want = Plan::new(s).unwrap().run_to_vec(&cropped).unwrap();
                let s = Spec {
                    src_width: w,
                    src_height: h,
                    frame: f,
                    crop: Some(Rect {
                        x,
                        y,
                        width: cw,
                        height: ch,
                    }),
                    ..s
                };
                assert_eq!(
                    Plan::new(s).unwrap().run_to_vec(&buf).unwrap(),
                    want,
                    "{s:?}"
                );
            }
        }
    }
}

#[test]
fn letterbox_places_the_content_and_pads_around_it() {
    let (w, h) = (12, 8);
    let f = format(
        PixelFormat::Nv12,
        ColorMatrix::Bt601,
        ColorRange::Limited,
        w,
    );
    let (buf, rgb) = yuv_frame(&f, w, h, 21);
    let (dw, dh) = (9, 10);
    // rows of padding above and below; columns left and right
    let contents = [(0, 2, 9, 6), (3, 0, 4, 10)].map(|(x, y, width, height)| Rect {
        x,
        y,
        width,
        height,
    });
    for content in contents {
        for output in [u8_out(), Output::F32, Output::F16] {
            for layout in [Layout::Nhwc, Layout::Nchw] {
                for resize in [Resize::Nearest, Resize::Bilinear] {
                    let inner = Spec {
                        resize,
                        ..base(w, h, content.width, content.height, output)
                    };
                    let inner = Plan::new(inner).unwrap().run_to_vec(&rgb).unwrap();
                    let pad = [114, 0, 255];
                    let s = Spec {
                        resize,
                        layout,
                        frame: f,
                        content: Some(content),
                        pad,
                        ..base(w, h, dw, dh, output)
                    };
                    let plan = Plan::new(s).unwrap();
                    let got = plan.run_to_vec(&buf).unwrap();
                    let e = plan.elem;
                    let one = |v: u8, c: usize| {
                        let px = Plan::new(Spec {
                            mean: [s.mean[c]; 3],
                            std: [s.std[c]; 3],
                            ..base(1, 1, 1, 1, output)
                        })
                        .unwrap()
                        .run_to_vec(&[v; 3])
                        .unwrap();
                        px[..e].to_vec()
                    };
                    for y in 0..dh {
                        for x in 0..dw {
                            for (c, &pad) in pad.iter().enumerate() {
                                let at = match layout {
                                    Layout::Nhwc => (y * dw + x) * 3 + c,
                                    Layout::Nchw => (c * dh + y) * dw + x,
                                } * e;
                                let inside = (content.y..content.y + content.height).contains(&y)
                                    && (content.x..content.x + content.width).contains(&x);
                                let want = if inside {
                                    let (ix, iy) = (x - content.x, y - content.y);
                                    let i = (iy * content.width + ix) * 3 + c;
                                    inner[i * e..(i + 1) * e].to_vec()
                                } else {
                                    one(pad, c)
                                };
                                assert_eq!(&got[at..at + e], &want[..], "{x} {y} {c} {s:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn refuses_bad_frames_without_panicking() {
    let err = |s: Spec, len: usize| -> String {
        match Plan::new(s) {
            Err(e) => e.to_string(),
            Ok(p) => p.run_to_vec(&vec![0; len]).unwrap_err().to_string(),
        }
    };
    let nv12 = |w, h, stride| Spec {
        frame: FrameFormat {
            format: PixelFormat::Nv12,
            stride,
            ..FrameFormat::default()
        },
        ..base(w, h, 4, 4, u8_out())
    };
    // 640x480 NV12, stride 704: Y 480 * 704, UV 239 * 704 + 640
    let short = err(nv12(640, 480, Some(704)), 1000);
    assert!(
        short.contains("nv12 frame of 640x480 (stride 704"),
        "{short}"
    );
    assert!(short.contains(&format!(
        "at least {} bytes, got 1000",
        480 * 704 + 239 * 704 + 640
    )));
    assert!(err(nv12(641, 480, None), 0).contains("an even width and height (4:2:0)"));
    assert!(err(nv12(640, 479, None), 0).contains("even width and height"));
    let yuyv = Spec {
        frame: FrameFormat {
            format: PixelFormat::Yuyv,
            ..FrameFormat::default()
        },
        ..base(7, 3, 4, 4, u8_out())
    };
    assert!(err(yuyv, 0).contains("yuyv frame needs an even width (4:2:2), got 7x3"));
    assert!(
        err(nv12(640, 480, Some(600)), 0)
            .contains("stride of a nv12 frame 640 pixels wide must be at least 640, got 600")
    );
    let i420 = Spec {
        frame: FrameFormat {
            format: PixelFormat::I420,
            stride: Some(640),
            chroma_stride: Some(100),
            ..FrameFormat::default()
        },
        ..base(640, 480, 4, 4, u8_out())
    };
    assert!(
        err(i420, 0).contains("chroma stride of a i420 frame 640 pixels wide must be at least 320")
    );
    let rgb = Spec {
        frame: FrameFormat {
            chroma_stride: Some(10),
            ..FrameFormat::default()
        },
        ..base(4, 4, 4, 4, u8_out())
    };
    assert!(err(rgb, 48).contains("rgb frame has no chroma plane"));
    let rect = |x, y, width, height| {
        Some(Rect {
            x,
            y,
            width,
            height,
        })
    };
    for crop in [
        rect(0, 0, 5, 4),
        rect(3, 3, 1, 2),
        rect(0, 0, 0, 1),
        rect(usize::MAX, 0, 2, 2),
    ] {
        let s = Spec {
            crop,
            ..base(4, 4, 2, 2, u8_out())
        };
        assert!(err(s, 48).contains("the crop {x:"), "{crop:?}");
    }
    let s = Spec {
        content: rect(1, 0, 2, 2),
        ..base(4, 4, 2, 2, u8_out())
    };
    assert!(
        err(s, 48).contains(
            "the content {x: 1, y: 0, w: 2, h: 2} is not a non-empty rectangle inside 2x2"
        )
    );
    let huge = Spec {
        frame: FrameFormat {
            stride: Some(usize::MAX / 2),
            ..FrameFormat::default()
        },
        ..base(4, 4, 2, 2, u8_out())
    };
    assert!(err(huge, 48).contains("overflows"));
}

/// The vector conversion (NEON's, on aarch64) against the formula, for every chroma pair and
/// the luma values around the edges of each range, with each matrix and range.
#[test]
fn the_vector_conversion_is_the_formula() {
    let ys = [0u8, 1, 15, 16, 17, 100, 128, 200, 234, 235, 236, 254, 255];
    for matrix in [ColorMatrix::Bt601, ColorMatrix::Bt709] {
        for range in [ColorRange::Limited, ColorRange::Full] {
            let k = yuv::Coefficients::of(matrix, range);
            for &y in &ys {
                for u in 0..=255u8 {
                    let samples = [vec![y; 256], vec![u; 256], (0..=255u8).collect()];
                    for kernels in linear::Kernels::available() {
                        let mut out = vec![0u8; 3 * 256];
                        let (r, gb) = out.split_at_mut(256);
                        let (g, b) = gb.split_at_mut(256);
                        k.planes_row(&samples, [r, g, b], kernels);
                        for v in 0..=255u8 {
                            let i = v as usize;
                            let got = [out[i], out[256 + i], out[512 + i]];
                            assert_eq!(got, k.rgb(y, u, v), "{matrix:?} {range:?} {kernels:?}");
                        }
                    }
                }
            }
        }
    }
}

/// The vector conversion of 4:2:0 rows (NV12 and NV21: pixel pairs sharing their chroma)
/// against the formula, for every chroma pair, the luma values around the edges of each range
/// on the even pixels and others on the odd ones, with each matrix and range; NV12 or NV21
/// and an even or odd first column by turns.
#[test]
fn the_vector_pair_conversion_is_the_formula() {
    let ys = [0u8, 1, 15, 16, 17, 100, 128, 200, 234, 235, 236, 254, 255];
    for matrix in [ColorMatrix::Bt601, ColorMatrix::Bt709] {
        for range in [ColorRange::Limited, ColorRange::Full] {
            let k = yuv::Coefficients::of(matrix, range);
            for (i, &y) in ys.iter().enumerate() {
                // even pixels y, odd pixels another value of the list
                let odd = ys[(i * 5 + 3) % ys.len()];
                let row: Vec<u8> = (0..512).map(|j| if j % 2 == 0 { y } else { odd }).collect();
                for u in 0..=255u8 {
                    let (iu, first) = ((u % 2) as usize, (u / 2 % 2) as usize);
                    // the pairs from that of `first` on: (u, v) for v = 0..=255 (NV12), or
                    // (v, u) (NV21, iu = 1)
                    let uv: Vec<u8> = (0..=255u8)
                        .flat_map(|v| if iu == 0 { [u, v] } else { [v, u] })
                        .collect();
                    let ys = &row[first..];
                    let n = ys.len();
                    for kernels in linear::Kernels::available() {
                        let mut out = vec![0u8; 3 * n];
                        let (r, gb) = out.split_at_mut(n);
                        let (g, b) = gb.split_at_mut(n);
                        k.nv_planes(ys, &uv, first, iu, [r, g, b], kernels);
                        for j in 0..n {
                            let v = ((j + first) / 2) as u8;
                            let got = [out[j], out[n + j], out[2 * n + j]];
                            let want = k.rgb(ys[j], u, v);
                            assert_eq!(got, want, "{matrix:?} {range:?} {kernels:?} {j}");
                        }
                    }
                }
            }
        }
    }
}

/// The vector kernels (AVX2 on x86-64 where the CPU has it, NEON on aarch64) against the
/// portable ones, byte for byte: random sizes (odd widths, upscale and downscale, some far
/// enough that NEON's blocks reach past their 64 bytes and columns are converted sparsely,
/// some downscaled by 2 to 5, AVX2's sparse gathers of 1 to 4 windows),
/// strides, crops (odd offsets), letterboxes, formats, matrices, ranges, layouts and outputs
/// (u8 ones with tables that map some channels' values to themselves, which skip the lookup).
#[test]
fn vector_kernels_equal_the_portable_ones() {
    let kernels = linear::Kernels::available();
    if kernels.len() < 2 {
        eprintln!("no vector kernels on this CPU: only the portable ones run");
    }
    let mut next = rng(31);
    let mut pick = |n: usize| {
        let r = (next() as usize) << 8 | next() as usize;
        r % n
    };
    let formats = [
        PixelFormat::Rgb,
        PixelFormat::Nv12,
        PixelFormat::Nv21,
        PixelFormat::I420,
        PixelFormat::Yuyv,
    ];
    for case in 0..600 {
        let fmt = formats[case % formats.len()];
        let even = |v: usize| if fmt == PixelFormat::Rgb { v } else { v & !1 };
        // every third case wide: up to 400 pixels, into at most 120; every seventh wider
        // still, downscaled by 2 to 5 (the ratios whose columns AVX2 gathers sparsely)
        let gathered = case % 7 == 6;
        let w = if gathered {
            even(300 + pick(500))
        } else {
            even(2 + pick(if case % 3 == 2 { 400 } else { 90 })).max(2)
        };
        let h = if matches!(fmt, PixelFormat::Rgb | PixelFormat::Yuyv) {
            1 + pick(60)
        } else {
            even(2 + pick(60)).max(2)
        };
        let f = if fmt == PixelFormat::Rgb {
            FrameFormat {
                stride: Some(w * 3 + pick(5)),
                ..FrameFormat::default()
            }
        } else {
            let matrix = [ColorMatrix::Bt601, ColorMatrix::Bt709][pick(2)];
            format(
                fmt,
                matrix,
                [ColorRange::Limited, ColorRange::Full][pick(2)],
                w,
            )
        };
        let (buf, _) = if fmt == PixelFormat::Rgb {
            let stride = f.stride.unwrap();
            let mut n = rng(case as u64);
            ((0..stride * h).map(|_| n()).collect(), vec![])
        } else {
            yuv_frame(&f, w, h, case as u64)
        };
        let (cw, ch) = (
            if gathered {
                w / 2 + pick(w / 2)
            } else {
                1 + pick(w)
            },
            1 + pick(h),
        );
        let crop = Rect {
            x: pick(w - cw + 1),
            y: pick(h - ch + 1),
            width: cw,
            height: ch,
        };
        let (dw, dh) = if gathered {
            // ratios 2..5 in steps of 1/16, integers among them (odd ones read one column)
            ((cw * 16 / (32 + pick(49))).max(1), 1 + pick(90))
        } else {
            (1 + pick(120), 1 + pick(90))
        };
        let content = if pick(2) == 0 {
            let (tw, th) = (1 + pick(dw), 1 + pick(dh));
            Some(Rect {
                x: pick(dw - tw + 1),
                y: pick(dh - th + 1),
                width: tw,
                height: th,
            })
        } else {
            None
        };
        // u8 outputs half the time with the tables that map values to themselves (0..1
        // inputs, scale 1/255: no lookup), on some channels only when a mean is not 0
        let identity = Output::Quantized {
            ty: QuantType::U8,
            scale: 1.0 / 255.0,
            offset: 0,
            range: (0, 255),
        };
        let output = [u8_out(), identity, identity, Output::F32, Output::F16][pick(5)];
        let mean = if output == identity {
            [0, 1, 2].map(|_| [0.0, 0.0, 0.1][pick(3)])
        } else {
            base(w, h, dw, dh, output).mean
        };
        let std = if output == identity {
            [1.0; 3]
        } else {
            base(w, h, dw, dh, output).std
        };
        let s = Spec {
            mean,
            std,
            layout: [Layout::Nhwc, Layout::Nchw][pick(2)],
            swap_rb: pick(2) == 0,
            frame: f,
            crop: Some(crop),
            content,
            pad: [1, 2, 3],
            ..base(w, h, dw, dh, output)
        };
        let plan = Plan::new(s).unwrap();
        let outs: Vec<Vec<u8>> = kernels
            .iter()
            .map(|&k| {
                let mut out = vec![0; plan.dst_len()];
                plan.run_with(&buf, &mut out, k);
                out
            })
            .collect();
        for o in &outs[1..] {
            assert!(o == &outs[0], "{s:?}");
        }
    }
}
