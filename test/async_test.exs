defmodule HexagonTpu.AsyncTest do
  # Asynchronous executes (issue 17, item 1): Graph.execute_async/3 returns at once, its input
  # already converted, and the result comes back through await/2 in the order the executes were
  # started; the next input is quantized while the previous executes; a caller that dies or
  # cancels before its turn costs no execute; close waits for executes already started.
  # Ordering-based: a slow execute (qnn_sim's sleep_ms) holds the graph while the others queue.
  # Not async: the counters are VM-global.
  use ExUnit.Case, async: false

  import HexagonTpu.Test.Numerics, only: [f32: 1, from_f32: 1]

  alias HexagonTpu.{Error, Graph, Pending, Stats}
  alias HexagonTpu.Test.{Models, Support}

  @moduletag :tmp_dir

  # u8 in and out, scale 0.5: f32 inputs are quantized on the host, outputs dequantized.
  @q Models.t(:ufixed_point_8, [4], {:per_tensor, 0.5, 0})

  setup %{tmp_dir: dir} do
    lib = Support.private_sim_lib!(dir)
    runtime = Support.runtime!(lib)
    slow = Models.build!(Models.identity(@q, @q, sleep_ms: 1_000))
    fast = Models.build!(Models.identity(@q, @q))
    %{lib: lib, runtime: runtime, slow: slow, fast: fast}
  end

  defp counters,
    do:
      Map.take(Stats.native(), [
        :executes_waiting,
        :executes_skipped,
        :executes_timed_out,
        :tensors_converted
      ])

  # An execute that holds the graph's turn (1 s in qnn_sim), running once this returns.
  defp hold(graph, lib), do: Support.hold_graph(graph, lib, f32([1, 1, 1, 1]))

  defp waiting(n), do: Support.executes_waiting?(n)

  test "results come back in the order the executes were started", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime)

    pendings =
      for k <- 1..6 do
        assert {:ok, %Pending{} = pending} =
                 Graph.execute_async(graph, [f32([k, k + 1, k + 2, k + 3])], output: :binary)

        pending
      end

    # FIFO: once the last answer is here, the others are in the mailbox, in start order
    last = List.last(pendings)
    assert {:ok, [out]} = Graph.await(last)
    assert from_f32(out) == [6.0, 7.0, 8.0, 9.0]
    {:messages, messages} = Process.info(self(), :messages)
    tags = for {:hexagon_tpu_reply, tag, _} <- messages, do: tag
    assert tags == Enum.map(Enum.drop(pendings, -1), & &1.ref)

    for {pending, k} <- Enum.with_index(Enum.drop(pendings, -1), 1) do
      assert {:ok, [out]} = Graph.await(pending)
      assert from_f32(out) == [k * 1.0, k + 1.0, k + 2.0, k + 3.0]
    end

    assert Support.qnn_sim_counters(ctx.lib).execute_count == 6
    assert Stats.native().executes_waiting == 0
  end

  test "the next input is quantized while the previous one executes", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.slow, runtime: ctx.runtime)
    holder = hold(graph, ctx.lib)
    before = counters()

    # returns while the holder is still inside graphExecute, its input already quantized
    assert {:ok, pending} = Graph.execute_async(graph, [f32([2, 4, 6, 8])], output: :binary)
    assert counters().tensors_converted == before.tensors_converted + 1
    assert Task.yield(holder, 0) == nil
    assert Support.qnn_sim_counters(ctx.lib).execute_count == 1

    assert {:ok, [_]} = Task.await(holder, 30_000)
    assert {:ok, [out]} = Graph.await(pending)
    assert from_f32(out) == [2.0, 4.0, 6.0, 8.0]
    # ...and the two outputs dequantized after their executes
    assert counters().tensors_converted == before.tensors_converted + 3
  end

  test "a caller that dies before its turn costs no execute", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.slow, runtime: ctx.runtime)
    holder = hold(graph, ctx.lib)
    before = counters()

    {pid, monitor} =
      spawn_monitor(fn ->
        {:ok, _pending} = Graph.execute_async(graph, [f32([3, 3, 3, 3])])
      end)

    assert_receive {:DOWN, ^monitor, :process, ^pid, :normal}, 30_000
    assert waiting(before.executes_waiting + 1)
    assert {:ok, _} = Task.await(holder, 30_000)

    skipped? = fn -> counters().executes_skipped == before.executes_skipped + 1 end
    assert Support.wait_until(skipped?)
    assert Support.qnn_sim_counters(ctx.lib).execute_count == 1
    assert counters().executes_waiting == before.executes_waiting
  end

  test "cancel/1 before the turn: skipped, and no answer arrives", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.slow, runtime: ctx.runtime)
    holder = hold(graph, ctx.lib)
    before = counters()

    assert {:ok, pending} = Graph.execute_async(graph, [f32([5, 5, 5, 5])])
    assert Graph.cancel(pending) == :ok
    assert {:ok, _} = Task.await(holder, 30_000)

    skipped? = fn -> counters().executes_skipped == before.executes_skipped + 1 end
    assert Support.wait_until(skipped?)
    assert Support.qnn_sim_counters(ctx.lib).execute_count == 1
    refute_received {:hexagon_tpu_reply, _, _}
  end

  test "cancel/1 after the answer takes it out of the mailbox", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime)
    assert {:ok, first} = Graph.execute_async(graph, [f32([1, 2, 3, 4])])
    assert {:ok, second} = Graph.execute_async(graph, [f32([5, 6, 7, 8])], output: :binary)
    # FIFO: the second answered means the first did too
    assert {:ok, _} = Graph.await(second)
    assert Graph.cancel(first) == :ok
    refute_received {:hexagon_tpu_reply, _, _}
    assert Support.qnn_sim_counters(ctx.lib).execute_count == 2
  end

  test "await/2 with a timeout gives the execute up", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.slow, runtime: ctx.runtime)
    holder = hold(graph, ctx.lib)
    before = counters()

    assert {:ok, pending} = Graph.execute_async(graph, [f32([6, 6, 6, 6])])
    assert {:error, %Error{reason: :timeout}} = Graph.await(pending, 20)
    assert {:ok, _} = Task.await(holder, 30_000)

    skipped? = fn -> counters().executes_skipped == before.executes_skipped + 1 end
    assert Support.wait_until(skipped?)
    assert counters().executes_timed_out == before.executes_timed_out + 1
    refute_received {:hexagon_tpu_reply, _, _}
  end

  test "close waits for the executes started before it; later ones are refused", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.slow, runtime: ctx.runtime)
    assert {:ok, first} = Graph.execute_async(graph, [f32([1, 2, 3, 4])], output: :binary)
    assert Support.await_executes_entered(ctx.lib, 0)
    assert {:ok, second} = Graph.execute_async(graph, [f32([4, 3, 2, 1])], output: :binary)

    assert Graph.close(graph) == :ok
    # close answered after both: their answers are here already
    assert_received {:hexagon_tpu_reply, _, {:ok, _}}
    assert_received {:hexagon_tpu_reply, _, {:ok, _}}

    assert {:error, %Error{reason: :closed}} = Graph.execute_async(graph, [f32([1, 1, 1, 1])])
    assert Support.qnn_sim_counters(ctx.lib).execute_count == 2
    _ = {first, second}
  end

  test "the graph's queue limit counts asynchronous executes", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.slow, runtime: ctx.runtime, max_queued: 1)
    holder = hold(graph, ctx.lib)

    assert {:ok, queued} = Graph.execute_async(graph, [f32([2, 2, 2, 2])], output: :binary)

    assert {:error, %Error{reason: :overloaded}} = Graph.execute_async(graph, [f32([3, 3, 3, 3])])

    assert {:ok, _} = Task.await(holder, 30_000)
    assert {:ok, [out]} = Graph.await(queued)
    assert from_f32(out) == [2.0, 2.0, 2.0, 2.0]
  end

  test "an idle graph takes an asynchronous execute even at max_queued: 0", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime, max_queued: 0)
    assert {:ok, pending} = Graph.execute_async(graph, [f32([1, 2, 3, 4])], output: :binary)
    assert {:ok, [out]} = Graph.await(pending)
    assert from_f32(out) == [1.0, 2.0, 3.0, 4.0]
  end

  test "wrong inputs and arguments", ctx do
    {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime)

    assert {:error, %Error{reason: :invalid_input, message: message}} =
             Graph.execute_async(graph, [<<1, 2, 3>>])

    assert message =~ "expected 16 bytes"

    assert_raise ArgumentError, ~r/:timeout option belongs to await\/2/, fn ->
      Graph.execute_async(graph, [f32([1, 2, 3, 4])], timeout: 10)
    end

    assert_raise ArgumentError, ~r/execute_async\/3: unknown option/, fn ->
      Graph.execute_async(graph, [f32([1, 2, 3, 4])], bogus: 1)
    end

    assert_raise ArgumentError, ~r/await\/2.*HexagonTpu.Pending/, fn -> Graph.await(:nope) end

    {:ok, pending} = Graph.execute_async(graph, [f32([1, 2, 3, 4])])

    other = Task.async(fn -> catch_error(Graph.await(pending)) end)
    assert %ArgumentError{message: message} = Task.await(other)
    assert message =~ "started by #{inspect(self())}"

    assert_raise ArgumentError, ~r/:timeout option/, fn -> Graph.await(pending, -1) end
    assert {:ok, [_]} = Graph.await(pending)
  end

  describe "in the backend's own queue (async_queue_depth:)" do
    # qnn_sim implements QnnGraph_executeAsync: one FIFO queue and worker per context, the
    # notification on that worker; its async_paused knob holds the worker, so nothing here
    # depends on how long anything takes.

    defp sim(ctx), do: Support.qnn_sim_counters(ctx.lib)

    defp in_backend(ctx, n),
      do: Support.wait_until(fn -> sim(ctx).async_in_flight == n end)

    defp paused(ctx, on?),
      do: :ok = HexagonTpu.Native.qnn_sim_configure(ctx.lib, "async_paused", to_string(on?))

    test "every execute runs there, in start order, answered from its notification", ctx do
      {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime, async_queue_depth: 4)
      assert graph.context.execute_queue == {:backend, 4}
      before = sim(ctx)

      pendings =
        for k <- 1..6 do
          {:ok, pending} = Graph.execute_async(graph, [f32([k, k, k, k])], output: :binary)
          pending
        end

      assert {:ok, [out]} = Graph.await(List.last(pendings))
      assert from_f32(out) == [6.0, 6.0, 6.0, 6.0]
      {:messages, messages} = Process.info(self(), :messages)
      tags = for {:hexagon_tpu_reply, tag, _} <- messages, do: tag
      assert tags == Enum.map(Enum.drop(pendings, -1), & &1.ref)

      for {pending, k} <- Enum.with_index(Enum.drop(pendings, -1), 1) do
        assert {:ok, [out]} = Graph.await(pending)
        assert from_f32(out) == [k * 1.0, k * 1.0, k * 1.0, k * 1.0]
      end

      # a synchronous execute goes the same way; inputs in the model's type are copied
      assert {:ok, [out]} = HexagonTpu.predict(graph, [f32([9, 8, 7, 6])], output: :binary)
      assert from_f32(out) == [9.0, 8.0, 7.0, 6.0]
      u8 = <<1, 2, 3, 4>>

      assert {:ok, [^u8]} =
               Graph.execute(graph, [u8], quantize: :none, dequantize: :none, output: :binary)

      assert sim(ctx).async_notifications == before.async_notifications + 8
    end

    test "the caller goes on while the backend holds its executes", ctx do
      {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime, async_queue_depth: 8)
      before = counters()
      paused(ctx, true)

      pendings =
        for k <- 1..3 do
          {:ok, pending} = Graph.execute_async(graph, [f32([k, 0, 0, 0])], output: :binary)
          pending
        end

      # all three quantized and in the backend's queue, none answered
      assert in_backend(ctx, 3)
      assert counters().tensors_converted == before.tensors_converted + 3
      refute_received {:hexagon_tpu_reply, _, _}

      paused(ctx, false)

      for {pending, k} <- Enum.with_index(pendings, 1) do
        assert {:ok, [out]} = Graph.await(pending)
        assert from_f32(out) == [k * 1.0, 0.0, 0.0, 0.0]
      end
    end

    test "a context closed with executes in the backend's queue is freed after them", ctx do
      {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime, async_queue_depth: 4)
      alive = Stats.native().contexts_alive
      paused(ctx, true)
      {:ok, first} = Graph.execute_async(graph, [f32([1, 2, 3, 4])], output: :binary)
      {:ok, second} = Graph.execute_async(graph, [f32([4, 3, 2, 1])], output: :binary)
      assert in_backend(ctx, 2)

      closing = Task.async(fn -> HexagonTpu.Context.close(graph.context) end)
      assert Support.wait_until(fn -> HexagonTpu.Context.closed?(graph.context) end)
      # QNN still holds two executes of it: not freed
      assert Stats.native().contexts_alive == alive

      paused(ctx, false)
      assert {:ok, [a]} = Graph.await(first)
      assert {:ok, [b]} = Graph.await(second)
      assert {from_f32(a), from_f32(b)} == {[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]}
      assert Task.await(closing) == :ok
      assert Support.wait_until(fn -> Stats.native().contexts_alive == alive - 1 end)
      {:ok, late} = Graph.execute_async(graph, [f32([1, 1, 1, 1])])
      assert {:error, %Error{reason: :closed}} = Graph.await(late)
    end

    test "a caller that dies while its execute is in the backend's queue: dropped, no leak",
         ctx do
      base = sim(ctx)
      {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime, async_queue_depth: 4)
      before = sim(ctx)
      paused(ctx, true)

      {pid, monitor} =
        spawn_monitor(fn ->
          {:ok, _} = Graph.execute_async(graph, [f32([3, 3, 3, 3])])

          receive do
            :exit -> :ok
          end
        end)

      # handed to the backend while its caller lived; then the caller goes
      assert in_backend(ctx, 1)
      send(pid, :exit)
      assert_receive {:DOWN, ^monitor, :process, ^pid, :normal}, 30_000
      paused(ctx, false)

      notified? = fn -> sim(ctx).async_notifications == before.async_notifications + 1 end
      assert Support.wait_until(notified?)
      :ok = HexagonTpu.Context.close(graph.context)
      assert Support.wait_until(fn -> sim(ctx).async_in_flight == 0 end)
      assert Support.wait_until(fn -> sim(ctx).live_handles == base.live_handles end)
    end

    test "without the backend's support the graphs' threads run them", ctx do
      :ok = HexagonTpu.Native.qnn_sim_configure(ctx.lib, "null_entries", "graphExecuteAsync")
      runtime = Support.runtime!(ctx.lib)
      before = sim(ctx)
      {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: runtime, async_queue_depth: 4)
      assert graph.context.execute_queue == :worker
      {:ok, pending} = Graph.execute_async(graph, [f32([1, 2, 3, 4])], output: :binary)
      assert {:ok, [out]} = Graph.await(pending)
      assert from_f32(out) == [1.0, 2.0, 3.0, 4.0]
      assert sim(ctx).async_notifications == before.async_notifications
    end

    test "wrong depths and profiles", ctx do
      for depth <- [0, 301, -1, 2.0, :deep] do
        assert_raise ArgumentError, ~r/:async_queue_depth option/, fn ->
          HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime, async_queue_depth: depth)
        end
      end

      {:ok, graph} = HexagonTpu.load_model(ctx.fast, runtime: ctx.runtime, async_queue_depth: 2)

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               Graph.execute(graph, [f32([1, 2, 3, 4])], profile: :basic)

      assert message =~ "async_queue_depth"
    end
  end

  test "a pending execute is awaited or cancelled once: a second await or cancel raises at once",
       ctx do
    graph = Graph.retrieve!(HexagonTpu.Context.from_file!(ctx.runtime, ctx.fast), "identity")
    second = ~r/already taken or given up/

    start = fn ->
      {:ok, pending} = Graph.execute_async(graph, [f32([1, 2, 3, 4])])
      pending
    end

    # after its result was taken
    pending = start.()
    assert {:ok, [_]} = Graph.await(pending)
    assert_raise ArgumentError, second, fn -> Graph.await(pending) end
    assert_raise ArgumentError, second, fn -> Graph.cancel(pending) end

    # after a cancel
    pending = start.()
    assert :ok = Graph.cancel(pending)
    assert_raise ArgumentError, second, fn -> Graph.cancel(pending) end
    assert_raise ArgumentError, second, fn -> Graph.await(pending, 10) end

    # after an await that timed out (the graph held by a slow execute)
    slow = Graph.retrieve!(HexagonTpu.Context.from_file!(ctx.runtime, ctx.slow), "identity")
    held = hold(slow, ctx.lib)
    {:ok, pending} = Graph.execute_async(slow, [f32([1, 2, 3, 4])])
    assert {:error, %Error{reason: :timeout}} = Graph.await(pending, 0)
    assert_raise ArgumentError, second, fn -> Graph.await(pending) end
    assert {:ok, _} = Task.await(held, 5_000)
    refute_received {:hexagon_tpu_reply, _, _}
  end
end
