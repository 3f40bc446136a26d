defmodule HexagonTpu.BenchTest do
  # Runs alone (async: false): it compares the VM-wide counters (Stats.native/0) before and
  # after a run, which another test's executes would move.
  use ExUnit.Case, async: false

  alias HexagonTpu.{Bench, Error, JSON, Stats}
  alias HexagonTpu.Test.{Models, Support}

  # Each test on its own copy of qnn_sim, so the backend's counters are the test's alone.
  setup do
    dir = Path.join(System.tmp_dir!(), "hexagon_tpu_bench_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    lib = Support.private_sim_lib!(dir)
    Support.quiesce()
    %{lib: lib, load: Support.runtime_opts(lib), path: Models.build!(add_model())}
  end

  # u8 (quantized: the bench gives it f32) + i32 (the model's own type) -> u8 (dequantized).
  defp add_model(opts \\ []) do
    a = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    b = Models.t(:int_32, [1, 4])
    out = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.1, -128})
    Models.add(a, b, out, opts)
  end

  @small [
    iterations: 7,
    warmup: 2,
    in_flight: [1, 2, 4],
    throughput_executes: 5,
    modes: [:burst, :default],
    mode_iterations: 3,
    progress: false
  ]

  test "every execute is counted: N iterations are N measured executes, and nothing leaks",
       %{lib: lib, load: load, path: path} do
    stats_before = Stats.native()

    {{:ok, result}, before, after_} =
      Stats.with_leak_check(fn -> Bench.run(path, load ++ @small) end)

    Support.assert_no_leaks(before, after_)

    # first + warm-up + latency + 3 levels x 5 + 2 modes x (1 + 3) + the profile
    total = 1 + 2 + 7 + 3 * 5 + 2 * 4 + 1
    assert result.executes == %{total: total, counted: total}
    assert Stats.native().executes - stats_before.executes == total
    assert %{execute_count: ^total, execute_overlaps: 0} = Support.qnn_sim_counters(lib)

    assert %{iterations: 7} = l = result.latency
    assert l.min_us <= l.p50_us and l.p50_us <= l.p90_us and l.p90_us <= l.p99_us
    assert l.p99_us <= l.max_us and l.min_us > 0

    # two tensors converted per execute: input a (f32 -> u8) and the output (u8 -> f32)
    assert %{executes: 7, exclusive: true, tensors_converted: 2.0} = h = result.host
    assert h.graph_execute_us > 0 and h.quantize_us > 0 and h.dequantize_us > 0

    assert_in_delta h.call_us,
                    h.graph_execute_us + h.quantize_us + h.dequantize_us + h.other_us,
                    0.01

    assert Enum.map(result.throughput, &{&1.in_flight, &1.executes}) == [{1, 5}, {2, 5}, {4, 5}]
    assert Enum.all?(result.throughput, &(&1.executes_per_s > 0))

    # qnn_sim has a perf infrastructure: :burst is voted once, :default withdraws it once
    assert [%{mode: :burst, iterations: 3, votes: 1}, %{mode: :default, iterations: 3, votes: 1}] =
             result.modes

    assert %{level: :detailed, ops: 1, top_ops: [%{name: _, share: 1.0}]} = result.profile

    # the context held its binary while loaded; the ledger is back where it was
    m = result.memory
    assert m.ledger_bytes_model >= File.stat!(path).size
    assert m.ledger_bytes_after == m.ledger_bytes_before
    assert is_integer(m.rss_before_bytes) and is_integer(m.rss_change_bytes)
    assert is_float(result.load_us) and is_float(result.first_execute_us)
  end

  test "the inputs are random of each input's shape and type, the same for a seed" do
    graph = Support.load!(add_model())
    [a, b] = Bench.Inputs.random(graph, 7)
    assert [^a, ^b] = Bench.Inputs.random(graph, 7)
    refute Bench.Inputs.random(graph, 8) == [a, b]
    # a: 4 f32 in the range u8 with scale 0.05, zero point 128 represents; b: 4 i32
    floats = for <<x::float-32-little <- a>>, do: x
    assert length(floats) == 4 and Enum.all?(floats, &(&1 >= -6.4 and &1 <= 6.35))
    assert byte_size(b) == 16
    assert {:ok, [_]} = HexagonTpu.Graph.execute(graph, [a, b], output: :binary)
  end

  test "executes in flight overlap in the backend's queue, never more than the level",
       %{lib: lib, load: load} do
    # Each execute sleeps 300 ms in qnn_sim, so the level's executes, all started before the
    # first is awaited, are in the backend's queue together (qnn_sim counts them).
    path = Models.build!(add_model(sleep_ms: 300))
    opts = load ++ [async_queue_depth: 4, warmup: 0, only: [:throughput], progress: false]

    assert {:ok, %{throughput: [%{in_flight: 2, executes: 4}]}} =
             Bench.run(path, opts ++ [in_flight: [2], throughput_executes: 4])

    assert %{peak_async_in_flight: 2, execute_count: 5} = Support.qnn_sim_counters(lib)

    assert {:ok, %{throughput: [%{in_flight: 4, executes: 4}]}} =
             Bench.run(path, opts ++ [in_flight: [4], throughput_executes: 4])

    assert %{peak_async_in_flight: 4, execute_count: 10} = Support.qnn_sim_counters(lib)
  end

  test "host time splits into the inputs' quantize and the outputs' dequantize", %{lib: lib} do
    # u8 in (quantized from f32 on the host), f32 out (the softmax's: nothing to dequantize)
    graph =
      Support.load!(Models.classifier([0.01, 0.02, 0.03], Enum.to_list(1..12), [0, 0, 0]),
        lib: lib
      )

    assert {:ok, result} = Bench.run(graph, iterations: 5, only: [:latency], progress: false)
    assert %{executes: 5, tensors_converted: 1.0} = h = result.host
    # compared, not matched: a 0.0 pattern matches only +0.0 on OTP 27 (and warns)
    assert h.dequantize_us == 0
    assert h.quantize_us > 0
  end

  test "a long run shows a progress line on standard error, and erases it", %{load: load} do
    # 1 + 4 executes of at least 300 ms each: longer than the second the line waits for
    path = Models.build!(add_model(sleep_ms: 300))
    opts = load ++ [iterations: 4, warmup: 0, only: [:latency]]

    stderr =
      ExUnit.CaptureIO.capture_io(:stderr, fn ->
        assert {:ok, _} = Bench.run(path, opts)
      end)

    assert stderr =~ ~r/^\rhexagon_tpu.bench: latency \d\/4\e\[K/
    assert String.ends_with?(stderr, "\r\e[K")

    assert ExUnit.CaptureIO.capture_io(:stderr, fn ->
             assert {:ok, _} = Bench.run(path, opts ++ [progress: false])
           end) == ""
  end

  test "the JSON decodes and has every key the schema names, the table every section",
       %{load: load, path: path} do
    {:ok, result} = Bench.run(path, load ++ @small)
    doc = JSON.decode!(Bench.format(result, :json))

    assert Map.keys(doc) |> Enum.sort() ==
             ~w(executes first_execute_us host latency load_us memory model modes profile
                schema settings throughput)

    assert doc["schema"] == "hexagon_tpu.bench/1"

    assert Map.keys(doc["latency"]) |> Enum.sort() ==
             ~w(iterations max_us mean_us min_us p50_us p90_us p99_us)

    assert Map.keys(doc["host"]) |> Enum.sort() ==
             ~w(call_us dequantize_us exclusive executes graph_execute_us other_us quantize_us
                tensors_converted)

    assert [%{"in_flight" => 1} = t | _] = doc["throughput"]
    assert Map.keys(t) |> Enum.sort() == ~w(elapsed_us executes executes_per_s in_flight)

    assert [%{"mode" => "burst"} = m, %{"mode" => "default"}] = doc["modes"]
    assert Map.keys(m) |> Enum.sort() == ~w(iterations mode p50_us votes votes_refused)

    assert Map.keys(doc["profile"]) |> Enum.sort() ==
             ~w(accelerator_cycles accelerator_us execute_us level ops top_ops)

    assert [op] = doc["profile"]["top_ops"]
    assert Map.keys(op) |> Enum.sort() == ~w(cycles name share us)

    assert Map.keys(doc["memory"]) |> Enum.sort() ==
             ~w(ledger_bytes_after ledger_bytes_before ledger_bytes_model rss_after_bytes
                rss_before_bytes rss_change_bytes rss_loaded_bytes)

    assert %{"graph" => "add", "path" => ^path, "inputs" => [a, _], "outputs" => [_]} =
             doc["model"]

    assert a == %{"name" => "a", "type" => "u8", "shape" => [1, 4], "form" => "f32"}

    assert Map.keys(doc["settings"]) |> Enum.sort() ==
             ~w(in_flight inputs iterations mode_iterations modes only performance profile seed
                throughput_executes top_ops warmup)

    assert doc["executes"] == %{"total" => 34, "counted" => 34}

    table = Bench.format(result, :table)

    for title <- [
          "hexagon_tpu.bench: graph \"add\"",
          "load and first execute",
          "latency (us; 7 executes after 2 warm-up)",
          "host and QNN",
          "throughput",
          "performance modes (3 executes each)",
          "profile (detailed",
          "memory",
          "executes: 34 made, 34 counted by the package"
        ],
        do: assert(table =~ title, "no #{inspect(title)} in:\n#{table}")
  end

  test "a loaded model is measured and left open; sections can be skipped", %{lib: lib} do
    graph = Support.load!(add_model(), lib: lib)

    assert {:ok, result} =
             Bench.run(graph, iterations: 3, warmup: 0, only: [:latency], progress: false)

    assert %{load_us: nil, throughput: nil, modes: nil, profile: nil} = result
    assert result.executes == %{total: 4, counted: 4}
    assert result.memory.ledger_bytes_model > 0
    assert {:ok, [_]} = HexagonTpu.Graph.execute(graph, Bench.Inputs.random(graph, 0))
  end

  test "a wrong option names itself; a missing file and wrong inputs are errors",
       %{load: load, path: path} do
    for {opts, named} <- [
          {[iterations: 0], "the :iterations option"},
          {[in_flight: [1, 0]], "the :in_flight option"},
          {[modes: [:fast]], "the :performance option"},
          {[only: [:latency, :nope]], "the :only option"},
          {[profile: :basic], "the :profile option"},
          {[progress: :yes], "the :progress option"},
          {[itterations: 5], "unknown option :itterations"}
        ] do
      error = assert_raise ArgumentError, fn -> Bench.run(path, load ++ opts) end
      assert error.message =~ "HexagonTpu.Bench.run/2: " <> named
    end

    graph = Support.load!(add_model())
    error = assert_raise ArgumentError, fn -> Bench.run(graph, graph: "add") end
    assert error.message =~ "the load options :graph apply to a path"
    assert_raise ArgumentError, ~r/a path or a HexagonTpu.Graph/, fn -> Bench.run(42) end

    missing = Path.join(System.tmp_dir!(), "no_such_model_#{System.unique_integer()}.bin")

    assert {:error, %Error{} = error} = Bench.run(missing, load ++ [progress: false])
    assert error.message =~ missing

    # inputs that do not fit stop the run at its first execute, and the model is closed
    {{:error, %Error{reason: :invalid_input}}, before, after_} =
      Stats.with_leak_check(fn ->
        Bench.run(path, load ++ [inputs: [<<0>>, <<0>>], progress: false])
      end)

    Support.assert_no_leaks(before, after_)
  end

  test "mix hexagon_tpu.bench prints the run's JSON or table", %{lib: lib, path: path} do
    Mix.shell(Mix.Shell.Process)
    on_exit(fn -> Mix.shell(Mix.Shell.IO) end)

    args =
      [path, "--lib", lib, "--system-lib", lib, "--iterations", "4", "--warmup", "1"] ++
        ["--in-flight", "1,2", "--throughput-executes", "3", "--modes", "burst"] ++
        ["--mode-iterations", "2", "--no-progress"]

    Mix.Task.rerun("hexagon_tpu.bench", args ++ ["--format", "json"])
    assert_received {:mix_shell, :info, [json]}
    doc = JSON.decode!(json)
    # 1 + 1 + 4 + 2 x 3 + (1 + 2) + 1
    assert doc["executes"] == %{"total" => 16, "counted" => 16}
    assert doc["settings"]["in_flight"] == [1, 2]

    Mix.Task.rerun("hexagon_tpu.bench", args ++ ["--only", "latency"])
    assert_received {:mix_shell, :info, [table]}
    assert table =~ "latency (us; 4 executes after 1 warm-up)"
    refute table =~ "throughput"

    assert_raise Mix.Error, ~r/--format: "yaml" is not one of table, json/, fn ->
      Mix.Task.rerun("hexagon_tpu.bench", [path, "--format", "yaml"])
    end

    assert_raise Mix.Error, ~r/usage: mix hexagon_tpu.bench MODEL.bin/, fn ->
      Mix.Task.rerun("hexagon_tpu.bench", [])
    end
  end
end
