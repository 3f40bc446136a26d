defmodule HexagonTpu.Test.RunReport do
  @moduledoc false
  # An ExUnit formatter beside the CLI one, added by test_helper.exs when HEXAGON_TPU_TEST_REPORT
  # names a file: at the end of the run it writes there one line of counts, such as
  #
  #   tests=180 passed=170 failures=0 excluded=10 skipped=0 invalid=0 nx=31 qnn_host=52 ...
  #
  # where each tag's count is the tests carrying it that ran (passed or failed; neither
  # excluded nor skipped). .ci/elixir-1.18.sh fails its leg unless the :nx and :qnn_host
  # tests ran; .ci/run prints each leg's line.
  use GenServer

  @tags [:nx, :qnn_host, :hex_sources, :telemetry_metrics, :hardware]

  @impl true
  def init(_opts) do
    counts =
      Map.new([:tests, :passed, :failures, :excluded, :skipped, :invalid | @tags], &{&1, 0})

    {:ok, %{path: System.fetch_env!("HEXAGON_TPU_TEST_REPORT"), counts: counts}}
  end

  @impl true
  def handle_cast({:test_finished, %ExUnit.Test{state: state, tags: tags}}, s) do
    outcome =
      case state do
        nil -> :passed
        {:failed, _} -> :failures
        {:excluded, _} -> :excluded
        {:skipped, _} -> :skipped
        {:invalid, _} -> :invalid
      end

    ran = if outcome in [:passed, :failures], do: Enum.filter(@tags, &tags[&1]), else: []

    counts =
      Enum.reduce([:tests, outcome | ran], s.counts, &Map.update!(&2, &1, fn n -> n + 1 end))

    {:noreply, %{s | counts: counts}}
  end

  def handle_cast({:suite_finished, _times}, s) do
    line =
      Enum.map_join([:tests, :passed, :failures, :excluded, :skipped, :invalid | @tags], " ", fn
        key -> "#{key}=#{s.counts[key]}"
      end)

    File.mkdir_p!(Path.dirname(s.path))
    File.write!(s.path, line <> "\n")
    {:noreply, s}
  end

  def handle_cast(_event, s), do: {:noreply, s}
end
