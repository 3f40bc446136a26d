defmodule HexagonTpu.Test.ExitRuns do
  @moduledoc false
  # Child VMs that stop in a given state (test/support/qnn_exit_child.exs), run a number of
  # times each, a few at a time: each run's exit status, wall time and whatever of QNN's
  # reached stdout or stderr, and a table of runs and failures per state and method.

  @child Path.expand("qnn_exit_child.exs", __DIR__)

  @doc "The status each method must end with when asked for `status`."
  def expected_status(method, _status) when method in ["sigterm", "end"], do: 0
  def expected_status(_method, status), do: status

  @doc """
  Runs the child `runs` times for each method in `methods`, `concurrency` at a time. `backend`
  is `{lib, system_lib}`. Returns a list of %{method:, status:, expected:, ms:, output:,
  reached?:, raw:, ok?:}.
  """
  def run_all({lib, system_lib}, model, state, methods, runs, concurrency, status \\ 7) do
    for method <- methods, n <- 1..runs do
      {method, n}
    end
    |> Task.async_stream(
      fn {method, _n} -> run_one([lib, system_lib, model, state, method], method, status) end,
      max_concurrency: concurrency,
      timeout: :infinity,
      ordered: true
    )
    |> Enum.map(fn {:ok, result} -> result end)
  end

  @doc "One child run."
  def run_one(args, method, status, timeout_ms \\ 180_000) do
    started = System.monotonic_time(:millisecond)

    port =
      Port.open({:spawn_executable, System.find_executable("elixir")}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        :hide,
        args:
          HexagonTpu.Test.Support.child_code_path() ++
            [@child | args] ++ [Integer.to_string(status)],
        env: [{~c"HEXAGON_TPU_OFFLINE", ~c"1"}]
      ])

    {exit_status, output} = collect(port, method, "", false, started + timeout_ms)
    ms = System.monotonic_time(:millisecond) - started
    expected = expected_status(method, status)
    raw = qnn_lines(output)
    reached? = output =~ "CHILD ready"

    %{
      method: method,
      status: exit_status,
      expected: expected,
      ms: ms,
      output: output,
      reached?: reached?,
      raw: raw,
      ok?: exit_status == expected and reached? and raw == []
    }
  end

  defp collect(port, method, acc, signalled?, deadline) do
    signalled? =
      if method == "sigterm" and not signalled? and acc =~ ~r/CHILD ready .*os_pid=\d+/ do
        [_, pid] = Regex.run(~r/os_pid=(\d+)/, acc)
        {_, 0} = System.cmd("kill", ["-TERM", pid])
        true
      else
        signalled?
      end

    receive do
      {^port, {:data, data}} ->
        collect(port, method, acc <> data, signalled?, deadline)

      {^port, {:exit_status, status}} ->
        {status, acc}
    after
      max(deadline - System.monotonic_time(:millisecond), 0) ->
        # A hang: kill the VM (the port's OS process is the beam, the scripts exec it).
        {:os_pid, pid} = Port.info(port, :os_pid)
        System.cmd("kill", ["-KILL", Integer.to_string(pid)])

        receive do
          {^port, {:exit_status, _}} -> :ok
        after
          5_000 -> :ok
        end

        {:hang, acc <> "\n(hung: killed by the test)"}
    end
  end

  @doc """
  What QNN (or the C library under it) printed itself: QNN's `<E>`/`<W>`/`<I>`/`<V>`/`<D>`
  lines, glibc's heap-corruption reports, Rust panics; not the emulator's LIBNATIVE line,
  printed at every dlopen (see guides/observability.md).
  """
  def qnn_lines(output) do
    output
    |> String.split("\n")
    |> Enum.filter(
      &(&1 =~ ~r/^\s*<[EWIVD]>/ or &1 =~ ~r/^\s*#\s*LIBNATIVE/ or
          &1 =~ ~r/malloc|free\(\)|double free|corrupted|munmap_chunk|panicked at/)
    )
    |> Enum.reject(&(&1 =~ "LIBNATIVE: No alternate configuration present"))
  end

  @doc "A one-line description of how a run ended."
  def outcome(%{ok?: true}), do: "ok"
  def outcome(%{status: :hang}), do: "hang"
  def outcome(%{status: 139}), do: "SIGSEGV (139)"
  def outcome(%{status: 134}), do: "SIGABRT (134)"

  def outcome(%{status: s, expected: e} = run) when s != e,
    do: "status #{s}, not #{e}#{if run.raw != [], do: " + QNN output", else: ""}"

  def outcome(%{reached?: false}), do: "never reached the state"
  def outcome(%{raw: raw}), do: "QNN output: #{hd(raw) |> String.trim()}"

  @doc "Prints a table row per method: runs, failures by kind, wall times; returns the text."
  def report(label, state, results) do
    rows =
      results
      |> Enum.group_by(& &1.method)
      |> Enum.map(fn {method, runs} ->
        failed = Enum.reject(runs, & &1.ok?)

        kinds =
          failed |> Enum.frequencies_by(&outcome/1) |> Enum.map(fn {k, n} -> "#{n}x #{k}" end)

        times = Enum.map(runs, & &1.ms) |> Enum.sort()
        median = Enum.at(times, div(length(times), 2))

        "#{label} | #{String.pad_trailing(state, 7)} | #{String.pad_trailing(method, 12)} | " <>
          "#{length(runs)} runs | #{length(failed)} failed | " <>
          "median #{median} ms, max #{List.last(times)} ms | #{Enum.join(kinds, "; ")}"
      end)

    text = Enum.join(rows, "\n")
    IO.puts("\n" <> text)
    text
  end

  @doc "The failures, each with its output, for an assertion message (the first few)."
  def failures_message(results, limit \\ 3) do
    failed = Enum.reject(results, & &1.ok?)

    details =
      failed
      |> Enum.take(limit)
      |> Enum.map(fn r -> "--- #{r.method}: #{outcome(r)}\n#{tail(r.output)}" end)

    "#{length(failed)} of #{length(results)} runs failed\n" <> Enum.join(details, "\n")
  end

  defp tail(output) do
    lines = String.split(output, "\n")
    lines |> Enum.take(-25) |> Enum.join("\n")
  end

  @doc "The states the child can stop in, with what each means (for test names)."
  def states do
    [
      {"idle", "two runtimes, three contexts and graphs open after an execute"},
      {"running", "an execute running in another process"},
      {"queued", "executes queued behind a running one on the same graph"},
      {"frees", "closes just issued and models dropped to the garbage collector"}
    ]
  end

  @doc """
  Stops the child in `state` by every method, `default_runs` times each (or
  HEXAGON_TPU_EXIT_RUNS), prints the table under `label`, and asserts every run was clean.
  """
  def assert_clean_exits(label, backend, model, state, default_runs) do
    results = run_all(backend, model, state, methods(), runs(default_runs), concurrency())
    report(label, state, results)
    ExUnit.Assertions.assert(Enum.all?(results, & &1.ok?), failures_message(results))
  end

  @doc "Runs per state and method: HEXAGON_TPU_EXIT_RUNS, else `default`."
  def runs(default), do: env("HEXAGON_TPU_EXIT_RUNS", default, &String.to_integer/1)

  @doc "Child VMs at a time: HEXAGON_TPU_EXIT_CONCURRENCY, else 2."
  def concurrency, do: env("HEXAGON_TPU_EXIT_CONCURRENCY", 2, &String.to_integer/1)

  @doc "The methods: HEXAGON_TPU_EXIT_METHODS (comma-separated), else halt, stop, sigterm, end."
  def methods,
    do:
      env(
        "HEXAGON_TPU_EXIT_METHODS",
        ~w(halt stop sigterm end),
        &String.split(&1, ",", trim: true)
      )

  defp env(name, default, parse) do
    case System.get_env(name) do
      value when value in [nil, ""] -> default
      value -> parse.(value)
    end
  end
end
