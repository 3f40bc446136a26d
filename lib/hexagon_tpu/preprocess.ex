defmodule HexagonTpu.Preprocess do
  alias HexagonTpu.Preprocess.Options

  @moduledoc """
  A camera frame (RGB, or YUV as cameras give it: NV12, NV21, I420, YUYV, with padded rows)
  to a model input, in one pass: colour conversion, crop, resize or letterbox, channel order
  (RGB ↔ BGR), layout (NHWC or NCHW), per-channel normalization and quantization with the
  input's own parameters, done natively in a single sweep over the output, on a dirty CPU
  scheduler.

  The result is exactly the bytes the model input takes, in its own type. `predict/3` (and
  any execute given a `frame/3`) runs the pass inside the execute, writing the input straight
  into the buffer QNN reads: no second copy, no second quantization.

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

    * a binary, with the `:width` and `:height` options, in the layout of `:pixel_format`:
      * `:rgb`, `:bgr` - 3 interleaved u8 per pixel (HWC);
      * `:nv12`, `:nv21` - 4:2:0: the Y plane (`height` rows), then the chroma plane
        (`height / 2` rows of `width / 2` interleaved U, V pairs; V, U for NV21);
      * `:i420` - 4:2:0: the Y plane, the U plane, the V plane (`height / 2` rows of
        `width / 2` bytes each);
      * `:yuyv` - 4:2:2 packed: `Y0 U Y1 V` for every two pixels;

      4:2:0 frames have an even width and height, YUYV frames an even width (others are
      refused). Rows may be padded, as V4L2 hands them over (`bytesperline`): `:stride` is the
      bytes per row of the first (or only) plane, default packed (`3 * width`, `width`,
      `2 * width`). The chroma plane of NV12/NV21 has the Y plane's stride, I420's chroma
      planes half of it (rounded down), unless `:chroma_stride` says otherwise. The Y plane
      starts at byte 0 and the chroma right after it, at `height * stride`, unless
      `:chroma_offset` says otherwise; I420's V plane follows its U plane
      (`chroma_offset + height / 2 * chroma_stride`). The binary must be at least as long as
      the last plane's last row (which needs no padding); longer is fine (a whole V4L2
      buffer), and shorter is an `:invalid_input` error naming the format, size and strides;
    * an `Nx.Tensor` of type `{:u, 8}` and shape `{height, width, 3}` (`:rgb`, `:bgr`; copied to
      a binary once: `Nx.to_binary/1`).

      # an NV12 V4L2 buffer, 1280x720 with bytesperline 1280, for a YOLO input (letterbox)
      opts = [width: 1280, height: 720, pixel_format: :nv12, stride: 1280, fit: :letterbox]
      {:ok, [out]} = HexagonTpu.Preprocess.predict(model, buffer, opts)
      {:ok, t} = HexagonTpu.Preprocess.transform(model, opts)
      frame_box = HexagonTpu.Preprocess.Transform.to_frame(t, model_box)

  ## YUV to RGB

  Every YUV pixel is first converted on its own to u8 RGB, and the pass then proceeds on that
  value exactly as on an RGB frame (below): the result is the pass on the whole frame converted
  first, which for BT.601 limited range is OpenCV's `cvtColor` with `COLOR_YUV2RGB_NV12`,
  `_NV21`, `_I420`, `_YUYV`. No RGB frame is made: the pass converts the pixels it reads. In
  fixed point (`K = 2^20`, `>>` the arithmetic shift, i.e. floor), with `y0 = 16` (limited)
  or `0` (full):

      y' = max(Y - y0, 0) * CY;   u = U - 128;   v = V - 128;   h = K / 2
      R = clamp((y' + h + CVR * v) >> 20, 0, 255)
      G = clamp((y' + h + CVG * v + CUG * u) >> 20, 0, 255)
      B = clamp((y' + h + CUB * u) >> 20, 0, 255)

  | `:color_matrix`, `:color_range` | CY      | CVR     | CVG     | CUG     | CUB     |
  |---------------------------------|---------|---------|---------|---------|---------|
  | `:bt601`, `:limited` (default)  | 1220542 | 1673527 | -852492 | -409993 | 2116026 |
  | `:bt601`, `:full`               | 1048576 | 1470104 | -748826 | -360853 | 1858077 |
  | `:bt709`, `:limited`            | 1220945 | 1879825 | -558796 | -223607 | 2215014 |
  | `:bt709`, `:full`               | 1048576 | 1651297 | -490864 | -196424 | 1945738 |

  BT.601 limited is OpenCV's (`ITUR_BT_601_*`: 1.164, 1.596, -0.813, -0.391, 2.018 times K).
  The others are `round(c * K)` from the standards (BT.601: Kr = 0.299, Kb = 0.114; BT.709
  (ITU-R BT.709): Kr = 0.2126, Kb = 0.0722; Kg = 1 - Kr - Kb): CY = 255/219,
  CVR = 2(1 - Kr)s, CUB = 2(1 - Kb)s, CVG = -2(1 - Kr)Kr/Kg s, CUG = -2(1 - Kb)Kb/Kg s with
  s = 255/224 for limited range; CY = 1 and s = 1 for full range (Y 0..255, chroma centred at
  128). Each is within 1 of the float formula rounded. The chroma of a 4:2:0 pixel `(x, y)` is
  the sample of the 2x2 block it is in, `(div(x, 2), div(y, 2))`; of a YUYV pixel, its pair's.

  ## Crop and letterbox

  `crop: {x, y, w, h}` (frame pixels) takes a rectangle of the frame, which must lie inside
  it; it is a crop of the converted frame, so odd `x` and `y` are fine in 4:2:0 frames too
  (chroma stays that of the frame's 2x2 blocks). The crop (the whole frame by default) is
  resized into a content rectangle of the model input:

    * `fit: :stretch` (default) - the whole input, `W x H`;
    * `fit: :letterbox` - the aspect ratio kept: if `W * h <= H * w` the width binds, the
      content is `W` wide and `round(h * W / w)` high (halves up, at least 1, at most `H`),
      else `H` high and `round(w * H / h)` wide; it sits at `left = div(W - width, 2)`,
      `top = div(H - height, 2)` (centred, an odd remainder leaving the extra row or column
      at the bottom or right, as Ultralytics' `LetterBox`). The rest takes `:pad`, a pixel
      value (default 114, Ultralytics'), or 3 of them in the model's channel order, normalized
      and quantized like a pixel.

  The content is resized from the crop's size to its own with the formulas below (so a
  letterboxed pass equals resizing the crop to the content's size, then padding).
  `transform/2` returns the map back to frame coordinates, a `HexagonTpu.Preprocess.Transform`.

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

  For each output channel `c` (the model's channel order), with `v` the resized pixel value
  (of the RGB frame, or of the YUV frame converted as above):

      x = (v / d - mean[c]) / std[c]     in f32; d = 255 (pixel_scale: :unit) or 1 (:byte)

  then `x` is quantized (or kept as f32, or rounded to f16). Resizing samples pixel centres
  (OpenCV's `INTER_LINEAR` and `INTER_NEAREST_EXACT`, PyTorch's `align_corners=False`), without
  an antialiasing filter:

    * `:nearest` - source index `floor((i + 0.5) * src / dst)`. Every output value is a
      function of one u8 pixel value, so the pass builds a 256-entry table per channel with
      the very arithmetic above and then only looks values up;
    * `:bilinear` - OpenCV's fixed point for u8 images, byte for byte
      `cv2.resize(frame, (w, h), interpolation=cv2.INTER_LINEAR)` (OpenCV 4.12 on x86-64):
      per axis `f = ((i + 0.5) * src / dst - 0.5)` rounded to f32, `s = floor(f)`, weights
      `round((1 - (f - s)) * 2048)` and `round((f - s) * 2048)` (columns clamp `s` to the
      frame with the fraction 0, rows clamp the two neighbours `s`, `s + 1`); a row's value
      `h = (p0 a0 + p1 a1) >>> 4`, then `v = (((h0 b0) >>> 16) + ((h1 b1) >>> 16) + 2) >>> 2`
      (OpenCV's 16-bit vertical step). `v` is a u8, so the same tables as `:nearest` apply.

  ## Options

  #{NimbleOptions.docs(Options.schema())}
  ## Errors

  An argument of the wrong type (a frame that is neither a binary nor an Nx tensor, a binary
  frame without `:width` and `:height`, an unknown option or one outside its type) raises
  `ArgumentError`. A frame too short or of the wrong type, an odd-sized 4:2:0 or 4:2:2 frame,
  a stride shorter than a row, a crop outside the frame, and a model input that is not an image
  this pass can fill (its shape, its type, per-axis quantization), return
  `{:error, %HexagonTpu.Error{reason: :invalid_input}}` saying what was wrong.
  """

  # Nx is optional: present wherever an Nx.Tensor reaches this module, maybe absent at compile.
  @compile {:no_warn_undefined, [Nx]}

  alias HexagonTpu.{Args, Error, Graph, Native, TensorInfo}

  alias HexagonTpu.Preprocess.{Frame, Transform}

  @yuv Options.yuv()

  @typedoc """
  A frame: bytes laid out as `:pixel_format` says (with `:width` and `:height`), or an
  `{h, w, 3}` u8 Nx tensor.
  """
  @type frame :: binary() | struct()

  @type option ::
          {:width, pos_integer()}
          | {:height, pos_integer()}
          | {:pixel_format, :rgb | :bgr | :nv12 | :nv21 | :i420 | :yuyv}
          | {:color_matrix, :bt601 | :bt709}
          | {:color_range, :limited | :full}
          | {:stride, pos_integer()}
          | {:chroma_stride, pos_integer()}
          | {:chroma_offset, non_neg_integer()}
          | {:crop, {non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()}}
          | {:fit, :stretch | :letterbox}
          | {:pad, 0..255 | [0..255]}
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
    opts = Options.check!(opts, fun)

    with {:ok, info} <- input(model_or_input, opts, fun),
         {:ok, frame} <- prepare(frame, info, opts, fun),
         do: Native.preprocess_image(frame.bytes, frame.spec)
  end

  @doc "Like `image/3`, but raises `HexagonTpu.Error`."
  @spec image!(frame(), Graph.t() | TensorInfo.t(), [option()]) :: binary()
  def image!(frame, model_or_input, opts \\ []),
    do: frame |> image(model_or_input, opts) |> Error.unwrap!()

  @doc """
  The transform from the model input's coordinates back to the frame's, for `image/3` with the
  same options (`:width`, `:height`, `:crop`, `:fit`; see "Crop and letterbox"): a
  `HexagonTpu.Preprocess.Transform`, which `Transform.to_frame/2` applies to a box or point.

      {:ok, t} = HexagonTpu.Preprocess.transform(model, width: 1280, height: 720, fit: :letterbox)
      {x1, y1, x2, y2} = HexagonTpu.Preprocess.Transform.to_frame(t, box_in_model_pixels)
  """
  @spec transform(Graph.t() | TensorInfo.t(), [option()]) ::
          {:ok, Transform.t()} | {:error, Error.t()}
  def transform(model_or_input, opts \\ []) do
    fun = "HexagonTpu.Preprocess.transform/2"
    opts = Options.check!(opts, fun)

    if opts.width == nil or opts.height == nil,
      do: raise(ArgumentError, "#{fun}: needs the frame's :width and :height options")

    with {:ok, info} <- input(model_or_input, opts, fun),
         {:ok, {_layout, dst_h, dst_w}} <- geometry(info, opts.layout) do
      {:ok, placement(opts, opts.width, opts.height, dst_w, dst_h)}
    end
  end

  @doc """
  The frame, checked, with the pass that makes the model input of it (the options of
  `image/3`), for the execute to run: `{:ok, %HexagonTpu.Preprocess.Frame{}}`, which
  `HexagonTpu.predict/3` and `HexagonTpu.Graph.execute/3` take as the input's value and
  preprocess straight into the input's buffer. Its `transform` is `transform/2`'s.
  """
  @spec frame(frame(), Graph.t() | TensorInfo.t(), [option()]) ::
          {:ok, Frame.t()} | {:error, Error.t()}
  def frame(frame, model_or_input, opts \\ []) do
    fun = "HexagonTpu.Preprocess.frame/3"
    opts = Options.check!(opts, fun)
    with {:ok, info} <- input(model_or_input, opts, fun), do: prepare(frame, info, opts, fun)
  end

  @doc """
  `image/3` and `HexagonTpu.predict/3` on a model with one image input (or the one named by
  `:input`, when the model's other inputs are given as `inputs:`, a map by name), as one
  execute: the pass runs in it, writing the input straight into the buffer QNN reads (see
  `HexagonTpu.Preprocess.Frame`).

  Takes the options of `image/3`, and `:dequantize`, `:output` and `:inputs`, which go to
  `HexagonTpu.predict/3`.

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

    opts = Options.check!(opts, fun)

    with {:ok, info} <- input(model, opts, fun),
         {:ok, frame} <- prepare(frame, info, opts, fun) do
      HexagonTpu.predict(model, Map.put(others, info.name, frame), predict_opts)
    end
  end

  # -- the model input -----------------------------------------------------------------------

  defp input(%TensorInfo{} = info, _opts, _fun), do: {:ok, info}

  defp input(%Graph{inputs: inputs} = graph, opts, _fun) when is_list(inputs) do
    case {opts.input, inputs} do
      {nil, [info]} ->
        {:ok, info}

      {nil, _} ->
        Args.invalid_input(
          "graph #{inspect(graph.name)} has #{length(inputs)} inputs (#{names(inputs)}): " <>
            "say which one takes the frame with the :input option"
        )

      {index, _} when is_integer(index) ->
        case Enum.at(inputs, index) do
          nil ->
            Args.invalid_input(
              "graph #{inspect(graph.name)} has no input #{index} (#{names(inputs)})"
            )

          info ->
            {:ok, info}
        end

      {name, _} ->
        name = to_string(name)

        case Enum.find(inputs, &(&1.name == name)) do
          nil ->
            Args.invalid_input(
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

        Args.invalid_input(
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
        Args.invalid_input(
          "input #{TensorInfo.describe(info)} is quantized per axis; the pass quantizes " <>
            "per tensor (u8, s8, u16, s16), or writes f32 or f16"
        )

      _ ->
        Args.invalid_input(
          "input #{TensorInfo.describe(info)} is not a type the pass writes: expected u8, s8, " <>
            "u16 or s16 (per-tensor quantized or not), f32 or f16"
        )
    end
  end

  defp range(:u, bits), do: {0, Bitwise.bsl(1, bits) - 1}
  defp range(:s, bits), do: {-Bitwise.bsl(1, bits - 1), Bitwise.bsl(1, bits - 1) - 1}

  # -- the frame -------------------------------------------------------------------------------

  # The frame's size is checked natively, against its format, size and strides.
  defp frame_bytes(frame, opts, fun) when is_binary(frame) do
    {w, h} = {opts.width, opts.height}

    if w == nil or h == nil,
      do:
        raise(
          ArgumentError,
          "#{fun}: a binary frame needs the :width and :height options"
        )

    {:ok, frame, w, h}
  end

  defp frame_bytes(frame, %{pixel_format: format}, _fun)
       when is_struct(frame, Nx.Tensor) and format in @yuv,
       do:
         Args.invalid_input(
           "frame: a #{inspect(format)} frame is a binary (with :width and :height), " <>
             "not an Nx tensor"
         )

  defp frame_bytes(frame, opts, _fun) when is_struct(frame, Nx.Tensor) do
    case {Nx.type(frame), Nx.shape(frame)} do
      {{:u, 8}, {h, w, 3}} ->
        if opts.width in [nil, w] and opts.height in [nil, h],
          do: {:ok, Nx.to_binary(frame), w, h},
          else:
            Args.invalid_input(
              "frame: the tensor is #{w}x#{h} ({#{h}, #{w}, 3}), the options say " <>
                "width: #{inspect(opts.width)}, height: #{inspect(opts.height)}"
            )

      {type, shape} ->
        Args.invalid_input(
          "frame: expected an Nx tensor of type {:u, 8} and shape {height, width, 3}, " <>
            "got #{inspect(type)} #{inspect(shape)}"
        )
    end
  end

  defp frame_bytes(other, _opts, fun),
    do:
      Args.type_error!(
        fun,
        "`frame`",
        "a binary (with :width and :height) or an Nx.Tensor {height, width, 3} u8",
        other
      )

  # -- the pass ----------------------------------------------------------------------------------

  # The frame checked, and the pass's spec (the NIF's map) for `info`.
  defp prepare(frame, info, opts, fun) do
    with {:ok, bytes, w, h} <- frame_bytes(frame, opts, fun),
         {:ok, {layout, dst_h, dst_w}} <- geometry(info, opts.layout),
         {:ok, output} <- output(info) do
      t = placement(opts, w, h, dst_w, dst_h)
      order = if opts.pixel_format == :bgr, do: :bgr, else: :rgb
      yuv? = opts.pixel_format in @yuv

      spec =
        Map.merge(output, %{
          src_width: w,
          src_height: h,
          dst_width: dst_w,
          dst_height: dst_h,
          resize: opts.resize,
          layout: layout,
          swap_rb: order != opts.channels,
          divisor: if(opts.pixel_scale == :unit, do: 255.0, else: 1.0),
          mean: opts.mean,
          std: opts.std,
          pixel_format: if(yuv?, do: opts.pixel_format, else: :rgb),
          color_matrix: opts.color_matrix,
          color_range: opts.color_range,
          stride: opts.stride,
          chroma_stride: opts.chroma_stride,
          chroma_offset: opts.chroma_offset,
          crop: opts.crop,
          content: if(opts.fit == :letterbox, do: t.content),
          pad: opts.pad
        })

      {:ok, %Frame{input: info, transform: t, bytes: bytes, spec: spec}}
    end
  end

  # Where the crop lands in the model input (see "Crop and letterbox"), as a Transform.
  defp placement(opts, w, h, dst_w, dst_h) do
    {cx, cy, cw, ch} = opts.crop || {0, 0, w, h}

    {nw, nh} =
      cond do
        opts.fit == :stretch -> {dst_w, dst_h}
        dst_w * ch <= dst_h * cw -> {dst_w, min(dst_h, max(1, div(2 * ch * dst_w + cw, 2 * cw)))}
        true -> {min(dst_w, max(1, div(2 * cw * dst_h + ch, 2 * ch))), dst_h}
      end

    {left, top} = {div(dst_w - nw, 2), div(dst_h - nh, 2)}
    {sx, sy} = {cw / nw, ch / nh}

    %Transform{
      x_scale: sx,
      y_scale: sy,
      x_offset: cx - left * sx,
      y_offset: cy - top * sy,
      content: {left, top, nw, nh}
    }
  end
end
