defmodule HexagonTpu.QnnHostPerformanceTest do
  # Performance modes on Qualcomm's x86 HTP emulator (QAIRT 2.51): it has the HTP perf
  # infrastructure and takes every vote ONNX Runtime's QNN EP sends.
  use ExUnit.Case, async: false

  alias HexagonTpu.{Graph, Performance, Runtime, Stats}
  alias HexagonTpu.Test.QnnHost

  @moduletag :qnn_host
  @moduletag timeout: 600_000

  setup_all do
    # the options qnn_host_test compiles float_io with: the compiled binary is shared by key
    %{bin: QnnHost.compiled!("float_io", ["float_io"], io: :float).bin}
  end

  test "every mode is accepted on create" do
    for mode <- Performance.modes() do
      before = Stats.native()
      runtime = Runtime.create!(QnnHost.runtime_opts() ++ [performance: mode])
      now = Stats.native()
      assert now.performance_votes_refused == before.performance_votes_refused, inspect(mode)
      {:ok, state} = Runtime.performance(runtime)
      assert %{mode: ^mode, voted: ^mode, available: true} = state

      if mode == :default do
        assert now.performance_votes == before.performance_votes
        assert state.last_vote == nil
      else
        assert now.performance_votes == before.performance_votes + 1
        assert %{mode: ^mode} = state.last_vote
      end

      :ok = Runtime.close(runtime)
    end
  end

  test "every mode is accepted by set_performance and per call", %{bin: bin} do
    runtime = QnnHost.runtime!()
    graph = QnnHost.graph!(bin, runtime)
    [%{shape: shape}] = Graph.inputs(graph)
    input = :binary.copy(<<0.5::float-32-little>>, shape |> Tuple.to_list() |> Enum.product())
    refused = Stats.native().performance_votes_refused

    for mode <- Performance.modes() ++ [:burst, :default] do
      assert :ok = Runtime.set_performance(runtime, mode)
      assert {:ok, %{voted: ^mode}} = Runtime.performance(runtime)
    end

    for mode <- Performance.modes() do
      assert {:ok, [_]} = Graph.execute(graph, [input], performance: mode)
      assert {:ok, %{voted: ^mode}} = Runtime.performance(runtime)
    end

    assert Stats.native().performance_votes_refused == refused
  end
end
