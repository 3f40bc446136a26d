defmodule HexagonTpu.PerformanceTest do
  # HTP performance modes on a private qnn_sim, which records every setPowerConfig (the count,
  # and the values of the last accepted vote) and can refuse votes (knob refuse_power_config).
  use ExUnit.Case, async: true

  import ExUnit.CaptureLog

  alias HexagonTpu.{Graph, Runtime, Stats}
  alias HexagonTpu.Test.{Models, Numerics, Support}

  @moduletag :tmp_dir

  # The DCVS v3 values ONNX Runtime's QNN EP votes per mode, written out from
  # onnxruntime/onnxruntime-qnn's qnn_htp_power_config_manager.cc and qnn_def.h (commit
  # cee6c0d9): {dcvsEnable, powerMode, sleepLatency, the one bus and core corner}.
  @ort %{
    burst: {0, 0x10, 40, 0xA0},
    sustained_high_performance: {0, 0x10, 40, 0xA0},
    high_performance: {0, 0x10, 100, 0x80},
    balanced: {1, 0x10, 1000, 0x70},
    low_balanced: {1, 0x10, 1000, 0x60},
    high_power_saver: {1, 0x10, 1000, 0x50},
    power_saver: {1, 0x10, 1000, 0x40},
    low_power_saver: {1, 0x10, 1000, 0x30},
    extreme_power_saver: {1, 0x04, 1000, 0x10}
  }

  setup %{tmp_dir: dir} do
    lib = Support.private_sim_lib!(dir)
    x = Models.t(:float_32, [1, 2])
    path = Models.build!(Models.identity(x, Models.t(:float_32, [1, 2])))
    %{lib: lib, path: path}
  end

  defp runtime!(lib, opts \\ []), do: Runtime.create!(Support.runtime_opts(lib) ++ opts)
  defp graph!(runtime, path), do: HexagonTpu.load_model!(path, runtime: runtime)
  defp calls(lib), do: Support.qnn_sim_counters(lib).set_power_config_calls
  defp last(lib), do: Support.qnn_sim_counters(lib).last_power_config

  defp expected_dcvs(mode, id) do
    {dcvs_enable, power_mode, sleep, corner} = @ort[mode]

    %{
      contextId: id,
      setDcvsEnable: 1,
      dcvsEnable: dcvs_enable,
      powerMode: power_mode,
      setSleepLatency: 1,
      sleepLatency: sleep,
      setSleepDisable: 0,
      sleepDisable: 0,
      setBusParams: 1,
      busVoltageCornerMin: corner,
      busVoltageCornerTarget: corner,
      busVoltageCornerMax: corner,
      setCoreParams: 1,
      coreVoltageCornerMin: corner,
      coreVoltageCornerTarget: corner,
      coreVoltageCornerMax: corner
    }
  end

  test "every mode votes ORT's DCVS v3 values, on create and with set_performance", %{lib: lib} do
    runtime = runtime!(lib)
    # :default votes nothing.
    assert calls(lib) == 0

    for mode <- Map.keys(@ort) do
      created = runtime!(lib, performance: mode)
      {:ok, %{last_vote: %{dcvs_v3: %{contextId: id}}}} = Runtime.performance(created)
      assert last(lib).dcvs_v3 == expected_dcvs(mode, id), inspect(mode)
      assert last(lib).rpc_polling_time == if(mode == :burst, do: 9999, else: nil)
      assert last(lib).rpc_control_latency == nil
      :ok = Runtime.close(created)

      assert :ok = Runtime.set_performance(runtime, mode)
      {:ok, state} = Runtime.performance(runtime)
      assert %{mode: ^mode, voted: ^mode, available: true} = state
      assert state.last_vote.dcvs_v3 == expected_dcvs(mode, state.last_vote.dcvs_v3.contextId)
      assert last(lib).dcvs_v3 == state.last_vote.dcvs_v3
    end

    # The polling time goes back to 0 when burst gives way, and only then is it sent.
    :ok = Runtime.set_performance(runtime, :burst)
    assert last(lib).rpc_polling_time == 9999
    :ok = Runtime.set_performance(runtime, :balanced)
    assert last(lib).rpc_polling_time == 0
    :ok = Runtime.set_performance(runtime, :power_saver)
    assert last(lib).rpc_polling_time == nil

    # :default withdraws the vote: the id is given back and a new one taken, nothing sent.
    before = calls(lib)
    :ok = Runtime.set_performance(runtime, :default)
    assert calls(lib) == before

    assert {:ok, %{mode: :default, voted: :default, last_vote: nil}} =
             Runtime.performance(runtime)
  end

  test "one vote per mode change: 1000 back-to-back predicts", %{lib: lib, path: path} do
    input = Numerics.f32([1, 2])

    # The runtime's mode: voted once at create, never again by predicts.
    model = graph!(runtime!(lib, performance: :burst), path)
    assert calls(lib) == 1
    for _ <- 1..1000, do: {:ok, _} = HexagonTpu.predict(model, [input])
    assert calls(lib) == 1

    # A call's own mode, the same every time: one vote up for the first call, none after.
    # (A long idle delay: no vote-down can fall between these calls.)
    model = graph!(runtime!(lib, performance_idle: 600_000), path)
    before = calls(lib)
    for _ <- 1..1000, do: {:ok, _} = HexagonTpu.predict(model, [input], performance: :burst)
    assert calls(lib) - before == 1

    # Asking for the runtime's own mode votes nothing.
    model = graph!(runtime!(lib, performance: :balanced, performance_idle: 600_000), path)
    before = calls(lib)

    for _ <- 1..1000,
        do: {:ok, _} = HexagonTpu.predict(model, [input], performance: :balanced)

    assert calls(lib) == before
  end

  test "asynchronous executes vote their mode once, before they are queued", ctx do
    %{lib: lib, path: path} = ctx
    runtime = runtime!(lib, performance_idle: 600_000)
    context = HexagonTpu.Context.from_file!(runtime, path)
    # room for all of them at once, however far the graph's thread has got
    graph = Graph.retrieve!(context, "identity", max_queued: 100)
    input = Numerics.f32([1, 2])

    pending =
      for _ <- 1..100 do
        {:ok, pending} = Graph.execute_async(graph, [input], performance: :high_performance)
        pending
      end

    # Voted before the first was queued (and only then), whatever has run since.
    assert calls(lib) == 1
    assert last(lib).dcvs_v3.coreVoltageCornerTarget == 0x80
    for p <- pending, do: {:ok, _} = Graph.await(p)
    assert calls(lib) == 1
  end

  test "a call's mode gives way to the runtime's once idle", %{lib: lib, path: path} do
    runtime = runtime!(lib, performance: :power_saver, performance_idle: 20)
    graph = Graph.retrieve!(HexagonTpu.Context.from_file!(runtime, path), "identity")
    assert calls(lib) == 1

    {:ok, _} = Graph.execute(graph, [Numerics.f32([1, 2])], performance: :burst)
    # Voted up before the execute. On a loaded machine the idle thread may have voted back
    # down already (20 ms after the execute ended), which it does only after a call's vote.
    assert calls(lib) in [2, 3]
    if calls(lib) == 2, do: assert(last(lib).dcvs_v3.coreVoltageCornerTarget == 0xA0)

    # Voted back down by the idle thread once no call came for 20 ms.
    assert Support.wait_until(fn -> calls(lib) == 3 end, timeout: 10_000)
    assert last(lib).dcvs_v3.coreVoltageCornerTarget == 0x40
    assert {:ok, %{voted: :power_saver}} = Runtime.performance(runtime)

    # And up again for the next call (and perhaps down again, as above).
    {:ok, _} = Graph.execute(graph, [Numerics.f32([1, 2])], performance: :burst)
    assert calls(lib) in [4, 5]
    assert Support.wait_until(fn -> calls(lib) == 5 end, timeout: 10_000)
    assert last(lib).dcvs_v3.coreVoltageCornerTarget == 0x40
  end

  test "a refused vote fails nothing: logged once, counted, the call runs", %{lib: lib} = ctx do
    :ok = HexagonTpu.Native.qnn_sim_configure(lib, "refuse_power_config", "13002")
    stats = Stats.native()

    log =
      capture_log(fn ->
        runtime = runtime!(lib, performance: :burst, performance_idle: 600_000)
        model = graph!(runtime, ctx.path)

        for mode <- [:balanced, :balanced, :high_performance] do
          assert {:ok, [out]} =
                   HexagonTpu.predict(model, [Numerics.f32([1, 2])],
                     performance: mode,
                     output: :binary
                   )

          assert Numerics.from_f32(out) == [1.0, 2.0]
        end

        assert {:ok, %{voted: :high_performance, last_vote: nil}} = Runtime.performance(runtime)
        # Let the drain thread deliver the line.
        assert Support.wait_until(fn -> Stats.native().log_lines > stats.log_lines end,
                 timeout: 10_000
               )

        Process.sleep(50)
      end)

    now = Stats.native()
    # create (burst), balanced (once: the second call asks for what was voted), high_performance
    assert now.performance_votes - stats.performance_votes == 3
    assert now.performance_votes_refused - stats.performance_votes_refused == 3
    assert calls(lib) == 3
    assert length(String.split(log, "a performance vote was refused")) == 2
    assert log =~ "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED_CONFIG"
  end

  test "a backend without a perf infrastructure refuses modes, never fails", %{lib: lib} = ctx do
    :ok = HexagonTpu.Native.qnn_sim_configure(lib, "null_entries", "deviceGetInfrastructure")
    refused = Stats.native().performance_votes_refused

    capture_log(fn ->
      # the call's mode gives way only after a minute: its refused give-back vote (a third)
      # cannot land before the counts are read, however slow the machine
      runtime = runtime!(lib, performance: :burst, performance_idle: 60_000)
      model = graph!(runtime, ctx.path)
      assert {:ok, _} = HexagonTpu.predict(model, [Numerics.f32([1, 2])], performance: :balanced)
      assert {:ok, %{available: false, last_vote: nil}} = Runtime.performance(runtime)
    end)

    # create (burst) and the call (balanced): refused without a backend call
    assert Stats.native().performance_votes_refused - refused == 2
    assert calls(lib) == 0
  end

  test "the power config id is destroyed with the runtime", %{lib: lib, path: path} do
    baseline = Support.qnn_sim_counters(lib)
    assert baseline.live_power_config_ids == 0
    runtime = runtime!(lib, performance: :burst)
    model = graph!(runtime, path)
    assert Support.qnn_sim_counters(lib).live_power_config_ids == 1
    # Withdrawn and taken anew: still one.
    :ok = Runtime.set_performance(runtime, :default)
    assert Support.qnn_sim_counters(lib).live_power_config_ids == 1

    :ok = Graph.close(model)
    :ok = HexagonTpu.Context.close(model.context)
    :ok = Runtime.close(runtime)
    assert Support.wait_until(fn -> Stats.native().runtime_jobs_pending == 0 end, timeout: 10_000)
    now = Support.qnn_sim_counters(lib)
    assert now.live_power_config_ids == 0
    assert now.live_handles == baseline.live_handles
  end

  test "bad modes are refused with the option named", %{lib: lib, path: path} do
    assert_raise ArgumentError, ~r/:performance.*:burst/, fn ->
      Runtime.create(Support.runtime_opts(lib) ++ [performance: :turbo])
    end

    runtime = runtime!(lib)

    assert_raise ArgumentError, ~r/:performance/, fn ->
      Runtime.set_performance(runtime, "burst")
    end

    model = graph!(runtime, path)

    assert_raise ArgumentError, ~r/:performance/, fn ->
      HexagonTpu.predict(model, [Numerics.f32([1, 2])], performance: :fast)
    end

    :ok = Runtime.close(runtime)
    assert {:error, %HexagonTpu.Error{reason: :closed}} = Runtime.set_performance(runtime, :burst)
  end
end
