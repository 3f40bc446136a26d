# A camera pipeline's throughput with HexagonTpu.Pipeline, against its bound: a qnn_sim graph
# with YOLOv8n's u8 {1, 640, 640, 3} input whose execute sleeps like the NPU's (6 ms by default;
# a field figure for YOLOv8n's graphExecute on the QCS6490 is 6.5 ms), and real CPU stages: pre
# is HexagonTpu.Preprocess.image/3 of a 1280x720 NV12 frame (letterbox, bilinear) to the
# input's u8 bytes, post is HexagonTpu.Postprocess.yolov8/2 (threshold 0.25, NMS 0.45, boxes
# back to the frame) on a YOLOv8n-shaped {1, 84, 8400} f32 head with 300 candidates among its
# 8400 x 80 scores, seeded. qnn_sim computes outputs on the host (a head of 8400 x 84 f32
# through its f64 arithmetic took 36 ms an execute here, work the NPU's host does not do), so
# the graph is a lone u8 identity, which qnn_sim copies (its fast path), and post decodes the
# fixed head instead of the graph's output. Each stage is first timed alone (median), then
# frames go through a serial loop and through the pipeline at several max_in_flight; frames/s
# is set against the bound 1 / max(pre, execute, post) and the serial 1 / (pre + execute + post).
# Prints figures; asserts nothing.
#
#   bash bench/run.sh pipeline [FRAMES [SLEEP_MS]]   (builds the release NIF and qnn_sim first)
#   mix run bench/pipeline.exs BUILDER LIBQNN_SIM [FRAMES [SLEEP_MS]]   (HEXAGON_TPU_OFFLINE=1
#                                                                        without Hex)

Code.require_file("support.exs", __DIR__)

[builder, lib | rest] = System.argv()
frames = String.to_integer(Enum.at(rest, 0) || "300")
sleep_ms = String.to_integer(Enum.at(rest, 1) || "6")

alias HexagonTpu.{Graph, Pipeline, Postprocess, Preprocess, Runtime, Stats}

dir = Path.join(System.tmp_dir!(), "hexagon_tpu_pipeline_#{System.os_time()}")
File.mkdir_p!(dir)

# The head: rows 0..3 cx, cy, w, h in the input's pixels; 80 class rows of scores below the
# threshold but for 300 (box, class) pairs.
:rand.seed(:exsss, {31, 5, 2025})
{n, classes} = {8400, 80}

boxes =
  for row <- 0..3,
      _ <- 1..n,
      do: if(row < 2, do: :rand.uniform() * 640, else: 8 + :rand.uniform() * 192)

hits = MapSet.new(1..300, fn _ -> {:rand.uniform(classes) - 1, :rand.uniform(n) - 1} end)

scores =
  for c <- 0..(classes - 1), i <- 0..(n - 1) do
    if MapSet.member?(hits, {c, i}), do: 0.3 + :rand.uniform() * 0.65, else: :rand.uniform() * 0.2
  end

head = for v <- boxes ++ scores, into: <<>>, do: <<v::float-32-little>>

u8 = ~s("dtype": "ufixed_point_8", "shape": [1, 640, 640, 3],
  "quant": {"scale": 0.00392156862745098, "offset": 0})

spec = ~s({"graphs": [{"name": "yolov8n_input", "inputs": [{"name": "images", #{u8}}],
  "nodes": [{"op": "identity", "inputs": ["images"], "output": {"name": "y", #{u8}}}],
  "outputs": ["y"]}], "behaviour": {"sleep_ms": #{sleep_ms}}})

bin = HexagonTpu.BenchSupport.sim_model!(builder, dir, "yolo", spec)

runtime = Runtime.create!(lib_path: lib, system_lib_path: lib)
{:ok, graph} = HexagonTpu.load_model(bin, runtime: runtime)
[input] = Graph.inputs(graph)

# NV12 1280x720 frames (Y plane, then interleaved U, V at half resolution), four of them.
{w, h} = {1280, 720}

camera =
  for f <- 0..3 do
    for i <- 0..(div(w * h * 3, 2) - 1),
        into: <<>>,
        do: <<rem(i * 97 + div(i, w) * 13 + f * 31, 256)>>
  end

pre_opts = [width: w, height: h, pixel_format: :nv12, fit: :letterbox, resize: :bilinear]
{:ok, transform} = Preprocess.transform(graph, pre_opts)

pre = fn frame ->
  with {:ok, bytes} <- Preprocess.image(frame, graph, pre_opts), do: [{input.type, bytes}]
end

post = fn [_stand_in] ->
  Postprocess.yolov8({head, {1, 84, 8400}},
    score_threshold: 0.25,
    iou_threshold: 0.45,
    letterbox: transform,
    clip: {w, h}
  )
end

execute = fn inputs ->
  {:ok, pending} = Graph.execute_async(graph, inputs, output: :binary, dequantize: :none)
  {:ok, outputs} = Graph.await(pending)
  outputs
end

frame = fn k -> Enum.at(camera, rem(k, 4)) end

ms_of = fn fun ->
  started = System.monotonic_time()
  result = fun.()

  {System.convert_time_unit(System.monotonic_time() - started, :native, :microsecond) / 1000,
   result}
end

median = &HexagonTpu.BenchSupport.median/1

# Each stage alone, on this process, one after another (median ms).
inputs = pre.(frame.(0))
outputs = execute.(inputs)
{:ok, detections} = post.(outputs)
alone = 101

pre_ms = median.(for k <- 1..alone, do: elem(ms_of.(fn -> pre.(frame.(k)) end), 0))
before = Stats.native()
execute_ms = median.(for _ <- 1..alone, do: elem(ms_of.(fn -> execute.(inputs) end), 0))
after_ = Stats.native()
graph_execute_ms = (after_.execute_ns_total - before.execute_ns_total) / alone / 1.0e6
post_ms = median.(for _ <- 1..alone, do: elem(ms_of.(fn -> {:ok, _} = post.(outputs) end), 0))

# Frames/s over `frames` frames: a serial loop, then the pipeline.
serial = fn ->
  for k <- 1..frames do
    {:ok, _} = post.(execute.(pre.(frame.(k))))
  end
end

pipeline = fn max_in_flight ->
  fn ->
    Pipeline.stream(graph, Stream.map(1..frames, frame),
      pre: pre,
      post: post,
      max_in_flight: max_in_flight,
      output: :binary,
      dequantize: :none
    )
    |> Enum.each(fn {:ok, _detections} -> :ok end)
  end
end

fps = fn run ->
  {ms, _} = ms_of.(run)
  frames / (ms / 1000)
end

_warm = fps.(pipeline.(3))

runs = [
  {"serial loop (pre, execute, post)", fps.(serial)}
  | for(m <- [1, 2, 3, 4], do: {"Pipeline.stream, max_in_flight: #{m}", fps.(pipeline.(m))})
]

bound = 1000 / Enum.max([pre_ms, execute_ms, post_ms])
serial_bound = 1000 / (pre_ms + execute_ms + post_ms)

f = fn x, d -> :erlang.float_to_binary(x / 1, decimals: d) |> String.pad_leading(8) end

IO.write("""
#{frames} frames each; a 1280x720 NV12 frame letterboxed to 640x640 u8, a qnn_sim graph \
sleeping #{sleep_ms} ms, #{length(detections)} detections a frame
(#{System.schedulers_online()} schedulers, #{:erlang.system_info(:dirty_cpu_schedulers_online)} \
dirty CPU)

each stage alone, median of #{alone} (ms)
  pre   Preprocess.image/3                  #{f.(pre_ms, 3)}
  exec  execute_async/3 + await/2           #{f.(execute_ms, 3)}   (graphExecute #{f.(graph_execute_ms, 3) |> String.trim()})
  post  Postprocess.yolov8/2                #{f.(post_ms, 3)}

                                          frames/s   of the bound
""")

for {label, value} <- runs,
    do:
      IO.puts(
        "  #{String.pad_trailing(label, 38)}#{f.(value, 1)}   #{f.(100 * value / bound, 1)}%"
      )

IO.puts("""
  #{String.pad_trailing("bound 1 / max(pre, exec, post)", 38)}#{f.(bound, 1)}
  #{String.pad_trailing("serial 1 / (pre + exec + post)", 38)}#{f.(serial_bound, 1)}
""")

File.rm_rf!(dir)
