# Synchronous against asynchronous pipelined throughput, on a qnn_sim graph whose execute takes
# 1 ms (its sleep_ms): a 224x224x3 u8 input (scale 1/255) fed either f32 frames (quantized on
# the host in each execute) or 1280x720 camera frames (HexagonTpu.Preprocess, bilinear, then
# passed in the model's type). Sync: one predict/3 after another. Async: two executes in flight
# (Graph.execute_async/3), so quantizing or preprocessing the next frame overlaps the running
# execute: on the graph's thread, and in qnn_sim's own asynchronous queue (async_queue_depth:,
# where graphExecute's column is the time from submission to notification). The limit is
# graphExecute's own time (Stats' execute_ns_total), printed beside.
# Prints figures; asserts nothing.
#
#   bash bench/run.sh throughput            (builds the release NIF and qnn_sim, then runs this)
#   mix run bench/throughput.exs BUILDER LIBQNN_SIM [RUNS]    (HEXAGON_TPU_OFFLINE=1 without Hex)

Code.require_file("support.exs", __DIR__)

[builder, lib | rest] = System.argv()
runs = String.to_integer(List.first(rest) || "300")

alias HexagonTpu.{Graph, Preprocess, Runtime, Stats}

dir = Path.join(System.tmp_dir!(), "hexagon_tpu_throughput_#{System.os_time()}")
File.mkdir_p!(dir)

spec = ~s({"graphs": [{"name": "camera",
  "inputs": [{"name": "image", "dtype": "ufixed_point_8", "shape": [1, 224, 224, 3],
              "quant": {"scale": 0.00392156862745098, "offset": 0}}],
  "nodes": [{"op": "identity", "inputs": ["image"],
             "output": {"name": "y", "dtype": "ufixed_point_8", "shape": [1, 224, 224, 3],
                        "quant": {"scale": 0.00392156862745098, "offset": 0}}}],
  "outputs": ["y"]}], "behaviour": {"sleep_ms": 1}})
bin = HexagonTpu.BenchSupport.sim_model!(builder, dir, "camera", spec)

runtime = Runtime.create!(lib_path: lib, system_lib_path: lib)
{:ok, graph} = HexagonTpu.load_model(bin, runtime: runtime)
# the same model, its executes in qnn_sim's own asynchronous queue (QnnGraph_executeAsync)
{:ok, backend} = HexagonTpu.load_model(bin, runtime: runtime, async_queue_depth: 4)
{:backend, 4} = backend.context.execute_queue

f32_frame =
  for i <- 0..(224 * 224 * 3 - 1), into: <<>>, do: <<rem(i, 256) / 255::float-32-little>>

{w, h} = {1280, 720}
camera = for i <- 0..(w * h * 3 - 1), into: <<>>, do: <<rem(i * 97 + div(i, 3840) * 13, 256)>>
pre_opts = [width: w, height: h, resize: :bilinear]

# One inference's input, and how it is executed.
f32_input = fn -> {[f32_frame], [output: :binary, dequantize: :none]} end

camera_input = fn ->
  {[Preprocess.image!(camera, graph, pre_opts)],
   [output: :binary, quantize: :none, dequantize: :none]}
end

sync = fn graph, input ->
  for _ <- 1..runs do
    {inputs, opts} = input.()
    {:ok, _} = HexagonTpu.predict(graph, inputs, opts)
  end
end

# Two in flight: start k+1 (its input made and converted now), then await k.
async = fn graph, input ->
  start = fn ->
    {inputs, opts} = input.()
    {:ok, pending} = Graph.execute_async(graph, inputs, opts)
    pending
  end

  last =
    Enum.reduce(2..runs, start.(), fn _, previous ->
      next = start.()
      {:ok, _} = Graph.await(previous)
      next
    end)

  {:ok, _} = Graph.await(last)
end

measure = fn fun ->
  before = Stats.native()
  started = System.monotonic_time()
  fun.()
  wall = System.convert_time_unit(System.monotonic_time() - started, :native, :nanosecond)
  after_ = Stats.native()
  executes = after_.executes - before.executes

  {wall / runs / 1.0e6, (after_.execute_ns_total - before.execute_ns_total) / executes / 1.0e6,
   (after_.convert_ns_total - before.convert_ns_total) / runs / 1.0e6}
end

ms = &(:erlang.float_to_binary(&1, decimals: 3) |> String.pad_leading(7))

IO.puts("""
#{runs} inferences each, on a qnn_sim graph whose execute sleeps 1 ms \
(#{System.schedulers_online()} schedulers, #{:erlang.system_info(:dirty_cpu_schedulers_online)} dirty CPU)
                                                 ms per inference   graphExecute   host conversion
""")

_warm = measure.(fn -> sync.(graph, f32_input) end)

modes = [
  {"sync ", sync, graph},
  {"async", async, graph},
  {"async, backend queue", async, backend}
]

for {label, input} <- [
      {"f32 frame (quantized)", f32_input},
      {"1280x720 camera frame", camera_input}
    ],
    {mode, run, graph} <- modes do
  {wall, execute, convert} = measure.(fn -> run.(graph, input) end)

  IO.puts(
    String.pad_trailing("#{mode} #{label}", 48) <>
      "#{ms.(wall)}          #{ms.(execute)}        #{ms.(convert)}"
  )
end

File.rm_rf!(dir)
