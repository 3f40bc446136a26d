# Nx tensors in and out. Runs where Nx is available (with Hex deps); in the offline build
# test_helper.exs prints a notice and excludes :nx.
if Code.ensure_loaded?(Nx) do
  defmodule HexagonTpu.NxTest do
    use ExUnit.Case, async: true

    @moduletag :nx

    alias HexagonTpu.{Error, Graph}
    alias HexagonTpu.Test.{Models, Support}

    setup_all do
      x = Models.t(:ufixed_point_8, [2, 3], {:per_tensor, 0.05, -128})
      y = Models.t(:sfixed_point_8, [2, 3], {:per_axis, 1, [0.1, 0.02, 0.05], [0, -10, 5]})
      %{graph: Support.load!(Models.identity(x, y))}
    end

    test "f32 tensor in, dequantized f32 tensor out, with the model's shape", %{graph: graph} do
      input = Nx.tensor([[0.5, 0.1, -1.0], [1.5, -0.3, 2.0]], type: {:f, 32})
      {:ok, [out]} = HexagonTpu.predict(graph, [input])

      assert Nx.shape(out) == {2, 3}
      assert Nx.type(out) == {:f, 32}
      tolerance = Nx.tensor([[0.1, 0.02, 0.05], [0.1, 0.02, 0.05]])

      assert Nx.all(Nx.less_equal(Nx.abs(Nx.subtract(out, input)), tolerance)) |> Nx.to_number() ==
               1
    end

    test "other float types are cast", %{graph: graph} do
      for type <- [{:f, 16}, {:f, 64}, {:bf, 16}] do
        input = Nx.tensor([[0.5, 0.1, -1.0], [1.5, -0.3, 2.0]], type: type)
        assert {:ok, [out]} = HexagonTpu.predict(graph, [input])
        assert Nx.type(out) == {:f, 32}
      end
    end

    test "model-type tensors pass through, :none returns the model's type", %{graph: graph} do
      input = Nx.tensor([[128, 130, 100], [0, 255, 129]], type: {:u, 8})
      {:ok, [out]} = Graph.execute(graph, [input], dequantize: :none)
      assert Nx.type(out) == {:s, 8}
      assert Nx.shape(out) == {2, 3}

      {:ok, [raw]} =
        Graph.execute(graph, [Nx.to_binary(input)],
          quantize: :none,
          dequantize: :none,
          output: :binary
        )

      assert Nx.to_binary(out) == raw
    end

    test "wrong shape", %{graph: graph} do
      assert {:error, %Error{reason: :invalid_input, message: message}} =
               HexagonTpu.predict(graph, [Nx.iota({3, 2}, type: {:f, 32})])

      assert message =~ "`x`" and message =~ "{2, 3}" and message =~ "{3, 2}"
    end

    test "wrong dtype", %{graph: graph} do
      assert {:error, %Error{reason: :invalid_input, message: message}} =
               HexagonTpu.predict(graph, [Nx.iota({2, 3}, type: {:s, 32})])

      assert message =~ "{:u, 8}" and message =~ "{:s, 32}"

      assert {:error, %Error{reason: :invalid_input}} =
               HexagonTpu.predict(graph, [Nx.iota({2, 3}, type: {:f, 32})], quantize: :none)
    end
  end
end
