# The NIF must be loaded (scripts/test.sh builds it into priv/native/); fail fast otherwise.
unless HexagonTpu.Native.nif_loaded() do
  raise "the hexagon_tpu NIF is not loaded (#{inspect(HexagonTpu.Native.load_error())}); " <>
          "run the tests with `bash scripts/test.sh`"
end

if Code.ensure_loaded?(:telemetry) and function_exported?(:telemetry, :start_stand_in, 0),
  do: :telemetry.start_stand_in()

# Models are built per run from their JSON specs (see test/support/models.ex).
File.rm_rf!(HexagonTpu.Test.Models.dir())

exclude = [:qnn_host, :hardware]

exclude =
  if Code.ensure_loaded?(Nx) do
    exclude
  else
    IO.puts("Nx is not available (offline build): excluding the tests tagged :nx")
    [:nx | exclude]
  end

ExUnit.start(exclude: exclude)
