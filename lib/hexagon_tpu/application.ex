defmodule HexagonTpu.Application do
  @moduledoc false
  # Starts HexagonTpu.QnnLog, which turns QNN's own log into Logger calls. Nothing here touches
  # a QNN library: a device without QNN still boots.

  use Application

  @impl true
  def start(_type, _args) do
    children = [HexagonTpu.QnnLog]
    Supervisor.start_link(children, strategy: :one_for_one, name: HexagonTpu.Supervisor)
  end
end
