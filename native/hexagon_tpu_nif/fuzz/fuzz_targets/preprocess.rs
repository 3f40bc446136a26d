//! Preprocessing argument planning and runs: a [`Spec`] built from the fuzz bytes (dimensions
//! mostly small, sometimes extreme; any normalization numbers; any frame layout, crop and
//! content rectangle), planned and, when accepted and small, run on a frame.
//!
//! Properties: nothing panics; a refused spec's error names the argument that is wrong (the
//! checks below recompute which); an accepted spec's output has the promised size
//! (`dst_width * dst_height * 3 * element size`), and a run on a frame of `src_len` bytes
//! fills exactly that, while a frame one byte short and a wrong output size are refused; and
//! the vectorized bilinear kernels give the portable ones' bytes (differential).

#![no_main]

use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use qnn::preprocess::{
    ColorMatrix, ColorRange, FrameFormat, Layout, Output, PixelFormat, Plan, PreprocessError, Rect,
    Resize, Spec,
};
use qnn::quant::QuantType;

/// Runs are made only below this many bytes of frame or output (plans of any size are made).
const RUN_LIMIT: usize = 1 << 18;

/// A dimension: small, 0, or near the overflow edge.
fn dim(u: &mut Unstructured) -> Result<usize> {
    Ok(match u.int_in_range(0..=15)? {
        0 => 0,
        1 => usize::MAX - u.int_in_range(0..=3)?,
        2 => (usize::MAX / 3) + u.int_in_range(0..=1)?,
        3 => u.int_in_range(1..=1 << 16)?,
        _ => u.int_in_range(1..=48)?,
    })
}

fn opt_dim(u: &mut Unstructured) -> Result<Option<usize>> {
    Ok(if bool::arbitrary(u)? {
        Some(dim(u)?)
    } else {
        None
    })
}

fn float(u: &mut Unstructured) -> Result<f32> {
    Ok(match u.int_in_range(0..=3)? {
        0 => f32::from_bits(u.arbitrary()?),
        1 => [255.0, 1.0, 0.0, 127.5, -1.0][u.choose_index(5)?],
        _ => u.int_in_range(-1000..=1000i32)? as f32 / 8.0,
    })
}

fn rect(u: &mut Unstructured) -> Result<Option<Rect>> {
    Ok(if bool::arbitrary(u)? {
        Some(Rect {
            x: u.int_in_range(0..=20)?,
            y: u.int_in_range(0..=20)?,
            width: dim(u)?,
            height: dim(u)?,
        })
    } else {
        None
    })
}

fn spec(u: &mut Unstructured) -> Result<Spec> {
    let output = match u.int_in_range(0..=2)? {
        0 => Output::F32,
        1 => Output::F16,
        _ => {
            let types = [
                QuantType::U8,
                QuantType::I8,
                QuantType::U16,
                QuantType::I16,
                QuantType::U32,
                QuantType::I32,
            ];
            let ty = types[u.choose_index(types.len())?];
            let (lo, hi) = ty.full_range();
            Output::Quantized {
                ty,
                scale: float(u)?,
                offset: u.int_in_range(-300..=300)?,
                range: if bool::arbitrary(u)? {
                    (lo, hi)
                } else {
                    (u.arbitrary()?, u.arbitrary()?)
                },
            }
        }
    };
    let formats = [
        PixelFormat::Rgb,
        PixelFormat::Nv12,
        PixelFormat::Nv21,
        PixelFormat::I420,
        PixelFormat::Yuyv,
    ];
    Ok(Spec {
        src_width: dim(u)?,
        src_height: dim(u)?,
        dst_width: dim(u)?,
        dst_height: dim(u)?,
        resize: if bool::arbitrary(u)? {
            Resize::Nearest
        } else {
            Resize::Bilinear
        },
        layout: if bool::arbitrary(u)? {
            Layout::Nhwc
        } else {
            Layout::Nchw
        },
        swap_rb: bool::arbitrary(u)?,
        divisor: float(u)?,
        mean: [float(u)?, float(u)?, float(u)?],
        std: [float(u)?, float(u)?, float(u)?],
        output,
        frame: FrameFormat {
            format: formats[u.choose_index(formats.len())?],
            matrix: if bool::arbitrary(u)? {
                ColorMatrix::Bt601
            } else {
                ColorMatrix::Bt709
            },
            range: if bool::arbitrary(u)? {
                ColorRange::Limited
            } else {
                ColorRange::Full
            },
            stride: opt_dim(u)?,
            chroma_stride: opt_dim(u)?,
            chroma_offset: opt_dim(u)?,
        },
        crop: rect(u)?,
        content: rect(u)?,
        pad: u.arbitrary()?,
    })
}

fn element_size(output: &Output) -> usize {
    match output {
        Output::Quantized { ty, .. } => ty.size(),
        Output::F32 => 4,
        Output::F16 => 2,
    }
}

/// Whether `rect` (default: the whole `width` x `height`) is a non-empty rectangle inside.
fn inside(rect: Option<Rect>, width: usize, height: usize) -> bool {
    rect.is_none_or(|r| {
        r.width > 0
            && r.height > 0
            && r.x.checked_add(r.width).is_some_and(|e| e <= width)
            && r.y.checked_add(r.height).is_some_and(|e| e <= height)
    })
}

/// The refusal names a wrong argument: the one its variant says is wrong is wrong.
fn check_refusal(s: &Spec, e: &PreprocessError) {
    let message = e.to_string();
    assert!(!message.is_empty());
    match e {
        PreprocessError::ZeroDimension { what } => {
            let v = match *what {
                "the frame width" => s.src_width,
                "the frame height" => s.src_height,
                "the model input's width" => s.dst_width,
                "the model input's height" => s.dst_height,
                other => panic!("unknown dimension {other:?}"),
            };
            assert_eq!(v, 0, "{message}");
        }
        PreprocessError::InvalidParameter { what, value, .. } => {
            let v = match what.as_str() {
                "the divisor" => s.divisor,
                "mean[0]" => s.mean[0],
                "mean[1]" => s.mean[1],
                "mean[2]" => s.mean[2],
                "std[0]" => s.std[0],
                "std[1]" => s.std[1],
                "std[2]" => s.std[2],
                other => panic!("unknown parameter {other:?}: {message}"),
            };
            assert_eq!(v.to_bits(), value.to_bits(), "{message}");
            let fine = v.is_finite() && (what.starts_with("mean") || v != 0.0);
            assert!(!fine || (what == "the divisor" && v < 0.0), "{message}");
        }
        PreprocessError::Rect { what, .. } => match *what {
            "the crop" => assert!(!inside(s.crop, s.src_width, s.src_height), "{message}"),
            "the content" => assert!(!inside(s.content, s.dst_width, s.dst_height), "{message}"),
            other => panic!("unknown rectangle {other:?}"),
        },
        PreprocessError::Quant(_) => assert!(matches!(s.output, Output::Quantized { .. })),
        PreprocessError::NoChromaPlane { .. } => assert!(
            matches!(s.frame.format, PixelFormat::Rgb | PixelFormat::Yuyv)
                && (s.frame.chroma_stride.is_some() || s.frame.chroma_offset.is_some())
        ),
        PreprocessError::OddSize { .. } => {
            assert!(s.frame.format != PixelFormat::Rgb, "{message}")
        }
        PreprocessError::Stride { .. } | PreprocessError::TooLarge { .. } => {}
        PreprocessError::FrameSize { .. } | PreprocessError::OutputSize { .. } => {
            panic!("a length error from planning: {message}")
        }
    }
}

fn run(u: &mut Unstructured) -> Result<()> {
    let s = spec(u)?;
    let plan = match Plan::new(s) {
        Ok(plan) => plan,
        Err(e) => {
            check_refusal(&s, &e);
            return Ok(());
        }
    };
    // The promised size.
    let promised = s
        .dst_width
        .checked_mul(s.dst_height)
        .and_then(|n| n.checked_mul(3 * element_size(&s.output)))
        .expect("an accepted spec's output size fits");
    assert_eq!(plan.dst_len(), promised);
    assert!(inside(s.crop, s.src_width, s.src_height));
    assert!(inside(s.content, s.dst_width, s.dst_height));
    let src_len = plan.src_len();
    if src_len > RUN_LIMIT || promised > RUN_LIMIT {
        return Ok(());
    }
    let seed = u.bytes(u.len().min(src_len))?.to_vec();
    let frame: Vec<u8> = if seed.is_empty() {
        vec![0x80; src_len]
    } else {
        seed.iter().cycle().take(src_len).copied().collect()
    };
    let out = plan
        .run_to_vec(&frame)
        .expect("a frame of src_len bytes runs");
    assert_eq!(out.len(), promised);
    if src_len > 0 {
        let short = plan.run_to_vec(&frame[..src_len - 1]);
        assert!(
            matches!(short, Err(PreprocessError::FrameSize { .. })),
            "{short:?}"
        );
    }
    let mut wrong = vec![0; promised + 1];
    assert!(matches!(
        plan.run(&frame, &mut wrong),
        Err(PreprocessError::OutputSize { .. })
    ));
    // Deterministic: a second run gives the same bytes.
    assert_eq!(plan.run_to_vec(&frame).unwrap(), out);
    // Differential: the vectorized kernels (AVX2 here) equal the portable definition.
    let mut portable = vec![0; promised];
    plan.run_portable(&frame, &mut portable)
        .expect("the portable kernels run what the chosen ones ran");
    assert!(
        portable == out,
        "the vector kernels differ from the portable ones"
    );
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
