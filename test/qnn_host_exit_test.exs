defmodule HexagonTpu.QnnHostExitTest do
  # A VM that stops in any state exits with the status asked for, without a crash and without
  # anything of QNN's on stdout or stderr (DESIGN.md, "Exit"; issue 13), against Qualcomm's own
  # HTP emulator, with onnx's light ResNet-50 compiled at test time: a 26 MB binary whose
  # executes take seconds, which made an exit with models open crash in 25-75% of runs (small
  # models rarely do). Each state is tried with System.halt/1, :init.stop/1, SIGTERM and the
  # script's normal end, in child VMs two at a time; the table of runs and failures is printed.
  #
  # Runs per state and method: HEXAGON_TPU_EXIT_RUNS (default @runs; raise it for soak runs),
  # child VMs at a time: HEXAGON_TPU_EXIT_CONCURRENCY (2), methods: HEXAGON_TPU_EXIT_METHODS.
  use ExUnit.Case, async: false

  alias HexagonTpu.Test.{ExitRuns, QnnHost}

  @moduletag :qnn_host
  @moduletag timeout: :infinity
  # 2 per method: 8 per state, 32 child VMs in all (with the Elixir 1.18 leg's one per method,
  # 12 per state in a CI run: a 25% crash rate goes unseen in a state with p = 0.75^12 = 3%).
  @runs 2

  setup_all do
    %{bin: bin} = QnnHost.compiled!("resnet50", ["resnet50"])
    lib = Path.join(QnnHost.lib_dir(), "libQnnHtp.so")
    system_lib = Path.join(QnnHost.lib_dir(), "libQnnSystem.so")
    %{backend: {lib, system_lib}, bin: bin}
  end

  for {state, what} <- ExitRuns.states() do
    @state state
    test "a VM stopped with #{what} exits with the status asked for, quietly", ctx do
      ExitRuns.assert_clean_exits("qnn_host", ctx.backend, ctx.bin, @state, @runs)
    end
  end
end
