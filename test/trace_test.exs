defmodule HexagonTpu.TraceTest do
  # The trace is process-wide: this module runs alone.
  use ExUnit.Case, async: false

  import HexagonTpu.Test.Numerics, only: [f32: 1]

  alias HexagonTpu.{Context, Graph, Runtime, Trace}
  alias HexagonTpu.Test.{Models, Support, TraceCheck}

  @moduletag :tmp_dir

  setup %{tmp_dir: dir} do
    t = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    path = Models.build!(Models.identity(t, t))
    Support.quiesce()
    on_exit(fn -> Trace.stop() end)
    # A private copy of qnn_sim: every event naming it is this test's.
    %{path: path, lib: Support.private_sim_lib!(dir), dir: dir}
  end

  test "a load and three executes: every phase, nested and in order, as trace-event JSON",
       %{path: path, lib: lib, dir: dir} do
    :ok = Trace.start()
    runtime = Support.runtime!(lib)
    context = Context.from_file!(runtime, path)
    graph = Graph.retrieve!(context, "identity")
    for _ <- 1..3, do: {:ok, _} = HexagonTpu.predict(graph, [f32([0.1, 0.2, 0.3, 0.4])])
    :ok = Graph.close(graph)
    :ok = Context.close(context)
    :ok = Runtime.close(runtime)
    :ok = Trace.stop()

    export = Path.join(dir, "trace.json")

    assert {:ok, %{recording: false, dropped: 0, emitted: emitted, held: emitted}} =
             Trace.export(export)

    {events, json} = TraceCheck.read!(export)
    assert json["otherData"] == %{"emitted" => emitted, "dropped" => 0, "capacity" => 65_536}

    backend = &(&1["args"] == %{"backend" => lib})
    context? = &(&1["args"] == %{"context" => path})
    graph? = &(&1["args"] == %{"graph" => "identity"})
    named = fn name, pred -> Enum.filter(events, &(&1["name"] == name and pred.(&1))) end

    # Runtime: created on the caller's thread, its handles on the runtime's own.
    assert [create] = named.("runtime.create", backend)
    assert [handles] = named.("runtime.handles", backend)
    owner = handles["tid"]
    assert owner != create["tid"]
    handle_steps = Enum.filter(events, &(TraceCheck.within?(&1, handles) and &1 != handles))

    assert Enum.map(handle_steps, & &1["name"]) ==
             ["QnnLog_create", "QnnBackend_create", "QnnDevice_create"]

    # Context: read, then the load with QnnSystem's metadata inside, then created on the
    # runtime's thread.
    assert [read] = named.("context.read", context?)
    assert [load] = named.("context.load", context?)
    assert [metadata] = named.("QnnSystemContext_getMetadata", context?)
    assert [created] = named.("QnnContext_createFromBinary", context?)
    assert TraceCheck.finish(read) <= load["ts"]
    assert TraceCheck.within?(metadata, load)
    assert created["tid"] == owner and created["ts"] >= TraceCheck.finish(metadata)

    assert [retrieve] = named.("QnnGraph_retrieve", graph?)
    assert retrieve["ts"] >= TraceCheck.finish(created)

    # Three executes, each quantize, graphExecute, dequantize in order within it.
    executes = named.("execute", graph?)
    assert length(executes) == 3

    for execute <- executes do
      inside = Enum.filter(events, &(TraceCheck.within?(&1, execute) and &1 != execute))

      assert Enum.map(inside, & &1["name"]) ==
               ["execute.quantize", "QnnGraph_execute", "execute.dequantize"]

      [q, x, d] = inside
      assert TraceCheck.finish(q) <= x["ts"] and TraceCheck.finish(x) <= d["ts"]
      assert Enum.all?(inside, graph?)
    end

    assert Enum.sort_by(executes, & &1["ts"]) |> hd() |> Map.fetch!("ts") >=
             TraceCheck.finish(retrieve)

    # Closing: the context freed, then the runtime, on the runtime's thread, after the executes.
    assert [free] = named.("QnnContext_free", context?)
    assert [runtime_free] = named.("runtime.free", backend)
    last_execute = executes |> Enum.map(&TraceCheck.finish/1) |> Enum.max()
    assert free["tid"] == owner and free["ts"] >= last_execute
    assert runtime_free["tid"] == owner and runtime_free["ts"] >= TraceCheck.finish(free)

    # Every event of this test's objects is one of those above.
    ours = Enum.filter(events, &(backend.(&1) or context?.(&1) or graph?.(&1)))
    assert length(ours) == 2 + 3 + 4 + 1 + 3 * 4 + 2
  end

  test "a queued execute's wait is an async event", %{lib: lib, dir: dir} do
    t = Models.t(:float_32, [4])
    slow = Models.build!(Models.identity(t, t, sleep_ms: 50))
    runtime = Support.runtime!(lib)
    graph = Graph.retrieve!(Context.from_file!(runtime, slow), "identity")
    :ok = Trace.start()

    tasks = for _ <- 1..2, do: Task.async(fn -> Graph.execute(graph, [f32([1, 2, 3, 4])]) end)
    for task <- tasks, do: {:ok, _} = Task.await(task)

    :ok = Trace.stop()
    export = Path.join(dir, "wait.json")
    {:ok, _} = Trace.export(export)
    {events, json} = TraceCheck.read!(export)
    # Two executes on one graph at once: one ran, the other waited for it on the graph's
    # worker (or both queued, if the second found the first still queueing).
    assert [%{"ph" => "b", "ts" => b}, %{"ph" => "e", "ts" => e}] =
             Enum.filter(json["traceEvents"], &(&1["name"] == "execute.wait"))

    [first, second] =
      events |> Enum.filter(&(&1["name"] == "execute")) |> Enum.sort_by(& &1["ts"])

    # The wait ends when the first gives the graph's turn back: after its QnnGraph_execute,
    # but possibly before its own span ends (its outputs are converted outside the turn).
    [first_run] =
      Enum.filter(events, &(&1["name"] == "QnnGraph_execute" and TraceCheck.within?(&1, first)))

    assert b <= TraceCheck.finish(first)
    assert e >= TraceCheck.finish(first_run) and e <= second["ts"]
    close!(graph, runtime)
  end

  test "a profiled execute's ops are spans inside its graphExecute, in the profile's order",
       %{lib: lib, dir: dir} do
    model = Models.classifier([0.01, 0.02, 0.03], Enum.to_list(1..12), [0, 0, 0])
    runtime = Support.runtime!(lib)
    graph = Graph.retrieve!(Context.from_file!(runtime, Models.build!(model)), "classifier")
    :ok = Trace.start()
    {:ok, _, profile} = Graph.execute(graph, [f32([0.1, 0.2, 0.3, 0.4])], profile: :detailed)
    {:ok, _} = Graph.execute(graph, [f32([0.1, 0.2, 0.3, 0.4])])
    :ok = Trace.stop()

    export = Path.join(dir, "ops.json")
    {:ok, _} = Trace.export(export)
    {events, _json} = TraceCheck.read!(export)

    # Only the profiled execute has ops: qnn_sim reports each op's µs, which the spans take.
    [profiled, _plain] =
      events |> Enum.filter(&(&1["name"] == "QnnGraph_execute")) |> Enum.sort_by(& &1["ts"])

    ops = events |> Enum.filter(&(&1["name"] == "op")) |> Enum.sort_by(& &1["ts"])
    assert Enum.map(ops, & &1["args"]["op"]) == Enum.map(profile.ops, & &1.name)
    assert Enum.map(ops, & &1["dur"]) == Enum.map(profile.ops, & &1.us)
    assert Enum.all?(ops, &(&1["tid"] == profiled["tid"]))
    # laid end to end from the call's start (the backend gives no op a start time)
    [first, second] = ops
    assert first["ts"] >= profiled["ts"] and first["ts"] - profiled["ts"] < profiled["dur"]
    assert_in_delta second["ts"], TraceCheck.finish(first), 0.002
    close!(graph, runtime)
  end

  test "off by default and when stopped: nothing is recorded", %{path: path, lib: lib} do
    :ok = Trace.start(capacity: 8)
    :ok = Trace.stop()
    before = Trace.info()
    assert %{recording: false, capacity: 8} = before
    runtime = Support.runtime!(lib)
    graph = Graph.retrieve!(Context.from_file!(runtime, path), "identity")
    for _ <- 1..3, do: {:ok, _} = HexagonTpu.predict(graph, [f32([0.1, 0.2, 0.3, 0.4])])
    assert Trace.info() == before
    close!(graph, runtime)
  end

  test "a full ring keeps the newest events and counts the dropped ones", %{
    path: path,
    lib: lib,
    dir: dir
  } do
    runtime = Support.runtime!(lib)
    graph = Graph.retrieve!(Context.from_file!(runtime, path), "identity")
    :ok = Trace.start(capacity: 5)
    # Four events an execute: execute, quantize, graphExecute, dequantize.
    for _ <- 1..3, do: {:ok, _} = HexagonTpu.predict(graph, [f32([0.1, 0.2, 0.3, 0.4])])
    assert Trace.info() == %{recording: true, capacity: 5, emitted: 12, dropped: 7, held: 5}

    export = Path.join(dir, "ring.json")
    {:ok, %{held: 5}} = Trace.export(export)
    {events, _} = TraceCheck.read!(export)
    # Events are recorded as they end (children before their execute): the ring keeps the
    # second execute's own event and the whole third; exported by start time.
    names = ["execute", "execute", "execute.quantize", "QnnGraph_execute", "execute.dequantize"]
    assert Enum.map(events, & &1["name"]) == names
    close!(graph, runtime)
  end

  # Frees a test's objects now, not at a later collection while another test records: the
  # trace is process-wide, and a late free would land in that test's ring.
  defp close!(graph, runtime) do
    :ok = Context.close(graph.context)
    :ok = Runtime.close(runtime)
  end

  test "options and paths are checked", %{dir: dir} do
    assert_raise ArgumentError, ~r/:capacity option/, fn -> Trace.start(capacity: 0) end
    assert_raise ArgumentError, ~r/unknown option/, fn -> Trace.start(size: 1) end
    :ok = Trace.start(capacity: 1)
    assert {:error, %HexagonTpu.Error{reason: :io}} = Trace.export(Path.join(dir, "no/such/dir"))
  end

  test "export/1 to a path that cannot name a file is :invalid_argument, to one not writable :io",
       %{tmp_dir: dir} do
    assert {:error, %HexagonTpu.Error{reason: :invalid_argument, message: message}} =
             Trace.export("")

    assert message =~ "`path` is empty"

    assert {:error, %HexagonTpu.Error{reason: :invalid_argument, message: message}} =
             Trace.export(Path.join(dir, "a\0b.json"))

    assert message =~ "NUL byte"

    assert {:error, %HexagonTpu.Error{reason: :io}} =
             Trace.export(Path.join([dir, "missing", "trace.json"]))
  end
end
