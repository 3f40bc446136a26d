# The user-level check (issue 15, item 6): the package used only through its public API, as a
# new user would, with the real Nx and :telemetry (the Debian 13 leg's Hex-mode run). Expected
# values are computed here, in Nx, from the model's own parameters, independently of the NIF's
# quantize and dequantize. The models are qnn_sim's (test support builds them).
if Code.ensure_loaded?(Nx) do
  defmodule HexagonTpu.UserLevelTest do
    use ExUnit.Case, async: false

    @moduletag :nx

    alias HexagonTpu.{Context, Error, Stats}
    alias HexagonTpu.Test.Models

    @alive [:runtimes_alive, :contexts_alive, :graphs_alive]

    # No value sits on a rounding tie at any of the scales below, so rounding to nearest is
    # the same whichever way ties go.
    @x [[0.503, -0.271, 1.337], [-1.009, 0.0, 2.718]]

    # QNN type -> {Nx type, quantization in QNN's convention (offset = -zero point) or :none}
    @quantized [
      ufixed_point_8: {{:u, 8}, {:per_tensor, 0.0125, -100}},
      sfixed_point_8: {{:s, 8}, {:per_tensor, 0.03, 7}},
      ufixed_point_16: {{:u, 16}, {:per_tensor, 0.0002, -30_000}},
      sfixed_point_16: {{:s, 16}, {:per_tensor, 0.0001, 0}},
      sfixed_point_32: {{:s, 32}, {:per_tensor, 1.0e-6, 0}}
    ]
    @plain [
      uint_8: {:u, 8},
      int_8: {:s, 8},
      uint_16: {:u, 16},
      int_16: {:s, 16},
      uint_32: {:u, 32},
      int_32: {:s, 32}
    ]

    setup_all do
      # A runtime of the user's own (the default libraries are the board's, not here).
      sim = Path.join(:code.priv_dir(:hexagon_tpu), "native/libqnn_sim.so")
      {:ok, runtime} = HexagonTpu.Runtime.create(lib_path: sim, system_lib_path: sim)
      %{runtime: runtime}
    end

    defp load(runtime, spec) do
      {:ok, model} = HexagonTpu.load_model(Models.build!(spec), runtime: runtime)
      model
    end

    defp identity(runtime, dtype, quant \\ :none) do
      t = Models.t(dtype, [2, 3], quant)
      load(runtime, Models.identity(t, t))
    end

    # What QNN's convention gives for x: q = clamp(round(x / scale) - offset), then
    # (q + offset) * scale, in f32; computed here with Nx alone.
    defp round_trip(x, {type, {:per_tensor, scale, offset}}) do
      {lo, hi} = limits(type)

      x
      |> Nx.divide(scale)
      |> Nx.round()
      |> Nx.subtract(offset)
      |> Nx.clip(lo, hi)
      |> Nx.add(offset)
      |> Nx.multiply(scale)
      |> Nx.as_type({:f, 32})
    end

    defp limits({:u, bits}), do: {0, 2 ** bits - 1}
    defp limits({:s, bits}), do: {-(2 ** (bits - 1)), 2 ** (bits - 1) - 1}

    defp close?(a, b, tolerance),
      do: Nx.all_close(a, b, atol: tolerance, rtol: 0) |> Nx.to_number() == 1

    test "every quantized type: f32 in, the model's quantization, f32 out", %{runtime: runtime} do
      x = Nx.tensor(@x, type: {:f, 32})

      for {dtype, {type, {:per_tensor, scale, _} = quant}} <- @quantized do
        model = identity(runtime, dtype, quant)
        assert {:ok, [y]} = HexagonTpu.predict(model, [x])
        assert Nx.type(y) == {:f, 32} and Nx.shape(y) == {2, 3}
        # f32 arithmetic here and in the NIF may differ in the last bit of the product
        assert close?(y, round_trip(x, {type, quant}), scale * 1.0e-3), "#{dtype}"

        # quantize: :none / dequantize: :none: the model's own type, bytes untouched
        {:ok, [raw]} = HexagonTpu.predict(model, [x], dequantize: :none)
        assert Nx.type(raw) == type

        assert {:ok, [^raw]} =
                 HexagonTpu.predict(model, [raw], quantize: :none, dequantize: :none)

        assert {:error, %Error{reason: :invalid_input, message: message}} =
                 HexagonTpu.predict(model, [x], quantize: :none)

        assert message =~ inspect(type)
      end
    end

    test "every plain type passes through in its own type", %{runtime: runtime} do
      for {dtype, type} <- @plain do
        {lo, hi} = limits(type)
        x = Nx.tensor([[lo, hi, 0], [1, div(hi, 2), max(lo, -7)]], type: type)
        model = identity(runtime, dtype)
        assert {:ok, [^x]} = HexagonTpu.predict(model, [x])
      end

      # f16 takes f32 (cast to f16 here, by the NIF) and gives back f32
      model = identity(runtime, :float_16)
      x = Nx.tensor(@x, type: {:f, 32})
      assert {:ok, [y]} = HexagonTpu.predict(model, [x])
      assert y == x |> Nx.as_type({:f, 16}) |> Nx.as_type({:f, 32})
      f16 = Nx.as_type(x, {:f, 16})
      assert {:ok, [^f16]} = HexagonTpu.predict(model, [f16], dequantize: :none)

      model = identity(runtime, :float_32)
      assert {:ok, [^x]} = HexagonTpu.predict(model, [x])
    end

    test "per-axis quantization, each channel with its own scale and zero point",
         %{runtime: runtime} do
      scales = [0.1, 0.02, 0.05]
      offsets = [0, -10, 5]
      t = Models.t(:sfixed_point_8, [2, 3], {:per_axis, 1, scales, offsets})
      model = load(runtime, Models.identity(t, t))
      x = Nx.tensor(@x, type: {:f, 32})

      scale = Nx.tensor([scales], type: {:f, 32})
      offset = Nx.tensor([offsets])

      expected =
        x
        |> Nx.divide(scale)
        |> Nx.round()
        |> Nx.subtract(offset)
        |> Nx.clip(-128, 127)
        |> Nx.add(offset)
        |> Nx.multiply(scale)

      assert {:ok, [y]} = HexagonTpu.predict(model, [x])
      assert close?(y, expected, 1.0e-6)
    end

    test "inputs by name, as a map with string or atom keys; errors name what is wrong",
         %{runtime: runtime} do
      t = Models.t(:float_32, [1, 3])
      model = load(runtime, Models.add(t, t, t))
      a = Nx.tensor([[1.0, 2.0, 3.0]])
      b = Nx.tensor([[0.5, 0.25, 0.125]])
      expected = Nx.add(a, b)

      assert {:ok, [^expected]} = HexagonTpu.predict(model, %{"a" => a, "b" => b})
      assert {:ok, [^expected]} = HexagonTpu.predict(model, %{a: a, b: b})
      assert {:ok, [^expected]} = HexagonTpu.predict(model, [a, b])

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               HexagonTpu.predict(model, %{"a" => a, "c" => b})

      assert message =~ ~s("c") and message =~ "`a`, `b`", message

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               HexagonTpu.predict(model, [a, Nx.tensor([[1.0, 2.0]])])

      assert message =~ "`b`" and message =~ "{1, 3}" and message =~ "{1, 2}"

      assert_raise ArgumentError, ~r/:quantize/, fn ->
        HexagonTpu.predict(model, [a, b], quantize: :sometimes)
      end

      assert {:error, %Error{reason: :io}} =
               HexagonTpu.load_model("/nonexistent.bin", runtime: runtime)
    end

    test "telemetry, with the real :telemetry: a span per predict", %{runtime: runtime} do
      assert Code.ensure_loaded?(:telemetry)
      model = identity(runtime, :float_32)
      test = self()
      id = "user-level-#{System.unique_integer([:positive])}"

      :ok =
        :telemetry.attach_many(
          id,
          [[:hexagon_tpu, :graph, :execute, :start], [:hexagon_tpu, :graph, :execute, :stop]],
          fn event, measurements, metadata, _ -> send(test, {event, measurements, metadata}) end,
          nil
        )

      on_exit(fn -> :telemetry.detach(id) end)
      x = Nx.tensor(@x, type: {:f, 32})
      {:ok, _} = HexagonTpu.predict(model, [x])

      assert_received {[:hexagon_tpu, :graph, :execute, :start], %{system_time: _},
                       %{graph: "identity"}}

      assert_received {[:hexagon_tpu, :graph, :execute, :stop], %{duration: d, execute_ns: ns},
                       %{status: :ok}}

      assert is_integer(d) and is_integer(ns) and ns >= 0
    end

    test "every handle is freed: counters back at their baseline", %{runtime: runtime} do
      # Stats.with_leak_check/1 takes both snapshots once the counters have settled (garbage
      # swept, the runtimes' frees done), so an earlier test's handle still on its way out
      # counts in neither, and the graph's handle goes with the task's heap before `after_`.
      {result, before, after_} =
        Stats.with_leak_check(fn ->
          Task.async(fn ->
            model = identity(runtime, :ufixed_point_8, {:per_tensor, 0.0125, -100})
            {:ok, _} = HexagonTpu.predict(model, [Nx.tensor(@x, type: {:f, 32})])
            :ok = Context.close(model.context)
          end)
          |> Task.await()
        end)

      assert result == :ok
      assert Map.take(after_, @alive) == Map.take(before, @alive)
    end
  end
end
