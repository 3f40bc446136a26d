defmodule HexagonTpu.Optional do
  @moduledoc false
  # The optional dependencies (Nx, :telemetry) are asked for when a call needs them, never when
  # hexagon_tpu compiles: a project that adds Nx after compiling hexagon_tpu just works. The
  # answer is kept per VM (a code-server lookup per predict would cost more than the lookup
  # saves), so a dependency added to a running VM counts from its next start.

  @doc "Whether `module` (an optional dependency's) can be called in this VM."
  @spec available?(module()) :: boolean()
  def available?(module) do
    key = {__MODULE__, module}

    case :persistent_term.get(key, nil) do
      nil ->
        available? = Code.ensure_loaded?(module)
        :persistent_term.put(key, available?)
        available?

      available? ->
        available?
    end
  end
end
