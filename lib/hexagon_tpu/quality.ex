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
           HexagonTpu.JSON.decode(text) do
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
end
