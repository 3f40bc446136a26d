//! What Elixir sends the NIFs: every option map and every atom choice a NIF decodes, in one
//! place (the answers going back are `crate::terms`'s).
//!
//! Naming: every type decoded from a term ends in `Arg`: an atom choice (`PerfModeArg`, a
//! `NifUnitEnum` mirroring a `qnn` enum, declared with `mirror!` together with its conversion)
//! and an option map (`ExecuteArg`, a `NifMap` whose keys are exactly the map's: every key
//! required). Types encoded for Elixir end in `Term` (`crate::terms`). The Elixir side that
//! builds each map is named on its type, and nothing else builds them (`.ci/aarch64.sh`
//! predicts through the public API).

use rustler::{Binary, NifMap, NifUnitEnum};

use qnn::postprocess::{AnchorOptions, BoxFormat, MaskLayout, NmsOptions};
use qnn::preprocess::{
    ColorMatrix, ColorRange, FrameFormat, Layout, Output, PixelFormat, Rect, Resize, Spec,
};
use qnn::quant::QuantType;

use crate::resources::{Handle, RuntimeRes};

/// An atom choice: a `NifUnitEnum` (variants as snake_case atoms) and its conversion to the
/// `qnn` type it stands for.
macro_rules! mirror {
    ($(#[$doc:meta])* $name:ident => $target:ty { $($variant:ident => $to:expr),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(NifUnitEnum, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($variant),+
        }

        impl From<$name> for $target {
            fn from(arg: $name) -> Self {
                match arg {
                    $($name::$variant => $to),+
                }
            }
        }
    };
}

// ---- runtime.rs, perf.rs: `HexagonTpu.Runtime`

mirror! {
    /// `:error | :warn | :info | :verbose | :debug`: QNN's log level.
    LogLevelArg => qnn::LogLevel {
        Error => qnn::LogLevel::Error,
        Warn => qnn::LogLevel::Warn,
        Info => qnn::LogLevel::Info,
        Verbose => qnn::LogLevel::Verbose,
        Debug => qnn::LogLevel::Debug,
    }
}

mirror! {
    /// `:burst | :sustained_high_performance | ... | :default` (Elixir has checked the atom).
    PerfModeArg => qnn::PerfMode {
        Burst => qnn::PerfMode::Burst,
        SustainedHighPerformance => qnn::PerfMode::SustainedHighPerformance,
        HighPerformance => qnn::PerfMode::HighPerformance,
        Balanced => qnn::PerfMode::Balanced,
        LowBalanced => qnn::PerfMode::LowBalanced,
        PowerSaver => qnn::PerfMode::PowerSaver,
        LowPowerSaver => qnn::PerfMode::LowPowerSaver,
        HighPowerSaver => qnn::PerfMode::HighPowerSaver,
        ExtremePowerSaver => qnn::PerfMode::ExtremePowerSaver,
        Default => qnn::PerfMode::Default,
    }
}

/// How a runtime is created, one map from `HexagonTpu.Runtime`: QNN's log level (`nil`: no
/// log), the runtime's performance mode and its idle delay in milliseconds (`qnn::perf`),
/// rpcmem's library (for contexts with shared buffers), and `site`, the Elixir caller, for the
/// ledger of live objects.
#[derive(NifMap)]
pub struct RuntimeArg {
    pub log_level: Option<LogLevelArg>,
    pub performance: PerfModeArg,
    pub performance_idle: u64,
    pub rpcmem_lib: String,
    pub site: String,
}

impl RuntimeArg {
    pub fn split(
        self,
    ) -> (
        qnn::Site,
        Option<qnn::LogLevel>,
        qnn::PerfConfig,
        std::path::PathBuf,
    ) {
        let performance = qnn::PerfConfig {
            mode: self.performance.into(),
            idle: std::time::Duration::from_millis(self.performance_idle),
        };
        let log_level = self.log_level.map(qnn::LogLevel::from);
        let rpcmem_lib = std::path::PathBuf::from(self.rpcmem_lib);
        (
            qnn::Site::named(self.site),
            log_level,
            performance,
            rpcmem_lib,
        )
    }
}

// ---- context.rs: `HexagonTpu.Context`

mirror! {
    /// The pre-flight mode: `:on | :strict | :off`.
    PreflightArg => qnn::preflight::Mode {
        On => qnn::preflight::Mode::On,
        Strict => qnn::preflight::Mode::Strict,
        Off => qnn::preflight::Mode::Off,
    }
}

mirror! {
    /// `:default | :low | :normal | :normal_high | :high`: the context priority (`:default`
    /// passes no config).
    PriorityArg => Option<qnn::context::Priority> {
        Default => None,
        Low => Some(qnn::context::Priority::Low),
        Normal => Some(qnn::context::Priority::Normal),
        NormalHigh => Some(qnn::context::Priority::NormalHigh),
        High => Some(qnn::context::Priority::High),
    }
}

mirror! {
    /// `:auto | :on | :off`: whether the context's executes use shared buffers.
    SharedBuffersArg => qnn::BufferChoice {
        Auto => qnn::BufferChoice::Auto,
        On => qnn::BufferChoice::On,
        Off => qnn::BufferChoice::Off,
    }
}

/// How a context is loaded, one map from `HexagonTpu.Context.load_args/1`: the pre-flight
/// mode, the priority, the backend queue's depth (`nil`: executes queue on the graphs' own
/// threads), whether it is created again after a device reset, whether its executes use
/// shared buffers, and `site`, the Elixir caller, for the ledger of live objects.
#[derive(NifMap)]
pub struct LoadArg {
    pub preflight: PreflightArg,
    pub priority: PriorityArg,
    pub async_queue_depth: Option<u32>,
    pub recover: bool,
    pub shared_buffers: SharedBuffersArg,
    pub site: String,
}

impl LoadArg {
    pub fn split(self) -> (qnn::Site, qnn::context::LoadOptions) {
        let options = qnn::context::LoadOptions {
            preflight: self.preflight.into(),
            priority: self.priority.into(),
            async_queue_depth: self.async_queue_depth,
            recover: self.recover,
            shared_buffers: self.shared_buffers.into(),
        };
        (qnn::Site::named(self.site), options)
    }
}

// ---- graph.rs, profile.rs: `HexagonTpu.Graph.Call`

mirror! {
    /// `qnn::io::Mode` as an atom: `:model` (the model's own dtype, passed through untouched),
    /// `:f32` (converted with the tensor's quantization parameters) or `:frame` (a camera
    /// frame, preprocessed straight into the input's buffer: `qnn::io::Mode::Written`).
    ModeArg => qnn::io::Mode {
        Model => qnn::io::Mode::Model,
        F32 => qnn::io::Mode::F32,
        Frame => qnn::io::Mode::Written,
    }
}

mirror! {
    /// The `profile:` option of an execute.
    ProfileLevelArg => qnn::profile::Level {
        Basic => qnn::profile::Level::Basic,
        Detailed => qnn::profile::Level::Detailed,
        Optrace => qnn::profile::Level::Optrace,
    }
}

/// The options of an execute, one map from `HexagonTpu.Graph.Call`.
#[derive(NifMap)]
#[rustler(decode)]
pub struct ExecuteArg {
    /// Per input, in model order: whether its bytes are in the model's dtype, f32, or a frame.
    pub input_modes: Vec<ModeArg>,
    /// The preprocessing pass of each `:frame` input, in input order.
    pub frames: Vec<SpecArg>,
    /// Per output: whether it comes back in the model's dtype or as f32.
    pub output_modes: Vec<ModeArg>,
    /// Executes that may wait for the graph's turn; one more is refused as overloaded.
    pub max_queued: usize,
    /// Queued even on an idle graph (a caller with a deadline must be free to leave).
    pub always_queue: bool,
    /// A profile of this execute, asked for by the caller.
    pub profile: Option<ProfileLevelArg>,
    /// The call's performance mode (`nil`: the runtime's), voted by `runtime`.
    pub performance: Option<PerfModeArg>,
    /// The graph's runtime, always: a resource decodes faster than an `Option` of one whose
    /// `nil` is tried as a resource first (rustler's `Option` decoder).
    pub runtime: Handle<RuntimeRes>,
}

// ---- preprocess.rs: `HexagonTpu.Preprocess`

mirror! {
    ResizeArg => Resize {
        Nearest => Resize::Nearest,
        Bilinear => Resize::Bilinear,
    }
}

mirror! {
    /// A model input's layout.
    InputLayoutArg => Layout {
        Nhwc => Layout::Nhwc,
        Nchw => Layout::Nchw,
    }
}

mirror! {
    /// How the frame's pixels are stored (`:rgb` also stands for `:bgr`: see `swap_rb`).
    PixelFormatArg => PixelFormat {
        Rgb => PixelFormat::Rgb,
        Nv12 => PixelFormat::Nv12,
        Nv21 => PixelFormat::Nv21,
        I420 => PixelFormat::I420,
        Yuyv => PixelFormat::Yuyv,
    }
}

mirror! {
    ColorMatrixArg => ColorMatrix {
        Bt601 => ColorMatrix::Bt601,
        Bt709 => ColorMatrix::Bt709,
    }
}

mirror! {
    ColorRangeArg => ColorRange {
        Limited => ColorRange::Limited,
        Full => ColorRange::Full,
    }
}

/// The output element type: a quantized container, or a float type.
#[derive(NifUnitEnum, Clone, Copy, PartialEq, Eq)]
pub enum OutputTypeArg {
    U8,
    S8,
    U16,
    S16,
    F32,
    F16,
}

/// A preprocessing pass, one map from `HexagonTpu.Preprocess` (every key present).
#[derive(NifMap)]
pub struct SpecArg {
    src_width: usize,
    src_height: usize,
    dst_width: usize,
    dst_height: usize,
    resize: ResizeArg,
    layout: InputLayoutArg,
    swap_rb: bool,
    divisor: f64,
    mean: (f64, f64, f64),
    std: (f64, f64, f64),
    output: OutputTypeArg,
    // QNN's convention (offset = -zero_point); ignored for f32 and f16
    scale: f64,
    offset: i32,
    qmin: i64,
    qmax: i64,
    // the frame's bytes; nil: the defaults (packed rows, chroma right after the Y plane)
    pixel_format: PixelFormatArg,
    color_matrix: ColorMatrixArg,
    color_range: ColorRangeArg,
    stride: Option<usize>,
    chroma_stride: Option<usize>,
    chroma_offset: Option<usize>,
    // {x, y, w, h}: the crop in the frame, the content in the model input (nil: all of it)
    crop: Option<(usize, usize, usize, usize)>,
    content: Option<(usize, usize, usize, usize)>,
    pad: (u8, u8, u8),
}

impl From<&SpecArg> for Spec {
    fn from(t: &SpecArg) -> Self {
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
            resize: t.resize.into(),
            layout: t.layout.into(),
            swap_rb: t.swap_rb,
            divisor: t.divisor as f32,
            mean: three(t.mean),
            std: three(t.std),
            output: match t.output {
                OutputTypeArg::U8 => quantized(QuantType::U8),
                OutputTypeArg::S8 => quantized(QuantType::I8),
                OutputTypeArg::U16 => quantized(QuantType::U16),
                OutputTypeArg::S16 => quantized(QuantType::I16),
                OutputTypeArg::F32 => Output::F32,
                OutputTypeArg::F16 => Output::F16,
            },
            frame: FrameFormat {
                format: t.pixel_format.into(),
                matrix: t.color_matrix.into(),
                range: t.color_range.into(),
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

// ---- postprocess.rs: `HexagonTpu.Postprocess`

mirror! {
    BoxFormatArg => BoxFormat {
        Xyxy => BoxFormat::Xyxy,
        Xywh => BoxFormat::Xywh,
        Cxcywh => BoxFormat::Cxcywh,
    }
}

mirror! {
    /// A segmentation output's layout.
    MaskLayoutArg => MaskLayout {
        Hwc => MaskLayout::Hwc,
        Chw => MaskLayout::Chw,
    }
}

/// Which YOLO head (no `qnn` enum: it picks the decoder function).
#[derive(NifUnitEnum, Clone, Copy, PartialEq, Eq)]
pub enum YoloVersionArg {
    Yolov8,
    Yolov5,
}

/// The container of quantized levels (no `qnn` enum: it picks how the bytes are read).
#[derive(NifUnitEnum, Clone, Copy, PartialEq, Eq)]
pub enum LevelsArg {
    U8,
    U16,
}

/// A decoder's tensor: its bytes, f32 little-endian, or quantized levels with
/// `{:u8 | :u16, scale, offset}` (QNN's offset, the negated zero point).
pub type TensorArg<'a> = (Binary<'a>, Option<(LevelsArg, f64, i32)>);

/// A YOLO head: one tensor, or YOLOv8's two parts (boxes, scores).
pub type HeadArg<'a> = Vec<TensorArg<'a>>;

/// A mask's geometry (`HexagonTpu.Postprocess.mask/2` builds it).
#[derive(NifMap)]
pub struct MaskArg {
    pub height: usize,
    pub width: usize,
    pub classes: usize,
    pub layout: MaskLayoutArg,
}

/// The NMS options `HexagonTpu.Postprocess` builds (every key present).
#[derive(NifMap)]
pub struct NmsArg {
    score_threshold: f64,
    iou_threshold: f64,
    max_detections: Option<usize>,
    class_agnostic: bool,
    multi_label: bool,
}

impl From<&NmsArg> for NmsOptions {
    fn from(t: &NmsArg) -> Self {
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
pub struct BoxesArg<'a> {
    pub format: BoxFormatArg,
    pub classes: usize,
    pub box_classes: Option<Binary<'a>>,
    pub nms: NmsArg,
}

/// A YOLO head's spec (the kept boxes come back in the model's coordinates).
#[derive(NifMap)]
pub struct YoloArg {
    pub version: YoloVersionArg,
    pub candidates: usize,
    pub classes: usize,
    pub nms: NmsArg,
}

/// MediaPipe's `SsdAnchorsCalculatorOptions` (`HexagonTpu.Postprocess.ssd_anchors/1`).
#[derive(NifMap)]
pub struct AnchorsArg {
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

impl From<&AnchorsArg> for AnchorOptions {
    fn from(t: &AnchorsArg) -> Self {
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
pub struct SsdArg {
    pub coords: usize,
    pub classes: usize,
    pub scales: (f64, f64, f64, f64),
    pub reverse_output_order: bool,
    pub apply_exponential_on_box_size: bool,
    pub sigmoid_score: bool,
    pub score_clipping_thresh: Option<f64>,
    pub nms: NmsArg,
}
