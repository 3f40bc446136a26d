defmodule HexagonTpu.Postprocess.Input do
  @moduledoc false
  # The tensors `HexagonTpu.Postprocess` takes, as f32 little-endian bytes and a shape: an
  # `Nx.Tensor` (a float type, converted to f32) or `{binary, shape}`. A wrong type raises
  # ArgumentError; a wrong size or shape returns an :invalid_input error naming the argument.

  # Nx is optional: present wherever an Nx.Tensor reaches this module, maybe absent at compile.
  @compile {:no_warn_undefined, [Nx]}

  alias HexagonTpu.{Args, Error}

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
