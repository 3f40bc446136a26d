# Batches in HexagonTpu.predict/3 (its moduledoc, "Batches"): a leading axis longer or shorter
# than the model's, and vectorized tensors. Needs Nx: in the offline build test_helper.exs
# excludes :nx.
if Code.ensure_loaded?(Nx) do
  defmodule HexagonTpu.BatchTest do
    use ExUnit.Case, async: false

    @moduletag :nx

    alias HexagonTpu.{Error, Stats}
    alias HexagonTpu.Test.{Models, Support}

    @u8 {:per_tensor, 0.05, -128}

    setup_all do
      row = Models.t(:float_32, [1, 4])
      quantized_row = Models.t(:ufixed_point_8, [1, 4], @u8)

      # x [1, 4] -> y = x (the batch axis kept) and flat = reshape(x) to [4] (no batch axis)
      two_outputs = %{
        name: "two_outputs",
        inputs: [Map.put(row, :name, "x")],
        nodes: [
          %{op: "identity", inputs: ["x"], output: Map.put(row, :name, "y")},
          %{
            op: "reshape",
            inputs: ["x"],
            output: Map.put(Models.t(:float_32, [4]), :name, "flat")
          }
        ],
        outputs: ["y", "flat"]
      }

      %{
        row: Support.load!(Models.identity(row, row)),
        slow: Support.load!(Models.identity(row, row, sleep_ms: 30)),
        quantized: Support.load!(Models.identity(quantized_row, quantized_row)),
        batch3:
          Support.load!(Models.identity(Models.t(:float_32, [3, 2]), Models.t(:float_32, [3, 2]))),
        add: Support.load!(Models.add(row, row, row)),
        two_outputs: Support.load!(Models.model([two_outputs], []))
      }
    end

    defp executes, do: Stats.native().executes

    # What the model gives for each row alone, stacked: the independent computation.
    defp row_by_row(graph, batch, opts \\ []) do
      batch
      |> Nx.to_batched(1)
      |> Enum.map(fn row -> hd(HexagonTpu.predict!(graph, [row], opts)) end)
      |> Nx.concatenate()
    end

    test "a leading axis longer than the model's runs one execute per entry, stacked", ctx do
      batch = Nx.iota({5, 4}, type: {:f, 32}) |> Nx.divide(10)
      before = executes()
      assert {:ok, [out]} = HexagonTpu.predict(ctx.row, [batch])
      assert executes() - before == 5
      assert Nx.shape(out) == {5, 4}
      assert out == batch

      # quantized: each entry quantized and dequantized with the model's parameters, exactly
      # as one entry at a time
      assert {:ok, [q]} = HexagonTpu.predict(ctx.quantized, [batch])
      assert q == row_by_row(ctx.quantized, batch)
      assert {:ok, [raw]} = HexagonTpu.predict(ctx.quantized, [batch], dequantize: :none)
      assert Nx.type(raw) == {:u, 8} and Nx.shape(raw) == {5, 4}
      assert raw == row_by_row(ctx.quantized, batch, dequantize: :none)
    end

    test "pipelined: the next execute is already waiting when one ends", ctx do
      test = self()
      id = "batch-pipeline-#{System.unique_integer([:positive])}"
      events = [[:hexagon_tpu, :graph, :execute, :start], [:hexagon_tpu, :graph, :execute, :stop]]

      :ok =
        :telemetry.attach_many(
          id,
          events,
          fn [_, _, _, kind], m, _, _ ->
            send(test, {kind, m.monotonic_time})
          end,
          nil
        )

      on_exit(fn -> :telemetry.detach(id) end)
      batch = Nx.iota({4, 4}, type: {:f, 32})
      assert {:ok, [^batch]} = HexagonTpu.predict(ctx.slow, [batch])

      starts = for _ <- 1..4, do: assert_receive({:start, t}) && t
      stops = for _ <- 1..4, do: assert_receive({:stop, t}) && t
      starts = Enum.sort(starts)
      stops = Enum.sort(stops)
      # execute k+1 was handed to the graph before execute k ended (it queued behind it), for
      # every k: never a gap in which the graph had nothing to run
      for k <- 0..2, do: assert(Enum.at(starts, k + 1) < Enum.at(stops, k))
    end

    test "a model with a batch of 3 takes fewer and pads, more in chunks of 3", ctx do
      for n <- [1, 2, 3, 4, 7] do
        batch = Nx.iota({n, 2}, type: {:f, 32})
        before = executes()
        assert {:ok, [out]} = HexagonTpu.predict(ctx.batch3, [batch])
        # ceil(n / 3) executes, the last padded with zeros; the padding is cut from the output
        assert executes() - before == div(n + 2, 3)
        assert out == batch, "n = #{n}"
      end
    end

    test "outputs without the batch axis are stacked, one per execute", ctx do
      batch = Nx.iota({3, 4}, type: {:f, 32})
      assert {:ok, [y, flat]} = HexagonTpu.predict(ctx.two_outputs, [batch])
      assert y == batch
      assert Nx.shape(flat) == {3, 4}
      assert flat == batch

      # binaries too: joined in order, byte for byte
      assert {:ok, [y_bin, flat_bin]} =
               HexagonTpu.predict(ctx.two_outputs, [batch], output: :binary)

      assert y_bin == Nx.to_binary(batch)
      assert flat_bin == Nx.to_binary(batch)
    end

    test "an input with the model's own shape is used for every entry", ctx do
      a = Nx.iota({3, 4}, type: {:f, 32})
      b = Nx.tensor([[100.0, 200.0, 300.0, 400.0]])
      assert {:ok, [sum]} = HexagonTpu.predict(ctx.add, %{"a" => a, "b" => b})
      assert sum == Nx.add(a, b)
    end

    test "batched inputs that disagree are refused, naming them", ctx do
      a = Nx.iota({3, 4}, type: {:f, 32})
      b = Nx.iota({2, 4}, type: {:f, 32})
      before = executes()

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               HexagonTpu.predict(ctx.add, [a, b])

      assert message =~ "`a` a batch of 3"
      assert message =~ "`b` a batch of 2"
      assert executes() == before
    end

    test "vectorized tensors: each entry runs, outputs come back vectorized", ctx do
      batch = Nx.iota({3, 1, 4}, type: {:f, 32})
      vectorized = Nx.vectorize(batch, :image)

      assert {:ok, [out]} = HexagonTpu.predict(ctx.row, [vectorized])
      assert out.vectorized_axes == [image: 3]
      assert Nx.shape(out) == {1, 4}
      assert Nx.devectorize(out, keep_names: false) == batch

      # a vectorized axis of size 1 is kept, not dropped
      one = Nx.vectorize(Nx.iota({1, 1, 4}, type: {:f, 32}), :image)
      assert {:ok, [out]} = HexagonTpu.predict(ctx.row, [one])
      assert out.vectorized_axes == [image: 1]

      # two vectorized axes, and the unbatched output stacked and vectorized too
      two = Nx.vectorize(Nx.iota({2, 3, 1, 4}, type: {:f, 32}), [:a, :b])
      assert {:ok, [y, flat]} = HexagonTpu.predict(ctx.two_outputs, [two])
      assert y.vectorized_axes == [a: 2, b: 3] and Nx.shape(y) == {1, 4}
      assert flat.vectorized_axes == [a: 2, b: 3] and Nx.shape(flat) == {4}

      assert Nx.devectorize(flat, keep_names: false) ==
               Nx.reshape(two |> Nx.devectorize(), {2, 3, 4})
    end

    test "a vectorized tensor whose entries are not the model's shape says vectorized", ctx do
      vectorized = Nx.vectorize(Nx.iota({3, 4}, type: {:f, 32}), :image)

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               HexagonTpu.predict(ctx.row, [vectorized])

      assert message =~ "vectorized (image: 3)"
      assert message =~ "{4}"
      assert message =~ "{1, 4}"
    end

    test "an execute that fails stops the batch with its error", ctx do
      batch = Nx.iota({3, 4}, type: {:s, 32})

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               HexagonTpu.predict(ctx.row, [batch])

      assert message =~ "{:s, 32}"
    end
  end
end
