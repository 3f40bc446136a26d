defmodule HexagonTpu.Test.TraceCheck do
  @moduledoc false
  # Reads a trace export (HexagonTpu.Trace.export/1) and checks it is trace-event JSON as
  # Chrome and Perfetto read it: the object format, each event's required fields and types,
  # complete events nesting properly within their thread, async pairs matching.

  import ExUnit.Assertions

  alias HexagonTpu.JSON

  @doc "Parses and checks the file at `path`; returns `{complete_events, json}` (X events, by ts)."
  def read!(path) do
    json = path |> File.read!() |> JSON.decode!()
    assert %{"traceEvents" => events, "otherData" => other} = json
    assert %{"emitted" => e, "dropped" => d, "capacity" => c} = other
    assert is_integer(e) and is_integer(d) and is_integer(c) and d <= e
    pid = String.to_integer(System.pid())

    for event <- events do
      assert %{"name" => name, "ph" => ph, "pid" => ^pid, "tid" => tid} = event
      assert is_binary(name) and is_integer(tid) and tid > 0

      case ph do
        "M" ->
          assert name == "thread_name"
          assert %{"args" => %{"name" => thread}} = event
          assert is_binary(thread)

        "X" ->
          assert %{"cat" => "hexagon_tpu", "ts" => ts, "dur" => dur, "args" => args} = event
          assert is_number(ts) and ts >= 0 and is_number(dur) and dur >= 0
          assert map_size(args) == 1

        ph when ph in ["b", "e"] ->
          assert %{"cat" => "hexagon_tpu", "ts" => ts, "id" => id} = event
          assert is_number(ts) and is_integer(id)
      end
    end

    # Every thread an event names is named by a metadata event.
    named = for %{"ph" => "M", "tid" => tid} <- events, into: MapSet.new(), do: tid
    for %{"ph" => ph, "tid" => tid} <- events, ph != "M", do: assert(tid in named)

    # Async pairs: one begin and one end per id, the end not before the begin.
    asyncs = Enum.filter(events, &(&1["ph"] in ["b", "e"]))

    for {_id, pair} <- Enum.group_by(asyncs, & &1["id"]) do
      assert [%{"ph" => "b", "ts" => b}, %{"ph" => "e", "ts" => e}] = pair
      assert e >= b
    end

    complete = Enum.filter(events, &(&1["ph"] == "X"))
    # Exported in start order, a parent before the children that start with it.
    assert complete == Enum.sort_by(complete, &{&1["ts"], -&1["dur"]})

    # Within a thread, two events are nested or disjoint, never overlapping.
    for {_tid, list} <- Enum.group_by(complete, & &1["tid"]),
        [a | rest] <- tails(list),
        b <- rest do
      assert b["ts"] >= a["ts"]

      assert b["ts"] >= finish(a) or finish(b) <= finish(a),
             "#{inspect(a)} overlaps #{inspect(b)}"
    end

    {complete, json}
  end

  defp tails([]), do: []
  defp tails([_ | rest] = list), do: [list | tails(rest)]

  @doc "The end of a complete event."
  def finish(event), do: event["ts"] + event["dur"]

  @doc "Whether `inner` lies within `outer` on the same thread."
  def within?(inner, outer) do
    inner["tid"] == outer["tid"] and inner["ts"] >= outer["ts"] and
      finish(inner) <= finish(outer)
  end
end
