defmodule HexagonTpu.StatsTest do
  # The leak guard and the counters. Counters are VM-global, so this module runs alone.
  use ExUnit.Case, async: false

  import HexagonTpu.Test.Numerics, only: [f32: 1]

  alias HexagonTpu.{Context, Graph, Runtime, Stats}
  alias HexagonTpu.Test.{Models, Support}

  @zero %{runtimes_alive: 0, contexts_alive: 0, graphs_alive: 0}

  setup_all do
    t = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    %{path: Models.build!(Models.identity(t, t))}
  end

  # A private copy of qnn_sim: its live-handle count belongs to this test alone.
  @moduletag :tmp_dir
  setup %{tmp_dir: dir} do
    Support.quiesce()
    %{lib: Support.private_sim_lib!(dir)}
  end

  test "native/0 has every counter the docs name, and no other" do
    counters = Stats.native()
    names = counters |> Map.keys() |> Enum.sort()

    for key <- names, do: assert(is_integer(counters[key]) and counters[key] >= 0)

    # The NIF's names (qnn's Counters::fields) are the ones native/0's docs describe, whole:
    # each documented name opens a bullet or a `name - ` / `name / ` pair in the list.
    assert names == Enum.sort(Stats.counter_names())
    {:docs_v1, _, _, _, _, _, docs} = Code.fetch_docs(Stats)
    [doc] = for {{:function, :native, 0}, _, _, %{"en" => doc}, _} <- docs, do: doc
    assert doc =~ "* `runtimes_alive` / `contexts_alive` / `graphs_alive` - QNN objects"
    assert length(Stats.counter_names()) == length(Enum.uniq(Stats.counter_names()))
  end

  test "alive counts return to baseline across create/close cycles", %{lib: lib, path: path} do
    {_, before, after_} =
      Stats.with_leak_check(fn ->
        for _ <- 1..25 do
          {runtime, context, graph} = executed_identity!(lib, path)

          during = Stats.native()
          assert during.graphs_alive >= 1 and during.contexts_alive >= 1

          :ok = Graph.close(graph)
          :ok = Context.close(context)
          :ok = Runtime.close(runtime)
        end

        :done
      end)

    assert Stats.alive_diff(before, after_) == @zero
    assert after_.runtimes_created - before.runtimes_created == 25
    assert after_.contexts_created - before.contexts_created == 25
    assert after_.graphs_created - before.graphs_created == 25
    assert Support.live_handles(lib) == 0
  end

  test "closing in the wrong order frees everything when the last child goes",
       %{lib: lib, path: path} do
    {_, before, after_} =
      Stats.with_leak_check(fn ->
        runtime = Support.runtime!(lib)
        context = Context.from_file!(runtime, path)
        graph = Graph.retrieve!(context, "identity")
        during = Stats.native()

        # parent first: it stays alive for its children, which keep working
        :ok = Runtime.close(runtime)
        assert Stats.native().runtimes_alive == during.runtimes_alive
        assert {:ok, [_]} = Graph.execute(graph, [f32([0.1, 0.2, 0.3, 0.4])])
        :ok = Context.close(context)
        :ok = Graph.close(graph)
        :done
      end)

    assert Stats.alive_diff(before, after_) == @zero
    assert Support.live_handles(lib) == 0
  end

  test "alive counts return to baseline across GC-only cycles", %{lib: lib, path: path} do
    baseline = Stats.native()

    {_, before, after_} =
      Stats.with_leak_check(fn ->
        # nothing is closed: dropping the references is all (Enum.each keeps none of them)
        Enum.each(1..25, fn _ -> executed_identity!(lib, path) end)

        :done
      end)

    assert Stats.alive_diff(before, after_) == @zero
    assert Stats.alive_diff(baseline, after_) == @zero
    assert Support.live_handles(lib) == 0
  end

  test "resources held by another process are freed when that process goes",
       %{lib: lib, path: path} do
    before = Stats.native()
    parent = self()

    pid =
      spawn(fn ->
        runtime = Support.runtime!(lib)
        context = Context.from_file!(runtime, path)
        graph = Graph.retrieve!(context, "identity")
        send(parent, {:loaded, Stats.native()})

        receive do
          :stop -> graph
        end
      end)

    assert_receive {:loaded, during}, 5_000

    assert Stats.alive_diff(before, during) == %{
             runtimes_alive: 1,
             contexts_alive: 1,
             graphs_alive: 1
           }

    assert Support.live_handles(lib) > 0

    ref = Process.monitor(pid)
    send(pid, :stop)
    assert_receive {:DOWN, ^ref, :process, ^pid, _}

    assert Support.wait_until(fn -> Stats.alive_diff(before, Stats.native()) == @zero end,
             sweep: true
           )

    assert Support.live_handles(lib) == 0
  end

  test "with_leak_check/1 reports a leak", %{lib: lib} do
    {runtime, before, after_} = Stats.with_leak_check(fn -> Support.runtime!(lib) end)

    assert Stats.alive_diff(before, after_) == %{
             runtimes_alive: 1,
             contexts_alive: 0,
             graphs_alive: 0
           }

    :ok = Runtime.close(runtime)
    assert Support.live_handles(lib) == 0
  end

  test "counters stay consistent across bad input and failures", %{lib: lib, path: path} do
    t = Models.t(:float_32, [2])
    bad_create = Models.build!(Models.identity(t, t, fail_context_create: {5002, :always}))

    {_, before, after_} =
      Stats.with_leak_check(fn ->
        runtime = Support.runtime!(lib)
        {:error, _} = Runtime.create(lib_path: "/nonexistent.so", system_lib_path: lib)
        {:error, _} = Context.from_file(runtime, "/nonexistent.bin")
        {:error, _} = Context.from_binary(runtime, "garbage")
        {:error, _} = Context.from_file(runtime, bad_create)
        context = Context.from_file!(runtime, path)
        {:error, _} = Graph.retrieve(context, "nope")
        graph = Graph.retrieve!(context, "identity")
        {:error, _} = Graph.execute(graph, [<<1, 2>>])
        {:error, _} = Graph.execute(graph, [:atom])

        failing_graph =
          Support.load!(Models.identity(t, t, fail_execute: {1003, :always}), runtime: runtime)

        {:error, _} = Graph.execute(failing_graph, [f32([1, 2])])
        :ok = Context.close(context)
        {:error, _} = Graph.execute(graph, [f32([0.1, 0.2, 0.3, 0.4])])
        :done
      end)

    assert Stats.alive_diff(before, after_) == @zero
    assert Support.live_handles(lib) == 0
    # rejected inputs never reach QNN; the injected failure does
    assert after_.executes - before.executes == 1
    assert after_.execute_errors - before.execute_errors == 1
  end

  test "executes, execute_errors and execute_ns move as they should", %{lib: lib} do
    t = Models.t(:float_32, [2])
    runtime = Support.runtime!(lib)
    graph = Support.load!(Models.identity(t, t, sleep_ms: 2), runtime: runtime)

    failing =
      Support.load!(Models.identity(t, t, fail_execute: {1003, {:after, 2}}), runtime: runtime)

    before = Stats.native()
    for _ <- 1..3, do: {:ok, _} = Graph.execute(graph, [f32([1, 2])])
    middle = Stats.native()
    assert middle.executes - before.executes == 3
    assert middle.execute_errors == before.execute_errors
    assert middle.execute_ns_last >= 2_000_000
    assert middle.execute_ns_total - before.execute_ns_total >= 6_000_000

    assert {:ok, _} = Graph.execute(failing, [f32([1, 2])])
    assert {:ok, _} = Graph.execute(failing, [f32([1, 2])])
    assert {:error, %{reason: :qnn_error, qnn_code: 1003}} = Graph.execute(failing, [f32([1, 2])])
    after_ = Stats.native()
    assert after_.executes - middle.executes == 3
    assert after_.execute_errors - middle.execute_errors == 1
  end

  test "memory/0" do
    memory = Stats.memory()
    assert memory.binary > 0 and memory.total >= memory.binary and memory.processes > 0
  end

  test "dirty_utilization/1 returns shares in 0.0..1.0 that rise while executes run", %{lib: lib} do
    idle = Stats.dirty_utilization(200)

    for key <- [:dirty_cpu, :dirty_io, :scheduler] do
      assert is_float(idle[key]) and idle[key] >= 0.0 and idle[key] <= 1.0
    end

    t = Models.t(:float_32, [2])
    runtime = Support.runtime!(lib)
    dirty_cpus = :erlang.system_info(:dirty_cpu_schedulers_online)

    graphs =
      for i <- 1..dirty_cpus do
        Support.load!(Models.identity(t, t, sleep_ms: 20, name: "busy#{i}"), runtime: runtime)
      end

    workers =
      for graph <- graphs do
        spawn(fn -> Support.busy_loop(graph) end)
      end

    busy = Stats.dirty_utilization(400)
    Enum.each(workers, &Process.exit(&1, :kill))

    assert busy.dirty_cpu > 0.7, "busy: #{inspect(busy)}"
    assert busy.dirty_cpu > idle.dirty_cpu
    assert busy.dirty_cpu <= 1.0
  end

  describe "the ledger of live objects" do
    test "a leaked context is listed with its creation site until closed or collected",
         %{lib: lib, path: path} do
      runtime = Support.runtime!(lib)
      line = __ENV__.line + 1
      context = Context.from_file!(runtime, path)

      site =
        "HexagonTpu.StatsTest.\"test the ledger of live objects a leaked context " <>
          "is listed with its creation site until closed or collected\"/1 (test/stats_test.exs:#{line})"

      assert [entry] = Enum.filter(Stats.live(), &(&1.kind == :context and &1.site == site))

      assert entry.detail == "#{path} (graphs: identity)"
      assert is_integer(entry.age_ms) and entry.age_ms >= 0
      assert Enum.any?(Stats.live(), &(&1.kind == :runtime and &1.detail == lib))
      assert_ledger_agrees_with_counters()

      :ok = Context.close(context)
      refute Enum.any?(Stats.live(), &(&1.site == site))

      # Dropped without close: listed until the garbage collector frees it.
      parent = self()

      pid =
        spawn(fn ->
          context = Context.from_file!(runtime, path)
          send(parent, {:loaded, __ENV__.line - 1})

          receive do
            :stop -> context
          end
        end)

      assert_receive {:loaded, line}, 5_000
      # The spawned fn is the site (its arity as the VM reports it counts captured variables).
      in_fun = "anonymous fn/"
      at = "(test/stats_test.exs:#{line})"

      by_gc? =
        &(String.starts_with?(&1.site, in_fun) and &1.site =~ "in HexagonTpu.StatsTest." and
            String.ends_with?(&1.site, at))

      assert [%{kind: :context}] = Enum.filter(Stats.live(), by_gc?)
      send(pid, :stop)
      assert Support.wait_until(fn -> not Enum.any?(Stats.live(), by_gc?) end, sweep: true)
      assert_ledger_agrees_with_counters()

      :ok = Runtime.close(runtime)

      assert Support.wait_until(fn -> not Enum.any?(Stats.live(), &(&1.detail == lib)) end,
               sweep: true
             )

      assert Support.live_handles(lib) == 0
    end

    test "live_by_site/0 counts live objects by site and kind, largest first",
         %{lib: lib, path: path} do
      runtime = Support.runtime!(lib)
      line_many = __ENV__.line + 1
      many = for _ <- 1..3, do: Context.from_file!(runtime, path)
      line_one = __ENV__.line + 1
      one = Context.from_file!(runtime, path)
      graph = Graph.retrieve!(one, "identity")

      by_site = Stats.live_by_site()

      at_line = fn line ->
        Enum.filter(by_site, &(elem(&1, 0) =~ "(test/stats_test.exs:#{line})"))
      end

      assert [{_, :context, 3}] = at_line.(line_many)
      assert [{_, :context, 1}] = at_line.(line_one)
      assert [{_, :graph, 1}] = at_line.(line_one + 1)

      counts = Enum.map(by_site, &elem(&1, 2))
      assert counts == Enum.sort(counts, :desc)
      assert Enum.sum(counts) == length(Stats.live())

      Enum.each([graph, one | many], &close/1)
      :ok = Runtime.close(runtime)
    end

    test "leaked/2 names the creation sites of what with_leak_check/1 saw leak",
         %{lib: lib, path: path} do
      {{runtime, context, line}, before, after_} =
        Stats.with_leak_check(fn ->
          runtime = Support.runtime!(lib)
          {runtime, Context.from_file!(runtime, path), __ENV__.line}
        end)

      assert Stats.alive_diff(before, after_) == %{
               runtimes_alive: 1,
               contexts_alive: 1,
               graphs_alive: 0
             }

      leaked = Stats.leaked(before, after_)
      assert [{_, :context, 1}, {_, :runtime, 1}] = Enum.sort_by(leaked, &elem(&1, 1))
      at = &String.ends_with?(elem(&1, 0), "(test/stats_test.exs:#{&2})")
      assert Enum.any?(leaked, &(elem(&1, 1) == :context and at.(&1, line)))
      assert Enum.any?(leaked, &(elem(&1, 1) == :runtime and at.(&1, line - 1)))

      :ok = Context.close(context)
      :ok = Runtime.close(runtime)

      {_, before, after_} =
        Stats.with_leak_check(fn ->
          runtime = Support.runtime!(lib)
          Runtime.close(runtime)
        end)

      assert Stats.leaked(before, after_) == []
      assert Support.live_handles(lib) == 0
    end
  end

  describe "the ledger's bytes" do
    test "a context holds its binary's bytes and the spill-fill QnnSystem reports; live_report/1 adds them up by site and file",
         %{lib: lib, path: path} do
      t = Models.t(:float_32, [4])
      # qnn_sim reports a spill-fill buffer in the graph blob info of each graph; QNN allocates
      # one for the context, the largest.
      spilled = Models.two_graphs(t) |> Map.put(:stamp, %{spill_fill: 123_456}) |> Models.build!()

      plain_size = File.stat!(path).size
      spilled_size = File.stat!(spilled).size
      runtime = Support.runtime!(lib)
      line = __ENV__.line + 1
      plain = for _ <- 1..2, do: Context.from_file!(runtime, path)
      from_memory = Context.from_binary!(runtime, File.read!(spilled))
      graph = Graph.retrieve!(from_memory, "first")

      here = &(&1.site =~ "(test/stats_test.exs:")
      mine = Enum.filter(Stats.live(), here)

      at = fn l ->
        Enum.filter(mine, &String.ends_with?(&1.site, "(test/stats_test.exs:#{l})"))
      end

      assert [%{held: [binary: ^plain_size], bytes: ^plain_size}, _] = at.(line)
      spilled_bytes = spilled_size + 123_456

      # Loaded from memory, it keeps its binary to be created again after a device reset.
      assert [
               %{
                 kind: :context,
                 held: [binary: ^spilled_size, spill_fill: 123_456, source: ^spilled_size]
               } = c
             ] = at.(line + 1)

      spilled_bytes = spilled_bytes + spilled_size
      assert c.bytes == spilled_bytes
      assert [%{kind: :graph, held: [], bytes: 0}] = at.(line + 2)
      assert [%{kind: :runtime, held: [], bytes: 0}] = at.(line - 2)

      # The report of these objects alone: exact figures, largest site first, the rest folded.
      report = Stats.Ledger.format_report(mine, 2)
      lines = String.split(report, "\n")
      total = 2 * plain_size + spilled_bytes
      k = &(&1 |> Integer.to_string() |> String.replace(~r/(\d)(?=(\d{3})+$)/, "\\1,"))

      assert hd(lines) ==
               "hexagon_tpu: 1 runtime, 3 contexts, 1 graph alive; #{k.(total)} bytes held"

      assert Enum.at(lines, 1) == "by creation site, largest first:"
      # the two plain contexts (about 2 × 1.3 KB) against one binary with 123,456 bytes of
      # spill-fill: the latter is larger
      assert spilled_bytes > 2 * plain_size
      assert Enum.at(lines, 2) =~ ~r/^ +#{k.(spilled_bytes)} bytes  1 context  /

      assert Enum.at(lines, 2) =~
               "[binary #{k.(spilled_size)}, spill_fill 123,456, source #{k.(spilled_size)}]"

      assert Enum.at(lines, 3) =~
               ~r/^ +#{k.(2 * plain_size)} bytes  2 contexts  .*:#{line}\)  \[binary #{k.(2 * plain_size)}\]$/

      assert Enum.at(lines, 4) =~ ~r/^ +0 bytes  1 runtime, 1 graph in 2 more sites$/
      assert Enum.at(lines, 5) == "by file:"

      assert Enum.at(lines, 6) =~
               ~r/^ +#{k.(total)} bytes  test\/stats_test.exs \(5 objects\)$/

      assert length(lines) == 7

      # Closed, a context's bytes leave the ledger.
      close(graph)
      :ok = Context.close(from_memory)
      refute Enum.any?(Stats.live(), &(&1.held[:spill_fill] == 123_456 and here.(&1)))
      Enum.each(plain, &close/1)
      :ok = Runtime.close(runtime)
      assert Support.wait_until(fn -> not Enum.any?(Stats.live(), here) end, sweep: true)
    end

    test "live_report/1 folds the sites beyond top: and checks its options" do
      assert Stats.live_report(top: 0) =~ ~r/^hexagon_tpu: /

      assert_raise ArgumentError, ~r/:top option/, fn -> Stats.live_report(top: -1) end
      assert_raise ArgumentError, ~r/unknown option/, fn -> Stats.live_report(tops: 1) end

      assert Stats.Ledger.site_file("MyApp.Vision.init/1 (lib/my_app/vision.ex:42)") ==
               "lib/my_app/vision.ex"

      assert Stats.Ledger.site_file("MyApp.Vision.init/1 (lib/my_app/vision.ex)") ==
               "lib/my_app/vision.ex"

      assert Stats.Ledger.site_file("qnn/src/exec/context.rs:12") == "qnn/src/exec/context.rs"
      assert Stats.Ledger.site_file("somewhere") == "somewhere"
    end

    test "format_report/2 prints the example of live_report/1's docs" do
      e = fn id, kind, site, held ->
        bytes = held |> Keyword.values() |> Enum.sum()
        %{id: id, kind: kind, site: site, age_ms: 1, detail: "", held: held, bytes: bytes}
      end

      vision = "MyApp.Vision.init/1 (lib/my_app/vision.ex:42)"
      extra = "MyApp.Vision.extra/0 (lib/my_app/vision.ex:60)"

      entries = [
        e.(1, :runtime, "MyApp.Application.start/2 (lib/my_app/application.ex:12)", []),
        e.(2, :context, vision, binary: 3_702_784, spill_fill: 524_288),
        e.(3, :graph, vision, []),
        e.(4, :context, "MyApp.Faces.init/1 (lib/my_app/faces.ex:17)", binary: 4_194_304),
        e.(5, :context, extra, binary: 53_248),
        e.(6, :graph, extra, []),
        e.(7, :graph, extra, [])
      ]

      {:docs_v1, _, _, _, _, _, docs} = Code.fetch_docs(Stats)

      [doc] = for {{:function, :live_report, 1}, _, _, %{"en" => doc}, _} <- docs, do: doc

      [_, example] = Regex.run(~r/iex> IO.puts\(.*\)\n((?:    .*\n)+)/, doc)

      expected =
        example
        |> String.split("\n", trim: true)
        |> Enum.map_join("\n", &String.slice(&1, 4..-1//1))

      assert Stats.Ledger.format_report(entries, 2) == expected
      assert Stats.Ledger.format_report([], 2) == "hexagon_tpu: no objects alive; 0 bytes held"
    end
  end

  describe "load_model/2's shared runtime" do
    test "is not a leak for with_leak_check/1, and the ledger says what it is",
         %{lib: lib, path: path} do
      opts = Support.runtime_opts(lib)

      # The first load_model/2 with these options opens the runtime it keeps for reuse.
      {line, before, after_} =
        Stats.with_leak_check(fn ->
          {:ok, model} = HexagonTpu.load_model(path, opts)
          line = __ENV__.line - 1
          {:ok, [_]} = HexagonTpu.predict(model, [f32([0.1, 0.2, 0.3, 0.4])])
          :ok = Context.close(model.context)
          line
        end)

      assert after_.runtimes_alive - before.runtimes_alive == 1
      assert after_.shared_runtimes - before.shared_runtimes == 1
      assert Stats.alive_diff(before, after_) == @zero
      assert Stats.leaked(before, after_) == []

      assert [%{site: site}] = Enum.filter(Stats.live(), &(&1.detail == lib))

      shared = ~r/^HexagonTpu\.load_model\/2 shared runtime, opened for (anonymous fn\/\d+ in )?/
      assert site =~ shared and site =~ "HexagonTpu.StatsTest."

      assert String.ends_with?(site, "(test/stats_test.exs:#{line})"), site
      assert [{^site, :runtime, 1}] = Enum.filter(Stats.live_by_site(), &(elem(&1, 0) == site))

      # A model kept alive is still a leak, named at its own site; the runtime is reused.
      {{model, line}, before, after_} =
        Stats.with_leak_check(fn -> {HexagonTpu.load_model!(path, opts), __ENV__.line} end)

      assert Stats.alive_diff(before, after_) == %{@zero | contexts_alive: 1, graphs_alive: 1}
      assert after_.shared_runtimes == before.shared_runtimes
      at = "(test/stats_test.exs:#{line})"

      assert [{context_site, :context, 1}, {graph_site, :graph, 1}] =
               Enum.sort_by(Stats.leaked(before, after_), &elem(&1, 1))

      assert String.ends_with?(context_site, at) and String.ends_with?(graph_site, at)

      # Snapshots from native/0 carry no :shared_runtimes: alive_diff/2 counts every runtime.
      runtime = model.context.runtime
      :ok = Graph.close(model)
      :ok = Context.close(model.context)
      before = Stats.native()
      :ok = Runtime.close(runtime)

      assert Support.wait_until(
               fn ->
                 Stats.alive_diff(before, Stats.native()) == %{@zero | runtimes_alive: -1}
               end,
               sweep: true
             )

      assert Support.live_handles(lib) == 0
    end
  end

  defp close(%Context{} = context), do: :ok = Context.close(context)
  defp close(%Graph{} = graph), do: :ok = Graph.close(graph)

  # A runtime on `lib`, the identity model at `path` in it, and its graph, executed once.
  defp executed_identity!(lib, path) do
    runtime = Support.runtime!(lib)
    context = Context.from_file!(runtime, path)
    graph = Graph.retrieve!(context, "identity")
    {:ok, [_]} = Graph.execute(graph, [f32([0.1, 0.2, 0.3, 0.4])])
    {runtime, context, graph}
  end

  # The ledger and the counters move together (under one lock in the NIF), but Stats.live/0
  # and Stats.native/0 are two calls, and processes of earlier tests may still be releasing
  # resources between them. Compare only a reading where the ledger did not change around
  # the counters.
  defp assert_ledger_agrees_with_counters(tries \\ 100) do
    live = Stats.live()
    native = Stats.native()
    ids = fn entries -> Enum.map(entries, & &1.id) end

    if ids.(Stats.live()) != ids.(live) and tries > 0 do
      Process.sleep(10)
      assert_ledger_agrees_with_counters(tries - 1)
    else
      for {kind, key} <- [
            runtime: :runtimes_alive,
            context: :contexts_alive,
            graph: :graphs_alive
          ] do
        assert Enum.count(live, &(&1.kind == kind)) == native[key], "#{kind}: #{inspect(live)}"
      end
    end
  end
end
