defmodule HexagonTpu.QnnHostBenchTest do
  # HexagonTpu.Bench on Qualcomm's x86-64 HTP emulator, on the squeezenet binary the profile
  # tests compile: few executes (the emulator is slow), every section, exact counts.
  use ExUnit.Case, async: false

  @moduletag :qnn_host
  @moduletag timeout: 900_000

  alias HexagonTpu.{Bench, JSON, Stats}
  alias HexagonTpu.Test.{QnnHost, Support}

  test "every section on the emulator; the JSON decodes; nothing left alive" do
    %{bin: bin} = QnnHost.compiled!("squeezenet", ["squeezenet"])

    opts =
      QnnHost.runtime_opts() ++
        [
          iterations: 3,
          warmup: 1,
          in_flight: [1, 2],
          throughput_executes: 2,
          modes: [:burst, :default],
          mode_iterations: 1,
          progress: false
        ]

    Support.quiesce()
    {{:ok, result}, before, after_} = Stats.with_leak_check(fn -> Bench.run(bin, opts) end)
    Support.assert_no_leaks(before, after_)

    # first + warm-up + latency + 2 levels x 2 + 2 modes x (1 + 1) + the profile
    assert result.executes == %{total: 14, counted: 14}
    assert %{executes: 3, exclusive: true} = result.host
    assert result.host.graph_execute_us > 0 and result.host.quantize_us > 0
    assert result.profile.ops > 20 and length(result.profile.top_ops) == 10
    assert result.memory.ledger_bytes_model >= File.stat!(bin).size
    assert result.memory.ledger_bytes_after == result.memory.ledger_bytes_before

    doc = JSON.decode!(Bench.format(result, :json))
    assert doc["executes"] == %{"total" => 14, "counted" => 14}

    # the report's figures (docs/bench.md's sample comes from here)
    if path = System.get_env("HEXAGON_TPU_BENCH_REPORT") do
      File.write!(path <> ".txt", Bench.format(result, :table))
      File.write!(path <> ".json", Bench.format(result, :json))
    end
  end
end
