defmodule HexagonTpu.Bench.Inputs do
  @moduledoc false
  # The inputs of a benchmark (HexagonTpu.Bench, "Inputs"): random data of each input's shape
  # and type, from its TensorInfo, the same for the same seed. An input the package converts
  # from f32 (quantized, f16) gets f32 values spread over the range its quantization can
  # represent, so the bench pays the quantize a caller with float data pays; an f32 input gets
  # values in [-1, 1); any other type random bytes in the model's own type (0 or 1 for
  # booleans). Each a plain binary, which HexagonTpu.Graph.execute/3 reads that way.

  alias HexagonTpu.TensorInfo
  alias HexagonTpu.Graph.Inputs

  @doc "One binary per input of `graph`, in its input order, from `seed`."
  @spec random(HexagonTpu.Graph.t(), integer()) :: [binary()]
  def random(graph, seed) do
    state = :rand.seed_s(:exsss, seed)

    {binaries, _state} =
      Enum.map_reduce(graph.inputs, state, fn info, state -> tensor(info, state) end)

    binaries
  end

  @doc "`:f32` or `:model`: the form `random/2` gives `info`'s data in (execute's own rule)."
  @spec form(TensorInfo.t()) :: :f32 | :model
  def form(info), do: Inputs.mode(info, :auto)

  defp tensor(info, state) do
    n = TensorInfo.size(info)

    cond do
      form(info) == :f32 ->
        {lo, hi} = float_range(info)
        floats(n, lo, hi, state)

      info.type == {:f, 32} ->
        floats(n, -1.0, 1.0, state)

      info.data_type == :bool_8 ->
        bytes(info.byte_size, fn state -> :rand.uniform_s(2, state) end, state)

      true ->
        bytes(info.byte_size, fn state -> :rand.uniform_s(256, state) end, state)
    end
  end

  # The floats a quantized tensor represents: (q - zero_point) * scale over q's range, the
  # widest over a per-axis tensor's channels. f16 (no quantization): [-1, 1).
  defp float_range(%TensorInfo{quantization: %{kind: :per_tensor} = q} = info),
    do: dequantized_range(info, q.scale, q.zero_point)

  defp float_range(%TensorInfo{quantization: %{kind: :per_axis} = q} = info) do
    ranges = Enum.zip_with(q.scales, q.zero_points, &dequantized_range(info, &1, &2))

    {ranges |> Enum.map(&elem(&1, 0)) |> Enum.min(),
     ranges |> Enum.map(&elem(&1, 1)) |> Enum.max()}
  end

  defp float_range(_info), do: {-1.0, 1.0}

  defp dequantized_range(info, scale, zero_point) do
    {qmin, qmax} = integer_range(info)
    {(qmin - zero_point) * scale, (qmax - zero_point) * scale}
  end

  defp integer_range(%TensorInfo{type: {:u, bits}}), do: {0, Bitwise.bsl(1, bits) - 1}

  defp integer_range(%TensorInfo{type: {:s, bits}}),
    do: {-Bitwise.bsl(1, bits - 1), Bitwise.bsl(1, bits - 1) - 1}

  defp integer_range(_info), do: {0, 255}

  defp floats(n, lo, hi, state) do
    span = hi - lo

    {iodata, state} =
      Enum.map_reduce(1..n//1, state, fn _, state ->
        {x, state} = :rand.uniform_s(state)
        {<<lo + x * span::float-32-little>>, state}
      end)

    {IO.iodata_to_binary(iodata), state}
  end

  defp bytes(n, draw, state) do
    {iodata, state} =
      Enum.map_reduce(1..n//1, state, fn _, state ->
        {x, state} = draw.(state)
        {x - 1, state}
      end)

    {:erlang.list_to_binary(iodata), state}
  end
end
