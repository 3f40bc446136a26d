defmodule HexagonTpu.Pending do
  @moduledoc """
  An execute started with `HexagonTpu.Graph.execute_async/3` and not yet awaited: take its
  result with `HexagonTpu.Graph.await/2`, or give it up with `HexagonTpu.Graph.cancel/1`. Its
  answer goes to the process that started it (`:owner`), as a message only these functions
  should receive.
  """

  @enforce_keys [:ref, :ticket, :owner, :call]
  defstruct [:ref, :ticket, :owner, :call, :span]

  @type t :: %__MODULE__{
          ref: reference(),
          ticket: reference(),
          owner: pid(),
          # the execute: an internal struct holding its graph, options and output modes
          call: struct(),
          span: term()
        }

  defimpl Inspect do
    def inspect(pending, _opts),
      do: "#HexagonTpu.Pending<#{inspect(pending.call.graph.name)} for #{inspect(pending.owner)}>"
  end
end
