defmodule HexagonTpu.MonitorTest do
  # Reads VM-global counters and scheduler accounting: runs alone.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  alias HexagonTpu.{Context, Graph, Monitor, Runtime, Stats}
  alias HexagonTpu.Test.{Models, Support}

  @hour 3_600_000

  setup do
    Support.quiesce()
  end

  test "runs under a supervisor and emits [:hexagon_tpu, :monitor, :stats] every interval" do
    Support.attach_events([[:hexagon_tpu, :monitor, :stats]])
    start_supervised!({Monitor, interval_ms: 20, metadata: %{site: "test"}})

    assert_receive {:event, [:hexagon_tpu, :monitor, :stats], measurements, metadata}, 1_000
    assert_receive {:event, [:hexagon_tpu, :monitor, :stats], _, _}, 1_000

    for key <-
          [:runtimes_alive, :contexts_alive, :graphs_alive, :executes, :execute_errors] ++
            [:execute_ns_total, :execute_ns_last, :memory_binary, :memory_total] do
      assert is_integer(measurements[key]), "#{key} missing from #{inspect(measurements)}"
    end

    for key <- [:dirty_cpu, :dirty_io, :scheduler] do
      assert measurements[key] >= 0.0 and measurements[key] <= 1.0
    end

    assert metadata.node == node()
    assert metadata.site == "test"
  end

  test "sample/1 takes a sample on demand: the live counts of now" do
    t = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    path = Models.build!(Models.identity(t, t))
    pid = start_supervised!({Monitor, interval_ms: @hour})
    alive = [:runtimes_alive, :contexts_alive, :graphs_alive]

    before = Monitor.sample(pid)
    assert Map.take(before, alive) == Map.take(Stats.native(), alive)

    runtime = Support.runtime!()
    context = Context.from_file!(runtime, path)
    graph = Graph.retrieve!(context, hd(Context.graphs(context)))

    during = Monitor.sample(pid)
    for key <- alive, do: assert(during[key] == before[key] + 1, "#{key}: #{inspect(during)}")
    assert during.graphs_created == before.graphs_created + 1

    :ok = Graph.close(graph)
    :ok = Context.close(context)
    :ok = Runtime.close(runtime)

    assert Map.take(Monitor.sample(pid), alive) == Map.take(before, alive)
  end

  test "warns on sustained growth of live resources, naming where they were created" do
    # Alive before the growth, from one site with more than the growth's: not named.
    earlier = for _ <- 1..4, do: earlier_runtime()
    pid = start_supervised!({Monitor, interval_ms: @hour, growth_samples: 3})
    %{runtimes_alive: from} = Monitor.sample(pid)
    line = __ENV__.line + 6

    log =
      capture_log(fn ->
        kept =
          for _ <- 1..3 do
            runtime = Support.runtime!()
            Monitor.sample(pid)
            runtime
          end

        Enum.each(kept ++ earlier, &Runtime.close/1)
      end)

    assert log =~ "runtimes_alive grew #{from} → #{from + 3} in 3 consecutive samples"

    # The runtimes are created in a comprehension: its anonymous fn is the creation site, and
    # the only one named (runtimes alive from earlier tests were not created in the growth).
    assert log =~ "top creation sites: anonymous fn/"

    assert log =~
             ~S(in HexagonTpu.MonitorTest."test warns on sustained growth of live resources, ) <>
               ~s(naming where they were created"/1 \(test/monitor_test.exs:#{line}\) ×3)

    refute log =~ "earlier_runtime"
    refute log =~ "shared runtime"
    assert log =~ "leaking"
  end

  # Not a tail call, so that this function is the creation site.
  defp earlier_runtime do
    {:ok, runtime} = Runtime.create(Support.runtime_opts(Support.sim_lib()))
    runtime
  end

  test "no warning when resources come and go" do
    pid = start_supervised!({Monitor, interval_ms: @hour, growth_samples: 2})
    Monitor.sample(pid)

    log =
      capture_log(fn ->
        for _ <- 1..4 do
          runtime = Support.runtime!()
          Monitor.sample(pid)
          Runtime.close(runtime)
          Monitor.sample(pid)
        end
      end)

    refute log =~ "grew"
  end

  test "warns on sustained dirty CPU saturation" do
    pid = start_supervised!({Monitor, interval_ms: @hour, saturation: 0.6, saturation_samples: 2})
    t = Models.t(:float_32, [2])
    runtime = Support.runtime!()

    workers =
      for i <- 1..:erlang.system_info(:dirty_cpu_schedulers_online) do
        graph =
          Support.load!(Models.identity(t, t, sleep_ms: 20, name: "busy#{i}"), runtime: runtime)

        spawn(fn -> Support.busy_loop(graph) end)
      end

    log =
      capture_log(fn ->
        Monitor.sample(pid)
        Process.sleep(300)
        Monitor.sample(pid)
        Process.sleep(300)
        Monitor.sample(pid)
      end)

    Enum.each(workers, &Process.exit(&1, :kill))
    assert log =~ "dirty CPU schedulers"
    assert log =~ "consecutive samples"
  end

  test "rejects bad options" do
    assert_raise ArgumentError, fn -> Monitor.start_link(interval_ms: 0) end
    assert_raise ArgumentError, fn -> Monitor.start_link(saturation: 2.0) end
    assert_raise ArgumentError, fn -> Monitor.start_link(bogus: 1) end
  end
end
