defmodule HexagonTpu.Test.JSON do
  @moduledoc false
  # A minimal JSON encoder for model specs: Elixir 1.14 has no JSON module and the offline
  # build has no Hex packages.

  @spec encode(term()) :: String.t()
  def encode(term), do: term |> enc() |> IO.iodata_to_binary()

  defp enc(nil), do: "null"
  defp enc(true), do: "true"
  defp enc(false), do: "false"
  defp enc(n) when is_integer(n), do: Integer.to_string(n)
  defp enc(f) when is_float(f), do: :erlang.float_to_binary(f, [:short])
  defp enc(a) when is_atom(a), do: enc(Atom.to_string(a))
  defp enc(s) when is_binary(s), do: [?", escape(s), ?"]

  defp enc(list) when is_list(list),
    do: [?[, list |> Enum.map(&enc/1) |> Enum.intersperse(?,), ?]]

  defp enc(map) when is_map(map) do
    pairs = Enum.map(map, fn {k, v} -> [enc(to_string(k)), ?:, enc(v)] end)
    [?{, Enum.intersperse(pairs, ?,), ?}]
  end

  defp escape(s) do
    for <<c::utf8 <- s>>, into: "" do
      case c do
        ?" -> "\\\""
        ?\\ -> "\\\\"
        c when c < 0x20 -> "\\u" <> String.pad_leading(Integer.to_string(c, 16), 4, "0")
        c -> <<c::utf8>>
      end
    end
  end
end
