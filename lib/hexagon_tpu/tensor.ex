defmodule HexagonTpu.Tensor do
  @moduledoc """
  Conversion between `Nx.Tensor`s and the bytes a graph reads and writes.

  `HexagonTpu.Graph.execute/3` uses it for tensor inputs and outputs; it is public for
  pipelines that prepare data themselves. It needs Nx at run time only: whether Nx is there is
  asked when a call needs it, so a project may add Nx after hexagon_tpu was compiled.

  A tensor in the model's own type is passed as its bytes, untouched. A float tensor
  (`{:f, 16 | 32 | 64}`, `{:bf, 16}`) for a quantized or f16 input is cast to f32 here and
  quantized by the NIF with the tensor's own parameters (see `HexagonTpu.Graph`,
  "Quantization"). Anything else is refused with the expected and given type.
  """

  alias HexagonTpu.{Args, Error, TensorInfo}
  alias HexagonTpu.Graph.Inputs

  # Nx is optional: present wherever an Nx.Tensor reaches this module, maybe absent at compile.
  @compile {:no_warn_undefined, [Nx]}

  @doc """
  The bytes and conversion mode for `tensor` as input `info`.

  Returns `{:ok, binary, :model | :f32}`, where `:model` means the bytes are in the
  model's type and `:f32` that the NIF quantizes them, or an `:invalid_input` error.
  """
  @spec to_input(Nx.Tensor.t(), TensorInfo.t(), :auto | :none) ::
          {:ok, binary(), :model | :f32} | {:error, Error.t()}
  def to_input(tensor, %TensorInfo{} = info, quantize)
      when is_struct(tensor, Nx.Tensor) and quantize in [:auto, :none] do
    given = Nx.type(tensor)

    cond do
      tensor.vectorized_axes != [] ->
        Args.invalid_input(
          "input `#{info.name}` is vectorized (" <>
            Enum.map_join(tensor.vectorized_axes, ", ", fn {name, size} -> "#{name}: #{size}" end) <>
            "): an execute takes one entry; HexagonTpu.predict/3 runs vectorized tensors entry " <>
            "by entry"
        )

      Nx.shape(tensor) != info.shape ->
        Args.invalid_input(
          "input `#{info.name}`: expected shape #{inspect(info.shape)}, " <>
            "given #{inspect(Nx.shape(tensor))}"
        )

      given == info.type ->
        {:ok, Nx.to_binary(tensor), :model}

      quantize == :none ->
        Args.invalid_input(
          "input `#{info.name}`: expected type #{inspect(info.type)} (the model's type, " <>
            "as quantize: :none requires), given #{inspect(given)}"
        )

      # f32 bytes: the model's own for an f32 input, converted by the NIF otherwise.
      float?(given) and (info.type == {:f, 32} or info.f32_conversion) ->
        {:ok, tensor |> Nx.as_type({:f, 32}) |> Nx.to_binary(), Inputs.mode(info, quantize)}

      info.f32_conversion ->
        Args.invalid_input(
          "input `#{info.name}`: expected type #{inspect(info.type)} (the model's type) " <>
            "or a float type to quantize, given #{inspect(given)}"
        )

      true ->
        Args.invalid_input(
          "input `#{info.name}`: expected type #{inspect(info.type || info.data_type)} " <>
            "(#{info.data_type}, which has no f32 conversion), given #{inspect(given)}"
        )
    end
  end

  def to_input(tensor, info, quantize) do
    argument_error!(
      "HexagonTpu.Tensor.to_input/3",
      {is_struct(tensor, Nx.Tensor), "`tensor`", "an Nx.Tensor", tensor},
      info,
      {"`quantize`", ":auto or :none", quantize}
    )
  end

  @doc """
  The tensor for output `info` from the bytes the NIF returned: f32 when `mode` is `:f32`
  (dequantized), the model's type otherwise. Types Nx cannot represent (4-bit) stay a
  binary.
  """
  @spec from_output(binary(), TensorInfo.t(), :model | :f32) :: Nx.Tensor.t() | binary()
  def from_output(binary, %TensorInfo{} = info, mode)
      when is_binary(binary) and mode in [:model, :f32] do
    case if(mode == :f32, do: {:f, 32}, else: info.type) do
      nil -> binary
      type -> binary |> Nx.from_binary(type) |> Nx.reshape(info.shape)
    end
  end

  def from_output(binary, info, mode) do
    argument_error!(
      "HexagonTpu.Tensor.from_output/3",
      {is_binary(binary), "`binary`", "a binary", binary},
      info,
      {"`mode`", ":model or :f32", mode}
    )
  end

  # The ArgumentError of a call (data, info, option) that matched no clause, for the first
  # argument that is off: the data (`ok?` false), `info`, else the option.
  defp argument_error!(fun, {ok?, what, expected, data}, info, {option, allowed, value}) do
    cond do
      not ok? ->
        Args.type_error!(fun, what, expected, data)

      not is_struct(info, TensorInfo) ->
        Args.type_error!(fun, "`info`", "a HexagonTpu.TensorInfo", info)

      true ->
        Args.type_error!(fun, option, allowed, value)
    end
  end

  defp float?({kind, _bits}), do: kind in [:f, :bf]
end
