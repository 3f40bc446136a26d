# The hexagon_tpu demo on Qualcomm's own QNN stack: a real QNN context binary (HTP v68, the
# QCS6490's NPU), compiled from a small ONNX classifier with `mix hexagon_tpu.compile`, runs
# on Qualcomm's HTP emulator (the x86-64 libQnnHtp.so in PyPI's onnxruntime-qnn wheel), and its
# output is compared with ONNX Runtime's on the same binary and backend.
#
# Run it with `bash scripts/demo.sh`, which installs the stack, makes the model and ORT's
# reference output first. By hand:
#   mix run examples/demo_real.exs MODEL.bin QNN_LIB_DIR INPUT.f32 ORT_OUTPUT.f32
#
# On the Dragon Q6A the same code runs on the NPU itself: drop the library options.

[model_path, lib_dir, input_path, ort_path] =
  case System.argv() do
    [_, _, _, _] = args ->
      args

    _ ->
      raise "usage: mix run examples/demo_real.exs MODEL.bin QNN_LIB_DIR INPUT.f32 ORT_OUTPUT.f32"
  end

import Bitwise
alias HexagonTpu.{Graph, Runtime, Stats}

floats = fn binary -> for <<v::float-32-little <- binary>>, do: v end
round3 = fn values -> Enum.map(values, &Float.round(&1, 4)) end

IO.puts("""
Qualcomm's HTP emulator executes the real v68 context binary in software on this CPU. It is
slow (SqueezeNet 1.1 at 224x224 takes about 0.75 s per execute here), and none of the figures
below are device figures. The "# LIBNATIVE" line is printed by Qualcomm's library as it loads.
""")

{runtime_us, {:ok, runtime}} =
  :timer.tc(fn ->
    Runtime.create(
      lib_path: Path.join(lib_dir, "libQnnHtp.so"),
      system_lib_path: Path.join(lib_dir, "libQnnSystem.so"),
      # The emulator logs four start-up notices at :warn; errors still reach Logger.
      log_level: :error
    )
  end)

{:ok, info} = Runtime.info(runtime)

{load_us, {:ok, model}} = :timer.tc(fn -> HexagonTpu.load_model(model_path, runtime: runtime) end)

IO.puts("""
backend   #{info.provider_name} (core API #{info.core_api}, backend API #{info.backend_api}, build #{info.build_id})
          from #{lib_dir}
runtime   created in #{Float.round(runtime_us / 1000, 1)} ms (QNN sets itself up once per process)
model     #{Path.basename(model_path)} (#{File.stat!(model_path).size} bytes), loaded in #{Float.round(load_us / 1000, 1)} ms
graph     #{model.name}
""")

for tensor <- Graph.inputs(model), do: IO.puts("  input  #{inspect(tensor)}")
for tensor <- Graph.outputs(model), do: IO.puts("  output #{inspect(tensor)}")

# One prediction: f32 in, quantized by this package with the binary's own parameters; the
# quantized output dequantized back to f32. ORT's QNN EP did the same on the same binary.
input = File.read!(input_path)
reference = File.read!(ort_path)
{:ok, [output]} = HexagonTpu.predict(model, [input], output: :binary)
{:ok, [raw]} = HexagonTpu.predict(model, [input], output: :binary, dequantize: :none)

ours = floats.(output)
theirs = floats.(reference)
[out_info] = Graph.outputs(model)

raw_line =
  case out_info.type do
    {kind, bits} when kind in [:u, :s] ->
      values =
        for <<v::size(bits)-little <- raw>>,
          do: if(kind == :s and v >= 1 <<< (bits - 1), do: v - (1 <<< bits), else: v)

      "\n             as QNN wrote it (#{inspect(out_info.type)}): #{inspect(values)}"

    _ ->
      ""
  end

comparison =
  if output == reference do
    "equal, bit for bit (#{length(ours)} of #{length(ours)} values)"
  else
    diffs = Enum.zip(ours, theirs) |> Enum.count(fn {a, b} -> a != b end)

    max_abs =
      Enum.zip(ours, theirs) |> Enum.map(fn {a, b} -> abs(a - b) end) |> Enum.max(fn -> 0.0 end)

    "DIFFERENT: #{diffs} of #{length(ours)} values differ (largest difference #{max_abs})"
  end

{best, class} = ours |> Enum.with_index() |> Enum.max_by(&elem(&1, 0))

IO.puts("""

input        #{inspect(round3.(floats.(input)))}
hexagon_tpu  #{inspect(round3.(ours))}  (class #{class}, p=#{Float.round(best, 3)})#{raw_line}
ORT QNN EP   #{inspect(round3.(theirs))}
comparison   #{comparison}
""")

# Timings on the emulator: the whole predict/3 call, and graphExecute alone (the native
# counter execute_ns_last, read after every call).
runs = 200

samples =
  for _ <- 1..runs do
    {us, {:ok, _}} = :timer.tc(fn -> HexagonTpu.predict(model, [input], output: :binary) end)
    {us, Stats.native().execute_ns_last}
  end

pct = fn values, p ->
  sorted = Enum.sort(values)
  Enum.at(sorted, min(length(sorted) - 1, round(p * length(sorted))))
end

wall = Enum.map(samples, &elem(&1, 0))
graph_us = Enum.map(samples, &(elem(&1, 1) / 1000))
fmt = fn us -> "#{Float.round(us / 1000, 2)} ms" end

IO.puts("""
#{runs} predictions on the emulator (not device figures):
  predict/3     p50 #{fmt.(pct.(wall, 0.5))}, p99 #{fmt.(pct.(wall, 0.99))}
  graphExecute  p50 #{fmt.(pct.(graph_us, 0.5))}, p99 #{fmt.(pct.(graph_us, 0.99))} (Stats.native/0 execute_ns_last)

HexagonTpu.Stats.native() (the model still loaded):
#{inspect(Stats.native(), pretty: true)}
""")

:ok = Graph.close(model)
:ok = HexagonTpu.Context.close(model.context)
:ok = Runtime.close(runtime)

IO.puts(
  "after close/1: #{inspect(Map.take(Stats.native(), [:runtimes_alive, :contexts_alive, :graphs_alive]))}"
)

if output != reference do
  IO.puts(:stderr, "demo_real.exs: hexagon_tpu and ORT disagree on the same binary")
  System.halt(1)
end
