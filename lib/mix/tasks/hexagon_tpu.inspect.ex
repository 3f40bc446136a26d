defmodule Mix.Tasks.HexagonTpu.Inspect do
  @shortdoc "Prints what a QNN context binary says about itself"

  @moduledoc """
  Prints what a QNN context binary says about itself, read with the QnnSystem library alone
  (no backend, no device): the QAIRT build that made it, API and blob versions, backend, SoC
  model, HTP arch, VTCM size, every graph's inputs and outputs, and which runtimes it loads on.
  When `MODEL.bin.quality.json` lies beside it (`mix hexagon_tpu.compile` writes it for a
  float model it quantized), also the quantization quality measured then, per output
  (`HexagonTpu.Quality`).

      mix hexagon_tpu.inspect MODEL.bin [--system-lib PATH]

  The System library is `--system-lib`, else `HEXAGON_TPU_SYSTEM_LIB`, else
  `/usr/lib/libQnnSystem.so` (as for `HexagonTpu.Runtime.create/1`). See
  `HexagonTpu.inspect_model/2` and `HexagonTpu.ModelInfo`.
  """

  use Mix.Task

  @impl Mix.Task
  def run(argv) do
    {opts, args, invalid} = OptionParser.parse(argv, strict: [system_lib: :string])

    if invalid != [] or length(args) != 1,
      do: Mix.raise("usage: mix hexagon_tpu.inspect MODEL.bin [--system-lib PATH]")

    Mix.Task.run("app.config")
    inspect_opts = if opts[:system_lib], do: [system_lib_path: opts[:system_lib]], else: []

    case HexagonTpu.inspect_model(hd(args), inspect_opts) do
      {:ok, info} ->
        Mix.shell().info(HexagonTpu.ModelInfo.format(info))
        quality(hd(args))

      {:error, error} ->
        Mix.raise(Exception.message(error))
    end
  end

  defp quality(binary) do
    case HexagonTpu.Quality.read(binary) do
      {:ok, figures} ->
        Mix.shell().info(HexagonTpu.Quality.format(figures))

      :none ->
        Mix.shell().info(
          "  quantization quality: (none recorded: no #{Path.basename(HexagonTpu.Quality.path(binary))})"
        )

      {:error, message} ->
        Mix.shell().error("warning: " <> message)
    end
  end
end
