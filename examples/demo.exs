# The hexagon_tpu demo: load a small quantized classifier built for qnn_sim (the project's
# simulated QNN backend), predict, and print the outputs, the timings and the native counters.
#
# Run it with `bash scripts/demo.sh`, which builds everything first. By hand:
#   mix run examples/demo.exs MODEL.bin path/to/libqnn_sim.so
#
# The same code runs on the Dragon Q6A NPU with a real context binary: drop the library
# options (the defaults are /usr/lib/libQnnHtp.so and /usr/lib/libQnnSystem.so).

[model_path, backend] =
  case System.argv() do
    [model, lib] -> [model, lib]
    _ -> raise "usage: mix run examples/demo.exs MODEL.bin LIBQNN_BACKEND.so"
  end

alias HexagonTpu.{Graph, Stats}

# The "image" is 4x4 pixels in 0.0..1.0; the model tells which pattern it shows.
patterns = %{
  "horizontal" => for(r <- 0..3, _c <- 0..3, do: if(r == 1, do: 1.0, else: 0.0)),
  "vertical" => for(_r <- 0..3, c <- 0..3, do: if(c == 2, do: 1.0, else: 0.0)),
  "diagonal" => for(r <- 0..3, c <- 0..3, do: if(r == c, do: 1.0, else: 0.0)),
  "corners" => for(r <- 0..3, c <- 0..3, do: if(r in [0, 3] and c in [0, 3], do: 1.0, else: 0.0))
}

labels = ["horizontal", "vertical", "diagonal", "corners"]
f32 = fn values -> for v <- values, into: <<>>, do: <<v::float-32-little>> end
floats = fn binary -> for <<v::float-32-little <- binary>>, do: v end

{load_us, {:ok, model}} =
  :timer.tc(fn ->
    HexagonTpu.load_model(model_path, lib_path: backend, system_lib_path: backend)
  end)

{:ok, info} = HexagonTpu.Runtime.info(model.context.runtime)

IO.puts("""
backend   #{info.provider_name} (core API #{info.core_api}, backend API #{info.backend_api}) from #{Path.basename(backend)}
model     #{inspect(model)}
loaded in #{Float.round(load_us / 1000, 2)} ms
""")

for tensor <- Graph.inputs(model), do: IO.puts("  input  #{inspect(tensor)}")
for tensor <- Graph.outputs(model), do: IO.puts("  output #{inspect(tensor)}")
IO.puts("")

# f32 in -> quantized with the model's parameters; quantized out -> dequantized to f32.
for label <- labels do
  noisy = Enum.map(patterns[label], &min(1.0, &1 + :rand.uniform() * 0.1))
  {:ok, [logits, probs]} = HexagonTpu.predict(model, [f32.(noisy)], output: :binary)
  probs = floats.(probs)
  {best, index} = probs |> Enum.with_index() |> Enum.max_by(&elem(&1, 0))

  IO.puts(
    "#{String.pad_trailing(label, 10)} -> #{String.pad_trailing(Enum.at(labels, index), 10)} " <>
      "p=#{Float.round(best, 3)}  probabilities #{inspect(Enum.map(probs, &Float.round(&1, 3)))}  " <>
      "logits #{inspect(Enum.map(floats.(logits), &Float.round(&1, 2)))}"
  )
end

# Timings: the whole predict call (conversion, dirty scheduler, graphExecute) and QNN's
# graphExecute alone, from the native counters.
input = f32.(patterns["diagonal"])
runs = 2_000
before = Stats.native()

wall =
  for _ <- 1..runs do
    {us, {:ok, _}} = :timer.tc(fn -> HexagonTpu.predict(model, [input], output: :binary) end)
    us
  end
  |> Enum.sort()

after_ = Stats.native()
pct = fn p -> Enum.at(wall, min(runs - 1, round(p * runs))) end

graph_us =
  (after_.execute_ns_total - before.execute_ns_total) / (after_.executes - before.executes) / 1000

IO.puts("""

#{runs} predictions: predict/3 p50 #{pct.(0.5)} us, p99 #{pct.(0.99)} us, mean #{Float.round(Enum.sum(wall) / runs, 1)} us; \
graphExecute alone: mean #{Float.round(graph_us, 1)} us, last #{after_.execute_ns_last} ns

HexagonTpu.Stats.native() (the model still loaded):
#{inspect(Stats.native(), pretty: true)}
""")

# Deterministic teardown (the garbage collector would do it too). A context closed while its
# graph lives is freed with the graph, so close both.
:ok = Graph.close(model)
:ok = HexagonTpu.Context.close(model.context)

IO.puts(
  "after Graph.close/1 and Context.close/1: " <>
    inspect(Map.take(Stats.native(), [:contexts_alive, :graphs_alive]))
)
