defmodule HexagonTpu.ResilienceTest do
  # The VM survives what a device meets: a panic inside the package, a model file rewritten
  # under a load, a slow execute on a runtime other models share. Each test runs on its own copy
  # of qnn_sim, so the backend's counters are its own. Orderings, never wall-clock bounds.
  use ExUnit.Case, async: false

  import HexagonTpu.Test.Numerics

  alias HexagonTpu.{Context, Error, Graph, Runtime}
  alias HexagonTpu.Test.{Models, Support}

  setup do
    dir =
      Path.join(System.tmp_dir!(), "hexagon_tpu_resilience_#{System.unique_integer([:positive])}")

    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{dir: dir, lib: Support.private_sim_lib!(dir)}
  end

  describe "a panic inside an execute" do
    setup do
      on_exit(fn -> HexagonTpu.Native.qnn_panic_in_next_executes(0) end)
    end

    test "in a queued execute answers its caller with :internal; the queue behind it runs",
         %{lib: lib} do
      t = Models.t(:float_32, [4])
      runtime = Support.runtime!(lib)
      graph = Support.load!(Models.identity(t, t, sleep_ms: 1_000), runtime: runtime)
      input = [f32([1, 2, 3, 4])]

      running = Task.async(fn -> Graph.execute(graph, input, output: :binary) end)
      assert Support.await_executes_entered(lib, 0)
      # The running execute is past the point where the fault strikes: the next one panics.
      :ok = HexagonTpu.Native.qnn_panic_in_next_executes(1)
      panicking = Task.async(fn -> Graph.execute(graph, input, output: :binary) end)
      behind = Task.async(fn -> Graph.execute(graph, input, output: :binary) end)

      assert {:ok, [out]} = Task.await(running, 30_000)
      assert from_f32(out) == [1.0, 2.0, 3.0, 4.0]
      assert {:error, %Error{reason: :internal, message: message}} = Task.await(panicking, 30_000)
      assert message =~ "panicked"
      assert {:ok, [out]} = Task.await(behind, 30_000)
      assert from_f32(out) == [1.0, 2.0, 3.0, 4.0]

      # The graph, its context and its runtime are usable and freeable afterwards.
      assert {:ok, [_]} = Graph.execute(graph, input)
      assert :ok = Graph.close(graph)
      assert :ok = Context.close(graph.context)
      assert :ok = Runtime.close(runtime)
      assert Support.live_handles(lib) == 0
    end

    test "in an execute on an idle graph answers :internal; the next execute runs", %{lib: lib} do
      t = Models.t(:float_32, [4])
      graph = Support.load!(Models.identity(t, t), lib: lib)
      :ok = HexagonTpu.Native.qnn_panic_in_next_executes(1)

      assert {:error, %Error{reason: :internal}} = Graph.execute(graph, [f32([1, 2, 3, 4])])
      assert {:ok, [_]} = Graph.execute(graph, [f32([1, 2, 3, 4])])
      assert %{execute_count: 1} = Support.qnn_sim_counters(lib)
    end
  end

  test "closing a model whose execute runs does not stall other models of the runtime",
       %{lib: lib} do
    t = Models.t(:float_32, [4])
    runtime = Support.runtime!(lib)
    slow = Support.load!(Models.identity(t, t, sleep_ms: 1_000), runtime: runtime)
    fast_path = Models.build!(Models.identity(t, t, name: "fast"))
    test = self()

    executing = Task.async(fn -> Graph.execute(slow, [f32([1, 2, 3, 4])]) end)
    assert Support.await_executes_entered(lib, 0)

    closing =
      Task.async(fn ->
        result = Context.close(slow.context)
        send(test, {:done, :slow_closed})
        result
      end)

    # The close has been handed on before the second model's load: if it held the runtime's
    # thread until the execute ended, this load and close would queue behind it.
    assert Support.wait_until(fn -> Context.closed?(slow.context) end)
    {:ok, context} = Context.from_file(runtime, fast_path)
    {:ok, graph} = Graph.retrieve(context, "fast")
    assert {:ok, [_]} = Graph.execute(graph, [f32([1, 2, 3, 4])])
    assert :ok = Graph.close(graph)
    assert :ok = Context.close(context)
    send(test, {:done, :fast_closed})

    assert {:ok, [_]} = Task.await(executing, 30_000)
    assert :ok = Task.await(closing, 30_000)
    assert_received {:done, first}
    assert_received {:done, second}
    assert {first, second} == {:fast_closed, :slow_closed}

    assert {:error, %Error{reason: :closed}} = Graph.execute(slow, [f32([1, 2, 3, 4])])
    assert :ok = Graph.close(slow)
    assert :ok = Runtime.close(runtime)
    assert Support.live_handles(lib) == 0
  end

  @tag timeout: 300_000
  test "model files truncated and rewritten while 4 processes load them: every load answers",
       %{dir: dir, lib: lib} do
    # Over 1 MiB (0.2.0 mapped files from 1 MiB, and a truncation under a mapping is SIGBUS).
    features = 600_000
    model = Models.classifier([0.01, 0.02], List.duplicate(1, 2 * features), [0, 0])
    good = File.read!(Models.build!(model))
    assert byte_size(good) > 1024 * 1024
    paths = for i <- 1..2, do: Path.join(dir, "model_#{i}.bin")
    Enum.each(paths, &File.write!(&1, good))
    runtime = Support.runtime!(lib)
    rounds = 300

    writer =
      Task.async(fn ->
        for round <- 1..rounds, path <- paths do
          # In place, as an update that does not rename would: cut short, then written again.
          {:ok, file} = :file.open(path, [:read, :write, :raw, :binary])
          {:ok, _} = :file.position(file, rem(round * 7919, byte_size(good)))
          :ok = :file.truncate(file)
          :ok = :file.close(file)
          File.write!(path, good)
        end

        :written
      end)

    loaders =
      for i <- 1..4 do
        Task.async(fn -> load_until_done(runtime, Enum.at(paths, rem(i, 2)), writer.pid, %{}) end)
      end

    assert :written = Task.await(writer, 240_000)
    outcomes = Enum.map(loaders, &Task.await(&1, 60_000))
    total = Enum.reduce(outcomes, %{}, &Map.merge(&1, &2, fn _, a, b -> a + b end))

    # Every load answered, with a context or a named error; both happened.
    assert total[:ok] > 0, inspect(total)
    assert Map.delete(total, :ok) != %{}, inspect(total)

    for {reason, _} <- total,
        reason != :ok,
        do: assert(reason in [:io, :invalid_model, :qnn_error], inspect(total))

    assert :ok = Runtime.close(runtime)
    Support.quiesce()
    assert Support.live_handles(lib) == 0
  end

  defp load_until_done(runtime, path, writer, outcomes) do
    outcome =
      case Context.from_file(runtime, path) do
        {:ok, context} ->
          :ok = Context.close(context)
          :ok

        {:error, %Error{reason: reason}} ->
          reason
      end

    outcomes = Map.update(outcomes, outcome, 1, &(&1 + 1))

    if Process.alive?(writer),
      do: load_until_done(runtime, path, writer, outcomes),
      else: outcomes
  end
end
