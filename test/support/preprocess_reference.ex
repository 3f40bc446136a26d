defmodule HexagonTpu.Test.PreprocessReference do
  @moduledoc false
  # HexagonTpu.Preprocess's steps done separately, in plain Elixir (no Nx): resize, channel
  # order, layout, normalize, quantize, one element at a time from the definition in the
  # moduledoc (bilinear: OpenCV's u8 fixed point, in integers). Single-precision arithmetic is emulated by rounding every +, -, *, / to f32
  # (`f32/1`): Elixir computes in f64, and an f64 result rounded to f32 is the f32 result of
  # the same operation on f32 operands (53 >= 2 * 24 + 2 bits, so double rounding never bites).
  #
  # `p` is a map: :sw, :sh (frame), :dw, :dh (model), :resize, :layout (:nhwc | :nchw), :swap
  # (RGB <-> BGR), :divisor (255.0 | 1.0), :mean, :std (3-tuples), :out (see `convert/2`).

  import Bitwise

  def f32(x) do
    <<y::float-32>> = <<x::float-32>>
    y
  end

  @doc "The normalized f32 values, in the model input's order."
  def values(frame, p) do
    order =
      case p.layout do
        :nhwc -> for y <- 0..(p.dh - 1), x <- 0..(p.dw - 1), c <- 0..2, do: {x, y, c}
        :nchw -> for c <- 0..2, y <- 0..(p.dh - 1), x <- 0..(p.dw - 1), do: {x, y, c}
      end

    xs = for x <- 0..(p.dw - 1), into: %{}, do: {x, index(p.resize, :column, x, p.sw, p.dw)}
    ys = for y <- 0..(p.dh - 1), into: %{}, do: {y, index(p.resize, :row, y, p.sh, p.dh)}

    Enum.map(order, fn {x, y, c} ->
      sc = if p.swap, do: 2 - c, else: c
      pixel = fn px, py -> :binary.at(frame, (py * p.sw + px) * 3 + sc) end

      v =
        case {xs[x], ys[y]} do
          {{:nearest, sx}, {:nearest, sy}} ->
            pixel.(sx, sy) * 1.0

          {{:column, x0, x1, a0, a1}, {:row, y0, y1, b0, b1}} ->
            h = fn py -> (pixel.(x0, py) * a0 + pixel.(x1, py) * a1) >>> 4 end
            v = ((h.(y0) * b0) >>> 16) + ((h.(y1) * b1) >>> 16)
            rounded = (v + 2) >>> 2
            rounded |> max(0) |> min(255) |> Kernel.*(1.0)
        end

      mean = f32(elem(p.mean, c))
      std = f32(elem(p.std, c))
      f32(f32(f32(v / p.divisor) - mean) / std)
    end)
  end

  @doc "Bilinear taps of an axis (`:column` or `:row`): `{i0s, i1s, w0s, w1s}`, lists."
  def linear_taps(axis, src, dst) do
    taps = for d <- 0..(dst - 1), do: index(:bilinear, axis, d, src, dst)
    for k <- 1..4, do: Enum.map(taps, &elem(&1, k))
  end

  defp index(:nearest, _, d, src, dst),
    do: {:nearest, min(div((2 * d + 1) * src, 2 * dst), src - 1)}

  # OpenCV's INTER_LINEAR taps for u8: the position in f32, 11-bit weights; columns clamp the
  # position at the borders (fraction 0), rows only the neighbours
  defp index(:bilinear, axis, d, src, dst) do
    f = f32((d + 0.5) * (1.0 / (dst / src)) - 0.5)
    s = trunc(Float.floor(f))
    f = f32(f - s)

    {s, f} =
      if axis == :column and (s < 0 or s >= src - 1),
        do: {min(max(s, 0), src - 1), 0.0},
        else: {s, f}

    w = fn x -> round_even(f32(x) * 2048.0) end
    clamp = fn i -> i |> max(0) |> min(src - 1) end
    {axis, clamp.(s), clamp.(s + 1), w.(1.0 - f), w.(f)}
  end

  @doc """
  The values as the input's bytes: `out` is `:f32`, or `{type, scale, zero_point, {qmin, qmax}}`
  (quantized: round half to even of `x / scale` in f32, plus the zero point, saturated).
  """
  def convert(values, :f32), do: for(x <- values, into: <<>>, do: <<x::float-32-little>>)

  def convert(values, {{kind, bits}, scale, zp, {qmin, qmax}}) do
    for x <- values, into: <<>> do
      q = (round_even(f32(x / f32(scale))) + zp) |> max(qmin) |> min(qmax)

      case kind do
        :u -> <<q::unsigned-size(bits)-little>>
        :s -> <<q::signed-size(bits)-little>>
      end
    end
  end

  def round_even(r) do
    f = Float.floor(r)
    i = trunc(f)

    cond do
      r - f > 0.5 -> i + 1
      r - f < 0.5 -> i
      (i &&& 1) == 0 -> i
      true -> i + 1
    end
  end

  @doc "A deterministic u8 frame of `w * h * 3` bytes in which every byte value occurs."
  def frame(w, h, seed \\ 1) do
    for i <- 0..(w * h * 3 - 1), into: <<>>, do: <<rem(i * 97 + seed * 31 + div(i, 7) * 13, 256)>>
  end

  @doc "The parameters `p` as test/support/preprocess_numpy.py reads them (JSON)."
  def numpy_params(p) do
    out =
      case p.out do
        out when out in [:f32, :f16] ->
          out

        {{kind, bits}, scale, zp, {qmin, qmax}} ->
          %{type: "#{kind}#{bits}", scale: scale, zero_point: zp, qmin: qmin, qmax: qmax}
      end

    HexagonTpu.JSON.encode(%{
      p
      | mean: Tuple.to_list(p.mean),
        std: Tuple.to_list(p.std),
        out: out
    })
  end

  @doc "numpy's output (test/support/preprocess_numpy.py, `python` from the QNN venv)."
  def numpy!(python, frame, p) do
    dir =
      Path.join(System.tmp_dir!(), "hexagon_tpu_preprocess_#{System.unique_integer([:positive])}")

    File.mkdir_p!(dir)
    frame_file = Path.join(dir, "frame")
    out_file = Path.join(dir, "out")
    File.write!(frame_file, frame)
    script = Path.expand("preprocess_numpy.py", __DIR__)

    try do
      {output, status} =
        System.cmd(python, [script, "run", numpy_params(p), frame_file, out_file],
          stderr_to_stdout: true
        )

      if status != 0, do: raise("preprocess_numpy.py failed (#{status}): #{output}")
      File.read!(out_file)
    after
      File.rm_rf!(dir)
    end
  end
end
