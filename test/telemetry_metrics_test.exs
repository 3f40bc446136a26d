defmodule HexagonTpu.TelemetryMetricsTest do
  # HexagonTpu.Telemetry.metrics/0 through the real Telemetry.Metrics: each definition built by
  # the library, and fed by the package's own events to the reporter the library ships
  # (ConsoleReporter), which reads measurements, units, tags and keep as every reporter does.
  # Handlers are global: runs alone.
  use ExUnit.Case, async: false

  @compile {:no_warn_undefined, [Telemetry.Metrics, Telemetry.Metrics.ConsoleReporter]}

  import HexagonTpu.Test.Numerics, only: [f32: 1]

  alias HexagonTpu.Monitor
  alias HexagonTpu.Test.{Models, Support}

  # The events the moduledoc of HexagonTpu.Telemetry lists.
  @events [
    [:hexagon_tpu, :graph, :execute, :stop],
    [:hexagon_tpu, :context, :load, :stop],
    [:hexagon_tpu, :context, :recover],
    [:hexagon_tpu, :execute, :profile],
    [:hexagon_tpu, :monitor, :stats]
  ]

  test "without telemetry_metrics, metrics/0 says which package to add" do
    if Code.ensure_loaded?(Telemetry.Metrics) do
      assert [_ | _] = HexagonTpu.Telemetry.metrics()
    else
      assert_raise RuntimeError,
                   ~r/add \{:telemetry_metrics, "~> 1.0"\}/,
                   &HexagonTpu.Telemetry.metrics/0
    end
  end

  describe "with Telemetry.Metrics" do
    @describetag :telemetry_metrics

    test "every metric is the library's own struct, on a documented event, named uniquely" do
      metrics = HexagonTpu.Telemetry.metrics()

      for metric <- metrics do
        assert metric.__struct__ in [
                 Telemetry.Metrics.Counter,
                 Telemetry.Metrics.Summary,
                 Telemetry.Metrics.Distribution,
                 Telemetry.Metrics.LastValue
               ]

        assert metric.event_name in @events, inspect(metric)
      end

      assert Enum.uniq_by(metrics, &{&1.__struct__, &1.name}) == metrics

      assert Enum.map(metrics, & &1.event_name) |> Enum.uniq() |> Enum.sort() ==
               Enum.sort(@events)
    end

    @tag :tmp_dir
    test "a reporter gets every metric's value from the package's events", %{tmp_dir: dir} do
      {:ok, io} = StringIO.open("")

      start_supervised!(
        {Telemetry.Metrics.ConsoleReporter, metrics: HexagonTpu.Telemetry.metrics(), device: io}
      )

      lib = Support.private_sim_lib!(dir)
      t = Models.t(:float_32, [1, 4])
      path = Models.build!(Models.identity(t, t))
      runtime = Support.runtime!(lib)
      {:ok, model} = HexagonTpu.load_model(path, runtime: runtime, profile_every: 1)

      assert {:ok, [_]} = HexagonTpu.predict(model, [f32([1, 2, 3, 4])], output: :binary)
      assert {:error, _} = HexagonTpu.predict(model, [<<1, 2, 3>>])
      :ok = HexagonTpu.Native.qnn_sim_configure(lib, "ssr_after_executes", "0")
      assert {:ok, [_]} = HexagonTpu.predict(model, [f32([1, 2, 3, 4])], output: :binary)
      monitor = start_supervised!({Monitor, interval_ms: 3_600_000})
      Monitor.sample(monitor)
      # Closed after the sample, which counts them alive.
      HexagonTpu.Graph.close(model)
      HexagonTpu.Context.close(model.context)
      HexagonTpu.Runtime.close(runtime)

      {_, out} = StringIO.contents(io)
      refute out =~ "Measurement value missing"
      refute out =~ "Errored when processing"
      refute out =~ "WARNING!"

      ms = ~r/^With value: \d+(\.\d+)?(e-?\d+)? millisecond$/m
      execute = "hexagon_tpu.graph.execute.stop"
      # The execute: the call's duration (summary and distribution), QNN's time, the counts.
      for type <- ["summary", "distribution"] do
        assert [first | _] = printed(out, execute, :duration, type)
        assert first =~ ms
        assert tags?(first, graph: "identity", status: :ok)
      end

      assert [first | _] = printed(out, execute, :execute_ns, "summary")
      assert first =~ ms
      assert [count | _] = printed(out, execute, :duration, "counter")
      assert tags?(count, graph: "identity", status: :ok)

      # The wrong input: counted (and as an error, by its reason), not in QNN's time.
      assert Enum.any?(printed(out, execute, :duration, "counter"), &tags?(&1, status: :error))

      assert Enum.any?(
               printed(out, execute, :duration, "counter"),
               &tags?(&1, error: :invalid_input)
             )

      assert "Event dropped" in printed(out, execute, :execute_ns, "summary")

      # Loading, the recovery from the device reset, the sampled profile, the Monitor.
      assert [load | _] = printed(out, "hexagon_tpu.context.load.stop", :duration, "summary")
      assert load =~ ms and tags?(load, status: :ok)
      assert [recover] = printed(out, "hexagon_tpu.context.recover", :duration, "summary")
      assert recover =~ ms and tags?(recover, graph: "identity")
      assert [recovered] = printed(out, "hexagon_tpu.context.recover", :duration, "counter")
      assert tags?(recovered, graph: "identity")
      assert [profile | _] = printed(out, "hexagon_tpu.execute.profile", :execute_us, "summary")
      assert profile =~ ~r/^With value: \d+$/m

      for key <- [:runtimes_alive, :contexts_alive, :graphs_alive, :memory_total] do
        assert [value] = printed(out, "hexagon_tpu.monitor.stats", key, "last_value")
        assert value =~ ~r/^With value: [1-9]\d*$/m, "#{key}: #{value}"
      end

      assert [cpu] = printed(out, "hexagon_tpu.monitor.stats", :dirty_cpu, "last_value")
      assert cpu =~ ~r/^With value: \d\.\d+$/m
    end
  end

  # What ConsoleReporter printed for a metric of `measurement` and `type`, at each `event`.
  defp printed(out, event, measurement, type) do
    metric = ~r/^Metric measurement: #{inspect(measurement)}( \[via [^\n]*\])? \(#{type}\)\n/m

    for chunk <- String.split(out, "Got new event!\n"),
        String.starts_with?(chunk, "Event name: #{event}\n"),
        part <- String.split(chunk, "\n\n"),
        part =~ metric,
        do: part |> String.replace(metric, "") |> String.trim()
  end

  # Whether a printed metric's tag values hold `pairs` (maps print in no fixed key order).
  defp tags?(part, pairs) do
    case Regex.run(~r/^Tag values: (.*)$/m, part) do
      [_, map] ->
        {tags, []} = Code.eval_string(map)
        Enum.all?(pairs, fn {key, value} -> Map.get(tags, key) == value end)

      nil ->
        false
    end
  end
end
