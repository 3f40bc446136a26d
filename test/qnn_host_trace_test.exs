defmodule HexagonTpu.QnnHostTraceTest do
  # A trace of a load and three executes on Qualcomm's HTP emulator, exported as trace-event
  # JSON. The trace is process-wide: this module runs alone.
  use ExUnit.Case, async: false

  alias HexagonTpu.{Context, Graph, Runtime, Trace}
  alias HexagonTpu.Test.{QnnHost, TraceCheck}

  @moduletag :qnn_host
  @moduletag :tmp_dir
  @moduletag timeout: 600_000

  setup_all do
    %{u8: QnnHost.compiled!("u8_io", ["u8_io"])}
  end

  test "a load and three executes export as trace-event JSON", %{u8: u8, tmp_dir: dir} do
    on_exit(fn -> Trace.stop() end)
    :ok = Trace.start()
    runtime = QnnHost.runtime!()
    context = Context.from_file!(runtime, u8.bin)
    [name] = Context.graphs(context)
    graph = Graph.retrieve!(context, name)
    # Events name the graph as the binary does (here the compiler's name behind `name`).
    info = Enum.find(context.graphs, &(&1.name == name))
    qnn_name = Map.get(info, :qnn_name, info.name)
    [input] = graph.inputs
    data = {{:u, 8}, :binary.copy(<<128>>, input.byte_size)}
    for _ <- 1..3, do: {:ok, [_]} = Graph.execute(graph, [data])
    :ok = Graph.close(graph)
    :ok = Context.close(context)
    :ok = Runtime.close(runtime)
    :ok = Trace.stop()

    path = Path.join(dir, "emulator.json")
    assert {:ok, %{dropped: 0}} = Trace.export(path)
    {events, _json} = TraceCheck.read!(path)

    count = fn name, arg ->
      Enum.count(events, &(&1["name"] == name and Map.values(&1["args"]) == [arg]))
    end

    backend = Keyword.fetch!(QnnHost.runtime_opts(), :lib_path)
    assert count.("runtime.handles", backend) == 1
    assert count.("QnnBackend_create", backend) == 1
    assert count.("context.read", u8.bin) == 1
    assert count.("QnnSystemContext_getMetadata", u8.bin) == 1
    assert count.("QnnContext_createFromBinary", u8.bin) == 1
    assert count.("QnnGraph_retrieve", qnn_name) == 1
    assert count.("execute", qnn_name) == 3
    assert count.("QnnGraph_execute", qnn_name) == 3
    assert count.("QnnContext_free", u8.bin) == 1
    assert count.("runtime.free", backend) == 1

    # Each graphExecute lies within an execute.
    executes = Enum.filter(events, &(&1["name"] == "execute"))

    for x <- Enum.filter(events, &(&1["name"] == "QnnGraph_execute")),
        do: assert(Enum.any?(executes, &TraceCheck.within?(x, &1)))
  end
end
