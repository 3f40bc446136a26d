defmodule HexagonTpu.PipelineTest do
  # HexagonTpu.Pipeline (issue 31, item 5): frames in order, at most :max_in_flight between
  # pre's start and post's end, pre of N+1 and post of N-1 while N executes, errors per frame,
  # raises handed to the consumer, nothing left behind by an early halt. Ordering-based: a
  # slow execute (qnn_sim's sleep_ms) and counts read at chosen moments, never wall-clock
  # bounds. Not async: Stats' counters are VM-global.
  use ExUnit.Case, async: false

  import HexagonTpu.Test.Numerics, only: [f32: 1, from_f32: 1]

  alias HexagonTpu.{Error, Pipeline, Stats}
  alias HexagonTpu.Test.{Models, Support}

  @moduletag :tmp_dir

  @t Models.t(:float_32, [4])

  setup %{tmp_dir: dir} do
    lib = Support.private_sim_lib!(dir)
    %{lib: lib, runtime: Support.runtime!(lib)}
  end

  defp load(ctx, opts) do
    {:ok, graph} =
      HexagonTpu.load_model(Models.build!(Models.identity(@t, @t, opts)), runtime: ctx.runtime)

    graph
  end

  defp inputs(k), do: [f32([k, k, k, k])]
  defp first([out]), do: hd(from_f32(out))

  # Executes inside QNN now: qnn_sim's count of executes entered (our private copy's) against
  # the executes QNN has answered (Stats, VM-global; this module runs alone).
  defp entered(lib), do: Support.qnn_sim_counters(lib).execute_count
  defp answered, do: Stats.native().executes

  # What must be back where it was once a pipeline is over: no execute waiting or inside
  # QNN, no process linked to the caller, no message in its mailbox.
  defp snapshot(lib),
    do: %{
      waiting: Stats.native().executes_waiting,
      inside: entered(lib) - answered(),
      links: Process.info(self(), :links),
      messages: Process.info(self(), :messages)
    }

  test "answers come back in the frames' order, whatever order the stages end in", ctx do
    graph = load(ctx, sleep_ms: 2)

    # pre takes 0-4 ms by frame, so the frames' pres end out of order
    answers =
      Pipeline.stream(graph, 0..11,
        pre: fn k ->
          Process.sleep(rem(k * 7, 5))
          inputs(k)
        end,
        post: &first/1,
        output: :binary
      )
      |> Enum.to_list()

    assert answers == Enum.map(0..11, &{:ok, &1 * 1.0})
  end

  test "no more than :max_in_flight frames between pre's start and post's end", ctx do
    graph = load(ctx, sleep_ms: 10)

    for bound <- [1, 2, 3, 5] do
      # [in flight now, the most seen]
      counts = :atomics.new(2, signed: true)

      pre = fn k ->
        now = :atomics.add_get(counts, 1, 1)
        raise_max(counts, now)
        Process.sleep(2)
        inputs(k)
      end

      post = fn outputs ->
        Process.sleep(2)
        :atomics.sub(counts, 1, 1)
        first(outputs)
      end

      answers =
        Pipeline.stream(graph, 0..11, pre: pre, post: post, max_in_flight: bound, output: :binary)
        |> Enum.to_list()

      assert length(answers) == 12
      # reached, never passed
      assert :atomics.get(counts, 2) == bound, "max_in_flight: #{bound}"
      assert :atomics.get(counts, 1) == 0
    end
  end

  defp raise_max(counts, now) do
    seen = :atomics.get(counts, 2)

    if now > seen and :atomics.compare_exchange(counts, 2, seen, now) != :ok,
      do: raise_max(counts, now)
  end

  test "pre of N+1 and post of N-1 run while N executes", ctx do
    # 150 ms executes; post takes 20 ms (margins for a loaded machine). Events go to an
    # ordered table keyed by a monotonic integer, each with the executes entered and answered
    # at that moment.
    graph = load(ctx, sleep_ms: 150)
    events = :ets.new(:events, [:ordered_set, :public])
    record = fn event -> :ets.insert(events, {System.unique_integer([:monotonic]), event}) end
    base = answered()
    n = 10

    pre = fn k ->
      record.({:pre_start, k, entered(ctx.lib), answered() - base})
      inputs(k)
    end

    post = fn outputs ->
      Process.sleep(20)
      k = trunc(first(outputs))
      record.({:post_end, k, entered(ctx.lib), answered() - base})
      k
    end

    answers =
      Pipeline.stream(graph, 0..(n - 1), pre: pre, post: post, max_in_flight: 3, output: :binary)
      |> Enum.to_list()

    assert answers == Enum.map(0..(n - 1), &{:ok, &1})

    log = events |> :ets.tab2list() |> Enum.with_index(fn {_key, event}, seq -> {event, seq} end)
    pre_start = Map.new(for {{:pre_start, k, _, done}, seq} <- log, do: {k, {seq, done}})

    post_end =
      Map.new(for {{:post_end, k, in_qnn, done}, seq} <- log, do: {k, {seq, in_qnn, done}})

    # pre of frame k began before the k-th execute was answered: it overlapped execute k-1
    # (serially, k executes would have been answered by then)
    for k <- 1..(n - 1) do
      {_seq, done} = pre_start[k]
      assert done < k, "pre of frame #{k} began after #{done} executes were answered"
    end

    # when post of frame k ended, another frame's execute was inside QNN: entered, not
    # answered (serially, none would have been entered yet). The first frames' pres race, so
    # their executes may run in another order than the frames': the count, not which frame.
    # Not for frame n-2, whose post a loaded machine may delay past the last execute.
    for k <- 0..(n - 3) do
      {_seq, in_qnn, done} = post_end[k]
      assert in_qnn == done + 1, "post of frame #{k}: #{in_qnn} entered, #{done} answered"
    end

    # and pre of frame k+2 had begun: the three stages at once. From frame 3 on, each frame
    # starts when the one three before it ends, so the executes run in the frames' order.
    for k <- 3..(n - 3) do
      {pre_seq, _} = pre_start[k + 2]
      {post_seq, _, _} = post_end[k]
      assert pre_seq < post_seq, "pre of frame #{k + 2} began after post of frame #{k} ended"
    end
  end

  test "an error in any stage is that frame's element; the others go on", ctx do
    graph = load(ctx, sleep_ms: 1)
    refused = Error.new(:invalid_argument, "no frame")

    pre = fn
      1 -> {:error, refused}
      # a wrong size: the execute refuses it
      2 -> [f32([2, 2])]
      4 -> {:ok, inputs(4)}
      k -> inputs(k)
    end

    post = fn outputs ->
      case first(outputs) do
        3.0 -> {:error, :post_refused}
        v -> {:ok, v}
      end
    end

    assert [
             {:ok, +0.0},
             {:error, ^refused},
             {:error, %Error{reason: :invalid_input}},
             {:error, :post_refused},
             {:ok, 4.0},
             {:ok, 5.0}
           ] =
             Pipeline.stream(graph, 0..5, pre: pre, post: post, output: :binary) |> Enum.to_list()
  end

  test "a QNN error fails its frame only", ctx do
    graph = load(ctx, fail_execute: {1003, :once})

    assert [{:error, %Error{reason: :qnn_error, qnn_code: 1003}}, {:ok, 1.0}, {:ok, 2.0}] =
             Pipeline.stream(graph, 0..2,
               pre: &inputs/1,
               post: &first/1,
               max_in_flight: 1,
               output: :binary
             )
             |> Enum.to_list()
  end

  test "the execute options apply to each frame's execute", ctx do
    # :profile hands post {outputs, profile}; :timeout bounds each frame's wait
    graph = load(ctx, [])

    assert [{:ok, +0.0}, {:ok, 1.0}] =
             Pipeline.stream(graph, 0..1,
               pre: &inputs/1,
               post: fn {outputs, %HexagonTpu.Profile{}} -> first(outputs) end,
               profile: :basic,
               output: :binary
             )
             |> Enum.to_list()

    slow = load(ctx, sleep_ms: 300)
    before = snapshot(ctx.lib)

    assert [{:error, %Error{reason: :timeout}}, {:error, %Error{reason: :timeout}}] =
             Pipeline.stream(slow, 0..1, pre: &inputs/1, timeout: 20) |> Enum.to_list()

    # the first execute finishes unseen, the second is skipped at its turn: before the next
    # test reads the counters
    assert Support.wait_until(fn -> snapshot(ctx.lib) == before end), inspect(snapshot(ctx.lib))
  end

  test "a raise in post reaches the consumer; nothing is left behind", ctx do
    graph = load(ctx, sleep_ms: 20)
    before = snapshot(ctx.lib)

    stream =
      Pipeline.stream(graph, Stream.iterate(0, &(&1 + 1)),
        pre: &inputs/1,
        post: fn outputs ->
          if first(outputs) == 2.0, do: raise("post failed on frame 2"), else: first(outputs)
        end,
        output: :binary
      )

    assert_raise RuntimeError, "post failed on frame 2", fn -> Enum.to_list(stream) end
    assert Support.wait_until(fn -> snapshot(ctx.lib) == before end), inspect(snapshot(ctx.lib))
  end

  test "a throw in pre reaches the consumer as a throw", ctx do
    graph = load(ctx, [])

    assert catch_throw(
             Pipeline.stream(graph, 0..3,
               pre: fn k -> if k == 1, do: throw(:no), else: inputs(k) end
             )
             |> Enum.to_list()
           ) == :no
  end

  test "halting early stops the frames in flight: no execute waits or runs afterwards", ctx do
    graph = load(ctx, sleep_ms: 30)
    before = snapshot(ctx.lib)
    started = :counters.new(1, [])

    pre = fn k ->
      :counters.add(started, 1, 1)
      inputs(k)
    end

    assert [{:ok, +0.0}, {:ok, 1.0}] =
             Pipeline.stream(graph, Stream.iterate(0, &(&1 + 1)),
               pre: pre,
               post: &first/1,
               output: :binary
             )
             |> Enum.take(2)

    # the frames admitted: the two taken and at most max_in_flight more
    assert :counters.get(started, 1) <= 2 + 3
    assert Support.wait_until(fn -> snapshot(ctx.lib) == before end), inspect(snapshot(ctx.lib))

    # and none starts later: past a whole execute's time, still no more entered
    entered = entered(ctx.lib)
    Process.sleep(100)
    assert entered(ctx.lib) == entered
    assert entered <= :counters.get(started, 1)
  end

  test "arguments are checked when the stream is made", ctx do
    graph = load(ctx, [])
    fun = "HexagonTpu.Pipeline.stream/3"

    for {opts, message} <- [
          {[max_in_flight: 0],
           "#{fun}: the :max_in_flight option must be a positive integer, given: 0"},
          {[max_in_flight: :many],
           "the :max_in_flight option must be a positive integer, given: :many"},
          {[pre: 1], "#{fun}: the :pre option must be a function of one argument, given: 1"},
          {[post: fn _a, _b -> :ok end], "the :post option must be a function of one argument"},
          {[timeout: -1], "#{fun}: the :timeout option must be a non-negative integer"},
          {[quantize: :maybe], "#{fun}: the :quantize option must be one of :auto, :none"},
          {[frames_per_second: 30],
           "#{fun}: unknown option :frames_per_second; the options are :pre, :post, :max_in_flight, :quantize"},
          {[pre: &inputs/1, pre: &inputs/1], "#{fun}: the :pre option is given more than once"},
          {:not_a_list, "#{fun}: `opts` must be a keyword list"}
        ] do
      error = assert_raise ArgumentError, fn -> Pipeline.stream(graph, 0..1, opts) end
      assert error.message =~ message
    end

    assert_raise ArgumentError, ~r/#{fun}: `frames` must be an enumerable, given: 42/, fn ->
      Pipeline.stream(graph, 42)
    end

    assert_raise ArgumentError, ~r/#{fun}: `model` must be a HexagonTpu.Graph/, fn ->
      Pipeline.stream(:model, [])
    end
  end
end
