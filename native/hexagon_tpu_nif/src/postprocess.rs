//! `HexagonTpu.Postprocess`: a classifier's top k, NMS, YOLOv8 / YOLOv5 heads decoded, and
//! SSD heads (MediaPipe's anchors), and class masks
//! (`qnn::postprocess`). Elixir checks the options and shapes and builds the spec maps; this
//! decodes them, runs the core and returns the results. Each NIF comes twice: on a normal
//! scheduler for small inputs and on a dirty CPU scheduler (`*_dirty`) for large ones, which
//! `HexagonTpu.Postprocess` picks by size.

use rustler::{Binary, Encoder, Env, OwnedBinary, Term};

use qnn::postprocess::{
    self, AnchorOptions, Detection, NmsOptions, PostprocessError, Quantized, Scores, SsdSpec,
    Values, YoloSpec,
};

use crate::error::Failure;
use crate::protocol::{
    AnchorsArg, BoxesArg, HeadArg, LevelsArg, MaskArg, SsdArg, TensorArg, YoloArg, YoloVersionArg,
};

/// A [`TensorArg`]'s values, converted where the bytes cannot be read in place.
enum TensorValues<'a> {
    F32(Vec<f32>),
    U8(&'a [u8], f32, i32),
    U16(Vec<u16>, f32, i32),
}

impl<'a> TensorValues<'a> {
    fn new(
        argument: &'static str,
        (bytes, level): &TensorArg<'a>,
    ) -> Result<Self, PostprocessError> {
        let bytes = bytes.as_slice();
        Ok(match *level {
            None => TensorValues::F32(postprocess::f32_values(argument, bytes)?),
            Some((LevelsArg::U8, scale, offset)) => TensorValues::U8(bytes, scale as f32, offset),
            Some((LevelsArg::U16, scale, offset)) => {
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

/// A core's error, naming the argument: `:invalid_input`.
fn invalid(e: PostprocessError) -> Failure {
    Failure::invalid_input(e.to_string())
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
    scores: &TensorArg,
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
    args: &BoxesArg,
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
    let kept = postprocess::nms(
        &boxes,
        args.format.into(),
        scores,
        &NmsOptions::from(&args.nms),
    )?;
    Ok(detections(kept))
}

fn yolo(head: &HeadArg, args: &YoloArg) -> Result<Vec<DetectionTerm>, PostprocessError> {
    let spec = YoloSpec {
        candidates: args.candidates,
        classes: args.classes,
        nms: NmsOptions::from(&args.nms),
    };
    let kept = match (args.version, &head[..]) {
        (version, [boxes, scores]) => {
            let boxes = TensorValues::new("boxes", boxes)?;
            let scores = TensorValues::new("scores", scores)?;
            match version {
                YoloVersionArg::Yolov8 => {
                    postprocess::yolov8_split(boxes.view(), scores.view(), &spec)?
                }
                YoloVersionArg::Yolov5 => {
                    postprocess::yolov5_split(boxes.view(), scores.view(), &spec)?
                }
            }
        }
        (version, [output]) => {
            let output = TensorValues::new("output", output)?;
            match version {
                YoloVersionArg::Yolov8 => postprocess::yolov8(output.view(), &spec)?,
                YoloVersionArg::Yolov5 => postprocess::yolov5(output.view(), &spec)?,
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

/// Registers `$body` (a plain fn taking the env first and answering a `Result`) twice: `$name` on a normal scheduler and
/// `$dirty` on a dirty CPU scheduler; `HexagonTpu.Postprocess` calls the dirty one for large
/// inputs. (Argument types are matched as `Name` or `Name<'a>`: rustler's attribute refuses a
/// `$t:ty` fragment; and `env` is named here, where rustler's expansion can see it.)
macro_rules! normal_and_dirty {
    ($body:ident as $name:ident, $dirty:ident ($($arg:ident: $ty:ident$(<$l:lifetime>)?),*)) => {
        #[doc = concat!("[`", stringify!($body), "`] on a normal scheduler.")]
        #[rustler::nif]
        fn $name<'a>(env: Env<'a>, $($arg: $ty$(<$l>)?),*) -> Term<'a> {
            $body(env, $($arg),*).encode(env)
        }

        #[doc = concat!("[`", stringify!($body), "`] on a dirty CPU scheduler, for large inputs.")]
        #[rustler::nif(schedule = "DirtyCpu")]
        fn $dirty<'a>(env: Env<'a>, $($arg: $ty$(<$l>)?),*) -> Term<'a> {
            $body(env, $($arg),*).encode(env)
        }
    };
}

/// `{:ok, [{class, score}]} | {:error, %HexagonTpu.Error{reason: :invalid_input}}`.
fn top_k_term(
    _env: Env<'_>,
    scores: TensorArg<'_>,
    k: usize,
    softmax: bool,
) -> Result<Vec<(usize, f64)>, Failure> {
    top_k(&scores, k, softmax).map_err(invalid)
}

normal_and_dirty!(top_k_term as postprocess_top_k, postprocess_top_k_dirty(scores: TensorArg<'a>, k: usize, softmax: bool));

/// `{:ok, [{index, class, score, {x1, y1, x2, y2}}]} | {:error, ...}`, by score.
fn nms_term<'a>(
    _env: Env<'a>,
    boxes: Binary<'a>,
    scores: Binary<'a>,
    args: BoxesArg<'a>,
) -> Result<Vec<DetectionTerm>, Failure> {
    nms(boxes.as_slice(), scores.as_slice(), &args).map_err(invalid)
}

normal_and_dirty!(nms_term as postprocess_nms, postprocess_nms_dirty(boxes: Binary<'a>, scores: Binary<'a>, args: BoxesArg<'a>));

/// A YOLO head decoded and suppressed: like `postprocess_nms` (YOLOv8n at 640: 8400 x 84
/// values, dirty).
fn yolo_term(
    _env: Env<'_>,
    head: HeadArg<'_>,
    args: YoloArg,
) -> Result<Vec<DetectionTerm>, Failure> {
    yolo(&head, &args).map_err(invalid)
}

normal_and_dirty!(yolo_term as postprocess_yolo, postprocess_yolo_dirty(head: HeadArg<'a>, args: YoloArg));

/// `{:ok, class_bytes} | {:error, ...}`: each pixel's argmax class, u8 (u16 past 256 classes).
fn mask_term<'a>(env: Env<'a>, output: Binary<'a>, args: MaskArg) -> Result<Binary<'a>, Failure> {
    let bytes = postprocess::f32_values("output", output.as_slice())
        .and_then(|values| {
            let layout = args.layout.into();
            postprocess::argmax_mask(&values, args.height, args.width, args.classes, layout)
        })
        .map_err(invalid)?;
    // Aborts the VM if the allocation fails, like every binary the VM allocates.
    let mut out = OwnedBinary::new(bytes.len());
    out.as_mut_slice().copy_from_slice(&bytes);
    Ok(out.release(env))
}

normal_and_dirty!(mask_term as postprocess_mask, postprocess_mask_dirty(output: Binary<'a>, args: MaskArg));

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
    boxes: &TensorArg,
    scores: &TensorArg,
    anchors: &[u8],
    args: &SsdArg,
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
fn postprocess_ssd_anchors<'a>(env: Env<'a>, options: AnchorsArg) -> Result<Binary<'a>, Failure> {
    let anchors = postprocess::ssd_anchors(&AnchorOptions::from(&options)).map_err(invalid)?;
    let mut out = OwnedBinary::new(anchors.len() * 16);
    for (chunk, v) in out
        .as_mut_slice()
        .chunks_exact_mut(4)
        .zip(anchors.iter().flatten())
    {
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    Ok(out.release(env))
}

/// An SSD head decoded against its anchors and suppressed: like `postprocess_nms`.
fn ssd_term<'a>(
    _env: Env<'a>,
    boxes: TensorArg<'a>,
    scores: TensorArg<'a>,
    anchors: Binary<'a>,
    args: SsdArg,
) -> Result<Vec<DetectionTerm>, Failure> {
    ssd(&boxes, &scores, anchors.as_slice(), &args).map_err(invalid)
}

normal_and_dirty!(ssd_term as postprocess_ssd, postprocess_ssd_dirty(boxes: TensorArg<'a>, scores: TensorArg<'a>, anchors: Binary<'a>, args: SsdArg));
