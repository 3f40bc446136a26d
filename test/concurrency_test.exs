defmodule HexagonTpu.ConcurrencyTest do
  # Runs alone (async: false): the overlap test needs two dirty CPU schedulers free at once,
  # and there are only as many as cores (2 on CI machines).
  use ExUnit.Case, async: false

  import HexagonTpu.Test.Numerics

  alias HexagonTpu.{Context, Error, Graph}
  alias HexagonTpu.Test.{Models, Support}

  @sleep_ms 300

  test "many processes predicting on one model all get their own, correct results" do
    a = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    b = Models.t(:float_32, [1, 4])
    out = Models.t(:float_32, [1, 4])
    graph = Support.load!(Models.add(a, b, out))

    results =
      1..40
      |> Task.async_stream(
        fn i ->
          for j <- 1..10 do
            xs = [i * 0.1, -i * 0.05, j * 0.2, 1.0]
            ys = [j * 1.0, i * 1.0, -1.0, 0.5]
            {:ok, [sum]} = Graph.execute(graph, [f32(xs), f32(ys)], output: :binary)
            expected = Enum.zip_with(xs, ys, &(fake_quant(&1, 0.05, 128, {:u, 8}) + &2))
            {from_f32(sum), expected}
          end
        end,
        max_concurrency: 40,
        timeout: 60_000
      )
      |> Enum.flat_map(fn {:ok, pairs} -> pairs end)

    assert length(results) == 400
    for {actual, expected} <- results, do: assert_close(actual, expected, 1.0e-5)
  end

  # Each test below runs on its own copy of qnn_sim, so the backend's counters
  # (executes entered, peak concurrency, overlaps on one graph) are the test's alone. No test
  # asserts an upper bound on time: only orderings the runtime must guarantee.
  setup do
    dir =
      Path.join(
        System.tmp_dir!(),
        "hexagon_tpu_concurrency_#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{lib: Support.private_sim_lib!(dir)}
  end

  test "predictions on different models overlap in time", %{lib: lib} do
    t = Models.t(:float_32, [4])
    runtime = Support.runtime!(lib)
    first = Support.load!(Models.identity(t, t, sleep_ms: 1_000), runtime: runtime)

    second =
      Support.load!(Models.identity(t, t, sleep_ms: 1_000, name: "other"), runtime: runtime)

    # The second starts once the first is inside the backend, which then sleeps 1 s; a
    # runtime that serialized different graphs would keep the peak at 1.
    task = Task.async(fn -> Graph.execute(first, [f32([1, 2, 3, 4])]) end)
    assert Support.await_executes_entered(lib, 0)
    assert {:ok, _} = Graph.execute(second, [f32([1, 2, 3, 4])])
    assert {:ok, _} = Task.await(task, 30_000)

    assert %{peak_concurrent_executes: 2, execute_overlaps: 0} = Support.qnn_sim_counters(lib)
  end

  test "executes on one graph run one at a time", %{lib: lib} do
    t = Models.t(:float_32, [4])
    graph = Support.load!(Models.identity(t, t, sleep_ms: 20), lib: lib)

    1..8
    |> Enum.map(fn _ -> Task.async(fn -> Graph.execute(graph, [f32([1, 2, 3, 4])]) end) end)
    |> Task.await_many(30_000)
    |> Enum.each(&assert {:ok, _} = &1)

    # The backend rejects (and counts) a second execute entering a graph that is running one.
    assert %{execute_count: 8, execute_overlaps: 0, peak_concurrent_executes: 1} =
             Support.qnn_sim_counters(lib)
  end

  test "closing a context while another process executes on it waits, then reports :closed",
       %{lib: lib} do
    t = Models.t(:float_32, [4])
    graph = Support.load!(Models.identity(t, t, sleep_ms: @sleep_ms), lib: lib)

    started = System.monotonic_time(:millisecond)
    task = Task.async(fn -> Graph.execute(graph, [f32([1, 2, 3, 4])], output: :binary) end)
    assert Support.await_executes_entered(lib, 0)

    assert :ok = Context.close(graph.context)
    # the close waited for the running execute (the backend sleeps @sleep_ms inside it)...
    assert System.monotonic_time(:millisecond) - started >= @sleep_ms
    # ...which completed normally
    assert {:ok, [out]} = Task.await(task)
    assert from_f32(out) == [1.0, 2.0, 3.0, 4.0]

    # and everything after it is told the context is closed
    assert {:error, %Error{reason: :closed}} = Graph.execute(graph, [f32([1, 2, 3, 4])])
    assert {:error, %Error{reason: :closed}} = Graph.retrieve(graph.context, graph.name)
  end

  test "closing a graph while another process executes on it waits too", %{lib: lib} do
    t = Models.t(:float_32, [4])
    graph = Support.load!(Models.identity(t, t, sleep_ms: @sleep_ms), lib: lib)

    started = System.monotonic_time(:millisecond)
    task = Task.async(fn -> Graph.execute(graph, [f32([1, 2, 3, 4])]) end)
    assert Support.await_executes_entered(lib, 0)
    assert :ok = Graph.close(graph)
    assert System.monotonic_time(:millisecond) - started >= @sleep_ms
    assert {:ok, _} = Task.await(task)
    assert {:error, %Error{reason: :closed}} = Graph.execute(graph, [f32([1, 2, 3, 4])])
  end

  test "a slow model saturated by many callers does not hold up another model", %{lib: lib} do
    t = Models.t(:float_32, [4])
    runtime = Support.runtime!(lib)
    slow = Support.load!(Models.identity(t, t, sleep_ms: @sleep_ms), runtime: runtime)
    fast = Support.load!(Models.identity(t, t, name: "fast"), runtime: runtime)
    callers = 8

    # One slow execute runs; the other seven find the graph busy and wait in `receive`, not on
    # a dirty scheduler (there are only as many of those as cores: 2 on CI machines).
    tasks =
      for _ <- 1..callers,
          do: Task.async(fn -> Graph.execute(slow, [f32([1, 2, 3, 4])], output: :binary) end)

    assert Support.await_executes_entered(lib, 0)
    assert Support.wait_until(fn -> Enum.count(tasks, &in_receive?(&1.pid)) == callers - 1 end)

    # The fast model answers many times while the slow queue has barely started: with callers
    # parked on dirty schedulers it would wait for most of the 8 x @sleep_ms.
    for i <- 1..20 do
      assert {:ok, [out]} = Graph.execute(fast, [f32([i, 2, 3, 4])], output: :binary)
      assert from_f32(out) == [i * 1.0, 2.0, 3.0, 4.0]
    end

    assert Support.qnn_sim_counters(lib).execute_count < 20 + callers
    slow_done = Support.qnn_sim_counters(lib).execute_count - 20
    assert slow_done < callers

    # Every slow caller gets its own correct answer, in turn, one at a time.
    for {:ok, [out]} <- Task.await_many(tasks, 60_000),
        do: assert(from_f32(out) == [1.0, 2.0, 3.0, 4.0])

    assert %{execute_count: 28, execute_overlaps: 0} = Support.qnn_sim_counters(lib)
  end

  test "a caller that dies while queued: its execute is skipped, the graph goes on",
       %{lib: lib} do
    t = Models.t(:float_32, [4])
    graph = Support.load!(Models.identity(t, t, sleep_ms: 100), lib: lib)
    skipped = HexagonTpu.Stats.native().executes_skipped
    first = Task.async(fn -> Graph.execute(graph, [f32([1, 2, 3, 4])], output: :binary) end)
    assert Support.await_executes_entered(lib, 0)

    {doomed, ref} = spawn_monitor(fn -> Graph.execute(graph, [f32([5, 6, 7, 8])]) end)
    assert waiting_in_receive?(doomed)
    Process.exit(doomed, :kill)
    assert_receive {:DOWN, ^ref, :process, ^doomed, :killed}

    assert {:ok, _} = Task.await(first, 30_000)
    # The dead caller's execute is not run at its turn; the graph moves on.
    assert {:ok, [out]} = Graph.execute(graph, [f32([9, 9, 9, 9])], output: :binary)
    assert from_f32(out) == [9.0, 9.0, 9.0, 9.0]
    assert %{execute_count: 2, execute_overlaps: 0} = Support.qnn_sim_counters(lib)
    assert HexagonTpu.Stats.native().executes_skipped == skipped + 1
  end

  defp waiting_in_receive?(pid), do: Support.wait_until(fn -> in_receive?(pid) end)

  # Waiting for a queued answer in HexagonTpu.Native.call/2 (its receive is in await/3).
  defp in_receive?(pid),
    do:
      Process.info(pid, :current_function) == {:current_function, {HexagonTpu.Native, :await, 3}}
end
