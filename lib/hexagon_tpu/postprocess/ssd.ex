defmodule HexagonTpu.Postprocess.Ssd do
  @moduledoc false
  # The options of `HexagonTpu.Postprocess.ssd/3` and `ssd_anchors/1`, checked and put in the
  # NIF's maps (src/protocol.rs's AnchorsArg and SsdArg).

  alias HexagonTpu.{Args, Error, Native}
  alias HexagonTpu.Postprocess.Input

  @anchor_schema Args.schema!(
                   input_size_width: [
                     type: :pos_integer,
                     required: true,
                     type_doc: "a positive integer",
                     doc: "The model input's width."
                   ],
                   input_size_height: [
                     type: :pos_integer,
                     required: true,
                     type_doc: "a positive integer",
                     doc: "The model input's height."
                   ],
                   min_scale: [
                     type: {:or, [:integer, :float]},
                     required: true,
                     type_doc: "a number",
                     doc: "The first layer's scale."
                   ],
                   max_scale: [
                     type: {:or, [:integer, :float]},
                     required: true,
                     type_doc: "a number",
                     doc: "The last layer's scale."
                   ],
                   strides: [
                     type: {:custom, Args, :positive_integers, []},
                     required: true,
                     type_doc: "a non-empty list of positive integers",
                     doc: "One per layer; feature maps are `ceil(input / stride)`."
                   ],
                   num_layers: [
                     type: :any,
                     default: nil,
                     type_doc: "the number of strides or nil",
                     doc: "MediaPipe's; the number of strides when given."
                   ],
                   anchor_offset_x: [
                     type: {:or, [:integer, :float]},
                     default: 0.5,
                     type_doc: "a number",
                     doc: "A cell centre's offset, in cells."
                   ],
                   anchor_offset_y: [
                     type: {:or, [:integer, :float]},
                     default: 0.5,
                     type_doc: "a number",
                     doc: "A cell centre's offset, in cells."
                   ],
                   aspect_ratios: [
                     type: {:custom, Args, :positive_numbers, []},
                     default: [1.0],
                     type_doc: "a list of positive numbers",
                     doc: "One anchor per ratio at each cell."
                   ],
                   reduce_boxes_in_lowest_layer: [
                     type: :boolean,
                     default: false,
                     type_doc: "a boolean",
                     doc: "MediaPipe's: three anchors in the lowest layer."
                   ],
                   interpolated_scale_aspect_ratio: [
                     type: {:or, [:integer, :float]},
                     default: 1.0,
                     type_doc: "a number",
                     doc: "The ratio of the anchor added at the interpolated scale."
                   ],
                   fixed_anchor_size: [
                     type: :boolean,
                     default: false,
                     type_doc: "a boolean",
                     doc: "Every anchor 1 x 1."
                   ]
                 )

  @options [
    anchors: [
      type: {:custom, __MODULE__, :given, []},
      required: true,
      type_doc: "anchors {N, 4} or a keyword list of anchor options",
      doc: """
      Anchors `{N, 4}`, or the options of `HexagonTpu.Postprocess.ssd_anchors/1` that make \
      them.
      """
    ],
    x_scale: [
      type: {:custom, __MODULE__, :non_zero, []},
      default: 1.0,
      type_doc: "a non-zero number",
      doc: "A box's `x` is divided by it."
    ],
    y_scale: [
      type: {:custom, __MODULE__, :non_zero, []},
      default: 1.0,
      type_doc: "a non-zero number",
      doc: "A box's `y` is divided by it."
    ],
    w_scale: [
      type: {:custom, __MODULE__, :non_zero, []},
      default: 1.0,
      type_doc: "a non-zero number",
      doc: "A box's `w` is divided by it."
    ],
    h_scale: [
      type: {:custom, __MODULE__, :non_zero, []},
      default: 1.0,
      type_doc: "a non-zero number",
      doc: "A box's `h` is divided by it."
    ],
    reverse_output_order: [
      type: :boolean,
      default: false,
      type_doc: "a boolean",
      doc: "Boxes are `x, y, w, h` (BlazeFace), not `y, x, h, w`."
    ],
    apply_exponential_on_box_size: [
      type: :boolean,
      default: false,
      type_doc: "a boolean",
      doc: "`w = exp(w / w_scale) * anchor_w` (and `h` alike)."
    ],
    sigmoid_score: [
      type: :boolean,
      default: false,
      type_doc: "a boolean",
      doc: "Scores are logits: their sigmoid is used."
    ],
    score_clipping_thresh: [
      type: {:or, [nil, {:custom, Args, :positive_number, []}]},
      default: nil,
      type_doc: "a positive number or nil",
      doc: "Logits clamped to `[-t, t]` before the sigmoid; `nil`: none."
    ]
  ]

  @doc "The SSD options' schema (HexagonTpu.Postprocess.ssd/3 adds the NMS ones)."
  @spec options() :: keyword()
  def options, do: @options

  @doc false
  # The :anchors option's type: anything but nil (anchors!/2 reads it).
  def given(nil), do: {:error, "not given"}
  def given(anchors), do: {:ok, anchors}

  @doc false
  # The scales' type.
  def non_zero(value) when is_number(value) and value != 0, do: {:ok, value}
  def non_zero(_value), do: {:error, "not a non-zero number"}

  @doc "`{:ok, f32_bytes, n}` of the anchors: given, or generated from their options."
  @spec anchors!(term(), String.t()) :: {:ok, binary(), non_neg_integer()} | {:error, Error.t()}
  def anchors!(opts, fun) when is_list(opts) and opts != [] and is_tuple(hd(opts)) do
    with {:ok, bytes} <- generate(opts, fun), do: {:ok, bytes, div(byte_size(bytes), 16)}
  end

  def anchors!(tensor, fun) do
    with {:ok, bytes, shape} <- Input.f32!(tensor, "anchors", fun) do
      case shape do
        {n, 4} ->
          {:ok, bytes, n}

        _ ->
          {:error,
           Error.new(:invalid_input, "anchors: expected a shape {N, 4}, got #{inspect(shape)}")}
      end
    end
  end

  @doc "MediaPipe's SsdAnchorsCalculator on `opts`: `{:ok, f32_bytes}`."
  @spec generate(keyword(), String.t()) :: {:ok, binary()} | {:error, Error.t()}
  def generate(opts, fun) do
    opts = Args.options!(opts, @anchor_schema, fun)
    strides = opts[:strides]
    layers = opts[:num_layers]

    unless layers == nil or layers == length(strides),
      do:
        Args.type_error!(
          fun,
          "the :num_layers option",
          "the number of strides (#{length(strides)}) or nil",
          layers
        )

    ratios = opts[:aspect_ratios]

    Native.postprocess_ssd_anchors(%{
      input_width: opts[:input_size_width],
      input_height: opts[:input_size_height],
      min_scale: opts[:min_scale] * 1.0,
      max_scale: opts[:max_scale] * 1.0,
      anchor_offset_x: opts[:anchor_offset_x] * 1.0,
      anchor_offset_y: opts[:anchor_offset_y] * 1.0,
      strides: strides,
      aspect_ratios: Enum.map(ratios, &(&1 * 1.0)),
      reduce_boxes_in_lowest_layer: opts[:reduce_boxes_in_lowest_layer],
      interpolated_scale_aspect_ratio: opts[:interpolated_scale_aspect_ratio] * 1.0,
      fixed_anchor_size: opts[:fixed_anchor_size]
    })
  end

  @doc "The NIF's SsdArg map."
  @spec args(map(), non_neg_integer(), non_neg_integer(), map()) :: map()
  def args(ssd, coords, classes, nms) do
    %{
      coords: coords,
      classes: classes,
      scales: {ssd.x_scale * 1.0, ssd.y_scale * 1.0, ssd.w_scale * 1.0, ssd.h_scale * 1.0},
      reverse_output_order: ssd.reverse_output_order,
      apply_exponential_on_box_size: ssd.apply_exponential_on_box_size,
      sigmoid_score: ssd.sigmoid_score,
      score_clipping_thresh: ssd.score_clipping_thresh && ssd.score_clipping_thresh * 1.0,
      nms: nms
    }
  end
end
