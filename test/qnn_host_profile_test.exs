defmodule HexagonTpu.QnnHostProfileTest do
  # Profiling on Qualcomm's x86-64 HTP emulator (onnxruntime-qnn 2.7.0, QAIRT 2.51), checked
  # against ONNX Runtime's QNN EP profiling the same context binary on the same backend.
  use ExUnit.Case, async: false

  @moduletag :qnn_host
  @moduletag timeout: 600_000

  alias HexagonTpu.{Graph, Profile, Stats}
  alias HexagonTpu.Test.QnnHost

  setup_all do
    model = QnnHost.compiled!("squeezenet", ["squeezenet"])
    [dir] = model.inputs
    %{runtime: QnnHost.runtime!(), model: model, dir: dir}
  end

  defp inputs(graph, dir) do
    for info <- graph.inputs do
      npy = QnnHost.read_npy!(Path.join(dir, "#{info.name}_0.npy"))
      {npy.type, npy.data}
    end
  end

  # ORT's CSV rows: Msg Timestamp, Message, Time, Unit of Measurement, Timing Source,
  # Event Level, Event Identifier (the identifier may hold commas: it is the rest of the line).
  defp ort_rows(csv) do
    [_header | lines] = csv |> File.read!() |> String.split("\n", trim: true)

    for line <- lines do
      [_ts, message, time, unit, _source, level, identifier] = String.split(line, ",", parts: 7)
      %{message: message, time: String.to_integer(time), unit: unit, level: level, id: identifier}
    end
  end

  test "a detailed profile names the same ops, as many and in the same order, as ORT's CSV", %{
    runtime: runtime,
    model: model,
    dir: dir
  } do
    graph = QnnHost.graph!(model.bin, runtime)
    {:ok, [_], %Profile{} = p} = Graph.execute(graph, inputs(graph, dir), profile: :detailed)

    csv = Path.join(QnnHost.dir(), "squeezenet_ort_profile.csv")
    File.rm(csv)
    QnnHost.python!(["profile", hd(model.ctx), dir, csv, "--lib-dir", QnnHost.lib_dir()])
    ort_nodes = for %{message: "NODE", level: "SUB-EVENT"} = row <- ort_rows(csv), do: row

    cycles = Enum.find(p.events, &(&1.name == :accelerator_cycles))
    assert Enum.map(cycles.sub_events, & &1.identifier) == Enum.map(ort_nodes, & &1.id)
    assert length(p.ops) == length(ort_nodes)
    assert length(ort_nodes) > 20
    # the op names are the identifiers without the unit the HTP appends
    assert Enum.map(p.ops, &(&1.name <> " (cycles)")) == Enum.map(ort_nodes, & &1.id)
    assert Enum.all?(ort_nodes, &(&1.unit == "CYCLES"))
    assert Enum.all?(cycles.sub_events, &(&1.unit == :cycles and &1.kind == 404))

    # the same top-level events ORT reports for the execute, by identifier and unit
    ort_roots =
      for %{level: "ROOT", id: id, unit: unit} <- ort_rows(csv),
          not String.contains?(id, "load binary"),
          do: {id, String.downcase(unit)}

    assert Enum.map(p.events, &{&1.identifier, unit_name(&1.unit)}) == ort_roots

    # the ops' cycles add up to the accelerator's, in ORT's CSV as in ours
    assert Enum.sum(Enum.map(p.ops, & &1.cycles)) == p.accelerator_cycles
    ort_total = Enum.find(ort_rows(csv), &(&1.id == "Accelerator (execute) time (cycles)")).time
    assert Enum.sum(Enum.map(ort_nodes, & &1.time)) == ort_total
    assert p.accelerator_cycles > 0 and p.accelerator_us > 0
    assert p.execute_us >= p.accelerator_us
    assert is_integer(p.vtcm_acquire_us) and is_integer(p.resource_power_up_us)
  end

  defp unit_name(:us), do: "us"
  defp unit_name(unit), do: Atom.to_string(unit)

  test "basic, detailed and optrace are all accepted; a handle is reused without accumulating", %{
    runtime: runtime,
    model: model,
    dir: dir
  } do
    # earlier tests' graphs and their profile handles freed first: the baseline holds still
    HexagonTpu.Test.Support.quiesce()
    before = Stats.native()
    graph = QnnHost.graph!(model.bin, runtime)
    input = inputs(graph, dir)

    {:ok, _, basic} = Graph.execute(graph, input, profile: :basic)
    assert basic.ops == [] and is_integer(basic.execute_us) and is_integer(basic.accelerator_us)

    {:ok, _, first} = Graph.execute(graph, input, profile: :detailed)
    {:ok, _, second} = Graph.execute(graph, input, profile: :detailed)
    assert length(second.events) == length(first.events)
    assert Enum.map(second.ops, & &1.name) == Enum.map(first.ops, & &1.name)

    # QNN 2.41+: enableOptrace set explicitly; the emulator takes it and reports the detailed
    # events (its op trace goes to QNN's serialized profile, which this package does not read)
    {:ok, _, optrace} = Graph.execute(graph, input, profile: :optrace)
    assert optrace.level == :optrace
    assert Enum.map(optrace.ops, & &1.name) == Enum.map(first.ops, & &1.name)

    assert Stats.native().profiles_created == before.profiles_created + 3
    :ok = Graph.close(graph)

    assert HexagonTpu.Test.Support.wait_until(fn ->
             Stats.native().profiles_alive == before.profiles_alive
           end)
  end

  test "profile_every: samples one execute in N into the table", %{
    runtime: runtime,
    model: model,
    dir: dir
  } do
    {:ok, graph} = HexagonTpu.load_model(model.bin, runtime: runtime, profile_every: 2)
    input = inputs(graph, dir)
    for _ <- 1..4, do: {:ok, [_]} = HexagonTpu.predict(graph, input)

    table = Profile.table(graph)
    assert table.every == 2 and table.samples == 2
    assert length(table.ops) > 20
    assert Enum.all?(table.ops, &(&1.samples == 2 and &1.max_cycles * 2 >= &1.total_cycles))
    assert table.ops == Enum.sort_by(table.ops, & &1.total_cycles, :desc)
  end
end
