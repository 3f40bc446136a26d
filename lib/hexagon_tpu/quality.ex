defmodule HexagonTpu.Quality do
  @moduledoc """
  The quantization quality `mix hexagon_tpu.compile` measured for a binary, kept beside it as
  `<binary>.quality.json` (schema in [docs/models.md](models.md), "Quantization quality"), which
  `mix hexagon_tpu.inspect` shows.

  For each graph quantized from a float model, and each of its outputs: the answer the user
  sees, measured against the float model's (`"answer"`: top-1 agreement for class scores, the
  float model's detections found again for a YOLO head, mask IoU for a probability map, the
  error in the output's own units for landmarks, cosine similarity for anything else; its
  `"kind"`, figures and `"verdict"` in words), which sets the bar (`"meets_bar"`); and the SQNR
  in dB and the share of values within one quantization step. They are measured on samples
  the calibration did not see, the float model run by ONNX Runtime's CPU EP against the binary
  itself run by the HTP emulator (a graph's `"measured_on"`); the quantized (QDQ) model's
  figures on ONNX Runtime's CPU are kept beside each output as `"qdq_cpu"`, and they can differ
  (the HTP's kernels round otherwise: at 16 bits an offset per channel, in proportion to the
  zero point; docs/models.md, "When the HTP and the CPU disagree"). A binary made from QDQ models has no float reference,
  and no such file. Files of version 1 (CPU figures, before the answer measures) are read too.
  """

  @typedoc "The decoded file: string keys, as written (see [docs/models.md](models.md))."
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
         {:ok, %{"version" => version, "graphs" => graphs} = figures}
         when version in [1, 2] and is_list(graphs) <-
           HexagonTpu.JSON.decode(text) do
      {:ok, figures}
    else
      {:error, :enoent} -> :none
      {:error, reason} when is_atom(reason) -> {:error, "#{file}: #{:file.format_error(reason)}"}
      {:error, message} -> {:error, "#{file}: #{message}"}
      {:ok, _other} -> {:error, "#{file}: not a quality file of version 1 or 2"}
    end
  end

  @doc "The figures for people, one output a line (what `mix hexagon_tpu.inspect` prints)."
  @spec format(t()) :: String.t()
  def format(%{"graphs" => graphs} = figures) do
    header = "  quantization quality (#{figures["measured_with"]}; #{bar(figures["bar"])}):"

    lines =
      Enum.flat_map(graphs, fn g ->
        eval = g["evaluation"] || %{}

        chosen =
          cond do
            g["min_sqnr_db"] ->
              ", chosen for --min-sqnr #{num(g["min_sqnr_db"])} dB from #{tried(g["tried"])}"

            g["tried"] not in [nil, []] ->
              ", chosen for the answers' bar from #{tried(g["tried"])}"

            true ->
              ""
          end

        task = if g["task"], do: ", --task #{g["task"]}", else: ""

        [
          "    graph #{inspect(g["name"])}: #{graph_activations(g)} activations, #{g["weights"]} weights#{task}#{chosen}; " <>
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

    cpu =
      case o["qdq_cpu"] do
        %{"answer" => %{"verdict" => said}} -> "\n        (the QDQ model on ORT's CPU: #{said})"
        _ -> ""
      end

    case o["answer"] do
      %{"kind" => kind, "verdict" => said} ->
        "      output #{inspect(o["name"])} (#{kind}): #{said}; SQNR #{sqnr}#{within}#{verdict}#{cpu}"

      _version_1 ->
        "      output #{inspect(o["name"])}: SQNR #{sqnr}#{within}#{verdict}"
    end
  end

  # version 2: a bar per answer kind; version 1: SQNR and the share within one step
  defp bar(%{"sqnr_db" => db, "within_one_step" => within}),
    do: "bar: SQNR >= #{num(db)} dB, #{num(100 * (within || 0))}% of 8-bit values within one step"

  defp bar(%{} = by_kind) when map_size(by_kind) > 0,
    do:
      "bars: " <>
        Enum.map_join(Enum.sort(by_kind), "; ", fn {kind, text} -> "#{kind} #{text}" end)

  defp bar(_), do: "bar: ?"

  defp graph_activations(%{"mixed_precision" => %{"u16_tensors" => [_ | _] = names}}),
    do: "mixed (u8, #{Enum.join(names, ", ")} at 16 bits)"

  defp graph_activations(g), do: g["activations"]

  defp tried(list) when is_list(list) do
    Enum.map_join(list, ", ", fn t ->
      sqnr = if t["min_sqnr_db"], do: "#{num(t["min_sqnr_db"])} dB", else: "exact"

      meets =
        case t["meets_bar"] do
          true -> ", meets the bar"
          false -> ", below the bar"
          nil -> ""
        end

      "#{activations(t)} #{sqnr}#{meets}#{judged(t["htp"])}"
    end)
  end

  defp tried(_), do: "?"

  # a candidate that met the bar on ORT's CPU, judged again on the HTP emulator
  defp judged(%{"meets_bar" => meets} = htp) do
    sqnr = if htp["min_sqnr_db"], do: "#{num(htp["min_sqnr_db"])} dB", else: "exact"
    " (HTP emulator: #{sqnr}, #{if meets, do: "meets it", else: "below it"})"
  end

  defp judged(_), do: ""

  # "mixed" (--activations auto): u8 with the tensors it names at 16 bits
  defp activations(%{"u16_tensors" => [_ | _] = names}),
    do: "u8 with #{Enum.join(names, ", ")} at 16 bits"

  defp activations(%{"activations" => a}), do: a

  defp step(s) when is_number(s), do: IO.iodata_to_binary(:io_lib.format("~.3g", [s / 1]))
  defp step(_), do: "?"

  defp num(n) when is_integer(n), do: Integer.to_string(n)
  defp num(n) when is_float(n), do: :erlang.float_to_binary(n, decimals: 1)
  defp num(_), do: "?"
end
