defmodule HexagonTpu.Test.ServingPeer do
  @moduledoc false
  # Runs on a peer node (test/serving_test.exs, distribution): a serving of `path` on qnn_sim,
  # started under a supervisor that outlives the :erpc call that starts it.

  def start(path, sim_lib, name) do
    {:ok, _} = Application.ensure_all_started(:hexagon_tpu)
    {:ok, _} = Application.ensure_all_started(:nx)
    {:ok, serving} = HexagonTpu.Serving.new(path, lib_path: sim_lib, system_lib_path: sim_lib)

    {:ok, supervisor} =
      Supervisor.start_link([{Nx.Serving, serving: serving, name: name}], strategy: :one_for_one)

    Process.unlink(supervisor)
    :ok
  end
end
