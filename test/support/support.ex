defmodule HexagonTpu.Test.Support do
  @moduledoc false
  # Paths to qnn_sim (the simulated QNN backend) and its model builder, runtimes on it, and
  # small helpers.

  alias HexagonTpu.{Context, Graph, Runtime}
  alias HexagonTpu.Test.Models

  def priv_native, do: Path.join(to_string(:code.priv_dir(:hexagon_tpu)), "native")

  @doc """
  The ebin folders of every application this build compiled besides hexagon_tpu: none offline;
  in Hex mode rustler_precompiled, telemetry, Nx and the rest, which hexagon_tpu's .app file
  names, so a child VM cannot start hexagon_tpu without them.
  """
  def dep_ebins do
    own = Path.expand(Path.dirname(:code.which(HexagonTpu)))

    Mix.Project.build_path()
    |> Path.join("lib/*/ebin")
    |> Path.wildcard()
    |> Enum.map(&Path.expand/1)
    |> Enum.reject(&(&1 == own))
  end

  @doc "The `-pa` arguments of a child VM: hexagon_tpu's ebin first, then its dependencies'."
  def child_code_path do
    Enum.flat_map([Path.dirname(:code.which(HexagonTpu)) | dep_ebins()], &["-pa", &1])
  end

  @doc "qnn_sim's library (serves as both the backend and the system library)."
  def sim_lib,
    do: System.get_env("HEXAGON_TPU_SIM_LIB") || Path.join(priv_native(), "libqnn_sim.so")

  @doc "qnn_sim's model builder CLI."
  def builder,
    do: System.get_env("HEXAGON_TPU_SIM_BUILDER") || Path.join(priv_native(), "qnn-sim-build")

  @doc """
  The fake rpcmem (memfd-backed `rpcmem_alloc`/`rpcmem_free`/`rpcmem_to_fd`, built from
  native/hexagon_tpu_nif/qnn_fake_rpcmem): a runtime given it as `:rpcmem_lib_path` has shared
  buffers on qnn_sim.
  """
  def fake_rpcmem_lib, do: Path.join(priv_native(), "libqnn_fake_rpcmem.so")

  def runtime_opts(lib \\ sim_lib()), do: [lib_path: lib, system_lib_path: lib]

  def runtime!(lib \\ sim_lib()), do: Runtime.create!(runtime_opts(lib))

  @doc "Builds `model` and loads its only (or the named) graph into a fresh runtime."
  def load!(model, opts \\ []) do
    lib = Keyword.get(opts, :lib, sim_lib())
    runtime = Keyword.get_lazy(opts, :runtime, fn -> runtime!(lib) end)
    context = Context.from_file!(runtime, Models.build!(model))
    name = Keyword.get_lazy(opts, :graph, fn -> hd(Context.graphs(context)) end)
    Graph.retrieve!(context, name)
  end

  @doc """
  The add model of arguments_test and errors_test (u8 + i32 -> u8, shape [1, 4]) loaded into a
  fresh runtime: `%{runtime:, context:, graph:, path:}`.
  """
  def add_graph! do
    in_a = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    in_b = Models.t(:int_32, [1, 4])
    out = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.1, -128})
    path = Models.build!(Models.add(in_a, in_b, out))
    runtime = runtime!()
    context = Context.from_file!(runtime, path)
    graph = Graph.retrieve!(context, "add")
    %{runtime: runtime, context: context, graph: graph, path: path}
  end

  @doc "Executes `graph` (an f32 [2] identity) forever: a worker that keeps a scheduler busy."
  def busy_loop(graph) do
    {:ok, _} = Graph.execute(graph, [HexagonTpu.Test.Numerics.f32([1, 2])])
    busy_loop(graph)
  end

  @doc "A private copy of qnn_sim, so that its live-handle count is ours alone."
  def private_sim_lib!(dir) do
    path = Path.join(dir, "libqnn_sim_private_#{System.unique_integer([:positive])}.so")
    File.cp!(sim_lib(), path)
    path
  end

  def live_handles(lib \\ sim_lib()), do: qnn_sim_counters(lib).live_handles

  @doc "qnn_sim's counters: live handles, overlaps, peak concurrency, executes entered."
  def qnn_sim_counters(lib \\ sim_lib()) do
    {:ok, counters} = HexagonTpu.Native.qnn_sim_counters(lib)
    counters
  rescue
    e in ErlangError ->
      if e.original == :nif_not_loaded and HexagonTpu.Native.nif_loaded() do
        reraise "the NIF in priv/native has no qnn_sim_counters: it was built without the " <>
                  "cargo feature test-support (bash scripts/test.sh builds it with it)",
                __STACKTRACE__
      else
        reraise e, __STACKTRACE__
      end
  end

  @doc """
  Starts an execute of `input` on `graph` in a task and returns the task once the execute is
  inside QNN (qnn_sim `lib`'s count of executes entered moved): with a slow model (its
  `sleep_ms`), it holds the graph's turn while a test queues others behind it.
  """
  def hold_graph(graph, lib, input) do
    entered = qnn_sim_counters(lib).execute_count
    task = Task.async(fn -> Graph.execute(graph, [input], output: :binary) end)
    true = await_executes_entered(lib, entered)
    task
  end

  @doc "Waits until `Stats.native/0` counts `n` executes waiting for a graph's turn."
  def executes_waiting?(n),
    do: wait_until(fn -> HexagonTpu.Stats.native().executes_waiting == n end)

  @doc """
  Waits until the qnn_sim library at `lib` has entered more than `count` executes (it counts
  them on entry), so a test knows an execute is running inside QNN rather than guessing with
  a sleep. Returns false on timeout.
  """
  def await_executes_entered(lib, count, timeout \\ 30_000),
    do: wait_until(fn -> qnn_sim_counters(lib).execute_count > count end, timeout: timeout)

  @doc """
  Resets the OS's peak resident set size of this VM (Linux: `/proc/self/clear_refs`) and
  returns the current resident set size in bytes, for `peak_rss!/0` to compare with: the OS sees
  the NIF's allocations, which `:erlang.memory/0` does not.
  """
  def reset_peak_rss! do
    File.write!("/proc/self/clear_refs", "5")
    proc_status_bytes!("VmRSS")
  end

  @doc "The peak resident set size in bytes since `reset_peak_rss!/0`."
  def peak_rss!, do: proc_status_bytes!("VmHWM")

  defp proc_status_bytes!(field) do
    [_, kb] = Regex.run(~r/^#{field}:\s+(\d+) kB$/m, File.read!("/proc/self/status"))
    String.to_integer(kb) * 1024
  end

  @doc "Sends every event in `events` to the calling process as {:event, name, measurements, metadata}."
  def attach_events(events) do
    id = "test-#{System.unique_integer([:positive])}"
    :ok = :telemetry.attach_many(id, events, &__MODULE__.forward_event/4, self())
    ExUnit.Callbacks.on_exit(fn -> :telemetry.detach(id) end)
    id
  end

  def forward_event(event, measurements, metadata, pid),
    do: send(pid, {:event, event, measurements, metadata})

  @doc """
  Waits until no NIF resource is being freed any more: the alive counters are the same over
  three sweeps 20 ms apart. The counters are VM-global, and processes of earlier (async)
  tests can still be releasing theirs; tests that compare counters start from quiet.
  """
  def quiesce(timeout \\ 5_000) do
    deadline = System.monotonic_time(:millisecond) + timeout
    do_quiesce(nil, 0, deadline)
  end

  defp do_quiesce(last, same, deadline) do
    HexagonTpu.Stats.sweep()

    alive =
      Map.take(HexagonTpu.Stats.native(), [
        :runtimes_alive,
        :contexts_alive,
        :graphs_alive,
        :profiles_alive
      ])

    cond do
      alive == last and same >= 2 ->
        :ok

      System.monotonic_time(:millisecond) > deadline ->
        :ok

      true ->
        Process.sleep(20)
        do_quiesce(alive, if(alive == last, do: same + 1, else: 0), deadline)
    end
  end

  @doc """
  Asserts that no runtime, context or graph created between two `Stats.with_leak_check/1`
  snapshots is still alive.
  """
  def assert_no_leaks(before, after_) do
    require ExUnit.Assertions

    ExUnit.Assertions.assert(
      HexagonTpu.Stats.alive_diff(before, after_) ==
        %{runtimes_alive: 0, contexts_alive: 0, graphs_alive: 0}
    )
  end

  @doc """
  Polls `fun` until it is truthy (returns true) or the timeout passes (false).

  Options: `timeout:` (ms, default 5_000); `sweep:` (default false), a GC sweep
  (`HexagonTpu.Stats.sweep/0`) between tries, for counters that change only when another
  process's garbage is collected, and a 10 ms pause between tries instead of 1 ms (a sweep
  is costly).
  """
  def wait_until(fun, opts \\ []) do
    opts = Keyword.validate!(opts, timeout: 5_000, sweep: false)
    deadline = System.monotonic_time(:millisecond) + opts[:timeout]

    pause =
      if opts[:sweep],
        do: fn ->
          HexagonTpu.Stats.sweep()
          Process.sleep(10)
        end,
        else: fn -> Process.sleep(1) end

    poll(fun, deadline, pause)
  end

  # true once `fun` is truthy, false once `deadline` has passed; `pause` runs between tries
  defp poll(fun, deadline, pause) do
    cond do
      fun.() ->
        true

      System.monotonic_time(:millisecond) > deadline ->
        false

      true ->
        pause.()
        poll(fun, deadline, pause)
    end
  end
end
