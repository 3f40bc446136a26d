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

  for {state, what} <- [
        {"idle", "two runtimes, three contexts and graphs open after an execute"},
        {"running", "an execute running in another process"},
        {"queued", "executes queued behind a running one on the same graph"},
        {"frees", "closes just issued and models dropped to the garbage collector"}
      ] do
    @state state
    test "a VM stopped with #{what} exits with the status asked for", ctx do
      results =
        ExitRuns.run_all(
          ctx.backend,
          ctx.bin,
          @state,
          ExitRuns.methods(),
          ExitRuns.runs(@runs),
          ExitRuns.concurrency()
        )

      ExitRuns.report("qnn_sim", @state, results)
      assert Enum.all?(results, & &1.ok?), ExitRuns.failures_message(results)
    end
  end
end
