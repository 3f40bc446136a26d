defmodule HexagonTpu.Preprocess.Options do
  @moduledoc false
  # The options of HexagonTpu.Preprocess's functions (documented there, from this schema),
  # checked once per call into the map the pass reads.

  alias HexagonTpu.Args

  @max_u64 18_446_744_073_709_551_615

  @yuv [:nv12, :nv21, :i420, :yuyv]

  @options Args.schema!(
             width: [
               type: {:or, [nil, :pos_integer]},
               default: nil,
               type_doc: "a positive integer",
               doc: """
               The frame's width; required for a binary frame (an Nx frame's shape gives it, \
               and must agree with it if it is given).
               """
             ],
             height: [
               type: {:or, [nil, :pos_integer]},
               default: nil,
               type_doc: "a positive integer",
               doc: "The frame's height; as `:width`."
             ],
             input: [
               type: {:or, [nil, {:custom, __MODULE__, :input_ref, []}]},
               default: nil,
               type_doc: "an input name (a string or atom) or position (a non-negative integer)",
               doc:
                 "The graph input, by name or position; needed when a graph has several inputs."
             ],
             pixel_format: [
               type: {:in, [:rgb, :bgr | @yuv]},
               default: :rgb,
               type_doc: ":rgb, :bgr, :nv12, :nv21, :i420 or :yuyv",
               doc: "The frame's layout (see \"The frame\")."
             ],
             channels: [
               type: {:in, [:rgb, :bgr]},
               default: :rgb,
               type_doc: ":rgb or :bgr",
               doc: "The model's channel order."
             ],
             resize: [
               type: {:in, [:bilinear, :nearest]},
               default: :bilinear,
               type_doc: ":bilinear or :nearest",
               doc: "See \"The arithmetic\"."
             ],
             layout: [
               type: {:in, [:auto, :nhwc, :nchw]},
               default: :auto,
               type_doc: ":auto, :nhwc or :nchw",
               doc: "The model input's layout; `:auto`: from its shape."
             ],
             mean: [
               type: {:custom, __MODULE__, :per_channel, []},
               default: 0.0,
               type_doc: "a number or a list of 3 numbers",
               doc: "In the model's channel order, in the scale of `:pixel_scale`."
             ],
             std: [
               type: {:custom, __MODULE__, :per_channel, []},
               default: 1.0,
               type_doc: "a number or a list of 3 numbers",
               doc: "As `:mean`; no value may be 0."
             ],
             pixel_scale: [
               type: {:in, [:unit, :byte]},
               default: :unit,
               type_doc: ":unit or :byte",
               doc: """
               `:unit`: pixels are divided by 255 first, mean and std are in the 0..1 scale, \
               as torchvision's; `:byte`: mean and std in the 0..255 scale.
               """
             ],
             color_matrix: [
               type: {:in, [:bt601, :bt709]},
               default: :bt601,
               type_doc: ":bt601 or :bt709",
               doc: "YUV frames' matrix."
             ],
             color_range: [
               type: {:in, [:limited, :full]},
               default: :limited,
               type_doc: ":limited or :full",
               doc: "YUV frames' range (limited: Y 16..235)."
             ],
             stride: [
               type: {:or, [nil, :pos_integer]},
               default: nil,
               type_doc: "a positive integer",
               doc: "Bytes per row of the frame's first plane; `nil`: packed rows."
             ],
             chroma_stride: [
               type: {:or, [nil, :pos_integer]},
               default: nil,
               type_doc: "a positive integer",
               doc: """
               Bytes per row of a chroma plane; `nil`: the stride (NV12/NV21), the stride / 2 \
               (I420).
               """
             ],
             chroma_offset: [
               type: {:or, [nil, :non_neg_integer]},
               default: nil,
               type_doc: "a non-negative integer",
               doc: "Where the chroma plane(s) start; `nil`: `height * stride`."
             ],
             crop: [
               type: {:or, [nil, {:custom, __MODULE__, :crop, []}]},
               default: nil,
               type_doc: "{x, y, width, height} (non-negative integers, width and height > 0)",
               doc: "The part of the frame to take; `nil`: all of it."
             ],
             fit: [
               type: {:in, [:stretch, :letterbox]},
               default: :stretch,
               type_doc: ":stretch or :letterbox",
               doc: "See \"Crop and letterbox\"."
             ],
             pad: [
               type: {:custom, __MODULE__, :pad, []},
               default: 114,
               type_doc: "an integer 0..255 or a list of 3 of them",
               doc: "The letterbox's pixel value."
             ]
           )

  @doc false
  # The schema, for HexagonTpu.Preprocess's docs.
  @spec schema() :: NimbleOptions.t()
  def schema, do: @options

  @doc false
  # The YUV pixel formats.
  @spec yuv() :: [atom()]
  def yuv, do: @yuv

  @doc false
  # The checked options as a map: mean, std and pad as tuples.
  @spec check!(term(), String.t()) :: map()
  def check!(given, fun), do: Args.cached_options!(given, @options, fun, &finish!(&1, given, fun))

  # The ranges and the non-zero std the schema cannot check; the options as a map.
  defp finish!(opts, given, fun) do
    why = "bytes or pixels as an unsigned 64-bit integer"

    for key <- [:width, :height, :stride, :chroma_stride, :chroma_offset],
        do: Args.at_most!(opts[key], @max_u64, key, why, fun)

    with {_, _, _, _} = crop <- opts[:crop],
         true <- crop |> Tuple.to_list() |> Enum.any?(&(&1 > @max_u64)),
         do:
           Args.too_large!(
             fun,
             "the :crop option's numbers",
             @max_u64,
             "pixels as unsigned 64-bit integers",
             crop
           )

    if Enum.any?(Tuple.to_list(opts[:std]), &(&1 == 0)),
      do:
        Args.type_error!(
          fun,
          "the :std option",
          "non-zero (a number or a list of 3 numbers)",
          given[:std]
        )

    Map.new(opts)
  end

  @doc false
  # The :crop option's type.
  def crop({x, y, w, h} = crop)
      when is_integer(x) and x >= 0 and is_integer(y) and y >= 0 and is_integer(w) and w > 0 and
             is_integer(h) and h > 0,
      do: {:ok, crop}

  def crop(_other), do: {:error, "not a crop"}

  @doc false
  # The :pad option's type: one byte, or three, as {r, g, b}.
  def pad(v) when is_integer(v) and v in 0..255, do: {:ok, {v, v, v}}

  def pad([a, b, c] = list) do
    if Enum.all?(list, &(is_integer(&1) and &1 in 0..255)),
      do: {:ok, {a, b, c}},
      else: {:error, "not bytes"}
  end

  def pad(_other), do: {:error, "not bytes"}

  @doc false
  # The :mean and :std options' type: one number, or three, as a tuple of floats.
  def per_channel(n) when is_number(n), do: per_channel([n, n, n])

  def per_channel([_, _, _] = values) do
    if Enum.all?(values, &is_number/1),
      do: {:ok, values |> Enum.map(&(&1 * 1.0)) |> List.to_tuple()},
      else: {:error, "not numbers"}
  end

  def per_channel(_other), do: {:error, "not numbers"}

  @doc false
  # The :input option's type.
  def input_ref(value)
      when is_binary(value) or is_atom(value) or (is_integer(value) and value >= 0),
      do: {:ok, value}

  def input_ref(_other), do: {:error, "not an input"}
end
