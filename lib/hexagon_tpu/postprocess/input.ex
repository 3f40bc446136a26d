defmodule HexagonTpu.Postprocess.Input do
  @moduledoc false
  # The tensors `HexagonTpu.Postprocess` takes, as f32 little-endian bytes and a shape: an
  # `Nx.Tensor` (a float type, converted to f32) or `{binary, shape}`; the decoders also take
  # a model output in its own type, `{tensor_or_binary, %TensorInfo{}}`, read as it is. A wrong
  # type raises ArgumentError; a wrong size or shape returns an :invalid_input error naming the
  # argument.

  # Nx is optional: present wherever an Nx.Tensor reaches this module, maybe absent at compile.
  @compile {:no_warn_undefined, [Nx]}

  alias HexagonTpu.{Args, Error, TensorInfo}

  @typedoc "Quantized levels' `{type, scale, offset}` (QNN's offset, `-zero_point`); nil: f32."
  @type levels :: {:u8 | :u16, float(), integer()} | nil

  @doc """
  `{:ok, {bytes, levels}, shape}` of a decoder's tensor `value`, the argument `what` of `fun`:
  what `f32!/3` takes (`levels` nil), or `{data, %TensorInfo{}}`, a model output and its
  description, f32 or u8/u16 quantized per tensor (`predict/3` with `dequantize: :none`).
  """
  @spec values!(term(), String.t(), String.t()) ::
          {:ok, {binary(), levels()}, tuple()} | {:error, Error.t()}
  def values!({data, %TensorInfo{} = info}, what, fun) do
    float? = is_struct(data, Nx.Tensor) and elem(Nx.type(data), 0) in [:f, :bf]

    cond do
      # a tensor predict/3 already dequantized
      float? ->
        with {:ok, bytes, shape} <- f32!(data, what, fun), do: {:ok, {bytes, nil}, shape}

      is_struct(data, Nx.Tensor) and Nx.type(data) != info.type ->
        Args.invalid_input(
          "#{what}: a tensor of type #{inspect(Nx.type(data))} given with the description " <>
            "of #{inspect(info.name)}, whose type is #{inspect(info.type)}"
        )

      is_struct(data, Nx.Tensor) or is_binary(data) ->
        bytes = if is_binary(data), do: data, else: Nx.to_binary(data)
        model_type(bytes, info, what)

      true ->
        Args.type_error!(fun, what, "an Nx.Tensor or a binary with its TensorInfo", data)
    end
  end

  def values!(value, what, fun) do
    with {:ok, bytes, shape} <- f32!(value, what, fun), do: {:ok, {bytes, nil}, shape}
  end

  defp model_type(bytes, %TensorInfo{} = info, what) do
    levels =
      case {info.type, info.quantization} do
        {{:f, 32}, _} ->
          nil

        {{:u, bits}, %{kind: :per_tensor, scale: s, zero_point: z}} when bits in [8, 16] ->
          {:"u#{bits}", s, -z}

        _ ->
          :unsupported
      end

    cond do
      levels == :unsupported ->
        Args.invalid_input(
          "#{what}: #{inspect(info.name)} is #{inspect(info.type)} with quantization " <>
            "#{inspect(quantization_kind(info.quantization))}; the decoders read f32 and u8 or " <>
            "u16 quantized per tensor: give it dequantized (predict/3's default)"
        )

      byte_size(bytes) != info.byte_size ->
        Args.invalid_input(
          "#{what}: #{inspect(info.name)} #{inspect(info.shape)} of #{inspect(info.type)} is " <>
            "#{info.byte_size} bytes, got #{byte_size(bytes)}"
        )

      true ->
        {:ok, {bytes, levels}, info.shape}
    end
  end

  defp quantization_kind(%{kind: kind}), do: kind
  defp quantization_kind(other), do: other

  @doc "`{:ok, f32_bytes, shape}` of `value`, the argument `what` of `fun`."
  @spec f32!(term(), String.t(), String.t()) ::
          {:ok, binary(), tuple()} | {:error, Error.t()}
  def f32!({bytes, shape} = value, what, fun) when is_binary(bytes) and is_tuple(shape) do
    dims = Tuple.to_list(shape)

    unless Enum.all?(dims, &(is_integer(&1) and &1 >= 0)),
      do: Args.type_error!(fun, "#{what}'s shape", "a tuple of non-negative integers", value)

    count = Enum.product(dims)

    if byte_size(bytes) == count * 4,
      do: {:ok, bytes, shape},
      else:
        Args.invalid_input(
          "#{what}: shape #{inspect(shape)} is #{count} f32 values (#{count * 4} bytes), " <>
            "got #{byte_size(bytes)} bytes"
        )
  end

  def f32!(tensor, what, _fun) when is_struct(tensor, Nx.Tensor) do
    case Nx.type(tensor) do
      {:f, 32} ->
        {:ok, Nx.to_binary(tensor), Nx.shape(tensor)}

      {kind, _} when kind in [:f, :bf] ->
        {:ok, tensor |> Nx.as_type({:f, 32}) |> Nx.to_binary(), Nx.shape(tensor)}

      type ->
        Args.invalid_input(
          "#{what}: expected a float tensor (converted to f32), got #{inspect(type)}"
        )
    end
  end

  def f32!(other, what, fun),
    do:
      Args.type_error!(
        fun,
        what,
        "an Nx.Tensor or {binary, shape} (f32 little-endian bytes and their shape)",
        other
      )

  @doc "The class ids of `classes:` (a list or an integer `Nx.Tensor`) as u32 bytes, or nil."
  @spec classes!(term(), String.t()) :: binary() | nil
  def classes!(nil, _fun), do: nil

  def classes!(list, fun) when is_list(list) do
    unless Enum.all?(list, &(is_integer(&1) and &1 >= 0 and &1 < 4_294_967_296)),
      do: Args.type_error!(fun, "the :classes option", "a list of class indices", list)

    for c <- list, into: <<>>, do: <<c::32-little>>
  end

  def classes!(tensor, fun) when is_struct(tensor, Nx.Tensor) do
    integer? = match?({k, _} when k in [:s, :u], Nx.type(tensor))

    unless integer? and Nx.rank(tensor) == 1,
      do: Args.type_error!(fun, "the :classes option", "an integer tensor of shape {N}", tensor)

    tensor |> Nx.to_flat_list() |> classes!(fun)
  end

  def classes!(other, fun),
    do:
      Args.type_error!(
        fun,
        "the :classes option",
        "a list of class indices or an integer Nx.Tensor",
        other
      )
end
