//! `HexagonTpu.Postprocess`: a classifier's top k, NMS, YOLOv8 / YOLOv5 heads decoded, and
//! SSD heads (MediaPipe's anchors), and class masks
//! (`qnn::postprocess`). Elixir checks the options and shapes and builds the spec maps; this
//! decodes them, runs the core and returns the results. Each NIF comes twice: on a normal
//! scheduler for small inputs and on a dirty CPU scheduler (`*_dirty`) for large ones, which
//! `HexagonTpu.Postprocess` picks by size.

use rustler::{Binary, Encoder, Env, NifMap, NifUnitEnum, OwnedBinary, Term};

use qnn::postprocess::{
    self, AnchorOptions, BoxFormat, Detection, MaskLayout, NmsOptions, PostprocessError, Quantized,
    Scores, SsdSpec, Values, YoloSpec,
};

use crate::atoms;
use crate::error::Failure;

#[derive(NifUnitEnum, Clone, Copy)]
pub enum FormatTerm {
    Xyxy,
    Xywh,
    Cxcywh,
}

#[derive(NifUnitEnum, Clone, Copy)]
pub enum LayoutTerm {
    Hwc,
    Chw,
}

/// A mask's geometry (`HexagonTpu.Postprocess.mask/2` builds it).
#[derive(NifMap)]
pub struct MaskArgs {
    height: usize,
    width: usize,
    classes: usize,
    layout: LayoutTerm,
}

#[derive(NifUnitEnum, Clone, Copy)]
pub enum VersionTerm {
    Yolov8,
    Yolov5,
}

/// The NMS options `HexagonTpu.Postprocess` builds (every key present).
#[derive(NifMap)]
pub struct NmsTerm {
    score_threshold: f64,
    iou_threshold: f64,
    max_detections: Option<usize>,
    class_agnostic: bool,
    multi_label: bool,
}

impl From<&NmsTerm> for NmsOptions {
    fn from(t: &NmsTerm) -> Self {
        NmsOptions {
            score_threshold: t.score_threshold as f32,
            iou_threshold: t.iou_threshold as f32,
            max_detections: t.max_detections,
            class_agnostic: t.class_agnostic,
            multi_label: t.multi_label,
        }
    }
}

/// The boxes and scores of `nms/3`: `classes` is 0 for one score per box (with `box_classes`,
/// u32 little-endian, or none).
#[derive(NifMap)]
pub struct NmsArgs<'a> {
    format: FormatTerm,
    classes: usize,
    box_classes: Option<Binary<'a>>,
    nms: NmsTerm,
}

/// A YOLO head's spec (the kept boxes come back in the model's coordinates).
#[derive(NifMap)]
pub struct YoloArgs {
    version: VersionTerm,
    candidates: usize,
    classes: usize,
    nms: NmsTerm,
}

#[derive(NifUnitEnum, Clone, Copy)]
pub enum LevelTerm {
    U8,
    U16,
}

/// A decoder's tensor: its bytes, f32 little-endian, or quantized levels with
/// `{:u8 | :u16, scale, offset}` (QNN's offset, the negated zero point).
type TensorTerm<'a> = (Binary<'a>, Option<(LevelTerm, f64, i32)>);

/// A YOLO head: one tensor, or YOLOv8's two parts (boxes, scores).
type HeadTerm<'a> = Vec<TensorTerm<'a>>;

/// A [`TensorTerm`]'s values, converted where the bytes cannot be read in place.
enum TensorValues<'a> {
    F32(Vec<f32>),
    U8(&'a [u8], f32, i32),
    U16(Vec<u16>, f32, i32),
}

impl<'a> TensorValues<'a> {
    fn new(
        argument: &'static str,
        (bytes, level): &TensorTerm<'a>,
    ) -> Result<Self, PostprocessError> {
        let bytes = bytes.as_slice();
        Ok(match *level {
            None => TensorValues::F32(postprocess::f32_values(argument, bytes)?),
            Some((LevelTerm::U8, scale, offset)) => TensorValues::U8(bytes, scale as f32, offset),
            Some((LevelTerm::U16, scale, offset)) => {
                if !bytes.len().is_multiple_of(2) {
                    return Err(PostprocessError {
                        argument,
                        message: format!(
                            "{} bytes is not a whole number of u16 values (2 bytes each)",
                            bytes.len()
                        ),
                    });
                }
                let levels = bytes
                    .chunks_exact(2)
                    .map(|b| u16::from_le_bytes([b[0], b[1]]))
                    .collect();
                TensorValues::U16(levels, scale as f32, offset)
            }
        })
    }

    fn view(&self) -> Values<'_> {
        match self {
            TensorValues::F32(v) => Values::F32(v),
            TensorValues::U8(levels, scale, offset) => Values::U8(Quantized {
                levels,
                scale: *scale,
                offset: *offset,
            }),
            TensorValues::U16(levels, scale, offset) => Values::U16(Quantized {
                levels,
                scale: *scale,
                offset: *offset,
            }),
        }
    }
}

fn encode<'a, T: Encoder>(env: Env<'a>, result: Result<T, PostprocessError>) -> Term<'a> {
    match result {
        Ok(value) => (atoms::ok(), value).encode(env),
        Err(e) => Failure::Qnn(qnn::Error::InvalidInput {
            message: e.to_string(),
        })
        .encode_error(env),
    }
}

type DetectionTerm = (usize, usize, f64, (f64, f64, f64, f64));

fn detections(kept: Vec<Detection>) -> Vec<DetectionTerm> {
    kept.into_iter()
        .map(|d| {
            let [x1, y1, x2, y2] = d.bbox.map(f64::from);
            (d.index, d.class, d.score as f64, (x1, y1, x2, y2))
        })
        .collect()
}

fn top_k(
    scores: &TensorTerm,
    k: usize,
    softmax: bool,
) -> Result<Vec<(usize, f64)>, PostprocessError> {
    let values = TensorValues::new("scores", scores)?;
    let top = postprocess::top_k(values.view(), k, softmax)?;
    Ok(top.into_iter().map(|(i, s)| (i, s as f64)).collect())
}

fn nms(
    boxes: &[u8],
    scores: &[u8],
    args: &NmsArgs,
) -> Result<Vec<DetectionTerm>, PostprocessError> {
    let boxes = postprocess::f32_values("boxes", boxes)?;
    let scores = postprocess::f32_values("scores", scores)?;
    let box_classes: Option<Vec<u32>> = args.box_classes.map(|b| {
        b.as_slice()
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    });
    let scores = if args.classes == 0 {
        Scores::PerBox {
            values: &scores,
            classes: box_classes.as_deref(),
        }
    } else {
        Scores::PerClass {
            values: &scores,
            classes: args.classes,
        }
    };
    let format = match args.format {
        FormatTerm::Xyxy => BoxFormat::Xyxy,
        FormatTerm::Xywh => BoxFormat::Xywh,
        FormatTerm::Cxcywh => BoxFormat::Cxcywh,
    };
    let kept = postprocess::nms(&boxes, format, scores, &NmsOptions::from(&args.nms))?;
    Ok(detections(kept))
}

fn yolo(head: &HeadTerm, args: &YoloArgs) -> Result<Vec<DetectionTerm>, PostprocessError> {
    let spec = YoloSpec {
        candidates: args.candidates,
        classes: args.classes,
        nms: NmsOptions::from(&args.nms),
    };
    let kept = match (args.version, &head[..]) {
        (VersionTerm::Yolov8, [boxes, scores]) => {
            let boxes = TensorValues::new("boxes", boxes)?;
            let scores = TensorValues::new("scores", scores)?;
            postprocess::yolov8_split(boxes.view(), scores.view(), &spec)?
        }
        (version, [output]) => {
            let output = TensorValues::new("output", output)?;
            match version {
                VersionTerm::Yolov8 => postprocess::yolov8(output.view(), &spec)?,
                VersionTerm::Yolov5 => postprocess::yolov5(output.view(), &spec)?,
            }
        }
        _ => {
            return Err(PostprocessError {
                argument: "output",
                message: format!(
                    "{} tensors: expected the head, or its boxes and scores",
                    head.len()
                ),
            });
        }
    };
    Ok(detections(kept))
}

/// Registers `$body` (a plain fn taking the env first) twice: `$name` on a normal scheduler and
/// `$dirty` on a dirty CPU scheduler; `HexagonTpu.Postprocess` calls the dirty one for large
/// inputs. (Argument types are matched as `Name` or `Name<'a>`: rustler's attribute refuses a
/// `$t:ty` fragment; and `env` is named here, where rustler's expansion can see it.)
macro_rules! normal_and_dirty {
    ($body:ident as $name:ident, $dirty:ident ($($arg:ident: $ty:ident$(<$l:lifetime>)?),*)) => {
        #[doc = concat!("[`", stringify!($body), "`] on a normal scheduler.")]
        #[rustler::nif]
        fn $name<'a>(env: Env<'a>, $($arg: $ty$(<$l>)?),*) -> Term<'a> {
            $body(env, $($arg),*)
        }

        #[doc = concat!("[`", stringify!($body), "`] on a dirty CPU scheduler, for large inputs.")]
        #[rustler::nif(schedule = "DirtyCpu")]
        fn $dirty<'a>(env: Env<'a>, $($arg: $ty$(<$l>)?),*) -> Term<'a> {
            $body(env, $($arg),*)
        }
    };
}

/// `{:ok, [{class, score}]} | {:error, %HexagonTpu.Error{reason: :invalid_input}}`.
fn top_k_term<'a>(env: Env<'a>, scores: TensorTerm<'a>, k: usize, softmax: bool) -> Term<'a> {
    encode(env, top_k(&scores, k, softmax))
}

normal_and_dirty!(top_k_term as postprocess_top_k, postprocess_top_k_dirty(scores: TensorTerm<'a>, k: usize, softmax: bool));

/// `{:ok, [{index, class, score, {x1, y1, x2, y2}}]} | {:error, ...}`, by score.
fn nms_term<'a>(
    env: Env<'a>,
    boxes: Binary<'a>,
    scores: Binary<'a>,
    args: NmsArgs<'a>,
) -> Term<'a> {
    encode(env, nms(boxes.as_slice(), scores.as_slice(), &args))
}

normal_and_dirty!(nms_term as postprocess_nms, postprocess_nms_dirty(boxes: Binary<'a>, scores: Binary<'a>, args: NmsArgs<'a>));

/// A YOLO head decoded and suppressed: like `postprocess_nms` (YOLOv8n at 640: 8400 x 84
/// values, dirty).
fn yolo_term<'a>(env: Env<'a>, head: HeadTerm<'a>, args: YoloArgs) -> Term<'a> {
    encode(env, yolo(&head, &args))
}

normal_and_dirty!(yolo_term as postprocess_yolo, postprocess_yolo_dirty(head: HeadTerm<'a>, args: YoloArgs));

/// `{:ok, class_bytes} | {:error, ...}`: each pixel's argmax class, u8 (u16 past 256 classes).
fn mask_term<'a>(env: Env<'a>, output: Binary<'a>, args: MaskArgs) -> Term<'a> {
    let layout = match args.layout {
        LayoutTerm::Hwc => MaskLayout::Hwc,
        LayoutTerm::Chw => MaskLayout::Chw,
    };
    let result = postprocess::f32_values("output", output.as_slice()).and_then(|values| {
        postprocess::argmax_mask(&values, args.height, args.width, args.classes, layout)
    });
    let bytes = match result {
        Ok(bytes) => bytes,
        Err(e) => return encode::<()>(env, Err(e)),
    };
    // Aborts the VM if the allocation fails, like every binary the VM allocates.
    let mut out = OwnedBinary::new(bytes.len());
    out.as_mut_slice().copy_from_slice(&bytes);
    (atoms::ok(), out.release(env)).encode(env)
}

normal_and_dirty!(mask_term as postprocess_mask, postprocess_mask_dirty(output: Binary<'a>, args: MaskArgs));

/// MediaPipe's `SsdAnchorsCalculatorOptions` (`HexagonTpu.Postprocess.ssd_anchors/1`).
#[derive(NifMap)]
pub struct AnchorsTerm {
    input_width: usize,
    input_height: usize,
    min_scale: f64,
    max_scale: f64,
    anchor_offset_x: f64,
    anchor_offset_y: f64,
    strides: Vec<usize>,
    aspect_ratios: Vec<f64>,
    reduce_boxes_in_lowest_layer: bool,
    interpolated_scale_aspect_ratio: f64,
    fixed_anchor_size: bool,
}

impl From<&AnchorsTerm> for AnchorOptions {
    fn from(t: &AnchorsTerm) -> Self {
        AnchorOptions {
            input_width: t.input_width,
            input_height: t.input_height,
            min_scale: t.min_scale as f32,
            max_scale: t.max_scale as f32,
            anchor_offset_x: t.anchor_offset_x as f32,
            anchor_offset_y: t.anchor_offset_y as f32,
            strides: t.strides.clone(),
            aspect_ratios: t.aspect_ratios.iter().map(|&a| a as f32).collect(),
            reduce_boxes_in_lowest_layer: t.reduce_boxes_in_lowest_layer,
            interpolated_scale_aspect_ratio: t.interpolated_scale_aspect_ratio as f32,
            fixed_anchor_size: t.fixed_anchor_size,
        }
    }
}

/// An SSD head's spec (`HexagonTpu.Postprocess.ssd/3` builds it).
#[derive(NifMap)]
pub struct SsdArgs {
    coords: usize,
    classes: usize,
    scales: (f64, f64, f64, f64),
    reverse_output_order: bool,
    apply_exponential_on_box_size: bool,
    sigmoid_score: bool,
    score_clipping_thresh: Option<f64>,
    nms: NmsTerm,
}

fn anchors_f32(bytes: &[u8]) -> Result<Vec<[f32; 4]>, PostprocessError> {
    let values = postprocess::f32_values("anchors", bytes)?;
    if !values.len().is_multiple_of(4) {
        return Err(PostprocessError {
            argument: "anchors",
            message: format!("expected [N, 4] f32 values, got {}", values.len()),
        });
    }
    Ok(values
        .chunks_exact(4)
        .map(|a| [a[0], a[1], a[2], a[3]])
        .collect())
}

fn ssd(
    boxes: &TensorTerm,
    scores: &TensorTerm,
    anchors: &[u8],
    args: &SsdArgs,
) -> Result<Vec<DetectionTerm>, PostprocessError> {
    let boxes = TensorValues::new("boxes", boxes)?;
    let scores = TensorValues::new("scores", scores)?;
    let anchors = anchors_f32(anchors)?;
    let (x, y, w, h) = args.scales;
    let spec = SsdSpec {
        coords: args.coords,
        classes: args.classes,
        x_scale: x as f32,
        y_scale: y as f32,
        w_scale: w as f32,
        h_scale: h as f32,
        reverse_output_order: args.reverse_output_order,
        apply_exponential_on_box_size: args.apply_exponential_on_box_size,
        sigmoid_score: args.sigmoid_score,
        score_clipping_thresh: args.score_clipping_thresh.map(|t| t as f32),
        nms: NmsOptions::from(&args.nms),
    };
    Ok(detections(postprocess::ssd(
        boxes.view(),
        scores.view(),
        &anchors,
        &spec,
    )?))
}

/// `{:ok, f32_bytes}` (`[N, 4]`: x_center, y_center, width, height) or `{:error, ...}`.
#[rustler::nif(schedule = "DirtyCpu")]
fn postprocess_ssd_anchors<'a>(env: Env<'a>, options: AnchorsTerm) -> Term<'a> {
    match postprocess::ssd_anchors(&AnchorOptions::from(&options)) {
        Ok(anchors) => {
            let mut out = OwnedBinary::new(anchors.len() * 16);
            for (chunk, v) in out
                .as_mut_slice()
                .chunks_exact_mut(4)
                .zip(anchors.iter().flatten())
            {
                chunk.copy_from_slice(&v.to_le_bytes());
            }
            (atoms::ok(), out.release(env)).encode(env)
        }
        Err(e) => encode::<()>(env, Err(e)),
    }
}

/// An SSD head decoded against its anchors and suppressed: like `postprocess_nms`.
fn ssd_term<'a>(
    env: Env<'a>,
    boxes: TensorTerm<'a>,
    scores: TensorTerm<'a>,
    anchors: Binary<'a>,
    args: SsdArgs,
) -> Term<'a> {
    encode(env, ssd(&boxes, &scores, anchors.as_slice(), &args))
}

normal_and_dirty!(ssd_term as postprocess_ssd, postprocess_ssd_dirty(boxes: TensorTerm<'a>, scores: TensorTerm<'a>, anchors: Binary<'a>, args: SsdArgs));
