defmodule HexagonTpu.ConcurrencyTest do
  # Timing assertions: runs alone (async: false), so that no other test holds the dirty CPU
  # schedulers (there are as many as cores, which may be 2).
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

  test "predictions on different models overlap in time" do
    t = Models.t(:float_32, [4])
    first = Support.load!(Models.identity(t, t, sleep_ms: @sleep_ms))
    second = Support.load!(Models.identity(t, t, sleep_ms: @sleep_ms, name: "other"))

    start = System.monotonic_time(:millisecond)

    [{:ok, _}, {:ok, _}] =
      [first, second]
      |> Enum.map(fn graph -> Task.async(fn -> Graph.execute(graph, [f32([1, 2, 3, 4])]) end) end)
      |> Task.await_many(10_000)

    elapsed = System.monotonic_time(:millisecond) - start
    # serialized they would take 2 * @sleep_ms
    assert elapsed < 2 * @sleep_ms - 50, "took #{elapsed} ms: the executes did not overlap"
  end

  test "executes on one graph run one at a time" do
    t = Models.t(:float_32, [4])
    graph = Support.load!(Models.identity(t, t, sleep_ms: 100))
    start = System.monotonic_time(:millisecond)

    1..3
    |> Enum.map(fn _ -> Task.async(fn -> Graph.execute(graph, [f32([1, 2, 3, 4])]) end) end)
    |> Task.await_many(10_000)
    |> Enum.each(&assert {:ok, _} = &1)

    assert System.monotonic_time(:millisecond) - start >= 300
  end

  test "closing a context while another process executes on it waits, then reports :closed" do
    t = Models.t(:float_32, [4])
    graph = Support.load!(Models.identity(t, t, sleep_ms: @sleep_ms))

    task = Task.async(fn -> Graph.execute(graph, [f32([1, 2, 3, 4])], output: :binary) end)
    Process.sleep(div(@sleep_ms, 3))

    {close_us, :ok} = :timer.tc(fn -> Context.close(graph.context) end)
    # the close waited for the running execute...
    assert close_us >= (@sleep_ms - div(@sleep_ms, 3) - 50) * 1000
    # ...which completed normally
    assert {:ok, [out]} = Task.await(task)
    assert from_f32(out) == [1.0, 2.0, 3.0, 4.0]

    # and everything after it is told the context is closed
    assert {:error, %Error{reason: :closed}} = Graph.execute(graph, [f32([1, 2, 3, 4])])
    assert {:error, %Error{reason: :closed}} = Graph.retrieve(graph.context, graph.name)
  end

  test "closing a graph while another process executes on it waits too" do
    t = Models.t(:float_32, [4])
    graph = Support.load!(Models.identity(t, t, sleep_ms: @sleep_ms))

    task = Task.async(fn -> Graph.execute(graph, [f32([1, 2, 3, 4])]) end)
    Process.sleep(div(@sleep_ms, 3))
    {close_us, :ok} = :timer.tc(fn -> Graph.close(graph) end)
    assert close_us >= (@sleep_ms - div(@sleep_ms, 3) - 50) * 1000
    assert {:ok, _} = Task.await(task)
    assert {:error, %Error{reason: :closed}} = Graph.execute(graph, [f32([1, 2, 3, 4])])
  end
end
