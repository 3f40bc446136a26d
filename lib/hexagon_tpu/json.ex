defmodule HexagonTpu.JSON do
  @moduledoc false
  # The package's one JSON codec (RFC 8259): Elixir 1.14 has no JSON module, and the package
  # takes no dependency for one (offline builds). Used by HexagonTpu.Bench (`format: :json`),
  # HexagonTpu.Quality (the `.quality.json` sidecar) and the tests (model specs, trace exports,
  # reference scripts' answers).
  #
  # encode/1 writes maps (atom or string keys, sorted, so the text is the same on every run),
  # lists, strings (UTF-8), integers, floats, booleans, nil and other atoms (as strings); any
  # other term raises. decode/1 is strict: objects become maps with string keys, numbers
  # integers or floats; trailing data, a trailing comma, a bare control character in a string,
  # a leading zero or a `\u` escape of a surrogate (this package writes non-ASCII text as it
  # is) is an error naming the byte offset.

  @doc "`term` as JSON text; raises `ArgumentError` for a term JSON cannot hold."
  @spec encode(term()) :: String.t()
  def encode(term), do: term |> enc() |> IO.iodata_to_binary()

  defp enc(nil), do: "null"
  defp enc(true), do: "true"
  defp enc(false), do: "false"
  defp enc(n) when is_integer(n), do: Integer.to_string(n)
  defp enc(f) when is_float(f), do: :erlang.float_to_binary(f, [:short])
  defp enc(a) when is_atom(a), do: enc(Atom.to_string(a))
  defp enc(s) when is_binary(s), do: [?", escape(s, s), ?"]

  defp enc(list) when is_list(list),
    do: [?[, list |> Enum.map(&enc/1) |> Enum.intersperse(?,), ?]]

  defp enc(map) when is_map(map) and not is_struct(map) do
    pairs =
      map
      |> Enum.map(fn {k, v} -> {key(k), v} end)
      |> Enum.sort()
      |> Enum.map(fn {k, v} -> [enc(k), ?:, enc(v)] end)

    [?{, Enum.intersperse(pairs, ?,), ?}]
  end

  defp enc(other), do: raise(ArgumentError, "cannot encode as JSON: #{inspect(other)}")

  defp key(k) when is_binary(k), do: k
  defp key(k) when is_atom(k) and k not in [nil, true, false], do: Atom.to_string(k)
  defp key(k), do: raise(ArgumentError, "cannot encode as a JSON key: #{inspect(k)}")

  defp escape(<<?", rest::binary>>, all), do: ["\\\"" | escape(rest, all)]
  defp escape(<<?\\, rest::binary>>, all), do: ["\\\\" | escape(rest, all)]

  defp escape(<<c, rest::binary>>, all) when c < 0x20,
    do: ["\\u" <> String.pad_leading(Integer.to_string(c, 16), 4, "0") | escape(rest, all)]

  defp escape(<<c::utf8, rest::binary>>, all), do: [<<c::utf8>> | escape(rest, all)]
  defp escape(<<>>, _all), do: []

  defp escape(_, all),
    do: raise(ArgumentError, "cannot encode as JSON (not UTF-8): #{inspect(all)}")

  @doc "Decodes one JSON text strictly: `{:ok, term}` or `{:error, message}` naming the byte."
  @spec decode(binary()) :: {:ok, term()} | {:error, String.t()}
  def decode(text) when is_binary(text) do
    {value, rest} = value(ws(text), text)

    case ws(rest) do
      "" -> {:ok, value}
      rest -> fail(text, rest, "trailing data")
    end
  catch
    {__MODULE__, message} -> {:error, message}
  end

  @doc "Like `decode/1`, but raises `ArgumentError`."
  @spec decode!(binary()) :: term()
  def decode!(text) do
    case decode(text) do
      {:ok, value} -> value
      {:error, message} -> raise ArgumentError, message
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

  @escapes %{
    ?" => ?",
    ?\\ => ?\\,
    ?/ => ?/,
    ?b => ?\b,
    ?f => ?\f,
    ?n => ?\n,
    ?r => ?\r,
    ?t => ?\t
  }

  defp string("\"" <> rest, _all, acc), do: {acc |> Enum.reverse() |> IO.iodata_to_binary(), rest}

  defp string("\\u" <> <<hex::binary-size(4), rest::binary>> = at, all, acc) do
    case Integer.parse(hex, 16) do
      {code, ""} when code not in 0xD800..0xDFFF -> string(rest, all, [<<code::utf8>> | acc])
      _ -> fail(all, at, "a \\u escape of a character expected")
    end
  end

  defp string("\\" <> <<c, rest::binary>>, all, acc) when is_map_key(@escapes, c),
    do: string(rest, all, [Map.fetch!(@escapes, c) | acc])

  defp string(<<c::utf8, rest::binary>> = at, all, acc) do
    if c < 0x20 or c == ?\\,
      do: fail(all, at, "a bad character in a string"),
      else: string(rest, all, [<<c::utf8>> | acc])
  end

  defp string(rest, all, _acc), do: fail(all, rest, "an unterminated string")

  @number ~r/\A-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/

  defp number(rest, all) do
    at = rest
    [text | parts] = Regex.run(@number, rest) || fail(all, at, "a number expected")
    rest = binary_part(at, byte_size(text), byte_size(at) - byte_size(text))

    value =
      case parts do
        [_int] ->
          String.to_integer(text)

        _ ->
          # "1e5" has no fraction, which Float.parse/1 reads but String.to_float/1 does not.
          case Float.parse(text) do
            {float, ""} -> float
            _ -> fail(all, at, "a number a float can hold expected")
          end
      end

    {value, rest}
  end

  defp fail(all, rest, what),
    do: throw({__MODULE__, "invalid JSON at byte #{byte_size(all) - byte_size(rest)}: #{what}"})
end
