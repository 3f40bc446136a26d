defmodule HexagonTpu.TensorInfo do
  @moduledoc """
  What a graph input or output looks like: name, shape, element type and quantization.

  Read from the context binary's own metadata when it is loaded (through QnnSystem), built by
  the NIF and cached in Elixir: reading it never calls into QNN and still works after
  `close/1`.

    * `:name` - the tensor name, as used by `HexagonTpu.predict/3` with a map of inputs: the
      model's own name when the binary's `.names` file gives one (`mix hexagon_tpu.compile`
      writes them), else the name in the binary
    * `:qnn_name` - the name in the binary when `:name` is the model's, else `nil`; inputs
      given by name are found by either
    * `:shape` - a tuple of dimensions, e.g. `{1, 224, 224, 3}`
    * `:type` - the Nx-style element type of the model's data, e.g. `{:u, 8}`, `{:s, 16}`,
      `{:f, 16}`, `{:f, 32}`; `nil` where Nx has no such type (4-bit types)
    * `:data_type` - QNN's own name for it, e.g. `:ufixed_point_8`, `:float_32`
    * `:quantization` - see below
    * `:byte_size` - bytes of one tensor in the model's type
    * `:f32_conversion` - whether `hexagon_tpu` converts this tensor from and to f32 (true
      for per-tensor and per-axis quantized tensors and for f16; false for unquantized
      integers, booleans and encodings it only describes)

  ## Quantization

  QNN stores affine quantization as `float = (q + offset) * scale`. `TensorInfo` reports
  the conventional zero point instead, `zero_point = -offset`, so that
  `float = (q - zero_point) * scale`:

    * `:none` - not quantized
    * `%{kind: :per_tensor, scale: float, zero_point: integer, bitwidth: integer | nil}`
    * `%{kind: :per_axis, axis: integer, scales: [float], zero_points: [integer],
      bitwidth: integer | nil}` - one scale and zero point per index along `axis`
    * `%{kind: :unsupported, encoding: String.t()}` - an encoding `hexagon_tpu` describes
      but does not convert (block or vector quantization, for example); such tensors are
      passed in the model's own type only

  Scales are the exact single-precision values QNN uses, widened to Elixir floats.
  """

  @enforce_keys [:name, :shape, :type, :data_type, :quantization, :byte_size]
  defstruct [
    :name,
    :id,
    :shape,
    :type,
    :data_type,
    :quantization,
    :byte_size,
    qnn_name: nil,
    f32_conversion: false
  ]

  @typedoc "An Nx-style element type."
  @type type :: {:u | :s | :f | :bf, pos_integer()}

  @type quantization ::
          :none
          | %{
              kind: :per_tensor,
              scale: float(),
              zero_point: integer(),
              bitwidth: pos_integer() | nil
            }
          | %{
              kind: :per_axis,
              axis: non_neg_integer(),
              scales: [float()],
              zero_points: [integer()],
              bitwidth: pos_integer() | nil
            }
          | %{kind: :unsupported, encoding: String.t()}

  @type t :: %__MODULE__{
          name: String.t(),
          id: non_neg_integer() | nil,
          shape: tuple(),
          type: type() | nil,
          data_type: atom(),
          quantization: quantization(),
          byte_size: non_neg_integer(),
          qnn_name: String.t() | nil,
          f32_conversion: boolean()
        }

  @doc """
  The number of elements: the product of the shape.

      iex> HexagonTpu.TensorInfo.size(%HexagonTpu.TensorInfo{name: "x", shape: {1, 3, 4},
      ...>   type: {:u, 8}, data_type: :ufixed_point_8, quantization: :none, byte_size: 12})
      12
  """
  @spec size(t()) :: non_neg_integer()
  def size(%__MODULE__{shape: shape}) when is_tuple(shape),
    do: shape |> Tuple.to_list() |> Enum.reduce(1, &(&1 * &2))

  def size(other) do
    HexagonTpu.Args.type_error!(
      "HexagonTpu.TensorInfo.size/1",
      "`info`",
      "a HexagonTpu.TensorInfo",
      other
    )
  end

  @doc false
  # "u8[1][224][224][3]": the compact form Inspect implementations use.
  @spec describe(t()) :: String.t()
  def describe(%__MODULE__{} = info) do
    type =
      case info.type do
        {kind, bits} -> "#{kind}#{bits}"
        nil -> Atom.to_string(info.data_type)
      end

    dims = info.shape |> Tuple.to_list() |> Enum.map_join(&"[#{&1}]")
    "#{info.name} #{type}#{dims}"
  end

  defimpl Inspect do
    def inspect(info, _opts) do
      quant =
        case info.quantization do
          :none ->
            ""

          %{kind: :per_tensor, scale: scale, zero_point: zp} ->
            " scale=#{Float.round(scale, 8)} zero_point=#{zp}"

          %{kind: :per_axis, axis: axis, scales: scales} ->
            " per_axis(axis=#{axis}, #{length(scales)} scales)"

          %{kind: :unsupported, encoding: encoding} ->
            " #{encoding}"
        end

      "#HexagonTpu.TensorInfo<#{HexagonTpu.TensorInfo.describe(info)}#{quant}>"
    end
  end
end
