# Run by test/qnn_host_threads_test.exs in a VM of its own, so that its stdout is the VM's
# and an orderly stop can be watched: a corrupt binary's explanation, and every way a QNN
# handle is freed, against Qualcomm's emulator, with QNN's log in Logger at :warn.
#   elixir -pa EBIN test/support/qnn_host_child.exs LIB_DIR MODEL.bin
[lib_dir, model] = System.argv()
{:ok, _} = Application.ensure_all_started(:hexagon_tpu)
Logger.configure(level: :debug)

alias HexagonTpu.{Context, Graph, Runtime, Stats}

opts = [
  lib_path: Path.join(lib_dir, "libQnnHtp.so"),
  system_lib_path: Path.join(lib_dir, "libQnnSystem.so"),
  log_level: :warn
]

run = fn runtime ->
  {:ok, context} = Context.from_file(runtime, model)
  {:ok, graph} = Graph.retrieve(context, hd(Context.graphs(context)))
  inputs = for info <- Graph.inputs(graph), do: :binary.copy(<<0>>, info.byte_size)
  {:ok, _} = Graph.execute(graph, inputs, quantize: :none, dequantize: :none, output: :binary)
  context
end

# A corrupt binary: QNN's explanation must come through the log callback (Logger), here in a
# VM no other test's runtimes have touched.
{:ok, runtime} = Runtime.create(opts)
good = File.read!(model)
offset = div(byte_size(good), 2)
<<pre::binary-size(offset), _::binary-size(64), post::binary>> = good

{:error, %HexagonTpu.Error{qnn_code: code}} =
  Context.from_binary(runtime, pre <> :binary.copy(<<0xA5>>, 64) <> post)

IO.puts("CHILD corrupt_binary_code=#{code}")
:ok = Runtime.close(runtime)

# Freed by the garbage collector: runtimes and contexts dropped in other processes.
for _ <- 1..4 do
  Task.async(fn ->
    {:ok, runtime} = Runtime.create(opts)
    run.(runtime)
    :ok
  end)
  |> Task.await(60_000)
end

Stats.sweep()

# Closed while the dirty IO schedulers are busy with file reads.
big = Path.join(System.tmp_dir!(), "qnn_host_child_#{System.os_time()}.bin")
File.write!(big, :binary.copy(<<1>>, 16 * 1024 * 1024))

readers =
  for _ <- 1..4,
      do: spawn(fn -> Stream.repeatedly(fn -> File.read!(big) end) |> Stream.run() end)

{:ok, runtime} = Runtime.create(opts)

for _ <- 1..4 do
  context = run.(runtime)
  :ok = Context.close(context)
end

:ok = Runtime.close(runtime)
Enum.each(readers, &Process.exit(&1, :kill))
File.rm!(big)
Stats.sweep()

# Left alive for the orderly stop: a runtime with a loaded context.
{:ok, kept} = Runtime.create(opts)
_context = run.(kept)
# QNN's lines so far in Logger, and counted, before they are read and the VM stops.
:ok = HexagonTpu.QnnLog.flush()
counters = Stats.native()
IO.puts("CHILD log_lines=#{counters.log_lines} runtimes_alive=#{counters.runtimes_alive}")
IO.puts("CHILD stopping")
System.stop(0)
Process.sleep(:infinity)
