defmodule HexagonTpu.Pending do
  @moduledoc """
  An execute started with `HexagonTpu.Graph.execute_async/3` and not yet awaited: take its
  result with `HexagonTpu.Graph.await/2`, or give it up with `HexagonTpu.Graph.cancel/1`. Its
  answer goes to the process that started it (`:owner`), as a message only these functions
  should receive.
  """

  @enforce_keys [:ref, :ticket, :owner, :graph, :output_modes, :output]
  defstruct [:ref, :ticket, :owner, :graph, :output_modes, :output, :span, :profile]

  @type t :: %__MODULE__{
          ref: reference(),
          ticket: reference(),
          owner: pid(),
          graph: HexagonTpu.Graph.t(),
          output_modes: [:model | :f32],
          output: :tensor | :binary,
          span: term(),
          profile: HexagonTpu.Profile.level() | nil
        }

  defimpl Inspect do
    def inspect(pending, _opts),
      do: "#HexagonTpu.Pending<#{inspect(pending.graph.name)} for #{inspect(pending.owner)}>"
  end
end
