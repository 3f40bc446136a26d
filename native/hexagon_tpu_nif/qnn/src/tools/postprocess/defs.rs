//! What every head shares: the error naming the argument, a kept box, the NMS options and the
//! input checks. A leaf under `postprocess.rs`, which re-exports it: the heads (`values.rs`,
//! `nms.rs`, `ssd.rs`, `yolo.rs`, `mask.rs`) import it here, not through their parent, which
//! imports them.

use thiserror::Error;

/// Why a postprocessing call cannot run: which argument, and what was wrong with it.
#[derive(Clone, Debug, PartialEq, Error)]
#[error("{argument}: {message}")]
pub struct PostprocessError {
    pub argument: &'static str,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, PostprocessError>;

pub(super) fn invalid<T>(argument: &'static str, message: impl Into<String>) -> Result<T> {
    Err(PostprocessError {
        argument,
        message: message.into(),
    })
}

/// One kept box: the index of its box in the input, its class, its score and the box as
/// `[x1, y1, x2, y2]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Detection {
    pub index: usize,
    pub class: usize,
    pub score: f32,
    pub bbox: [f32; 4],
}

/// The threshold, suppression and cutoff of one NMS.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NmsOptions {
    /// A candidate's score must be above it (strictly); any finite number.
    pub score_threshold: f32,
    /// Suppression when the IoU is above it (strictly); in `[0, 1]`.
    pub iou_threshold: f32,
    /// At most this many kept (`None`: no limit).
    pub max_detections: Option<usize>,
    /// Boxes of different classes suppress each other too.
    pub class_agnostic: bool,
    /// With per-class scores, every `(box, class)` above the threshold is a candidate.
    pub multi_label: bool,
}

impl NmsOptions {
    pub(super) fn check(&self) -> Result<()> {
        if !self.score_threshold.is_finite() {
            return invalid(
                "score_threshold",
                format!("must be a finite number, got {}", self.score_threshold),
            );
        }
        if !(0.0..=1.0).contains(&self.iou_threshold) {
            return invalid(
                "iou_threshold",
                format!("must be in [0, 1], got {}", self.iou_threshold),
            );
        }
        Ok(())
    }
}

/// `values` has `expected` elements (the product of `shape`, shown in the message).
pub(super) fn check_len(
    argument: &'static str,
    values: &[f32],
    expected: usize,
    shape: &str,
) -> Result<()> {
    check_count(argument, values.len(), "f32", expected, shape)
}

/// `len` elements of `type_name` are `expected` (the product of `shape`, shown in the message).
pub(super) fn check_count(
    argument: &'static str,
    len: usize,
    type_name: &str,
    expected: usize,
    shape: &str,
) -> Result<()> {
    if len != expected {
        return invalid(
            argument,
            format!("expected {shape} = {expected} {type_name} values, got {len}"),
        );
    }
    Ok(())
}

/// The first NaN of `values`, as an error naming `argument`.
pub(super) fn check_no_nan(argument: &'static str, values: &[f32]) -> Result<()> {
    match values.iter().position(|v| v.is_nan()) {
        Some(i) => invalid(argument, format!("value {i} is NaN")),
        None => Ok(()),
    }
}
