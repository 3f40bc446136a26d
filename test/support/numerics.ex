defmodule HexagonTpu.Test.Numerics do
  @moduledoc false
  # Reference quantization math in plain Elixir floats, written independently of the Rust
  # kernels: QNN's convention float = (q + offset) * scale, i.e. zero_point = -offset;
  # rounding half to even; saturation to the type's range.

  import Bitwise

  @doc "Little-endian f32 bytes for a list of numbers."
  def f32(values), do: for(v <- values, into: <<>>, do: <<v * 1.0::float-32-little>>)

  @doc "A list of floats from little-endian f32 bytes."
  def from_f32(binary), do: for(<<v::float-32-little <- binary>>, do: v)

  @doc "A list of integers from little-endian bytes of an integer type."
  def from_int(binary, {kind, bits}) do
    case kind do
      :u -> for <<v::unsigned-little-size(bits) <- binary>>, do: v
      :s -> for <<v::signed-little-size(bits) <- binary>>, do: v
    end
  end

  @doc "Little-endian bytes of an integer type."
  def to_int(values, {kind, bits}) do
    case kind do
      :u -> for v <- values, into: <<>>, do: <<v::unsigned-little-size(bits)>>
      :s -> for v <- values, into: <<>>, do: <<v::signed-little-size(bits)>>
    end
  end

  def range({:u, bits}), do: {0, (1 <<< bits) - 1}
  def range({:s, bits}), do: {-(1 <<< (bits - 1)), (1 <<< (bits - 1)) - 1}

  def round_half_even(x) do
    f = Float.floor(x)
    diff = x - f

    cond do
      diff > 0.5 -> trunc(f) + 1
      diff < 0.5 -> trunc(f)
      rem(trunc(f), 2) == 0 -> trunc(f)
      true -> trunc(f) + 1
    end
  end

  @doc "Quantizes one real value: saturate(round_half_even(x / scale) + zero_point)."
  def quantize(x, scale, zero_point, type) do
    {lo, hi} = range(type)
    q = round_half_even(x / scale) + zero_point
    q |> max(lo) |> min(hi)
  end

  def dequantize(q, scale, zero_point), do: (q - zero_point) * scale

  @doc "Round trip of a real value through a quantized type."
  def fake_quant(x, scale, zero_point, type),
    do: x |> quantize(scale, zero_point, type) |> dequantize(scale, zero_point)

  @doc "Asserts two lists of floats agree within `tolerance` (a number or one per element)."
  defmacro assert_close(actual, expected, tolerance) do
    quote do
      actual = unquote(actual)
      expected = unquote(expected)
      tolerance = unquote(tolerance)
      ExUnit.Assertions.assert(length(actual) == length(expected))

      tolerances =
        if is_list(tolerance), do: tolerance, else: List.duplicate(tolerance, length(actual))

      for {{a, e}, t} <- actual |> Enum.zip(expected) |> Enum.zip(tolerances) do
        ExUnit.Assertions.assert(abs(a - e) <= t * 1.0001,
          message:
            "#{a} is not within #{t} of #{e} (got #{inspect(actual)}, expected #{inspect(expected)})"
        )
      end
    end
  end
end
