defmodule HexagonTpu.Telemetry do
  @moduledoc """
  Telemetry events emitted by `hexagon_tpu`.

  Events are sent with [`:telemetry`](https://hexdocs.pm/telemetry) when it is loaded (it is
  a dependency of the Hex package); where it is absent (offline builds) they are not emitted
  and cost nothing. Durations are in `:native` time units: convert them with
  `System.convert_time_unit/3`. Stop metadata repeats the start metadata, so a handler can
  work from the stop event alone.

  The `:start`/`:stop`/`:exception` events of a span are emitted by `:telemetry.span/3`: each
  carries `:telemetry_span_context`, a reference that is the same in the start event and the
  stop (or exception) event of one call and different in every other, which is how
  OpenTelemetry's telemetry bridge (and any handler) pairs them. This needs telemetry 1.3 or
  later (stop events carry extra measurements such as `:execute_ns`).

  Every name follows one scheme, `[:hexagon_tpu, object, action | phase]`: the object that
  acts (`:graph`, `:context`, `:monitor`), what it does, and for spans the phase
  (`:start`, `:stop`, `:exception`).

  ## Inference

    * `[:hexagon_tpu, :graph, :execute, :start]` - before `HexagonTpu.Graph.execute/3` (and so
      `HexagonTpu.predict/3`) validates and converts its inputs.
      * Measurements: `:system_time`, `:monotonic_time`.
      * Metadata: `:graph` (the graph name), `:context` (the context's source: a path or
        `{:binary, byte_size}`).

    * `[:hexagon_tpu, :graph, :execute, :stop]` - after the call returned, successfully or with an
      error tuple.
      * Measurements: `:duration` (the whole call: input conversion, waiting for a dirty
        scheduler and for the graph, QNN's `graphExecute`, output conversion),
        `:execute_ns` (QNN's `graphExecute` alone, in nanoseconds; on a context loaded with
        `async_queue_depth:`, from the submission to the backend's notification, its wait in
        the backend's queue included; `0` when QNN was not reached or failed),
        `:monotonic_time`.
      * Metadata: `:graph`, `:context`, `:telemetry_span_context`, `:status` (`:ok` or
        `:error`, or `:cancelled` for an asynchronous execute given up with
        `HexagonTpu.Graph.cancel/1`), and on error `:error` (the `HexagonTpu.Error` reason
        atom). Keys present only when the execute has them: `:performance` (present when the
        execute ran under a performance vote: the mode it asked for), `:profile` (present when
        the execute was profiled: what the backend reported). Every way to run an execute
        (`HexagonTpu.predict/3` and its batches, `HexagonTpu.Graph.execute/3`,
        `execute_async/3` then `await/2` or `cancel/1`) gives the same keys.

    An asynchronous execute (`HexagonTpu.Graph.execute_async/3`) emits `:start` when it is
    started and `:stop` when `HexagonTpu.Graph.await/2` or `cancel/1` returns.

    * `[:hexagon_tpu, :graph, :execute, :exception]` - when the call raised (a bug, or a NIF that is
      not loaded).
      * Measurements: `:duration`, `:monotonic_time`.
      * Metadata: `:graph`, `:context`, `:telemetry_span_context`, `:kind`, `:reason`,
        `:stacktrace`.

  ## Sampled profiles

    * `[:hexagon_tpu, :execute, :profile]` - after each execute that a graph's `profile_every:`
      sampled (see `HexagonTpu.Profile`), once the execute returned; not for a `profile:`
      asked on the call (the caller has that profile already).
      * Measurements: `:accelerator_cycles` and `:execute_us` (as the backend reported them;
        `0` when it did not).
      * Metadata: `:graph`, `:context`, `:profile` (the `%HexagonTpu.Profile{}`, `sampled: true`).

  ## Context loading

    * `[:hexagon_tpu, :context, :load, :start]` - before `HexagonTpu.Context.from_file/3` or
      `HexagonTpu.Context.from_binary/3` (and so `HexagonTpu.load_model/2`) deserializes a
      context binary.
      * Measurements: `:system_time`, `:monotonic_time`.
      * Metadata: `:source` (the path, or `{:binary, byte_size}`), `:backend` (the backend
        library path).

    * `[:hexagon_tpu, :context, :load, :stop]`
      * Measurements: `:duration`, `:monotonic_time`.
      * Metadata: `:source`, `:backend`, `:telemetry_span_context`, `:status` (`:ok` or
        `:error`), `:graphs` (the graph names, `[]` on error), and on error `:error` (the
        reason atom).

    * `[:hexagon_tpu, :context, :load, :exception]`
      * Measurements: `:duration`, `:monotonic_time`.
      * Metadata: `:source`, `:backend`, `:telemetry_span_context`, `:kind`, `:reason`,
        `:stacktrace`.

  ## Device resets

    * `[:hexagon_tpu, :context, :recover]` - when an execute that a device reset (a DSP
      restart) met returns, retried on its context created again (see "Device resets" in
      `HexagonTpu.Context.from_file/3`); emitted before that execute's `:stop`. An execute
      that recovering did not bring through emits none: its `:stop` has `error:
      :device_reset`.
      * Measurements: `:duration` (how long the execute waited for the context to be created
        again).
      * Metadata: `:graph`, `:context`.

  ## Periodic statistics

    * `[:hexagon_tpu, :monitor, :stats]` - every `interval_ms` from each running `HexagonTpu.Monitor`.
      * Measurements: every counter of `HexagonTpu.Stats.native/0` (`:runtimes_alive`,
        `:contexts_alive`, `:graphs_alive`, `:runtimes_created`, `:contexts_created`,
        `:graphs_created`, `:executes`, `:execute_errors`, `:execute_ns_total`,
        `:execute_ns_last`, ...), the dirty scheduler utilization since the previous sample
        (`:dirty_cpu`, `:dirty_io`, `:scheduler`, each `0.0..1.0`), and memory
        (`:memory_binary`, `:memory_total`, in bytes).
      * Metadata: `:node`, plus the Monitor's `:metadata` option.

  ## Example

      :telemetry.attach(
        "log-slow-inference",
        [:hexagon_tpu, :graph, :execute, :stop],
        &MyApp.Metrics.handle_event/4,
        nil
      )

  ## Metrics for a reporter

  `metrics/0` gives `Telemetry.Metrics` definitions of these events, for any reporter
  (Prometheus, StatsD, Phoenix LiveDashboard, `Telemetry.Metrics.ConsoleReporter`):

      children = [
        {HexagonTpu.Monitor, interval_ms: 10_000},
        {TelemetryMetricsPrometheus, metrics: HexagonTpu.Telemetry.metrics()}
      ]
  """

  @compile {:no_warn_undefined, [:telemetry, Telemetry.Metrics]}

  @execute_stop [:hexagon_tpu, :graph, :execute, :stop]
  @execute_stop_name "hexagon_tpu.graph.execute.stop"
  @monitor_gauges [
    :runtimes_alive,
    :contexts_alive,
    :graphs_alive,
    :dirty_cpu,
    :dirty_io,
    :memory_binary,
    :memory_total
  ]

  @doc """
  `Telemetry.Metrics` definitions of the package's events, for a reporter.

  Needs the optional dependency `{:telemetry_metrics, "~> 1.0"}` (raises `RuntimeError`
  saying so without it). Times are in milliseconds, tags are plain terms a reporter can
  print or label with (`:graph` is the graph's name):

    * `hexagon_tpu.graph.execute.stop.duration` - a `summary` and a `distribution` of the
      whole call (`HexagonTpu.predict/3`, `HexagonTpu.Graph.execute/3`, an `await/2`),
      tagged `:graph` and `:status` (`:ok`, `:error`, `:cancelled`);
    * `hexagon_tpu.graph.execute.stop.execute_ns` - a `summary` of QNN's `graphExecute`
      alone, tagged `:graph`, for the executes that reached QNN (its value is `0` otherwise);
    * `hexagon_tpu.graph.execute.count` - a `counter` of calls, tagged `:graph`, `:status`;
    * `hexagon_tpu.graph.execute.errors` - a `counter` of the calls that failed, tagged
      `:graph` and `:error` (the `HexagonTpu.Error` reason);
    * `hexagon_tpu.context.load.stop.duration` - a `summary` of context loads, tagged
      `:status`;
    * `hexagon_tpu.context.recover.duration` - a `summary` of recoveries from a device
      reset, tagged `:graph`; `hexagon_tpu.context.recover.count`, their `counter`;
    * `hexagon_tpu.execute.profile.execute_us` and `.accelerator_cycles` - a `summary` of the
      sampled profiles (`profile_every:`), tagged `:graph`;
    * `hexagon_tpu.monitor.stats.*` - the `last_value` of what a running `HexagonTpu.Monitor`
      samples: `runtimes_alive`, `contexts_alive`, `graphs_alive`, `dirty_cpu`, `dirty_io`
      (`0.0..1.0`), `memory_binary` and `memory_total` (bytes).

  Take the ones you want (`Enum.filter/2` on `:name`) or add your own beside them.
  """
  @spec metrics() :: [struct()]
  def metrics do
    unless HexagonTpu.Optional.available?(Telemetry.Metrics) do
      raise "HexagonTpu.Telemetry.metrics/0 needs the telemetry_metrics package: add " <>
              "{:telemetry_metrics, \"~> 1.0\"} to your project's dependencies"
    end

    ms = {:native, :millisecond}
    graph = [tags: [:graph]]

    [
      Telemetry.Metrics.summary(@execute_stop_name <> ".duration",
        unit: ms,
        tags: [:graph, :status]
      ),
      Telemetry.Metrics.distribution(@execute_stop_name <> ".duration",
        unit: ms,
        tags: [:graph, :status],
        reporter_options: [buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]]
      ),
      Telemetry.Metrics.summary(
        @execute_stop_name <> ".execute_ns",
        graph ++ [unit: {:nanosecond, :millisecond}, keep: &(&1[:status] == :ok)]
      ),
      # A counter counts events; its measurement (:duration, which every stop has) is there
      # for the reporters that read one.
      Telemetry.Metrics.counter("hexagon_tpu.graph.execute.count",
        event_name: @execute_stop,
        measurement: :duration,
        tags: [:graph, :status]
      ),
      Telemetry.Metrics.counter("hexagon_tpu.graph.execute.errors",
        event_name: @execute_stop,
        measurement: :duration,
        tags: [:graph, :error],
        keep: &(&1[:status] == :error)
      ),
      Telemetry.Metrics.summary("hexagon_tpu.context.load.stop.duration",
        unit: ms,
        tags: [:status]
      ),
      Telemetry.Metrics.summary("hexagon_tpu.context.recover.duration", graph ++ [unit: ms]),
      Telemetry.Metrics.counter(
        "hexagon_tpu.context.recover.count",
        graph ++ [measurement: :duration]
      ),
      Telemetry.Metrics.summary("hexagon_tpu.execute.profile.execute_us", graph),
      Telemetry.Metrics.summary("hexagon_tpu.execute.profile.accelerator_cycles", graph)
    ] ++
      for(
        key <- @monitor_gauges,
        do: Telemetry.Metrics.last_value("hexagon_tpu.monitor.stats.#{key}")
      )
  end

  @doc false
  # Emits an event when :telemetry is loaded.
  @spec execute([atom()], map(), map()) :: :ok
  def execute(event, measurements, metadata) do
    if enabled?(), do: :telemetry.execute(event, measurements, metadata)
    :ok
  end

  @doc false
  # A span over `fun`, which returns `{result, extra_stop_measurements, extra_stop_metadata}`.
  # Where :telemetry is loaded it is :telemetry.span/3 (so every event carries the span's
  # `:telemetry_span_context`), with the start metadata merged into the stop metadata; where
  # it is absent, `fun` runs alone and nothing else happens.
  @spec span([atom()], map(), (... -> {result, map(), map()})) :: result when result: term()
  def span(prefix, start_metadata, fun) do
    if enabled?() do
      :telemetry.span(prefix, start_metadata, fn ->
        {result, measurements, metadata} = fun.()
        {result, measurements, Map.merge(start_metadata, metadata)}
      end)
    else
      {result, _measurements, _metadata} = fun.()
      result
    end
  end

  @doc false
  # A span whose end comes later, in another call (an asynchronous execute): the start event
  # now, with a `:telemetry_span_context` as :telemetry.span/3 gives one, and what
  # `stop_span/3` needs; `nil` when telemetry is absent.
  @spec start_span([atom()], map()) :: {[atom()], integer(), map()} | nil
  def start_span(prefix, start_metadata) do
    if enabled?() do
      start = System.monotonic_time()
      start_metadata = Map.put(start_metadata, :telemetry_span_context, make_ref())

      :telemetry.execute(
        prefix ++ [:start],
        %{system_time: System.system_time(), monotonic_time: start},
        start_metadata
      )

      {prefix, start, start_metadata}
    end
  end

  @doc false
  # The stop event of a span begun with `start_span/2`.
  @spec stop_span({[atom()], integer(), map()} | nil, map(), map()) :: :ok
  def stop_span(nil, _measurements, _metadata), do: :ok

  def stop_span({prefix, start, start_metadata}, measurements, metadata) do
    stop = System.monotonic_time()

    :telemetry.execute(
      prefix ++ [:stop],
      Map.merge(measurements, %{duration: stop - start, monotonic_time: stop}),
      Map.merge(start_metadata, metadata)
    )
  end

  @doc false
  # `metadata` with each of `extras` whose value is not nil: the stop metadata's optional keys
  # (`:profile`, `:performance`) are present only when the execute has them.
  @spec put_present(map(), keyword()) :: map()
  def put_present(metadata, extras) do
    Enum.reduce(extras, metadata, fn
      {_key, nil}, acc -> acc
      {key, value}, acc -> Map.put(acc, key, value)
    end)
  end

  defp enabled?, do: HexagonTpu.Optional.available?(:telemetry)
end
