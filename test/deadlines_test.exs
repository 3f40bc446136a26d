defmodule HexagonTpu.DeadlinesTest do
  # Bounded queues and deadlines (issue 17, item 2): max_queued refuses with :overloaded,
  # timeout: answers :timeout and the late answer never arrives, an execute whose caller gave up
  # or died before its turn is skipped; each counted in Stats.native/0. Ordering-based: a slow
  # execute (qnn_sim's sleep_ms) holds the graph while the others queue behind it.
  # Not async: the counters are VM-global.
  use ExUnit.Case, async: false

  import HexagonTpu.Test.Numerics, only: [f32: 1, from_f32: 1]

  alias HexagonTpu.{Error, Graph, Stats}
  alias HexagonTpu.Test.{Models, Support}

  @moduletag :tmp_dir

  setup %{tmp_dir: dir} do
    lib = Support.private_sim_lib!(dir)
    t = Models.t(:float_32, [4])
    runtime = Support.runtime!(lib)
    path = Models.build!(Models.identity(t, t, sleep_ms: 1_000))
    %{lib: lib, runtime: runtime, path: path}
  end

  defp counters,
    do:
      Map.take(Stats.native(), [
        :executes_waiting,
        :executes_overloaded,
        :executes_timed_out,
        :executes_skipped
      ])

  # An execute that holds the graph's turn (1 s in qnn_sim), running once this returns.
  defp hold(graph, lib), do: Support.hold_graph(graph, lib, f32([1, 1, 1, 1]))

  defp waiting(n), do: Support.executes_waiting?(n)

  test "beyond max_queued waiting executes: :overloaded at once, nothing queued", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.path, runtime: ctx.runtime, max_queued: 1)
    assert graph.max_queued == 1
    before = counters()
    holder = hold(graph, ctx.lib)

    queued = Task.async(fn -> Graph.execute(graph, [f32([2, 2, 2, 2])], output: :binary) end)
    assert waiting(before.executes_waiting + 1)

    assert {:error, %Error{reason: :overloaded, message: message}} =
             Graph.execute(graph, [f32([3, 3, 3, 3])], output: :binary)

    assert message =~ ~s[graph "identity" has 1 executes waiting, its limit (max_queued: 1)]

    assert {:ok, [_]} = Task.await(holder, 30_000)
    assert {:ok, [out]} = Task.await(queued, 30_000)
    assert from_f32(out) == [2.0, 2.0, 2.0, 2.0]

    after_ = counters()
    assert after_.executes_overloaded == before.executes_overloaded + 1
    assert after_.executes_waiting == before.executes_waiting
    # the refused execute never reached QNN: the holder's and the queued one's only
    assert Support.qnn_sim_counters(ctx.lib).execute_count == 2
  end

  test "max_queued: 0 refuses any execute that would wait", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.path, runtime: ctx.runtime, max_queued: 0)
    holder = hold(graph, ctx.lib)

    assert {:error, %Error{reason: :overloaded}} =
             Graph.execute(graph, [f32([3, 3, 3, 3])], output: :binary)

    assert {:ok, _} = Task.await(holder, 30_000)
  end

  test "timeout: :timeout while waiting; the execute is skipped, its answer never arrives",
       ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.path, runtime: ctx.runtime)
    before = counters()
    holder = hold(graph, ctx.lib)

    # the holder takes 1 s; this one gives up after 20 ms, while it still waits for its turn
    assert {:error, %Error{reason: :timeout, message: message}} =
             HexagonTpu.predict(graph, [f32([4, 4, 4, 4])], output: :binary, timeout: 20)

    assert message =~ "20 ms"
    assert {:ok, _} = Task.await(holder, 30_000)

    # the graph is idle again: the given-up execute was skipped at its turn, never run
    skipped? = fn -> counters().executes_skipped == before.executes_skipped + 1 end
    assert Support.wait_until(skipped?)

    assert Support.qnn_sim_counters(ctx.lib).execute_count == 1
    refute_received {:hexagon_tpu_reply, _, _}

    after_ = counters()
    assert after_.executes_timed_out == before.executes_timed_out + 1
    assert after_.executes_waiting == before.executes_waiting
  end

  test "timeout: an execute that is running when its caller gives up finishes, unseen", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.path, runtime: ctx.runtime)
    before = counters()

    # idle graph, but with a deadline the execute runs on the graph's thread: the caller leaves
    # after 20 ms of the 1 s execute
    assert {:error, %Error{reason: :timeout}} =
             Graph.execute(graph, [f32([5, 5, 5, 5])], output: :binary, timeout: 20)

    assert Support.await_executes_entered(ctx.lib, 0)
    # the next execute queues behind it, so once it answers the first has finished
    assert {:ok, [out]} = Graph.execute(graph, [f32([6, 6, 6, 6])], output: :binary)
    assert from_f32(out) == [6.0, 6.0, 6.0, 6.0]
    refute_received {:hexagon_tpu_reply, _, _}

    after_ = counters()
    assert after_.executes_timed_out == before.executes_timed_out + 1
    assert after_.executes_skipped == before.executes_skipped
    assert Support.qnn_sim_counters(ctx.lib).execute_count == 2
  end

  test "timeout: an answer in time is the answer, with or without a deadline", ctx do
    t = Models.t(:float_32, [4])
    graph = Support.load!(Models.identity(t, t), runtime: ctx.runtime)

    for timeout <- [60_000, :infinity] do
      assert {:ok, [out]} =
               Graph.execute(graph, [f32([7, 8, 9, 10])], output: :binary, timeout: timeout)

      assert from_f32(out) == [7.0, 8.0, 9.0, 10.0]
    end

    assert Stats.native().executes_waiting == 0
  end
end
