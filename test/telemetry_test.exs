defmodule HexagonTpu.TelemetryTest do
  # Handlers are global: runs alone so that no other test's events arrive here.
  use ExUnit.Case, async: false

  @compile {:no_warn_undefined, [Nx]}

  import HexagonTpu.Test.Numerics, only: [f32: 1]

  alias HexagonTpu.{Context, Graph}
  alias HexagonTpu.Test.{Models, Support}

  @execute [
    [:hexagon_tpu, :graph, :execute, :start],
    [:hexagon_tpu, :graph, :execute, :stop],
    [:hexagon_tpu, :graph, :execute, :exception]
  ]
  @load [
    [:hexagon_tpu, :context, :load, :start],
    [:hexagon_tpu, :context, :load, :stop],
    [:hexagon_tpu, :context, :load, :exception]
  ]

  setup do
    t = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    path = Models.build!(Models.identity(t, t, sleep_ms: 1))
    %{path: path, runtime: Support.runtime!()}
  end

  test "execute: start and stop with duration, execute_ns, graph and status", %{
    path: path,
    runtime: runtime
  } do
    graph = Graph.retrieve!(Context.from_file!(runtime, path), "identity")
    Support.attach_events(@execute)

    {:ok, _} = HexagonTpu.predict(graph, [f32([0.1, 0.2, 0.3, 0.4])])

    assert_received {:event, [:hexagon_tpu, :graph, :execute, :start], start, start_meta}
    assert is_integer(start.system_time) and is_integer(start.monotonic_time)
    assert start_meta.graph == "identity"
    assert start_meta.context == path

    assert_received {:event, [:hexagon_tpu, :graph, :execute, :stop], stop, meta}
    assert meta.graph == "identity"
    assert meta.status == :ok
    assert meta.context == path
    # execute_ns is QNN's graphExecute alone (the model sleeps 1 ms in it); duration is the
    # whole call, in native units
    assert stop.execute_ns >= 1_000_000
    assert System.convert_time_unit(stop.duration, :native, :nanosecond) >= stop.execute_ns
    refute_received {:event, [:hexagon_tpu, :graph, :execute, :exception], _, _}

    # :telemetry.span/3 links the two events of one call, and no other
    assert is_reference(start_meta.telemetry_span_context)
    assert meta.telemetry_span_context == start_meta.telemetry_span_context
    # an execute with neither a performance vote nor a profile carries neither key
    refute Map.has_key?(meta, :performance)
    refute Map.has_key?(meta, :profile)

    {:ok, _} = HexagonTpu.predict(graph, [f32([0.1, 0.2, 0.3, 0.4])])
    assert_received {:event, [:hexagon_tpu, :graph, :execute, :start], _, second_start}
    assert_received {:event, [:hexagon_tpu, :graph, :execute, :stop], _, second_stop}
    assert second_stop.telemetry_span_context == second_start.telemetry_span_context
    assert second_start.telemetry_span_context != start_meta.telemetry_span_context
  end

  test "every path's stop metadata has the same keys", %{path: path, runtime: runtime} do
    graph = Graph.retrieve!(Context.from_file!(runtime, path), "identity")
    Support.attach_events(@execute)
    input = [f32([0.1, 0.2, 0.3, 0.4])]
    opts = [output: :binary, performance: :burst]

    keys = fn run ->
      {:ok, _} = run.()
      assert_received {:event, [:hexagon_tpu, :graph, :execute, :stop], _, meta}
      refute_received {:event, [:hexagon_tpu, :graph, :execute, :stop], _, _}
      meta |> Map.keys() |> Enum.sort()
    end

    predict = keys.(fn -> HexagonTpu.predict(graph, input, opts) end)
    assert :performance in predict

    assert keys.(fn -> Graph.execute(graph, input, opts) end) == predict
    assert keys.(fn -> Graph.execute(graph, input, [timeout: 60_000] ++ opts) end) == predict

    assert keys.(fn ->
             {:ok, pending} = Graph.execute_async(graph, input, opts)
             Graph.await(pending)
           end) == predict

    # An error and a cancel share every key but the outcome's.
    {:error, _} = Graph.execute(graph, [<<1, 2, 3>>], opts)
    assert_received {:event, [:hexagon_tpu, :graph, :execute, :stop], _, error}
    assert (Map.keys(error) -- [:error]) |> Enum.sort() == predict

    {:ok, pending} = Graph.execute_async(graph, input, opts)
    :ok = Graph.cancel(pending)
    assert_received {:event, [:hexagon_tpu, :graph, :execute, :stop], _, cancelled}
    assert cancelled |> Map.keys() |> Enum.sort() == predict
  end

  @tag :nx
  test "a batch's executes stop with the keys of a single predict", ctx do
    graph = Graph.retrieve!(Context.from_file!(ctx.runtime, ctx.path), "identity")
    Support.attach_events(@execute)
    opts = [output: :binary, performance: :burst]
    {:ok, _} = HexagonTpu.predict(graph, [f32([0.1, 0.2, 0.3, 0.4])], opts)
    assert_received {:event, [:hexagon_tpu, :graph, :execute, :stop], _, single}

    # Two entries along the leading axis of a {1, 4} model: two executes, pipelined.
    batch = Nx.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]], type: :f32)
    {:ok, _} = HexagonTpu.predict(graph, [batch], opts)
    assert_received {:event, [:hexagon_tpu, :graph, :execute, :stop], _, first}
    assert_received {:event, [:hexagon_tpu, :graph, :execute, :stop], _, second}
    assert Map.keys(first) |> Enum.sort() == Map.keys(single) |> Enum.sort()
    assert Map.keys(second) |> Enum.sort() == Map.keys(single) |> Enum.sort()
  end

  test "stop metadata: optional keys only when present" do
    assert HexagonTpu.Telemetry.put_present(%{status: :ok}, performance: nil, profile: nil) ==
             %{status: :ok}

    assert HexagonTpu.Telemetry.put_present(%{status: :ok}, performance: :burst, profile: nil) ==
             %{status: :ok, performance: :burst}
  end

  test "execute: an error is a stop event with status :error", %{path: path, runtime: runtime} do
    graph = Graph.retrieve!(Context.from_file!(runtime, path), "identity")
    Support.attach_events(@execute)

    {:error, _} = Graph.execute(graph, [<<1, 2, 3>>])

    assert_received {:event, [:hexagon_tpu, :graph, :execute, :start], _, _}
    assert_received {:event, [:hexagon_tpu, :graph, :execute, :stop], stop, meta}
    assert meta.status == :error
    assert meta.error == :invalid_input
    assert stop.execute_ns == 0
    assert is_integer(stop.duration)
  end

  test "execute: a raise is an exception event", %{path: path, runtime: runtime} do
    graph = Graph.retrieve!(Context.from_file!(runtime, path), "identity")
    Support.attach_events(@execute)

    # a graph whose handle is not a NIF resource: the NIF raises ArgumentError
    broken = %Graph{graph | ref: make_ref()}
    assert_raise ArgumentError, fn -> Graph.execute(broken, [f32([0.1, 0.2, 0.3, 0.4])]) end

    assert_received {:event, [:hexagon_tpu, :graph, :execute, :start], _, start_meta}
    assert_received {:event, [:hexagon_tpu, :graph, :execute, :exception], measurements, meta}
    assert meta.telemetry_span_context == start_meta.telemetry_span_context
    assert is_integer(measurements.duration)
    assert meta.kind == :error
    assert meta.graph == "identity"
    assert is_list(meta.stacktrace)
    refute_received {:event, [:hexagon_tpu, :graph, :execute, :stop], _, _}
  end

  test "context load: start and stop with source, backend, status and graphs", %{
    path: path,
    runtime: runtime
  } do
    Support.attach_events(@load)

    context = Context.from_file!(runtime, path)
    assert_received {:event, [:hexagon_tpu, :context, :load, :start], %{system_time: _}, meta}
    assert meta.source == path
    assert meta.backend == Support.sim_lib()
    span = meta.telemetry_span_context
    assert_received {:event, [:hexagon_tpu, :context, :load, :stop], %{duration: duration}, meta}
    assert meta.telemetry_span_context == span
    assert meta.source == path
    assert duration > 0
    assert meta.status == :ok
    assert meta.graphs == ["identity"]

    {:ok, _} = Context.from_binary(runtime, File.read!(path))
    size = File.stat!(path).size

    assert_received {:event, [:hexagon_tpu, :context, :load, :stop], _,
                     %{source: {:binary, ^size}}}

    {:error, _} = Context.from_file(runtime, "/nonexistent.bin")
    assert_received {:event, [:hexagon_tpu, :context, :load, :stop], _, meta}
    assert meta.status == :error
    assert meta.error == :io
    assert meta.graphs == []

    Context.close(context)
  end
end
