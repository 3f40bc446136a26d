//! `HexagonTpu.Preprocess`: a camera frame to a model input's bytes, in one pass
//! (`qnn::preprocess`). Elixir decides every parameter from the input's `TensorInfo`; this
//! decodes them, runs the pass into a binary allocated here and returns it.

use rustler::{Binary, Encoder, Env, NifMap, NifUnitEnum, OwnedBinary, Term};

use qnn::preprocess::{
    ColorMatrix, ColorRange, FrameFormat, Layout, Output, PixelFormat, Plan, Rect, Resize, Spec,
};
use qnn::quant::QuantType;

use crate::atoms;
use crate::error::Failure;

#[derive(NifUnitEnum, Clone, Copy)]
pub enum ResizeTerm {
    Nearest,
    Bilinear,
}

#[derive(NifUnitEnum, Clone, Copy)]
pub enum LayoutTerm {
    Nhwc,
    Nchw,
}

/// How the frame's pixels are stored (`:rgb` also stands for `:bgr`: see `swap_rb`).
#[derive(NifUnitEnum, Clone, Copy)]
pub enum PixelFormatTerm {
    Rgb,
    Nv12,
    Nv21,
    I420,
    Yuyv,
}

#[derive(NifUnitEnum, Clone, Copy)]
pub enum ColorMatrixTerm {
    Bt601,
    Bt709,
}

#[derive(NifUnitEnum, Clone, Copy)]
pub enum ColorRangeTerm {
    Limited,
    Full,
}

/// The output element type: a quantized container, or a float type.
#[derive(NifUnitEnum, Clone, Copy)]
pub enum OutputTerm {
    U8,
    S8,
    U16,
    S16,
    F32,
    F16,
}

/// The map `HexagonTpu.Preprocess` builds (every key present).
#[derive(NifMap)]
pub struct SpecTerm {
    src_width: usize,
    src_height: usize,
    dst_width: usize,
    dst_height: usize,
    resize: ResizeTerm,
    layout: LayoutTerm,
    swap_rb: bool,
    divisor: f64,
    mean: (f64, f64, f64),
    std: (f64, f64, f64),
    output: OutputTerm,
    // QNN's convention (offset = -zero_point); ignored for f32 and f16
    scale: f64,
    offset: i32,
    qmin: i64,
    qmax: i64,
    // the frame's bytes; nil: the defaults (packed rows, chroma right after the Y plane)
    pixel_format: PixelFormatTerm,
    color_matrix: ColorMatrixTerm,
    color_range: ColorRangeTerm,
    stride: Option<usize>,
    chroma_stride: Option<usize>,
    chroma_offset: Option<usize>,
    // {x, y, w, h}: the crop in the frame, the content in the model input (nil: all of it)
    crop: Option<(usize, usize, usize, usize)>,
    content: Option<(usize, usize, usize, usize)>,
    pad: (u8, u8, u8),
}

impl From<&SpecTerm> for Spec {
    fn from(t: &SpecTerm) -> Self {
        let quantized = |ty| Output::Quantized {
            ty,
            scale: t.scale as f32,
            offset: t.offset,
            range: (t.qmin, t.qmax),
        };
        let three = |(a, b, c): (f64, f64, f64)| [a as f32, b as f32, c as f32];
        let rect = |r: Option<(usize, usize, usize, usize)>| {
            r.map(|(x, y, width, height)| Rect {
                x,
                y,
                width,
                height,
            })
        };
        Spec {
            src_width: t.src_width,
            src_height: t.src_height,
            dst_width: t.dst_width,
            dst_height: t.dst_height,
            resize: match t.resize {
                ResizeTerm::Nearest => Resize::Nearest,
                ResizeTerm::Bilinear => Resize::Bilinear,
            },
            layout: match t.layout {
                LayoutTerm::Nhwc => Layout::Nhwc,
                LayoutTerm::Nchw => Layout::Nchw,
            },
            swap_rb: t.swap_rb,
            divisor: t.divisor as f32,
            mean: three(t.mean),
            std: three(t.std),
            output: match t.output {
                OutputTerm::U8 => quantized(QuantType::U8),
                OutputTerm::S8 => quantized(QuantType::I8),
                OutputTerm::U16 => quantized(QuantType::U16),
                OutputTerm::S16 => quantized(QuantType::I16),
                OutputTerm::F32 => Output::F32,
                OutputTerm::F16 => Output::F16,
            },
            frame: FrameFormat {
                format: match t.pixel_format {
                    PixelFormatTerm::Rgb => PixelFormat::Rgb,
                    PixelFormatTerm::Nv12 => PixelFormat::Nv12,
                    PixelFormatTerm::Nv21 => PixelFormat::Nv21,
                    PixelFormatTerm::I420 => PixelFormat::I420,
                    PixelFormatTerm::Yuyv => PixelFormat::Yuyv,
                },
                matrix: match t.color_matrix {
                    ColorMatrixTerm::Bt601 => ColorMatrix::Bt601,
                    ColorMatrixTerm::Bt709 => ColorMatrix::Bt709,
                },
                range: match t.color_range {
                    ColorRangeTerm::Limited => ColorRange::Limited,
                    ColorRangeTerm::Full => ColorRange::Full,
                },
                stride: t.stride,
                chroma_stride: t.chroma_stride,
                chroma_offset: t.chroma_offset,
            },
            crop: rect(t.crop),
            content: rect(t.content),
            pad: [t.pad.0, t.pad.1, t.pad.2],
        }
    }
}

/// `{:ok, binary} | {:error, %HexagonTpu.Error{reason: :invalid_input}}`: the frame (RGB or YUV)
/// as the model input's bytes. Runs on a dirty CPU scheduler (a 640x640 input is ~1 ms).
#[rustler::nif(schedule = "DirtyCpu")]
fn preprocess_image<'a>(env: Env<'a>, frame: Binary<'a>, spec: SpecTerm) -> Term<'a> {
    let invalid =
        |message: String| Failure::Qnn(qnn::Error::InvalidInput { message }).encode_error(env);
    let plan = match Plan::new(Spec::from(&spec)) {
        Ok(plan) => plan,
        Err(e) => return invalid(e.to_string()),
    };
    // Aborts the VM if the allocation fails, like every binary the VM allocates.
    let mut out = OwnedBinary::new(plan.dst_len());
    match plan.run(frame.as_slice(), out.as_mut_slice()) {
        Ok(()) => (atoms::ok(), out.release(env)).encode(env),
        Err(e) => invalid(e.to_string()),
    }
}
