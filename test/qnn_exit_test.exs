defmodule HexagonTpu.QnnExitTest do
  # A VM that stops in any state exits with the status asked for, without a crash (DESIGN.md,
  # "Exit"), on qnn_sim: its model sleeps in execute, so an execute is reliably running, or
  # queued behind a running one, when the VM stops. The :qnn_host twin
  # (qnn_host_exit_test.exs) runs the same child on Qualcomm's emulator.
  #
  # Runs per state and method: HEXAGON_TPU_EXIT_RUNS (default @runs), child VMs at a time:
  # HEXAGON_TPU_EXIT_CONCURRENCY (2), methods: HEXAGON_TPU_EXIT_METHODS.
  use ExUnit.Case, async: false

  alias HexagonTpu.Test.{ExitRuns, Models, Support}

  @moduletag timeout: :infinity
  @runs 2

  setup_all do
    t = Models.t(:float_32, [1, 64])
    lib = Support.sim_lib()
    %{backend: {lib, lib}, bin: Models.build!(Models.identity(t, t, sleep_ms: 1_000))}
  end

  for {state, what} <- ExitRuns.states() do
    @state state
    test "a VM stopped with #{what} exits with the status asked for", ctx do
      ExitRuns.assert_clean_exits("qnn_sim", ctx.backend, ctx.bin, @state, @runs)
    end
  end
end
