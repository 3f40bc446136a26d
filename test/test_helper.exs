# The NIF must be loaded (scripts/test.sh builds it into priv/native/); fail fast otherwise.
unless HexagonTpu.Native.nif_loaded() do
  raise "the hexagon_tpu NIF is not loaded (#{inspect(HexagonTpu.Native.load_error())}); " <>
          "run the tests with `bash scripts/test.sh`"
end

if Code.ensure_loaded?(:telemetry) and function_exported?(:telemetry, :start_stand_in, 0),
  do: :telemetry.start_stand_in()

# :cover (test/names_fuzz_test.exs) lives in :tools, which Mix prunes from the code path
# (Elixir 1.15 and later) as no application here depends on it.
if function_exported?(Mix, :ensure_application!, 1),
  do: apply(Mix, :ensure_application!, [:tools])

# Models are built per run from their JSON specs (see test/support/models.ex).
File.rm_rf!(HexagonTpu.Test.Models.dir())

# Qualcomm's own libraries (the x86-64 HTP emulator and QnnSystem from PyPI's onnxruntime-qnn,
# in the venv `mix hexagon_tpu.compile --setup` creates): the :qnn_host suite runs whenever
# they are installed. Its models are made per run (test/support/qnn_host.ex).
File.rm_rf!(HexagonTpu.Test.QnnHost.dir())

exclude =
  case HexagonTpu.Test.QnnHost.unavailable_reason() do
    nil ->
      IO.puts("Running the :qnn_host tests on #{HexagonTpu.Test.QnnHost.lib_dir()}")
      [:hardware]

    reason ->
      IO.puts(
        "Qualcomm's QNN libraries are not installed: excluding the tests tagged :qnn_host (#{reason})"
      )

      [:qnn_host, :hardware]
  end

exclude =
  if Code.ensure_loaded?(Nx) do
    exclude
  else
    IO.puts("Nx is not available (offline build): excluding the tests tagged :nx")
    [:nx | exclude]
  end

# Telemetry.Metrics (an optional dependency of the Hex package) is among the Hex sources only
# when they hold it (HEXAGON_TPU_HEX_SOURCES/telemetry_metrics).
exclude =
  if Code.ensure_loaded?(Telemetry.Metrics) do
    exclude
  else
    IO.puts("Telemetry.Metrics is not available: excluding the tests tagged :telemetry_metrics")
    [:telemetry_metrics | exclude]
  end

# RustlerPrecompiled's and Rustler's loaders (test/nif_not_loaded_hex_test.exs) need their
# sources (HEXAGON_TPU_HEX_SOURCES: .ci/elixir-1.18.sh sets it to ../shared/hex) and, for
# rustler 0.38, Elixir 1.15 or newer.
exclude =
  cond do
    System.get_env("HEXAGON_TPU_HEX_SOURCES") in [nil, ""] ->
      IO.puts("HEXAGON_TPU_HEX_SOURCES is not set: excluding the tests tagged :hex_sources")
      [:hex_sources | exclude]

    Version.match?(System.version(), "< 1.15.0") ->
      IO.puts("rustler 0.38 needs Elixir 1.15: excluding the tests tagged :hex_sources")
      [:hex_sources | exclude]

    true ->
      exclude
  end

# HEXAGON_TPU_TEST_REPORT=FILE: the run's counts, per tag too, written to FILE (RunReport).
formatters =
  if System.get_env("HEXAGON_TPU_TEST_REPORT") in [nil, ""],
    do: [ExUnit.CLIFormatter],
    else: [ExUnit.CLIFormatter, HexagonTpu.Test.RunReport]

ExUnit.start(exclude: exclude, formatters: formatters)
