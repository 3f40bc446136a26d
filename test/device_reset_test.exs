defmodule HexagonTpu.DeviceResetTest do
  # Recovery from a device reset (a DSP subsystem restart) through the Elixir API, on a private
  # qnn_sim whose SSR fault kills every context after a planned execute (see qnn_sim's README):
  # the execute is retried on the context created again, the Graph keeps working, the
  # recovery is reported (telemetry, Stats, Logger), and :device_reset answers when it cannot
  # be. Telemetry handlers are global and the counters VM-wide: runs alone.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog
  import HexagonTpu.Test.Numerics, only: [f32: 1]

  alias HexagonTpu.{Context, Error, Graph, Stats}
  alias HexagonTpu.Test.{Models, Support}

  @moduletag :tmp_dir

  setup %{tmp_dir: dir} do
    lib = Support.private_sim_lib!(dir)
    t = Models.t(:float_32, [1, 4])
    path = Models.build!(Models.identity(t, t))
    %{lib: lib, path: path, runtime: Support.runtime!(lib)}
  end

  defp knob(lib, key, value), do: :ok = HexagonTpu.Native.qnn_sim_configure(lib, key, value)

  # `fun`'s log, with the recovery's line, which travels through QnnLog's process.
  defp logged(before, fun) do
    capture_log(fn ->
      fun.()
      Support.wait_until(fn -> Stats.native().log_lines > before.log_lines end)
      :sys.get_state(HexagonTpu.QnnLog)
    end)
  end

  defp newest_context,
    do: Stats.live() |> Enum.filter(&(&1.kind == :context)) |> Enum.max_by(& &1.id)

  defp input(i), do: f32([i, i + 0.25, i + 0.5, i + 0.75])

  test "an execute the reset meets is retried on its context created again, and reported",
       ctx do
    {:ok, model} = HexagonTpu.load_model(ctx.path, runtime: ctx.runtime)
    assert {:ok, [out]} = HexagonTpu.predict(model, [input(0)], output: :binary)
    assert out == input(0)
    before = Stats.native()
    Support.attach_events([[:hexagon_tpu, :context, :recover]])
    knob(ctx.lib, "ssr_after_executes", "0")

    log =
      logged(before, fn ->
        assert {:ok, [out]} = HexagonTpu.predict(model, [input(1)], output: :binary)
        assert out == input(1)
      end)

    assert log =~ "the device was reset; context #{ctx.path} created again in"
    assert_received {:event, [:hexagon_tpu, :context, :recover], %{duration: d}, meta}
    assert is_integer(d) and d >= 0
    assert meta == %{graph: "identity", context: ctx.path}
    assert Support.qnn_sim_counters(ctx.lib).ssr_restarts == 1
    assert Support.qnn_sim_counters(ctx.lib).ssr_dead_contexts == 0

    # The same Graph keeps working, with no further recovery.
    for i <- 2..4, do: assert({:ok, [_]} = HexagonTpu.predict(model, [input(i)]))
    refute_received {:event, [:hexagon_tpu, :context, :recover], _, _}
    after_ = Stats.native()
    assert after_.context_recoveries - before.context_recoveries == 1
    assert after_.device_resets == before.device_resets
  end

  test "a second reset on the retry answers :device_reset with QNN's code", ctx do
    {:ok, model} = HexagonTpu.load_model(ctx.path, runtime: ctx.runtime)
    before = Stats.native()
    knob(ctx.lib, "ssr_times", "2")
    knob(ctx.lib, "ssr_after_executes", "0")

    logged(before, fn ->
      assert {:error, %Error{reason: :device_reset, qnn_code: 1007} = error} =
               HexagonTpu.predict(model, [input(0)])

      assert error.message =~ ~s(graph "identity": the device was reset)
      assert error.message =~ "retried"
      # The context is dead again: the next predict recovers it.
      assert {:ok, [out]} = HexagonTpu.predict(model, [input(1)], output: :binary)
      assert out == input(1)
    end)

    after_ = Stats.native()
    assert after_.device_resets - before.device_resets == 1
    assert after_.context_recoveries - before.context_recoveries == 2
  end

  test "recover: false answers :device_reset and keeps no copy of the binary", ctx do
    binary = File.read!(ctx.path)
    context = Context.from_binary!(ctx.runtime, binary, recover: false)
    graph = Graph.retrieve!(context, "identity")
    entry = newest_context()
    refute Keyword.has_key?(entry.held, :source)
    knob(ctx.lib, "ssr_after_executes", "0")

    assert {:error, %Error{reason: :device_reset} = error} = Graph.execute(graph, [input(0)])
    assert error.message =~ "recover: false"
    :ok = Context.close(context)
    assert Support.qnn_sim_counters(ctx.lib).ssr_dead_contexts == 0
  end

  test "a context loaded from memory keeps its binary to recover, as the ledger shows", ctx do
    binary = File.read!(ctx.path)
    context = Context.from_binary!(ctx.runtime, binary)
    entry = newest_context()
    assert entry.detail =~ "<binary #{byte_size(binary)} bytes>"
    assert entry.held[:source] == byte_size(binary)
    graph = Graph.retrieve!(context, "identity")
    knob(ctx.lib, "ssr_after_executes", "0")
    before = Stats.native()

    log =
      logged(before, fn ->
        assert {:ok, [out]} = Graph.execute(graph, [input(3)], output: :binary)
        assert out == input(3)
      end)

    assert log =~ "context <binary #{byte_size(binary)} bytes> created again"
    :ok = Context.close(context)
  end

  test "the :recover option is checked", ctx do
    for fun <- [
          fn -> HexagonTpu.load_model(ctx.path, runtime: ctx.runtime, recover: :yes) end,
          fn -> Context.from_file(ctx.runtime, ctx.path, recover: 1) end,
          fn -> Context.from_binary(ctx.runtime, File.read!(ctx.path), recover: nil) end
        ] do
      assert_raise ArgumentError, ~r/the :recover option.*true or false/, fun
    end
  end
end
