defmodule HexagonTpu.Stats.Schedulers do
  @moduledoc false
  # Scheduler utilization from microstate accounting (`HexagonTpu.Stats.dirty_utilization/1`,
  # the docs are there; `HexagonTpu.Monitor` samples with `msacc_snapshot/0` and
  # `utilization/2`).

  alias HexagonTpu.{Args, Stats}

  @spec dirty_utilization(pos_integer()) :: Stats.utilization()
  def dirty_utilization(sample_ms \\ 1000)

  def dirty_utilization(sample_ms) when is_integer(sample_ms) and sample_ms > 0 do
    was_on = :erlang.system_flag(:microstate_accounting, true)

    try do
      before = msacc_snapshot()
      Process.sleep(sample_ms)
      utilization(before, msacc_snapshot())
    after
      unless was_on, do: :erlang.system_flag(:microstate_accounting, false)
    end
  end

  def dirty_utilization(other) do
    Args.type_error!(
      "HexagonTpu.Stats.dirty_utilization/1",
      "`sample_ms`",
      "a positive integer (milliseconds)",
      other
    )
  end

  # Microstate accounting counters per scheduler thread: %{{type, id} => {busy, total}}.
  # Empty when accounting is off.
  @spec msacc_snapshot() :: %{{atom(), non_neg_integer()} => {integer(), integer()}}
  def msacc_snapshot do
    case :erlang.statistics(:microstate_accounting) do
      threads when is_list(threads) ->
        for %{type: type, id: id, counters: counters} <- threads,
            type in [:scheduler, :dirty_cpu_scheduler, :dirty_io_scheduler],
            into: %{} do
          total = counters |> Map.values() |> Enum.sum()
          {{type, id}, {total - Map.get(counters, :sleep, 0), total}}
        end

      _ ->
        %{}
    end
  end

  # Busy shares per scheduler class between two snapshots. Threads whose counters went
  # backwards (someone reset them) are left out of the window.
  @spec utilization(map(), map()) :: Stats.utilization()
  def utilization(before, after_) do
    deltas =
      Enum.flat_map(after_, fn {{type, _id} = key, {busy, total}} ->
        {busy0, total0} = Map.get(before, key, {0, 0})

        if total > total0 and busy >= busy0,
          do: [{type, {busy - busy0, total - total0}}],
          else: []
      end)

    %{
      dirty_cpu: share(deltas, :dirty_cpu_scheduler),
      dirty_io: share(deltas, :dirty_io_scheduler),
      scheduler: share(deltas, :scheduler)
    }
  end

  defp share(deltas, type) do
    {busy, total} =
      Enum.reduce(deltas, {0, 0}, fn
        {^type, {b, t}}, {busy, total} -> {busy + b, total + t}
        _, acc -> acc
      end)

    if total > 0, do: min(busy / total, 1.0), else: 0.0
  end
end
