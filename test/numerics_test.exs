defmodule HexagonTpu.NumericsTest do
  # f32 in -> f32 out through quantized models, against references computed here in plain
  # Elixir floats; and the :none paths, which must hand back the backend's exact bytes.
  use ExUnit.Case, async: true

  import HexagonTpu.Test.Numerics

  alias HexagonTpu.Graph
  alias HexagonTpu.Test.{Models, Support}

  describe "per-tensor u8" do
    setup do
      in_t = Models.t(:ufixed_point_8, [1, 8], {:per_tensor, 0.05, -128})
      out_t = Models.t(:ufixed_point_8, [1, 8], {:per_tensor, 0.04, -100})
      %{graph: Support.load!(Models.identity(in_t, out_t))}
    end

    test "metadata reports zero_point = -offset", %{graph: graph} do
      [x] = Graph.inputs(graph)
      [y] = Graph.outputs(graph)

      assert x.name == "x"
      assert x.shape == {1, 8}
      assert x.type == {:u, 8}
      assert x.data_type == :ufixed_point_8
      assert x.byte_size == 8
      assert x.f32_conversion
      assert %{kind: :per_tensor, zero_point: 128} = x.quantization
      assert_in_delta x.quantization.scale, 0.05, 1.0e-8
      assert %{kind: :per_tensor, zero_point: 100} = y.quantization
    end

    test "f32 in, f32 out within one output step", %{graph: graph} do
      xs = [-3.0, -1.234, 0.0, 0.5, 1.0, 2.71, 3.3, 5.9]
      {:ok, [out]} = Graph.execute(graph, [f32(xs)], output: :binary)

      expected = Enum.map(xs, &fake_quant(&1, 0.05, 128, {:u, 8}))
      assert_close(from_f32(out), expected, 0.04)
    end

    test "values beyond the range saturate", %{graph: graph} do
      {:ok, [out]} =
        Graph.execute(graph, [f32([-100.0, 100.0, 0, 0, 0, 0, 0, 0])], output: :binary)

      [lo, hi | _] = from_f32(out)
      # the output range is [(0 - 100) * 0.04, (255 - 100) * 0.04] = [-4.0, 6.2]
      assert_in_delta lo, -4.0, 1.0e-6
      assert_in_delta hi, 6.2, 1.0e-6
    end
  end

  describe "rounding, saturation and NaN on the way in" do
    setup do
      # a power-of-two scale makes the ties exact
      t = Models.t(:ufixed_point_8, [1, 10], {:per_tensor, 0.0625, -128})
      %{graph: Support.load!(Models.identity(t, t))}
    end

    test "half to even, saturating, NaN to the zero point", %{graph: graph} do
      nan = <<0, 0, 192, 127>>
      inf = <<0, 0, 128, 127>>
      neg_inf = <<0, 0, 128, 255>>

      input =
        f32([0.03125, 0.09375, -0.03125, -0.09375, 1.0e9, -1.0e9, 0.0]) <> nan <> inf <> neg_inf

      {:ok, [out]} = Graph.execute(graph, [input], dequantize: :none, output: :binary)

      # 0.5 step -> 0, 1.5 -> 2, -0.5 -> 0, -1.5 -> -2, saturation, zero point, +-inf saturate
      assert :binary.bin_to_list(out) == [128, 130, 128, 126, 255, 0, 128, 128, 255, 0]
    end
  end

  describe "per-tensor s16 with a non-zero offset, two inputs" do
    setup do
      a = Models.t(:sfixed_point_16, [2, 3], {:per_tensor, 0.001, 100})
      b = Models.t(:sfixed_point_16, [2, 3], {:per_tensor, 0.002, 0})
      out = Models.t(:sfixed_point_16, [2, 3], {:per_tensor, 0.003, -50})
      %{graph: Support.load!(Models.add(a, b, out))}
    end

    test "a + b within one output step", %{graph: graph} do
      [a_info, _] = Graph.inputs(graph)
      assert a_info.type == {:s, 16}
      assert a_info.quantization.zero_point == -100

      as = [-10.0, -1.5, 0.0, 0.123, 7.7, 20.0]
      bs = [3.0, -2.25, 0.001, 0.5, -7.0, 11.0]
      {:ok, [sum]} = Graph.execute(graph, %{"a" => f32(as), "b" => f32(bs)}, output: :binary)

      expected =
        Enum.zip_with(as, bs, fn a, b ->
          fake_quant(a, 0.001, -100, {:s, 16}) + fake_quant(b, 0.002, 0, {:s, 16})
        end)

      assert_close(from_f32(sum), expected, 0.003)
    end
  end

  describe "per-axis" do
    test "a per-axis s8 output is dequantized with each channel's parameters" do
      x = Models.t(:float_32, [2, 3])
      y = Models.t(:sfixed_point_8, [2, 3], {:per_axis, 1, [0.1, 0.02, 0.05], [0, -10, 5]})
      graph = Support.load!(Models.identity(x, y))

      [out_info] = Graph.outputs(graph)
      assert %{kind: :per_axis, axis: 1, zero_points: [0, 10, -5]} = out_info.quantization

      xs = [1.23, 0.5, -2.0, -7.1, -0.77, 3.3]
      {:ok, [out]} = Graph.execute(graph, [f32(xs)], output: :binary)
      assert_close(from_f32(out), xs, [0.1, 0.02, 0.05, 0.1, 0.02, 0.05])

      # the raw bytes are the per-channel quantization of the input
      {:ok, [raw]} = Graph.execute(graph, [f32(xs)], dequantize: :none, output: :binary)
      scales = [0.1, 0.02, 0.05, 0.1, 0.02, 0.05]
      zps = [0, 10, -5, 0, 10, -5]

      expected =
        [xs, scales, zps]
        |> Enum.zip()
        |> Enum.map(fn {v, s, z} -> quantize(v, s, z, {:s, 8}) end)

      assert_close(from_int(raw, {:s, 8}), expected, 1)
    end

    test "fully connected with per-channel weights and bias" do
      w_scales = [0.01, 0.02, 0.015]
      w_values = [0.5, -0.25, 0.1, 0.0, 1.0, 0.5, -0.5, 0.2, -1.0, 0.3, 0.3, 0.3]
      b_values = [0.1, -0.1, 0.0]
      model = Models.classifier(w_scales, w_values, b_values, softmax: false)
      graph = Support.load!(model)

      xs = [0.2, 0.9, 0.5, 0.05]
      {:ok, [logits]} = Graph.execute(graph, [f32(xs)], output: :binary)

      x_hat = Enum.map(xs, &fake_quant(&1, 1 / 255, 0, {:u, 8}))

      w_hat =
        w_values
        |> Enum.chunk_every(4)
        |> Enum.zip(w_scales)
        |> Enum.map(fn {row, s} -> Enum.map(row, &fake_quant(&1, s, 0, {:s, 8})) end)

      b_hat =
        [b_values, w_scales]
        |> Enum.zip()
        |> Enum.map(fn {b, s} -> fake_quant(b, s / 255, 0, {:s, 32}) end)

      expected =
        Enum.zip_with(w_hat, b_hat, fn row, b ->
          row |> Enum.zip(x_hat) |> Enum.map(fn {w, x} -> w * x end) |> Enum.sum() |> Kernel.+(b)
        end)

      assert_close(from_f32(logits), expected, 4 / 255)
    end
  end

  describe "f16" do
    test "f32 is narrowed to f16 and widened back" do
      t = Models.t(:float_16, [5])
      graph = Support.load!(Models.identity(t, t))
      [info] = Graph.inputs(graph)
      assert info.type == {:f, 16}
      assert info.byte_size == 10

      xs = [1.0, -2.5, 0.333, 1000.0, 6.1e-5]
      {:ok, [out]} = Graph.execute(graph, [f32(xs)], output: :binary)
      assert_close(from_f32(out), xs, Enum.map(xs, &(abs(&1) * 0.0005)))

      {:ok, [raw]} = Graph.execute(graph, [f32(xs)], dequantize: :none, output: :binary)
      assert byte_size(raw) == 10
    end
  end

  describe ":none paths" do
    setup do
      t = Models.t(:ufixed_point_8, [1, 8], {:per_tensor, 0.05, -128})
      requant = Models.t(:ufixed_point_8, [1, 8], {:per_tensor, 0.04, -100})

      %{
        same: Support.load!(Models.identity(t, t)),
        requant: Support.load!(Models.identity(t, requant))
      }
    end

    test "model-type bytes in, the backend's bytes out, untouched", %{same: graph} do
      input = <<0, 1, 127, 128, 200, 255, 3, 77>>

      assert {:ok, [^input]} =
               Graph.execute(graph, [input], quantize: :none, dequantize: :none, output: :binary)

      # a typed binary in the model's type is the same thing
      assert {:ok, [^input]} =
               Graph.execute(graph, [{{:u, 8}, input}], dequantize: :none, output: :binary)
    end

    test "requantizing identity: exact integers", %{requant: graph} do
      qs = [128, 129, 131, 132, 140, 100, 60, 200]

      {:ok, [out]} =
        Graph.execute(graph, [:binary.list_to_bin(qs)],
          quantize: :none,
          dequantize: :none,
          output: :binary
        )

      expected = Enum.map(qs, fn q -> quantize(dequantize(q, 0.05, 128), 0.04, 100, {:u, 8}) end)
      assert :binary.bin_to_list(out) == expected
    end

    test "auto dequantization is exactly (q - zero_point) * scale in f32", %{requant: graph} do
      qs = :binary.list_to_bin([128, 129, 131, 132, 140, 100, 60, 200])

      {:ok, [raw]} =
        Graph.execute(graph, [qs], quantize: :none, dequantize: :none, output: :binary)

      {:ok, [f]} = Graph.execute(graph, [qs], quantize: :none, output: :binary)

      [%{quantization: %{scale: scale, zero_point: zp}}] = Graph.outputs(graph)

      expected =
        for q <- :binary.bin_to_list(raw), into: <<>>, do: <<(q - zp) * scale::float-32-little>>

      assert f == expected
    end
  end
end
