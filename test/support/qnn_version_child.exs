# Run by test/qnn_host_versions_test.exs in a VM of its own, so that one QAIRT's libraries are
# the only ones in the process: loads each binary on the runtime in LIB_DIR and runs it once
# on the raw inputs given (hex-encoded bytes, one per input), QNN's log at :warn. A binary
# that fails is loaded again without the pre-flight verdict, for QNN's own answer.
#   elixir -pa EBIN test/support/qnn_version_child.exs LIB_DIR MODEL.bin:HEX,HEX ...
[lib_dir | runs] = System.argv()
{:ok, _} = Application.ensure_all_started(:hexagon_tpu)

alias HexagonTpu.{Context, Graph, Runtime}

{:ok, runtime} =
  Runtime.create(
    lib_path: Path.join(lib_dir, "libQnnHtp.so"),
    system_lib_path: Path.join(lib_dir, "libQnnSystem.so"),
    log_level: :warn
  )

{:ok, info} = Runtime.info(runtime)
IO.puts("CHILD runtime #{info.build_id}")

for run <- runs do
  [bin, hex] = String.split(run, ":", parts: 2)
  inputs = hex |> String.split(",") |> Enum.map(&Base.decode16!/1)

  case Context.from_file(runtime, bin) do
    {:ok, context} ->
      [name] = Context.graphs(context)
      graph = Graph.retrieve!(context, name)

      {:ok, outputs} =
        Graph.execute(graph, inputs, quantize: :none, dequantize: :none, output: :binary)

      IO.puts(
        "CHILD #{bin} graph #{name} outputs #{Enum.map_join(outputs, ",", &Base.encode16/1)}"
      )

    {:error, error} ->
      IO.puts("CHILD #{bin} error #{error.reason} #{error.qnn_code}")

      # and QNN's own answer, without the pre-flight verdict
      {:error, error} = Context.from_file(runtime, bin, preflight: false)
      IO.puts("CHILD #{bin} without preflight error #{error.reason} #{error.qnn_code}")
  end
end

# QNN's log lines reach Logger through HexagonTpu.QnnLog: let them through before stopping.
:ok = HexagonTpu.QnnLog.flush()
Logger.flush()
System.stop(0)
Process.sleep(:infinity)
