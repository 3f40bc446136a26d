defmodule HexagonTpu.Postprocess do
  alias HexagonTpu.Args
  alias HexagonTpu.Postprocess.Ssd

  # The NMS options, of nms/3 and the decoders.
  @nms_options [
    score_threshold: [
      type: {:or, [:integer, :float]},
      default: 0.25,
      type_doc: "a number",
      doc: "A candidate's score is above it, strictly."
    ],
    iou_threshold: [
      type: {:custom, Args, :number_in, [0, 1]},
      default: 0.45,
      type_doc: "a number in [0, 1]",
      doc: "A candidate overlapping a kept one by more (IoU, strictly) is suppressed."
    ],
    max_detections: [
      type: {:or, [nil, :non_neg_integer]},
      default: 300,
      type_doc: "a non-negative integer or nil",
      doc: "The most detections kept; `nil`: no limit."
    ],
    class_agnostic: [
      type: :boolean,
      default: false,
      type_doc: "a boolean",
      doc: "Boxes of different classes suppress each other."
    ],
    multi_label: [
      type: :boolean,
      default: false,
      type_doc: "a boolean",
      doc: "With per-class scores, every class above the threshold is a candidate."
    ]
  ]

  @moduledoc """
  A model's raw outputs to answers, natively (no EXLA needed, so it runs on Nerves): a
  classifier's top k, a segmenter's class mask (`mask/2`), and a detector's boxes after a score threshold and non-maximum
  suppression (NMS), with the YOLOv8 and YOLOv5 heads decoded first and the boxes mapped back
  to the frame through the letterbox.

      # a classifier: the five best classes, as probabilities
      {:ok, [{class, p} | _]} = HexagonTpu.Postprocess.top_k(logits, 5, softmax: true)

      # YOLOv8n at 640 ({1, 84, 8400}), on a 1280x720 frame letterboxed to 640x640
      {:ok, detections} =
        HexagonTpu.Postprocess.yolov8(output,
          score_threshold: 0.25,
          iou_threshold: 0.45,
          letterbox: %{scale: 0.5, x_offset: 0, y_offset: 140},
          clip: {1280, 720}
        )

      for %HexagonTpu.Postprocess.Detection{box: {x1, y1, x2, y2}, class: c, score: s} <- detections,
        do: IO.puts("class \#{c} (\#{s}) at \#{x1},\#{y1} - \#{x2},\#{y2}")

      # any detector: boxes {N, 4} and per-class scores {N, C}
      {:ok, detections} = HexagonTpu.Postprocess.nms(boxes, scores, format: :cxcywh)

  ## Tensors

  Every tensor argument is an `Nx.Tensor` of a float type (converted to f32), or
  `{binary, shape}`: f32 little-endian bytes and their shape. `top_k/3` also takes a plain
  binary of f32 values.

  The decoders (`top_k/3`, `yolov8/2`, `yolov5/2`, `ssd/3`) also take a model output in the
  model's own type, as `{output, %HexagonTpu.TensorInfo{}}`: the tensor or binary that
  `HexagonTpu.predict/3` returns with `dequantize: :none`, and its description from
  `HexagonTpu.Graph.outputs/1`. An f32 output, or a u8/u16 one quantized per tensor, is read
  as it is: scores are compared with the threshold in the quantized domain, and only the
  candidates are dequantized (`float = (q - zero_point) * scale` in f32, as `predict/3`
  dequantizes), so the answer is the one of the dequantized output, bit for bit, without
  converting the whole head:

      {:ok, [boxes, scores]} = HexagonTpu.predict(model, input, dequantize: :none)
      [box_info, score_info] = HexagonTpu.Graph.outputs(model)
      {:ok, detections} =
        HexagonTpu.Postprocess.yolov8([{boxes, box_info}, {scores, score_info}], letterbox: transform)

  (A YOLO head that `mix hexagon_tpu.compile` split comes as those two outputs, each quantized
  on its own; `yolov5/2` takes a split YOLOv5 head's `[boxes, scores]` the same way.)

  ## Definitions

    * **Order.** Scores are ordered descending, equal scores by the lower box index, then the
      lower class. Every result is in that order. A NaN score is an error.
    * **`top_k/3`.** The `k` highest of `C` scores as `{class, score}`, all `C` when `k >= C`.
      With `softmax: true` the scores are first `p_i = exp(x_i - m) / sum_j exp(x_j - m)`,
      `m = max x` (numerically stable), in f64, rounded to f32; scores must then be finite.
    * **Boxes** are `:xyxy` (corners; the default), `:xywh` (top-left corner and size:
      `x2 = x + w`) or `:cxcywh` (centre and size: `x1 = cx - w * 0.5`, `x2 = cx + w * 0.5`),
      in f32, and are returned as `{x1, y1, x2, y2}`. A box's width is `max(x2 - x1, 0)`, its
      height likewise. Coordinates must be finite.
    * **IoU** is OpenCV's `dnn::NMSBoxes`'s, without the `+1` convention:
      `inter / (area_a + area_b - inter)`, with `inter` the intersection's area (0 when the
      boxes do not overlap); a pair whose union is 0 (both boxes of zero area) has IoU 0, so
      zero-area boxes never suppress or get suppressed. In f32.
    * **Candidates.** A box whose score is above `:score_threshold`, strictly (as OpenCV and
      Ultralytics). With per-class scores `{N, C}` a box takes its best class (the lowest index
      among equal maxima) and that score; with `multi_label: true`, every `{box, class}` pair
      above the threshold is a candidate of its own. With one score per box (`{N}`), the class
      comes from `:classes`, or is 0.
    * **NMS** is greedy: candidates are visited in the order above, and one is kept unless a
      kept candidate of the same class (of any class with `class_agnostic: true`) overlaps it
      with `IoU > iou_threshold` (strictly: OpenCV keeps a box whose overlap is
      `<= threshold`). The visit stops once `:max_detections` are kept.
    * **YOLOv8** (`yolov8/2`): the output is `{1, 4 + C, N}` (or `{4 + C, N}`), rows 0..3
      `cx, cy, w, h` in the model input's pixels, then the `C` class scores (no objectness,
      used as they are). **YOLOv5** (`yolov5/2`): `{1, N, 5 + C}` (or `{N, 5 + C}`),
      `cx, cy, w, h, objectness`, then the class scores; class `c` scores
      `objectness * class_score[c]` (f32). Either head may come split in two, `[boxes, scores]`:
      YOLOv8's `{1, 4, N}` and `{1, C, N}`, YOLOv5's `{1, N, 4}` and `{1, N, 1 + C}`
      (objectness first), answered as the two put together. NMS runs in the model's coordinates; then each kept
      box is mapped to the frame with `letterbox:`, the `HexagonTpu.Preprocess.Transform`
      that `HexagonTpu.Preprocess.transform/2` gives for the options that made the input
      (`frame = model * scale + offset` by `Transform.to_frame/2`, in f64), and clipped to
      `clip: {width, height}`: `x in [0, width]`, `y in [0, height]`. `letterbox:` also takes
      the older map `%{scale: s, x_offset: dx, y_offset: dy}`, which states the other way,
      `model = frame * s + offset`: it is the transform of scale `1 / s` and offset
      `-offset / s`.
    * **SSD** (`ssd_anchors/1`, `ssd/3`). Anchors are MediaPipe's `SsdAnchorsCalculator`'s,
      with its option names (`:input_size_width`, `:input_size_height`, `:min_scale`,
      `:max_scale`, `:strides`, `:aspect_ratios` (`[1.0]`), `:anchor_offset_x`/`_y` (0.5),
      `:reduce_boxes_in_lowest_layer`, `:interpolated_scale_aspect_ratio` (1.0),
      `:fixed_anchor_size`, `:num_layers` = the number of strides; feature maps are
      `ceil(input / stride)`): for each run of layers of one stride, the scale of layer `i` of
      `L` is `min + (max - min) * i / (L - 1)` (`(min + max) / 2` when `L = 1`), one anchor per
      aspect ratio `r` of size `scale * sqrt(r)` by `scale / sqrt(r)`, plus one of the
      interpolated ratio at `sqrt(scale * next_scale)` (next of the last layer: 1), at each
      cell centre `((x + offset_x) / fw, (y + offset_y) / fh)`; 1 x 1 with
      `fixed_anchor_size: true`. `:anchors` is those options, or anchors `{N, 4}` given. Boxes
      decode as `TensorsToDetectionsCalculator`'s: `x, y, w, h` (`reverse_output_order: true`,
      BlazeFace) or `y, x, h, w`, then `cx = x / x_scale * anchor_w + anchor_cx` (y alike), and
      `w = w / w_scale * anchor_w` (or `exp(w / w_scale) * anchor_w` with
      `apply_exponential_on_box_size: true`); scores are used as they are or, with
      `sigmoid_score: true`, `1 / (1 + exp(-clamp(x, -t, t)))` (`t`: `:score_clipping_thresh`,
      or none) in f64 rounded to f32. Keypoints are not decoded.
    * **`mask/2`.** Each pixel's class is the argmax over its `C` scores, the lowest class
      among equal maxima; one u8 per pixel (u16 little-endian past 256 classes).

  ## Options

  Of `nms/3`, `yolov8/2`, `yolov5/2` and `ssd/3`:

  #{NimbleOptions.docs(@nms_options)}
  `nms/3` and the decoders have options of their own besides (their docs list them).

  ## Errors and scheduling

  An argument of the wrong type (an option outside its type, a negative `k`, an
  `:iou_threshold` outside `[0, 1]`) raises `ArgumentError` naming it. Data that does not fit
  (a binary of the wrong size for its shape, shapes that disagree, a NaN score, a non-finite
  coordinate, an output type the decoders do not read) returns
  `{:error, %HexagonTpu.Error{reason: :invalid_input}}` naming the argument. Large inputs
  (over #{20_000} values, or over 1000 boxes) run on a dirty CPU scheduler, small ones on the
  caller's.
  """

  alias HexagonTpu.{Error, Native, TensorInfo}
  alias HexagonTpu.Postprocess.{Detection, Input}
  alias HexagonTpu.Preprocess.Transform

  @dirty_values 20_000
  @dirty_boxes 1000

  @top_k_options Args.schema!(
                   softmax: [
                     type: :boolean,
                     default: false,
                     type_doc: "a boolean",
                     doc: """
                     Softmax over the scores first (quantized scores are then all \
                     dequantized: the sum needs them).
                     """
                   ]
                 )

  @nms_schema Args.schema!(
                [
                  format: [
                    type: {:in, [:xyxy, :xywh, :cxcywh]},
                    default: :xyxy,
                    type_doc: ":xyxy, :xywh or :cxcywh",
                    doc: "How `boxes` hold a box."
                  ],
                  classes: [
                    type: :any,
                    default: nil,
                    type_doc: "a list or integer tensor of N class indices",
                    doc: "With one score per box (`{N}`), each box's class; `nil`: 0."
                  ]
                ] ++ @nms_options
              )

  @yolo_schema Args.schema!(
                 [
                   letterbox: [
                     type: {:or, [nil, {:custom, __MODULE__, :letterbox, []}]},
                     default: nil,
                     type_doc:
                       "a map %{scale: s, x_offset: dx, y_offset: dy} of numbers, s > 0, or a " <>
                         "HexagonTpu.Preprocess.Transform",
                     doc: """
                     Maps each kept box to the frame: the transform \
                     `HexagonTpu.Preprocess.transform/2` gives for the options that made the \
                     input (see "Definitions").
                     """
                   ],
                   clip: [
                     type: {:or, [nil, {:custom, __MODULE__, :clip, []}]},
                     default: nil,
                     type_doc: "{width, height}, positive numbers",
                     doc:
                       "Clips each kept box to the frame, `x in [0, width]`, `y in [0, height]`."
                   ]
                 ] ++ @nms_options
               )

  @ssd_schema Args.schema!(Ssd.options() ++ @nms_options)

  @mask_schema Args.schema!(
                 layout: [
                   type: {:in, [:hwc, :chw]},
                   default: :hwc,
                   type_doc: ":hwc or :chw",
                   doc: "`{H, W, C}` or `{C, H, W}`."
                 ]
               )

  @typedoc "An `Nx.Tensor` (a float type) or `{binary, shape}` (f32 little-endian)."
  @type tensor :: struct() | {binary(), tuple()}

  @typedoc "A model output in its own type and its description (the decoders)."
  @type output :: tensor() | {struct() | binary(), TensorInfo.t()}

  @doc """
  The `k` best classes of a classifier's scores (shape `{C}` or `{1, C}`), as
  `{:ok, [{class_index, score}]}`, by score (see "Definitions"). Options:

  #{NimbleOptions.docs(@top_k_options)}
  """
  @spec top_k(output() | binary(), non_neg_integer(), keyword()) ::
          {:ok, [{non_neg_integer(), float()}]} | {:error, Error.t()}
  def top_k(scores, k, opts \\ []) do
    fun = "HexagonTpu.Postprocess.top_k/3"
    softmax = Args.options!(opts, @top_k_options, fun)[:softmax]
    unless is_integer(k) and k >= 0, do: Args.type_error!(fun, "`k`", "a non-negative integer", k)

    scores = if is_binary(scores), do: {scores, {div(byte_size(scores), 4)}}, else: scores

    with {:ok, values, shape} <- Input.values!(scores, "scores", fun),
         :ok <- vector(shape) do
      # all C when k >= C: a k past what the NIF holds asks for all of them too
      native(:postprocess_top_k, [values, min(k, Args.max_u64()), softmax], dirty?(shape))
    end
  end

  @doc "Like `top_k/3`, but raises `HexagonTpu.Error`."
  @spec top_k!(output() | binary(), non_neg_integer(), keyword()) :: [
          {non_neg_integer(), float()}
        ]
  def top_k!(scores, k, opts \\ []), do: scores |> top_k(k, opts) |> Error.unwrap!()

  @doc """
  Greedy NMS of `boxes` (`{N, 4}`, or `{1, N, 4}`) with `scores`: per class `{N, C}` or one
  per box `{N}` (a leading batch dimension of 1 allowed). Returns
  `{:ok, [%HexagonTpu.Postprocess.Detection{}]}` by score (see "Definitions"). Options: the
  NMS ones (see "Options"), and

  #{NimbleOptions.docs(Keyword.take(@nms_schema.schema, [:format, :classes]))}
  """
  @spec nms(tensor(), tensor(), keyword()) :: {:ok, [Detection.t()]} | {:error, Error.t()}
  def nms(boxes, scores, opts \\ []) do
    fun = "HexagonTpu.Postprocess.nms/3"
    opts = Args.options!(opts, @nms_schema, fun)
    nms = nms_args(opts)
    format = opts[:format]
    box_classes = Input.classes!(opts[:classes], fun)

    with {:ok, box_bytes, box_shape} <- Input.f32!(boxes, "boxes", fun),
         {:ok, score_bytes, score_shape} <- Input.f32!(scores, "scores", fun),
         {:ok, n} <- boxes_shape(box_shape),
         {:ok, classes} <- scores_shape(score_shape, n, box_classes) do
      args = %{format: format, classes: classes, box_classes: box_classes, nms: nms}

      :postprocess_nms
      |> native([box_bytes, score_bytes, args], dirty?(score_shape, n))
      |> detections()
    end
  end

  @doc "Like `nms/3`, but raises `HexagonTpu.Error`."
  @spec nms!(tensor(), tensor(), keyword()) :: [Detection.t()]
  def nms!(boxes, scores, opts \\ []), do: boxes |> nms(scores, opts) |> Error.unwrap!()

  @doc """
  YOLOv8's head (`{1, 4 + C, N}`: `cx, cy, w, h`, then the class scores) decoded and
  suppressed: `{:ok, [%HexagonTpu.Postprocess.Detection{}]}` by score. Options: the NMS ones
  (see "Options"), and

  #{NimbleOptions.docs(Keyword.take(@yolo_schema.schema, [:letterbox, :clip]))}

  The head may also come in its two parts, `[boxes, scores]` (`{1, 4, N}` and `{1, C, N}`):
  the outputs `mix hexagon_tpu.compile` splits a YOLOv8 head into, so that each is quantized
  on its own (the binary's `.names` file says so). The result is the same as for the two put
  together.
  """
  @spec yolov8(output() | [output()], keyword()) :: {:ok, [Detection.t()]} | {:error, Error.t()}
  def yolov8(output, opts \\ []),
    do: yolo(:yolov8, output, opts, "HexagonTpu.Postprocess.yolov8/2")

  @doc "Like `yolov8/2`, but raises `HexagonTpu.Error`."
  @spec yolov8!(output() | [output()], keyword()) :: [Detection.t()]
  def yolov8!(output, opts \\ []), do: output |> yolov8(opts) |> Error.unwrap!()

  @doc """
  YOLOv5's head (`{1, N, 5 + C}`: `cx, cy, w, h, objectness`, then the class scores; a score is
  `objectness * class_score`) decoded and suppressed, as `yolov8/2`.

  The head may also come in its two parts, `[boxes, scores]` (`{1, N, 4}` and `{1, N, 1 + C}`:
  the objectness, then the class scores): the outputs `mix hexagon_tpu.compile` splits a
  YOLOv5 head into, so that each is quantized on its own (the binary's `.names` file says
  so). The result is the same as for the two put together.
  """
  @spec yolov5(output() | [output()], keyword()) :: {:ok, [Detection.t()]} | {:error, Error.t()}
  def yolov5(output, opts \\ []),
    do: yolo(:yolov5, output, opts, "HexagonTpu.Postprocess.yolov5/2")

  @doc "Like `yolov5/2`, but raises `HexagonTpu.Error`."
  @spec yolov5!(output() | [output()], keyword()) :: [Detection.t()]
  def yolov5!(output, opts \\ []), do: output |> yolov5(opts) |> Error.unwrap!()

  @doc """
  The `ssd/3` options of a MediaPipe graph, as MediaPipe states them: `:face_detection_short_range`
  (BlazeFace, a `{1, 3, 128, 128}` input; its `SsdAnchorsCalculator` options, its
  `TensorsToDetectionsCalculator`'s box scales, logit scores clipped at 100, and the
  `NonMaxSuppression`'s 0.3, with a score threshold of 0.5); `Keyword.merge/2` changes any:

      opts = Keyword.merge(Postprocess.ssd_options(:face_detection_short_range), score_threshold: 0.75)
      {:ok, faces} = Postprocess.ssd(boxes, scores, opts)
  """
  @spec ssd_options(:face_detection_short_range) :: keyword()
  def ssd_options(:face_detection_short_range) do
    [
      anchors: [
        num_layers: 4,
        input_size_width: 128,
        input_size_height: 128,
        min_scale: 0.1484375,
        max_scale: 0.75,
        strides: [8, 16, 16, 16],
        fixed_anchor_size: true
      ],
      x_scale: 128,
      y_scale: 128,
      w_scale: 128,
      h_scale: 128,
      reverse_output_order: true,
      sigmoid_score: true,
      score_clipping_thresh: 100,
      score_threshold: 0.5,
      iou_threshold: 0.3
    ]
  end

  def ssd_options(other),
    do:
      Args.type_error!(
        "HexagonTpu.Postprocess.ssd_options/1",
        "`graph`",
        ":face_detection_short_range",
        other
      )

  @doc """
  MediaPipe's `SsdAnchorsCalculator`: `{:ok, {f32_bytes, {n, 4}}}`, each anchor
  `x_center, y_center, width, height`, normalized to the input (see "SSD").
  """
  @spec ssd_anchors(keyword()) :: {:ok, {binary(), {non_neg_integer(), 4}}} | {:error, Error.t()}
  def ssd_anchors(opts) do
    with {:ok, bytes} <- Ssd.generate(opts, "HexagonTpu.Postprocess.ssd_anchors/1"),
         do: {:ok, {bytes, {div(byte_size(bytes), 16), 4}}}
  end

  @doc """
  An SSD head (BlazeFace and its kin): `raw_boxes` `{1, N, K}` (or `{N, K}`, `K >= 4` values
  per anchor), `raw_scores` `{1, N, C}`, `{N, C}` or `{N}`, decoded against `:anchors` and
  suppressed: `{:ok, [%HexagonTpu.Postprocess.Detection{}]}` by score, boxes in the anchors'
  units (see "SSD"). Options: the NMS ones (see "Options"), and

  #{NimbleOptions.docs(Ssd.options())}
  """
  @spec ssd(output(), output(), keyword()) :: {:ok, [Detection.t()]} | {:error, Error.t()}
  def ssd(raw_boxes, raw_scores, opts) do
    fun = "HexagonTpu.Postprocess.ssd/3"
    opts = Args.options!(opts, @ssd_schema, fun)
    ssd = Map.new(Keyword.take(opts, Keyword.keys(Ssd.options())))
    nms = nms_args(opts)

    with {:ok, anchors, n} <- Ssd.anchors!(ssd.anchors, fun),
         {:ok, box_values, box_shape} <- Input.values!(raw_boxes, "boxes", fun),
         {:ok, score_values, score_shape} <- Input.values!(raw_scores, "scores", fun),
         {:ok, coords} <- ssd_boxes(box_shape, n),
         {:ok, classes} <- ssd_scores(score_shape, n) do
      args = Ssd.args(ssd, coords, classes, nms)

      :postprocess_ssd
      |> native([box_values, score_values, anchors, args], dirty?(score_shape, n))
      |> detections()
    end
  end

  @doc "Like `ssd/3`, but raises `HexagonTpu.Error`."
  @spec ssd!(output(), output(), keyword()) :: [Detection.t()]
  def ssd!(raw_boxes, raw_scores, opts), do: raw_boxes |> ssd(raw_scores, opts) |> Error.unwrap!()

  defp ssd_boxes({1, n, k}, n) when k >= 4, do: {:ok, k}
  defp ssd_boxes({n, k}, n) when k >= 4, do: {:ok, k}

  defp ssd_boxes(shape, n),
    do:
      Args.invalid_input(
        "boxes: expected a shape {1, N, K} or {N, K} with N = #{n} (the anchors') and K >= 4, got #{inspect(shape)}"
      )

  defp ssd_scores({1, n, c}, n) when c > 0, do: {:ok, c}
  defp ssd_scores({n, c}, n) when c > 0, do: {:ok, c}
  defp ssd_scores({n}, n), do: {:ok, 1}

  defp ssd_scores(shape, n),
    do:
      Args.invalid_input(
        "scores: expected a shape {1, N, C}, {N, C} or {N} with N = #{n} (the anchors'), got #{inspect(shape)}"
      )

  @doc """
  A segmentation output's class mask: each pixel's class is the argmax over its `C` scores
  (the lowest class among equal maxima). `output` is `{H, W, C}` (`layout: :hwc`, the
  default) or `{C, H, W}` (`layout: :chw`), a leading batch dimension of 1 allowed. Returns
  `{:ok, {bytes, {h, w}}}`: row-major, one u8 per pixel, or u16 little-endian when `C > 256`.
  Options:

  #{NimbleOptions.docs(@mask_schema)}
  """
  @spec mask(tensor(), keyword()) ::
          {:ok, {binary(), {non_neg_integer(), non_neg_integer()}}} | {:error, Error.t()}
  def mask(output, opts \\ []) do
    fun = "HexagonTpu.Postprocess.mask/2"
    layout = Args.options!(opts, @mask_schema, fun)[:layout]

    with {:ok, bytes, shape} <- Input.f32!(output, "output", fun),
         {:ok, h, w, c} <- mask_shape(layout, shape) do
      args = %{height: h, width: w, classes: c, layout: layout}

      with {:ok, mask} <- native(:postprocess_mask, [bytes, args], dirty?(shape)),
           do: {:ok, {mask, {h, w}}}
    end
  end

  @doc "Like `mask/2`, but raises `HexagonTpu.Error`."
  @spec mask!(tensor(), keyword()) :: {binary(), {non_neg_integer(), non_neg_integer()}}
  def mask!(output, opts \\ []), do: output |> mask(opts) |> Error.unwrap!()

  defp mask_shape(:hwc, {1, h, w, c}) when c > 0, do: {:ok, h, w, c}
  defp mask_shape(:hwc, {h, w, c}) when c > 0, do: {:ok, h, w, c}
  defp mask_shape(:chw, {1, c, h, w}) when c > 0, do: {:ok, h, w, c}
  defp mask_shape(:chw, {c, h, w}) when c > 0, do: {:ok, h, w, c}

  defp mask_shape(layout, shape) do
    wanted = if layout == :hwc, do: "{H, W, C} or {1, H, W, C}", else: "{C, H, W} or {1, C, H, W}"

    Args.invalid_input(
      "output: expected a shape #{wanted} (layout: #{inspect(layout)}), got #{inspect(shape)}"
    )
  end

  # -- the decoders ----------------------------------------------------------------------------

  defp yolo(version, output, opts, fun) do
    opts = Args.options!(opts, @yolo_schema, fun)
    nms = nms_args(opts)
    {transform, clip} = {opts[:letterbox], opts[:clip]}

    with {:ok, head, shape} <- head!(version, output, fun),
         {:ok, n, c} <- head_shape(version, shape) do
      args = %{version: version, candidates: n, classes: c, nms: nms}

      :postprocess_yolo
      |> native([head, args], dirty?(shape))
      |> detections()
      |> to_frame(transform, clip)
    end
  end

  # A head split in [boxes, scores], each in its own type: the NIF takes both parts; the shape
  # is the whole's. YOLOv8's: {1, 4, N} and {1, C, N}, the whole {1, 4 + C, N}; YOLOv5's:
  # {1, N, 4} and {1, N, 1 + C} (objectness, then the classes), the whole {1, N, 5 + C}.
  defp head!(version, [boxes, scores], fun) do
    with {:ok, box_values, box_shape} <- Input.values!(boxes, "boxes", fun),
         {:ok, score_values, score_shape} <- Input.values!(scores, "scores", fun) do
      case {version, rows(box_shape), rows(score_shape)} do
        {:yolov8, {4, n}, {c, n}} when c >= 1 ->
          {:ok, [box_values, score_values], {1, 4 + c, n}}

        {:yolov5, {n, 4}, {n, k}} when k >= 2 ->
          {:ok, [box_values, score_values], {1, n, 4 + k}}

        _ ->
          wanted =
            if version == :yolov8,
              do: "{1, 4, N} and {1, C, N} (or {4, N} and {C, N}),",
              else: "{1, N, 4} and {1, N, 1 + C} (or {N, 4} and {N, 1 + C}) with C >= 1,"

          Args.invalid_input(
            "[boxes, scores]: expected shapes #{wanted} " <>
              "got #{inspect(box_shape)} and #{inspect(score_shape)}"
          )
      end
    end
  end

  defp head!(_version, parts, fun) when is_list(parts),
    do: Args.type_error!(fun, "output", "the head, or its two parts [boxes, scores]", parts)

  defp head!(_version, output, fun) do
    with {:ok, values, shape} <- Input.values!(output, "output", fun), do: {:ok, [values], shape}
  end

  defp rows({1, r, n}), do: {r, n}
  defp rows({r, n}), do: {r, n}
  defp rows(_), do: nil

  # The kept boxes, in the model input's pixels, mapped to the frame and clipped: the one place
  # a detection's box leaves the model's coordinates.
  defp to_frame({:ok, detections}, transform, clip) do
    {:ok,
     for detection <- detections do
       box = if transform, do: Transform.to_frame(transform, detection.box), else: detection.box
       %{detection | box: clip_box(box, clip)}
     end}
  end

  defp to_frame(error, _transform, _clip), do: error

  defp clip_box(box, nil), do: box

  defp clip_box({x1, y1, x2, y2}, {w, h}),
    do: {clamp(x1, w), clamp(y1, h), clamp(x2, w), clamp(y2, h)}

  defp clamp(v, limit), do: v |> max(0.0) |> min(limit)

  defp head_shape(version, shape) do
    {extra, dims} =
      case {version, shape} do
        {:yolov8, {1, rows, n}} -> {4, {rows, n}}
        {:yolov8, {rows, n}} -> {4, {rows, n}}
        {:yolov5, {1, n, cols}} -> {5, {cols, n}}
        {:yolov5, {n, cols}} -> {5, {cols, n}}
        {:yolov8, _} -> {4, nil}
        {:yolov5, _} -> {5, nil}
      end

    case dims do
      {width, n} when width > extra ->
        {:ok, n, width - extra}

      _ ->
        wanted =
          if version == :yolov8,
            do: "{1, 4 + C, N} or {4 + C, N} with C >= 1",
            else: "{1, N, 5 + C} or {N, 5 + C} with C >= 1"

        Args.invalid_input("output: expected a shape #{wanted}, got #{inspect(shape)}")
    end
  end

  @doc false
  # The :letterbox option's type: a Transform, or the older map, model = frame * s + offset, as
  # the transform frame = model / s - offset / s.
  def letterbox(%Transform{} = transform), do: {:ok, transform}

  def letterbox(%{scale: s, x_offset: dx, y_offset: dy})
      when is_number(s) and s > 0 and is_number(dx) and is_number(dy),
      do:
        {:ok,
         %Transform{
           x_scale: 1 / s,
           y_scale: 1 / s,
           x_offset: -dx / s,
           y_offset: -dy / s,
           content: nil
         }}

  def letterbox(_other), do: {:error, "not a transform"}

  @doc false
  # The :clip option's type.
  def clip({w, h}) when is_number(w) and is_number(h) and w > 0 and h > 0,
    do: {:ok, {w * 1.0, h * 1.0}}

  def clip(_other), do: {:error, "not {width, height}"}

  # -- shapes and options ------------------------------------------------------------------------

  defp vector({_c}), do: :ok
  defp vector({1, _c}), do: :ok

  defp vector(shape),
    do: Args.invalid_input("scores: expected a shape {C} or {1, C}, got #{inspect(shape)}")

  defp boxes_shape({n, 4}), do: {:ok, n}
  defp boxes_shape({1, n, 4}), do: {:ok, n}

  defp boxes_shape(shape),
    do: Args.invalid_input("boxes: expected a shape {N, 4} or {1, N, 4}, got #{inspect(shape)}")

  # 0 classes: one score per box.
  defp scores_shape(shape, n, box_classes) do
    {dims, per_box?} =
      case shape do
        {^n} -> {0, true}
        {1, ^n} when n != 1 -> {0, true}
        {^n, c} when c > 0 -> {c, false}
        {1, ^n, c} when c > 0 -> {c, false}
        _ -> {nil, false}
      end

    cond do
      dims == nil ->
        Args.invalid_input(
          "scores: expected a shape {N} or {N, C} with N = #{n} (the boxes'), " <>
            "got #{inspect(shape)}"
        )

      box_classes != nil and not per_box? ->
        Args.invalid_input(
          "classes: the :classes option is for one score per box ({N}); scores are #{inspect(shape)}"
        )

      box_classes != nil and byte_size(box_classes) != 4 * n ->
        Args.invalid_input(
          "classes: expected #{n} class indices (one per box), got #{div(byte_size(box_classes), 4)}"
        )

      true ->
        {:ok, dims}
    end
  end

  # The NIF's NmsArg map, from the checked options.
  defp nms_args(opts) do
    max = opts[:max_detections]

    %{
      score_threshold: opts[:score_threshold] * 1.0,
      iou_threshold: opts[:iou_threshold] * 1.0,
      # a limit past what the NIF holds limits nothing: the NIF's largest
      max_detections: max && min(max, Args.max_u64()),
      class_agnostic: opts[:class_agnostic],
      multi_label: opts[:multi_label]
    }
  end

  # The NIF comes twice: on a dirty CPU scheduler for large inputs, on the caller's for small.
  defp native(fun, args, true), do: apply(Native, :"#{fun}_dirty", args)
  defp native(fun, args, false), do: apply(Native, fun, args)

  defp dirty?(shape, boxes \\ 0),
    do: boxes > @dirty_boxes or shape |> Tuple.to_list() |> Enum.product() > @dirty_values

  defp detections({:ok, kept}) do
    detections =
      for {index, class, score, box} <- kept,
          do: %Detection{box: box, score: score, class: class, index: index}

    {:ok, detections}
  end

  defp detections({:error, %Error{}} = error), do: error
end
