defmodule HexagonTpu.Preprocess do
  @moduledoc """
  A camera frame to a model input, in one pass: resize, channel order (RGB ↔ BGR), layout
  (NHWC or NCHW), per-channel normalization and quantization with the input's own parameters,
  done natively in a single sweep over the output, on a dirty CPU scheduler.

  The result is exactly the bytes the model input takes, in its own type. `predict/3` hands
  them to QNN untouched: no second copy, no second quantization.

      {:ok, model} = HexagonTpu.load_model("mobilenet_v2_quantized.bin")

      # a 1280x720 RGB frame from the camera, for a {1, 224, 224, 3} u8 input
      {:ok, [scores]} =
        HexagonTpu.Preprocess.predict(model, frame,
          width: 1280,
          height: 720,
          mean: [0.485, 0.456, 0.406],
          std: [0.229, 0.224, 0.225]
        )

      # or in two steps (the input in the model's own type, tagged with it)
      [input] = HexagonTpu.Graph.inputs(model)
      {:ok, bytes} = HexagonTpu.Preprocess.image(frame, model, width: 1280, height: 720)
      {:ok, [scores]} = HexagonTpu.predict(model, [{input.type, bytes}])

      # a BGR frame as an Nx tensor {720, 1280, 3} u8, for an NCHW model in the 0..255 scale
      {:ok, bytes} =
        HexagonTpu.Preprocess.image(frame_tensor, model,
          pixel_format: :bgr,
          mean: [123.675, 116.28, 103.53],
          std: [58.395, 57.12, 57.375],
          pixel_scale: :byte
        )

  ## The frame

    * a binary of `height * width * 3` bytes, u8, row-major HWC (interleaved pixels, no row
      padding), with the `:width` and `:height` options; or
    * an `Nx.Tensor` of type `{:u, 8}` and shape `{height, width, 3}` (copied to a binary
      once: `Nx.to_binary/1`).

  ## The model input

  Given a `HexagonTpu.Graph` (its only input, or the one named by `:input`) or a
  `HexagonTpu.TensorInfo`. Its shape is `{1, H, W, 3}` (NHWC) or `{1, 3, H, W}` (NCHW), or
  the same without the batch dimension; `:layout` decides where the shape is ambiguous
  (`{1, 3, 3, 3}`: NHWC unless told). Its type is one of:

    * u8, s8, u16, s16 with per-tensor quantization: quantized with the input's scale and zero
      point, exactly as `HexagonTpu.predict/3` quantizes f32 (round half to even, saturating to
      the type's range or the encoding's bit width);
    * u8, s8, u16, s16 without quantization: the normalized value rounded half to even and
      saturated (scale 1, zero point 0): `pixel_scale: :byte` with the default mean and std
      passes the pixels through;
    * f32 (the normalized values) or f16 (rounded to nearest even).

  ## The arithmetic

  For each output channel `c` (the model's channel order), with `v` the resized pixel value:

      x = (v / d - mean[c]) / std[c]     in f32; d = 255 (pixel_scale: :unit) or 1 (:byte)

  then `x` is quantized (or kept as f32, or rounded to f16). Resizing samples pixel centres
  (OpenCV's `INTER_LINEAR` and `INTER_NEAREST_EXACT`, PyTorch's `align_corners=False`), without
  an antialiasing filter:

    * `:nearest` - source index `floor((i + 0.5) * src / dst)`. Every output value is a
      function of one u8 pixel, so the pass builds a 256-entry table per channel with the very
      arithmetic above and then only looks values up;
    * `:bilinear` - source coordinate `max((i + 0.5) * src / dst - 0.5, 0)` (f64), the two
      neighbours `i0 = floor(t)` and `min(i0 + 1, src - 1)`, weights `w1 = t - i0` and
      `w0 = 1 - w1` (f32), and `v = (p00 w0x + p01 w1x) w0y + (p10 w0x + p11 w1x) w1y` in f32.

  ## Options

    * `:width`, `:height` - the frame's size; required for a binary frame (an Nx frame's shape
      gives them, and must agree with them if they are given)
    * `:pixel_format` - the frame's channel order, `:rgb` (default) or `:bgr`
    * `:channels` - the model's channel order, `:rgb` (default) or `:bgr`
    * `:resize` - `:bilinear` (default) or `:nearest`
    * `:layout` - the model input's layout: `:auto` (default, from its shape), `:nhwc` or `:nchw`
    * `:mean`, `:std` - a number or a list of 3 (in the model's channel order), in the scale of
      `:pixel_scale`; default 0.0 and 1.0. `std` values must not be 0
    * `:pixel_scale` - `:unit` (default: pixels are divided by 255 first, mean and std are in
      the 0..1 scale, as torchvision's) or `:byte` (mean and std in the 0..255 scale)
    * `:input` - the graph input, by name (string or atom) or position; needed when a graph has
      several inputs

  ## Errors

  An argument of the wrong type (a frame that is neither a binary nor an Nx tensor, a binary
  frame without `:width` and `:height`, an unknown option or one outside its type) raises
  `ArgumentError`. A frame of the wrong size or type, and a model input that is not an image
  this pass can fill (its shape, its type, per-axis quantization), return
  `{:error, %HexagonTpu.Error{reason: :invalid_input}}` saying what was wrong.
  """

  # Nx is optional: present wherever an Nx.Tensor reaches this module, maybe absent at compile.
  @compile {:no_warn_undefined, [Nx]}

  alias HexagonTpu.{Args, Error, Graph, Native, TensorInfo}

  @options [
    width: nil,
    height: nil,
    input: nil,
    pixel_format: :rgb,
    channels: :rgb,
    resize: :bilinear,
    layout: :auto,
    mean: 0.0,
    std: 1.0,
    pixel_scale: :unit
  ]

  @typedoc "A frame: HWC u8 bytes (with `:width` and `:height`) or an `{h, w, 3}` u8 Nx tensor."
  @type frame :: binary() | struct()

  @type option ::
          {:width, pos_integer()}
          | {:height, pos_integer()}
          | {:pixel_format, :rgb | :bgr}
          | {:channels, :rgb | :bgr}
          | {:resize, :bilinear | :nearest}
          | {:layout, :auto | :nhwc | :nchw}
          | {:mean, number() | [number()]}
          | {:std, number() | [number()]}
          | {:pixel_scale, :unit | :byte}
          | {:input, String.t() | atom() | non_neg_integer()}

  @doc """
  The frame as the bytes of the model input (see the moduledoc): `{:ok, binary}`, exactly
  `TensorInfo.byte_size` bytes in the input's own type. Pass it to `HexagonTpu.predict/3`
  tagged with that type, `{info.type, binary}`, or as a plain binary with `quantize: :none`.
  """
  @spec image(frame(), Graph.t() | TensorInfo.t(), [option()]) ::
          {:ok, binary()} | {:error, Error.t()}
  def image(frame, model_or_input, opts \\ []) do
    fun = "HexagonTpu.Preprocess.image/3"
    opts = options!(opts, fun)

    with {:ok, info} <- input(model_or_input, opts, fun),
         {:ok, _info, bytes} <- run(frame, info, opts, fun),
         do: {:ok, bytes}
  end

  @doc "Like `image/3`, but raises `HexagonTpu.Error`."
  @spec image!(frame(), Graph.t() | TensorInfo.t(), [option()]) :: binary()
  def image!(frame, model_or_input, opts \\ []),
    do: frame |> image(model_or_input, opts) |> Error.unwrap!()

  @doc """
  `image/3`, then `HexagonTpu.predict/3` on a model with one image input (or the one named by
  `:input`, when the model's other inputs are given as `inputs:`, a map by name).

  Takes the options of `image/3`, and `:dequantize`, `:output` and `:inputs`, which go to
  `HexagonTpu.predict/3`. The preprocessed input is passed in the model's own type, untouched.

      {:ok, [scores]} = HexagonTpu.Preprocess.predict(model, frame, width: 640, height: 480)
  """
  @spec predict(Graph.t(), frame(), keyword()) :: {:ok, [Graph.output()]} | {:error, Error.t()}
  def predict(model, frame, opts \\ []) do
    fun = "HexagonTpu.Preprocess.predict/3"
    model = Args.handle!(model, Graph, "`model`", fun)

    unless Keyword.keyword?(opts), do: Args.type_error!(fun, "`opts`", "a keyword list", opts)

    {predict_opts, opts} = Keyword.split(opts, [:dequantize, :output, :inputs])
    {others, predict_opts} = Keyword.pop(predict_opts, :inputs, %{})

    unless is_map(others),
      do: Args.type_error!(fun, "the :inputs option", "a map of input names to values", others)

    opts = options!(opts, fun)

    with {:ok, info} <- input(model, opts, fun),
         {:ok, info, bytes} <- run(frame, info, opts, fun) do
      inputs = Map.put(others, info.name, {info.type, bytes})
      HexagonTpu.predict(model, inputs, predict_opts)
    end
  end

  # -- options -----------------------------------------------------------------------------

  defp options!(opts, fun) do
    opts = Args.keyword!(opts, @options, fun)

    for {key, value} <- opts, reduce: %{} do
      acc -> Map.put(acc, key, option!(key, value, fun))
    end
  end

  defp option!(key, nil, _fun) when key in [:width, :height, :input], do: nil

  defp option!(key, value, _fun)
       when key in [:width, :height] and is_integer(value) and value > 0,
       do: value

  defp option!(:input, value, _fun)
       when is_binary(value) or is_atom(value) or (is_integer(value) and value >= 0),
       do: value

  defp option!(key, value, _fun) when key in [:pixel_format, :channels] and value in [:rgb, :bgr],
    do: value

  defp option!(:resize, value, _fun) when value in [:bilinear, :nearest], do: value
  defp option!(:layout, value, _fun) when value in [:auto, :nhwc, :nchw], do: value
  defp option!(:pixel_scale, value, _fun) when value in [:unit, :byte], do: value

  defp option!(key, value, fun) when key in [:mean, :std] do
    values =
      case value do
        n when is_number(n) -> [n, n, n]
        [_, _, _] = list -> list
        _ -> nil
      end

    cond do
      values == nil or not Enum.all?(values, &is_number/1) ->
        option_error!(fun, key, "a number or a list of 3 numbers", value)

      key == :std and Enum.any?(values, &(&1 == 0)) ->
        option_error!(fun, key, "non-zero (a number or a list of 3 numbers)", value)

      true ->
        values |> Enum.map(&(&1 * 1.0)) |> List.to_tuple()
    end
  end

  defp option!(key, value, fun) do
    expected =
      case key do
        k when k in [:width, :height] -> "a positive integer"
        :input -> "an input name (a string or atom) or position (a non-negative integer)"
        k when k in [:pixel_format, :channels] -> ":rgb or :bgr"
        :resize -> ":bilinear or :nearest"
        :layout -> ":auto, :nhwc or :nchw"
        :pixel_scale -> ":unit or :byte"
      end

    option_error!(fun, key, expected, value)
  end

  defp option_error!(fun, key, expected, value),
    do: Args.type_error!(fun, "the #{inspect(key)} option", expected, value)

  # -- the model input -----------------------------------------------------------------------

  defp input(%TensorInfo{} = info, _opts, _fun), do: {:ok, info}

  defp input(%Graph{inputs: inputs} = graph, opts, _fun) when is_list(inputs) do
    case {opts.input, inputs} do
      {nil, [info]} ->
        {:ok, info}

      {nil, _} ->
        invalid(
          "graph #{inspect(graph.name)} has #{length(inputs)} inputs (#{names(inputs)}): " <>
            "say which one takes the frame with the :input option"
        )

      {index, _} when is_integer(index) ->
        case Enum.at(inputs, index) do
          nil -> invalid("graph #{inspect(graph.name)} has no input #{index} (#{names(inputs)})")
          info -> {:ok, info}
        end

      {name, _} ->
        name = to_string(name)

        case Enum.find(inputs, &(&1.name == name)) do
          nil ->
            invalid(
              "graph #{inspect(graph.name)} has no input #{Args.quote_input(name)} " <>
                "(#{names(inputs)})"
            )

          info ->
            {:ok, info}
        end
    end
  end

  defp input(other, _opts, fun),
    do: Args.type_error!(fun, "`model`", "a HexagonTpu.Graph or a HexagonTpu.TensorInfo", other)

  defp names(inputs), do: Enum.map_join(inputs, ", ", &inspect(&1.name))

  # {layout, height, width} of the model input, or why it is not an image.
  defp geometry(%TensorInfo{shape: shape} = info, layout) do
    dims = Tuple.to_list(shape)

    {batch, hwc} =
      case dims do
        [n, a, b, c] -> {n, {a, b, c}}
        [a, b, c] -> {1, {a, b, c}}
        _ -> {nil, nil}
      end

    result =
      case {batch, hwc, layout} do
        {1, {h, w, 3}, l} when l in [:auto, :nhwc] -> {:nhwc, h, w}
        {1, {3, h, w}, l} when l in [:auto, :nchw] -> {:nchw, h, w}
        _ -> nil
      end

    case result do
      {_, h, w} = geometry when h > 0 and w > 0 ->
        {:ok, geometry}

      _ ->
        wanted =
          case layout do
            :auto -> "{1, H, W, 3} (NHWC) or {1, 3, H, W} (NCHW), the batch dimension optional"
            :nhwc -> "{1, H, W, 3} or {H, W, 3} (layout: :nhwc)"
            :nchw -> "{1, 3, H, W} or {3, H, W} (layout: :nchw)"
          end

        invalid(
          "input #{TensorInfo.describe(info)} is not an image this pass can fill: " <>
            "expected a shape #{wanted}, got #{inspect(shape)}"
        )
    end
  end

  # The output type and its quantization parameters, in the NIF's terms (QNN's offset).
  defp output(%TensorInfo{type: type, quantization: quantization} = info) do
    kinds = %{{:u, 8} => :u8, {:s, 8} => :s8, {:u, 16} => :u16, {:s, 16} => :s16}

    case {type, quantization} do
      {{:f, 32}, :none} ->
        {:ok, %{output: :f32, scale: 1.0, offset: 0, qmin: 0, qmax: 0}}

      {{:f, 16}, :none} ->
        {:ok, %{output: :f16, scale: 1.0, offset: 0, qmin: 0, qmax: 0}}

      {{kind, bits}, :none} when is_map_key(kinds, {kind, bits}) ->
        {qmin, qmax} = range(kind, bits)
        {:ok, %{output: kinds[type], scale: 1.0, offset: 0, qmin: qmin, qmax: qmax}}

      {{kind, bits}, %{kind: :per_tensor, scale: scale, zero_point: zp} = q}
      when is_map_key(kinds, {kind, bits}) ->
        {qmin, qmax} = range(kind, q[:bitwidth] || bits)
        {:ok, %{output: kinds[type], scale: scale, offset: -zp, qmin: qmin, qmax: qmax}}

      {_, %{kind: :per_axis}} ->
        invalid(
          "input #{TensorInfo.describe(info)} is quantized per axis; the pass quantizes " <>
            "per tensor (u8, s8, u16, s16), or writes f32 or f16"
        )

      _ ->
        invalid(
          "input #{TensorInfo.describe(info)} is not a type the pass writes: expected u8, s8, " <>
            "u16 or s16 (per-tensor quantized or not), f32 or f16"
        )
    end
  end

  defp range(:u, bits), do: {0, Bitwise.bsl(1, bits) - 1}
  defp range(:s, bits), do: {-Bitwise.bsl(1, bits - 1), Bitwise.bsl(1, bits - 1) - 1}

  # -- the frame -------------------------------------------------------------------------------

  defp frame(frame, opts, fun) when is_binary(frame) do
    {w, h} = {opts.width, opts.height}

    if w == nil or h == nil,
      do:
        raise(
          ArgumentError,
          "#{fun}: a binary frame needs the :width and :height options (HWC u8, 3 channels)"
        )

    expected = w * h * 3

    if byte_size(frame) == expected,
      do: {:ok, frame, w, h},
      else:
        invalid(
          "frame: expected #{w}x#{h}x3 = #{expected} bytes (HWC u8, width: #{w}, " <>
            "height: #{h}), got #{byte_size(frame)} bytes"
        )
  end

  defp frame(frame, opts, _fun) when is_struct(frame, Nx.Tensor) do
    case {Nx.type(frame), Nx.shape(frame)} do
      {{:u, 8}, {h, w, 3}} ->
        if opts.width in [nil, w] and opts.height in [nil, h],
          do: {:ok, Nx.to_binary(frame), w, h},
          else:
            invalid(
              "frame: the tensor is #{w}x#{h} ({#{h}, #{w}, 3}), the options say " <>
                "width: #{inspect(opts.width)}, height: #{inspect(opts.height)}"
            )

      {type, shape} ->
        invalid(
          "frame: expected an Nx tensor of type {:u, 8} and shape {height, width, 3}, " <>
            "got #{inspect(type)} #{inspect(shape)}"
        )
    end
  end

  defp frame(other, _opts, fun),
    do:
      Args.type_error!(
        fun,
        "`frame`",
        "a binary (HWC u8, with :width and :height) or an Nx.Tensor {height, width, 3} u8",
        other
      )

  # -- the pass ----------------------------------------------------------------------------------

  defp run(frame, info, opts, fun) do
    with {:ok, bytes, w, h} <- frame(frame, opts, fun),
         {:ok, {layout, dst_h, dst_w}} <- geometry(info, opts.layout),
         {:ok, output} <- output(info) do
      spec =
        Map.merge(output, %{
          src_width: w,
          src_height: h,
          dst_width: dst_w,
          dst_height: dst_h,
          resize: opts.resize,
          layout: layout,
          swap_rb: opts.pixel_format != opts.channels,
          divisor: if(opts.pixel_scale == :unit, do: 255.0, else: 1.0),
          mean: opts.mean,
          std: opts.std
        })

      case Native.preprocess_image(bytes, spec) do
        {:ok, out} -> {:ok, info, out}
        {:error, %Error{}} = error -> error
      end
    end
  end

  defp invalid(message), do: {:error, Error.new(:invalid_input, message)}
end
