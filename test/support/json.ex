defmodule HexagonTpu.Test.JSON do
  @moduledoc false
  # A minimal JSON encoder for model specs, and a strict decoder (RFC 8259) for the files the
  # package writes (trace exports): Elixir 1.14 has no JSON module and the offline build has no
  # Hex packages.

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

  @doc """
  Decodes one JSON text strictly: objects become maps with string keys, numbers integers or
  floats; anything else (trailing data, a trailing comma, a bare control character in a
  string, a leading zero, a `\\u` escape of a surrogate: the package writes non-ASCII text
  as it is) raises `ArgumentError` with the offset.
  """
  @spec decode!(binary()) :: term()
  def decode!(text) when is_binary(text) do
    {value, rest} = value(ws(text), text)

    case ws(rest) do
      "" -> value
      rest -> fail(text, rest, "trailing data")
    end
  end

  defp ws(<<c, rest::binary>>) when c in [?\s, ?\t, ?\n, ?\r], do: ws(rest)
  defp ws(rest), do: rest

  defp value("{" <> rest, all), do: object(ws(rest), all, [])
  defp value("[" <> rest, all), do: array(ws(rest), all, [])
  defp value("\"" <> rest, all), do: string(rest, all, [])
  defp value("true" <> rest, _), do: {true, rest}
  defp value("false" <> rest, _), do: {false, rest}
  defp value("null" <> rest, _), do: {nil, rest}
  defp value(<<c, _::binary>> = rest, all) when c == ?- or c in ?0..?9, do: number(rest, all)
  defp value(rest, all), do: fail(all, rest, "a value expected")

  defp object("}" <> rest, _all, []), do: {%{}, rest}

  defp object("\"" <> rest, all, acc) do
    {key, rest} = string(rest, all, [])

    case ws(rest) do
      ":" <> rest ->
        {value, rest} = value(ws(rest), all)
        acc = [{key, value} | acc]

        case ws(rest) do
          "," <> rest -> object(ws(rest), all, acc)
          "}" <> rest -> {Map.new(Enum.reverse(acc)), rest}
          rest -> fail(all, rest, "`,` or `}` expected")
        end

      rest ->
        fail(all, rest, "`:` expected")
    end
  end

  defp object(rest, all, _acc), do: fail(all, rest, "a string key expected")

  defp array("]" <> rest, _all, []), do: {[], rest}

  defp array(rest, all, acc) do
    {value, rest} = value(rest, all)
    acc = [value | acc]

    case ws(rest) do
      "," <> rest -> array(ws(rest), all, acc)
      "]" <> rest -> {Enum.reverse(acc), rest}
      rest -> fail(all, rest, "`,` or `]` expected")
    end
  end

  defp string("\"" <> rest, _all, acc), do: {acc |> Enum.reverse() |> IO.iodata_to_binary(), rest}

  defp string("\\" <> <<c, rest::binary>>, all, acc) when c in ~c(\"\\/bfnrt) do
    char = %{
      ?" => ?",
      ?\\ => ?\\,
      ?/ => ?/,
      ?b => ?\b,
      ?f => ?\f,
      ?n => ?\n,
      ?r => ?\r,
      ?t => ?\t
    }

    string(rest, all, [<<Map.fetch!(char, c)::utf8>> | acc])
  end

  defp string("\\u" <> <<hex::binary-size(4), rest::binary>> = at, all, acc) do
    case Integer.parse(hex, 16) do
      {code, ""} when code not in 0xD800..0xDFFF -> string(rest, all, [<<code::utf8>> | acc])
      _ -> fail(all, at, "a \\u escape of a character expected")
    end
  end

  defp string(<<c::utf8, rest::binary>> = at, all, acc) do
    if c < 0x20 or c == ?\\,
      do: fail(all, at, "a bad character in a string"),
      else: string(rest, all, [<<c::utf8>> | acc])
  end

  defp string(rest, all, _acc), do: fail(all, rest, "an unterminated string")

  @number ~r/\A-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/

  defp number(rest, all) do
    [text | parts] = Regex.run(@number, rest) || fail(all, rest, "a number expected")
    rest = binary_part(rest, byte_size(text), byte_size(rest) - byte_size(text))

    value =
      case parts do
        [_int] ->
          String.to_integer(text)

        _ ->
          # Elixir's float parser wants digits after a point: "1e5" is 1.0e5.
          text |> String.replace(~r/^(-?\d+)([eE])/, "\\1.0\\2") |> String.to_float()
      end

    {value, rest}
  end

  defp fail(all, rest, what) do
    raise ArgumentError, "invalid JSON at byte #{byte_size(all) - byte_size(rest)}: #{what}"
  end
end
