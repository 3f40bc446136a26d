defmodule HexagonTpu.Text do
  @moduledoc false
  # Small pieces of the package's human-readable reports (the ledger's, the benchmark's).

  @doc "An integer with its thousands separated by commas: 1234567 -> \"1,234,567\"."
  @spec thousands(integer()) :: String.t()
  def thousands(n) when n < 0, do: "-" <> thousands(-n)

  def thousands(n) do
    n
    |> Integer.to_string()
    |> String.reverse()
    |> String.graphemes()
    |> Enum.chunk_every(3)
    |> Enum.map_join(",", &Enum.join/1)
    |> String.reverse()
  end
end
