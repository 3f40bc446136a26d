defmodule HexagonTpu.Quality do
  @moduledoc """
  The quantization quality `mix hexagon_tpu.compile` measured for a binary, kept beside it as
  `<binary>.quality.json` (schema in docs/models.md, "Quantization quality"), which
  `mix hexagon_tpu.inspect` shows.

  For each graph quantized from a float model, and each of its outputs: the SQNR of the
  quantized (QDQ) model against the float one, in dB, and the share of values within one
  quantization step, both measured with ONNX Runtime's CPU EP on samples the calibration did
  not see. They measure the quantization recipe, not the HTP. A binary made from QDQ models has
  no float reference, and no such file.
  """

  @typedoc "The decoded file: string keys, as written (see docs/models.md)."
  @type t :: %{optional(String.t()) => term()}

  @doc "The sidecar's path for `binary`."
  @spec path(Path.t()) :: Path.t()
  def path(binary), do: binary <> ".quality.json"

  @doc """
  Reads `binary`'s figures: `{:ok, figures}`, `:none` when there is no sidecar (a binary made
  from QDQ models, or not by `mix hexagon_tpu.compile`), or `{:error, message}` for a file that
  is not one.
  """
  @spec read(Path.t()) :: {:ok, t()} | :none | {:error, String.t()}
  def read(binary) do
    file = path(binary)

    with {:ok, text} <- File.read(file),
         {:ok, %{"version" => 1, "graphs" => graphs} = figures} when is_list(graphs) <-
           decode(text) do
      {:ok, figures}
    else
      {:error, :enoent} -> :none
      {:error, reason} when is_atom(reason) -> {:error, "#{file}: #{:file.format_error(reason)}"}
      {:error, message} -> {:error, "#{file}: #{message}"}
      {:ok, _other} -> {:error, "#{file}: not a quality file of version 1"}
    end
  end

  @doc "The figures for people, one output a line (what `mix hexagon_tpu.inspect` prints)."
  @spec format(t()) :: String.t()
  def format(%{"graphs" => graphs} = figures) do
    bar = figures["bar"] || %{}

    header =
      "  quantization quality (#{figures["measured_with"]}; bar: SQNR >= #{num(bar["sqnr_db"])} dB, " <>
        "#{num(100 * (bar["within_one_step"] || 0))}% of 8-bit values within one step):"

    lines =
      Enum.flat_map(graphs, fn g ->
        eval = g["evaluation"] || %{}

        chosen =
          if g["min_sqnr_db"],
            do: ", chosen for --min-sqnr #{num(g["min_sqnr_db"])} dB from #{tried(g["tried"])}",
            else: ""

        [
          "    graph #{inspect(g["name"])}: #{g["activations"]} activations, #{g["weights"]} weights#{chosen}; " <>
            "#{eval["samples"]} sample(s): #{eval["source"]}"
        ] ++ Enum.map(g["outputs"] || [], &output_line/1)
      end)

    unmeasured =
      for name <- figures["unmeasured"] || [],
          do:
            "    graph #{inspect(name)}: compiled from a QDQ model, no float reference to measure"

    Enum.join([header | lines] ++ unmeasured, "\n")
  end

  defp output_line(o) do
    sqnr = if o["sqnr_db"], do: "#{num(o["sqnr_db"])} dB", else: "exact"

    within =
      if o["within_one_step"],
        do: ", #{num(100 * o["within_one_step"])}% within one step (#{step(o["step"])})",
        else: ""

    verdict = if o["meets_bar"], do: "", else: "  BELOW THE BAR"
    "      output #{inspect(o["name"])}: SQNR #{sqnr}#{within}#{verdict}"
  end

  defp tried(list) when is_list(list) do
    Enum.map_join(list, ", ", fn t ->
      sqnr = if t["min_sqnr_db"], do: "#{num(t["min_sqnr_db"])} dB", else: "exact"
      "#{t["activations"]} #{sqnr}"
    end)
  end

  defp tried(_), do: "?"

  defp step(s) when is_number(s), do: IO.iodata_to_binary(:io_lib.format("~.3g", [s / 1]))
  defp step(_), do: "?"

  defp num(n) when is_integer(n), do: Integer.to_string(n)
  defp num(n) when is_float(n), do: :erlang.float_to_binary(n, decimals: 1)
  defp num(_), do: "?"

  # --- a strict JSON decoder (RFC 8259) for this one file: Elixir 1.14 has no JSON module, and
  # the package has no dependency for one.

  @doc false
  @spec decode(binary()) :: {:ok, term()} | {:error, String.t()}
  def decode(text) do
    case value(skip(text)) do
      {:ok, term, rest} ->
        if skip(rest) == "", do: {:ok, term}, else: {:error, "not JSON: trailing text"}

      {:error, _} = error ->
        error
    end
  catch
    {:json, message} -> {:error, "not JSON: #{message}"}
  end

  defp skip(<<c, rest::binary>>) when c in ~c" \t\r\n", do: skip(rest)
  defp skip(rest), do: rest

  defp value(<<?{, rest::binary>>), do: object(skip(rest), %{})
  defp value(<<?[, rest::binary>>), do: array(skip(rest), [])
  defp value(<<?", rest::binary>>), do: string(rest, [])
  defp value(<<"true", rest::binary>>), do: {:ok, true, rest}
  defp value(<<"false", rest::binary>>), do: {:ok, false, rest}
  defp value(<<"null", rest::binary>>), do: {:ok, nil, rest}
  defp value(text), do: number(text)

  # after { (an empty object may close) and after , (a member must follow)
  defp object(<<?}, rest::binary>>, acc), do: {:ok, acc, rest}
  defp object(text, acc), do: member(text, acc)

  defp member(<<?", rest::binary>>, acc) do
    {:ok, key, rest} = string(rest, [])

    case skip(rest) do
      <<?:, rest::binary>> ->
        {:ok, val, rest} = value(skip(rest))
        acc = Map.put(acc, key, val)

        case skip(rest) do
          <<?,, rest::binary>> -> member(skip(rest), acc)
          <<?}, rest::binary>> -> {:ok, acc, rest}
          _ -> throw({:json, "expected , or } in an object"})
        end

      _ ->
        throw({:json, "expected : after a key"})
    end
  end

  defp member(_, _), do: throw({:json, "expected a key"})

  defp array(<<?], rest::binary>>, []), do: {:ok, [], rest}
  defp array(text, acc), do: element(text, acc)

  defp element(text, acc) do
    {:ok, val, rest} = value(text)

    case skip(rest) do
      <<?,, rest::binary>> -> element(skip(rest), [val | acc])
      <<?], rest::binary>> -> {:ok, Enum.reverse([val | acc]), rest}
      _ -> throw({:json, "expected , or ] in an array"})
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

  defp string(<<?", rest::binary>>, acc),
    do: {:ok, IO.chardata_to_string(Enum.reverse(acc)), rest}

  defp string(<<?\\, ?u, hex::binary-size(4), rest::binary>>, acc) do
    case Integer.parse(hex, 16) do
      {code, ""} when code not in 0xD800..0xDFFF -> string(rest, [<<code::utf8>> | acc])
      _ -> throw({:json, "unsupported \\u escape"})
    end
  end

  defp string(<<?\\, c, rest::binary>>, acc) when is_map_key(@escapes, c),
    do: string(rest, [@escapes[c] | acc])

  defp string(<<c::utf8, rest::binary>>, acc) when c >= 0x20 and c != ?\\,
    do: string(rest, [<<c::utf8>> | acc])

  defp string(_, _), do: throw({:json, "bad string"})

  defp number(text) do
    case Regex.run(~r/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/, text) do
      [literal, _integer | fraction_exponent] ->
        rest = binary_part(text, byte_size(literal), byte_size(text) - byte_size(literal))
        float? = Enum.any?(fraction_exponent, &(&1 != ""))
        {:ok, if(float?, do: float(literal), else: String.to_integer(literal)), rest}

      nil ->
        throw({:json, "unexpected text"})
    end
  end

  # "1e5" has no fraction, which Float.parse accepts but :erlang.binary_to_float does not
  defp float(literal) do
    {f, ""} = Float.parse(literal)
    f
  end
end
