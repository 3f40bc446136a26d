defmodule HexagonTpu.Stats.LeakCheck do
  @moduledoc false
  # The leak check: the GC sweep, snapshots of the native counters taken once they have
  # settled, and what changed or leaked between two of them (`HexagonTpu.Stats.sweep/0`,
  # `with_leak_check/1`, `alive_diff/2`, `leaked/2`; the docs are there).

  alias HexagonTpu.{Args, Stats}
  alias HexagonTpu.Stats.Ledger

  @alive [:runtimes_alive, :contexts_alive, :graphs_alive]
  @snapshot_keys @alive ++ [:runtimes_created, :contexts_created, :graphs_created]

  @spec leaked(Stats.counters(), Stats.counters()) :: [Stats.site_count()]
  def leaked(before, after_) do
    snapshots!(before, after_, "leaked/2")
    first = created_total(before)
    last = created_total(after_)

    Stats.live()
    |> Enum.filter(&(&1.id > first and &1.id <= last and not Ledger.shared_runtime?(&1)))
    |> Ledger.by_site()
  end

  defp created_total(counters),
    do: counters.runtimes_created + counters.contexts_created + counters.graphs_created

  @spec sweep() :: :ok
  def sweep do
    # Two passes: a resource term can outlive the first pass in a process collected before
    # the term's last other holder was (observed in practice with terms that had just been
    # passed to dirty NIFs).
    gc_all()
    gc_all()
    :ok
  end

  defp gc_all do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
  end

  @spec with_leak_check((... -> result)) :: {result, Stats.counters(), Stats.counters()}
        when result: term()
  def with_leak_check(fun) when is_function(fun, 0) do
    before = settle()
    result = fun.()
    {result, before, settle()}
  end

  def with_leak_check(other) do
    Args.type_error!(
      "HexagonTpu.Stats.with_leak_check/1",
      "`fun`",
      "a function of no arguments",
      other
    )
  end

  # Sweeps until the alive counters stop changing (a resource can also be held for a moment
  # by a process that is exiting or about to be scheduled): ten rounds of about 5 ms, each also
  # waiting (up to 5 s) for the runtimes' pending jobs.
  defp settle(rounds \\ 10, last \\ nil) do
    sweep()
    counters = await_runtime_jobs(Stats.native(), 5_000)
    alive = Map.take(counters, @alive)

    cond do
      alive == last or rounds == 0 ->
        Map.put(counters, :shared_runtimes, Enum.count(Stats.live(), &Ledger.shared_runtime?/1))

      true ->
        Process.sleep(5)
        settle(rounds - 1, alive)
    end
  end

  # Frees of garbage-collected objects run on the runtimes' own threads: wait for them.
  defp await_runtime_jobs(%{runtime_jobs_pending: 0} = counters, _ms_left), do: counters
  defp await_runtime_jobs(counters, ms_left) when ms_left <= 0, do: counters

  defp await_runtime_jobs(_counters, ms_left) do
    Process.sleep(1)
    await_runtime_jobs(Stats.native(), ms_left - 1)
  end

  @spec alive_diff(Stats.counters(), Stats.counters()) :: %{atom() => integer()}
  def alive_diff(before, after_) do
    snapshots!(before, after_, "alive_diff/2")

    shared =
      case {before, after_} do
        {%{shared_runtimes: was}, %{shared_runtimes: now}} -> now - was
        _ -> 0
      end

    Map.new(@alive, fn key ->
      diff = Map.fetch!(after_, key) - Map.fetch!(before, key)
      {key, if(key == :runtimes_alive, do: diff - shared, else: diff)}
    end)
  end

  # Both arguments must be native/0 snapshots (ArgumentError otherwise).
  defp snapshots!(before, after_, fun) do
    for {value, what} <- [{before, "`before`"}, {after_, "`after_`"}] do
      unless is_map(value) and Enum.all?(@snapshot_keys, &is_integer(Map.get(value, &1))),
        do:
          Args.type_error!(
            "HexagonTpu.Stats.#{fun}",
            what,
            "a snapshot of HexagonTpu.Stats.native/0",
            value
          )
    end

    :ok
  end
end
