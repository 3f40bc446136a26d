defmodule HexagonTpu.Postprocess.Ssd do
  @moduledoc false
  # The options of `HexagonTpu.Postprocess.ssd/3` and `ssd_anchors/1`, checked and put in the
  # NIF's maps (src/protocol.rs's AnchorsArg and SsdArg).

  alias HexagonTpu.{Args, Error, Native}
  alias HexagonTpu.Postprocess.Input

  @anchor_options [
    :input_size_width,
    :input_size_height,
    :min_scale,
    :max_scale,
    :strides,
    num_layers: nil,
    anchor_offset_x: 0.5,
    anchor_offset_y: 0.5,
    aspect_ratios: [1.0],
    reduce_boxes_in_lowest_layer: false,
    interpolated_scale_aspect_ratio: 1.0,
    fixed_anchor_size: false
  ]

  @ssd_options [
    :anchors,
    x_scale: 1.0,
    y_scale: 1.0,
    w_scale: 1.0,
    h_scale: 1.0,
    reverse_output_order: false,
    apply_exponential_on_box_size: false,
    sigmoid_score: false,
    score_clipping_thresh: nil
  ]

  @doc "The SSD options and the rest (the NMS options), or ArgumentError."
  @spec split!(keyword(), [atom()], String.t()) :: {map(), keyword()}
  def split!(opts, nms_keys, fun) do
    opts = Args.keyword!(opts, @ssd_options ++ nms_keys, fun)

    keys =
      Enum.map(@ssd_options, fn
        {key, _} -> key
        key -> key
      end)

    {ssd, nms} = Keyword.split(opts, keys)
    ssd = Map.new(ssd)

    if ssd[:anchors] == nil,
      do: error!(fun, :anchors, "anchors {N, 4} or a keyword list of anchor options", nil)

    for key <- [:x_scale, :y_scale, :w_scale, :h_scale] do
      value = ssd[key]
      unless is_number(value) and value != 0, do: error!(fun, key, "a non-zero number", value)
    end

    for key <- [:reverse_output_order, :apply_exponential_on_box_size, :sigmoid_score] do
      unless is_boolean(ssd[key]), do: error!(fun, key, "a boolean", ssd[key])
    end

    clip = ssd[:score_clipping_thresh]

    unless clip == nil or (is_number(clip) and clip > 0),
      do: error!(fun, :score_clipping_thresh, "a positive number or nil", clip)

    {ssd, nms}
  end

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
    opts = Args.keyword!(opts, @anchor_options, fun)

    for key <- [:input_size_width, :input_size_height] do
      v = opts[key]
      unless is_integer(v) and v > 0, do: error!(fun, key, "a positive integer", v)
    end

    for key <- [
          :min_scale,
          :max_scale,
          :anchor_offset_x,
          :anchor_offset_y,
          :interpolated_scale_aspect_ratio
        ] do
      unless is_number(opts[key]), do: error!(fun, key, "a number", opts[key])
    end

    strides = opts[:strides]

    unless is_list(strides) and strides != [] and
             Enum.all?(strides, &(is_integer(&1) and &1 > 0)),
           do: error!(fun, :strides, "a non-empty list of positive integers", strides)

    layers = opts[:num_layers]

    unless layers == nil or layers == length(strides),
      do: error!(fun, :num_layers, "the number of strides (#{length(strides)}) or nil", layers)

    ratios = opts[:aspect_ratios]

    unless is_list(ratios) and Enum.all?(ratios, &(is_number(&1) and &1 > 0)),
      do: error!(fun, :aspect_ratios, "a list of positive numbers", ratios)

    for key <- [:reduce_boxes_in_lowest_layer, :fixed_anchor_size] do
      unless is_boolean(opts[key]), do: error!(fun, key, "a boolean", opts[key])
    end

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

  defp error!(fun, key, expected, value),
    do: Args.type_error!(fun, "the #{inspect(key)} option", expected, value)
end
