# HexagonTpu.Postprocess against the same definitions in numpy, in one run: YOLOv8n at 640
# (8400 candidates x 80 classes, {1, 84, 8400}) decoded and suppressed, the same boxes and
# scores through nms/3 ({8400, 4} xyxy and {8400, 80}), BlazeFace's SSD head, a 512x512
# 21-class mask, and a 1000-class top 5 with softmax; the nms rows against OpenCV's
# dnn.NMSBoxesBatched too; the YOLOv8 head quantized (u8) read as it is against dequantized,
# on the synthetic head and on a real detector's outputs. Prints figures; asserts nothing.
#
#   mix run bench/postprocess.exs [RUNS]
#
# Ours: the whole public call (options, NIF on a dirty CPU scheduler, the Detection structs).
# numpy: test/support/postprocess_numpy.py (the QNN venv's Python, when it is installed), the
# tests' reference: vectorized decoding and thresholds, the greedy visit a Python loop with
# each IoU row vectorized, timed inside Python. The output is synthetic: every box random, 5%
# of the class scores high, the rest under 0.1, so a threshold of 0.25 leaves about 3000
# candidates (many boxes have a class above it) and 0.5 about 1700.

alias HexagonTpu.Postprocess

runs = String.to_integer(List.first(System.argv()) || "20")
:rand.seed(:exsss, {1, 2, 3})
{n, c} = {8400, 80}
f32 = fn list -> for x <- list, into: <<>>, do: <<x::float-32-little>> end

boxes_cxcywh =
  for _ <- 1..n,
      do: [
        :rand.uniform() * 640,
        :rand.uniform() * 640,
        8 + :rand.uniform() * 120,
        8 + :rand.uniform() * 120
      ]

class_rows =
  for _ <- 1..c,
      do:
        for(
          _ <- 1..n,
          do: if(:rand.uniform() < 0.05, do: :rand.uniform(), else: :rand.uniform() * 0.1)
        )

# {1, 84, 8400}: rows cx, cy, w, h, then the class rows
box_rows = boxes_cxcywh |> Enum.zip_with(& &1)
output = f32.(List.flatten(box_rows ++ class_rows))

boxes_xyxy =
  Enum.flat_map(boxes_cxcywh, fn [cx, cy, w, h] ->
    [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
  end)

scores_nc = class_rows |> Enum.zip_with(& &1) |> List.flatten()
logits = for _ <- 1..1000, do: :rand.normal() * 3

Code.require_file("support.exs", __DIR__)
alias HexagonTpu.BenchSupport

time_ms = &BenchSupport.time_ms(&1, runs)
python = BenchSupport.python()

dir = Path.join(System.tmp_dir!(), "hexagon_tpu_bench_postprocess")
File.mkdir_p!(dir)

file = fn name, bytes ->
  path = Path.join(dir, name)
  File.write!(path, bytes)
  path
end

numpy_ms = fn params ->
  if python do
    script = Path.expand("../test/support/postprocess_numpy.py", __DIR__)
    json = "{" <> Enum.map_join(params, ", ", fn {k, v} -> ~s("#{k}": #{v}) end) <> "}"

    {out, 0} =
      System.cmd(python, [script, "bench", json, Integer.to_string(max(div(runs, 4), 3))])

    [_, ms] = Regex.run(~r/"median_ms": ([0-9.e+-]+)/, out)
    String.to_float(ms)
  end
end

nms_json = fn thr ->
  [
    score_threshold: thr,
    iou_threshold: 0.45,
    max_detections: 300,
    class_agnostic: false,
    multi_label: false
  ]
  |> Enum.map(fn {k, v} -> {k, if(is_boolean(v), do: to_string(v), else: v)} end)
end

output_file = ~s("#{file.("output", output)}")
boxes_file = ~s("#{file.("boxes", f32.(boxes_xyxy))}")
scores_file = ~s("#{file.("scores", f32.(scores_nc))}")
logits_file = ~s("#{file.("logits", f32.(logits))}")

# OpenCV's cv2.dnn.NMSBoxesBatched for the nms rows (numpy turning the {N, 4} xyxy boxes and
# {N, C} scores into its inputs first: x, y, w, h and each box's best class and score), with the
# opencv-python-headless test/support/real_models.py installs into the cache
# (test/support/opencv_reference.py, timed inside Python)
opencv_site =
  with python when python != nil <- python,
       {:ok, site} <- BenchSupport.opencv_site(python),
       do: site,
       else: (_ -> nil)

opencv_nms_ms = fn boxes_path, scores_path, thr ->
  if opencv_site do
    script = Path.expand("../test/support/opencv_reference.py", __DIR__)
    args = Enum.map([boxes_path, scores_path, n, c, thr, max(div(runs, 4), 3)], &to_string/1)

    {out, 0} =
      System.cmd(python, [script, "bench-nms" | args], env: [{"PYTHONPATH", opencv_site}])

    String.to_float(String.trim(out))
  end
end

IO.puts("#{runs} runs each (numpy, OpenCV: a quarter of them, at least 3), median ms")

IO.puts(
  String.pad_trailing("case", 58) <>
    String.pad_leading("ours", 9) <>
    String.pad_leading("numpy", 10) <> String.pad_leading("opencv", 10)
)

shown = fn
  nil -> "-"
  ms -> :erlang.float_to_binary(ms, decimals: 2)
end

row_cv = fn label, ours, numpy, opencv ->
  IO.puts(
    String.pad_trailing(label, 58) <>
      String.pad_leading(shown.(ours), 9) <>
      String.pad_leading(shown.(numpy), 10) <> String.pad_leading(shown.(opencv), 10)
  )
end

row = fn label, ours, numpy -> row_cv.(label, ours, numpy, nil) end

for thr <- [0.25, 0.5] do
  kept = Postprocess.yolov8!({output, {1, 4 + c, n}}, score_threshold: thr)
  ours = time_ms.(fn -> Postprocess.yolov8!({output, {1, 4 + c, n}}, score_threshold: thr) end)

  numpy =
    numpy_ms.(
      [op: ~s("yolov8"), output: output_file, n: n, classes: c, letterbox: "null", clip: "null"] ++
        nms_json.(thr)
    )

  row.("yolov8 {1, 84, 8400}, score > #{thr}, IoU 0.45 (#{length(kept)} kept)", ours, numpy)
end

# The same head as the compile task leaves it: split, boxes and scores u8 each with its own
# scale, read in the model's own type against the same values dequantized to f32 first (what
# predict/3 returns by default, the dequantization itself not counted here). The answers are
# equal (test/postprocess_test.exs); numpy's column: the f32 path's reference above.
u8_part = fn values, scale, name, shape ->
  # a scale is an f32 value, as QNN's are
  <<scale::float-32>> = <<scale::float-32>>
  bytes = for v <- values, into: <<>>, do: <<min(round(v / scale), 255)::8>>

  info = %HexagonTpu.TensorInfo{
    name: name,
    shape: shape,
    type: {:u, 8},
    data_type: :ufixed_point_8,
    quantization: %{kind: :per_tensor, scale: scale, zero_point: 0, bitwidth: 8},
    byte_size: byte_size(bytes)
  }

  dequantized = for <<q::8 <- bytes>>, into: <<>>, do: <<q * scale::float-32-little>>
  {{bytes, info}, {dequantized, shape}}
end

{box_q, box_f} = u8_part.(List.flatten(box_rows), 3.0, "boxes", {1, 4, n})
{score_q, score_f} = u8_part.(List.flatten(class_rows), 1 / 255, "scores", {1, c, n})

for thr <- [0.25, 0.5] do
  kept = Postprocess.yolov8!([box_q, score_q], score_threshold: thr)
  ^kept = Postprocess.yolov8!([box_f, score_f], score_threshold: thr)
  f32_ms = time_ms.(fn -> Postprocess.yolov8!([box_f, score_f], score_threshold: thr) end)
  u8_ms = time_ms.(fn -> Postprocess.yolov8!([box_q, score_q], score_threshold: thr) end)
  row.("yolov8 split, f32 (dequantized), score > #{thr} (#{length(kept)} kept)", f32_ms, nil)
  row.("yolov8 split, u8 as the model wrote it, score > #{thr}", u8_ms, nil)
end

# A real detector's outputs: nudenet 3.4.2's YOLOv8n at 320 ({1, 22, 2100}, split by the task,
# u8), run on Qualcomm's emulator by test/qnn_host_wheel_models_test.exs, which keeps them in
# the build's cache (run it first: `mix test --only wheel_models --include wheel_models`).
real = Path.expand("../_build/test/qnn_host_models/real_models/nudenet_320n/outputs.etf", __DIR__)

if File.exists?(real) do
  %{infos: infos, runs: samples} = real |> File.read!() |> :erlang.binary_to_term()
  shapes = Enum.map(infos, & &1.shape)

  for thr <- [0.25, 0.01] do
    decode = fn parts ->
      fn -> for p <- parts, do: Postprocess.yolov8!(p, score_threshold: thr) end
    end

    f32_parts = for s <- samples, do: Enum.zip(s.dequantized, shapes)
    u8_parts = for s <- samples, do: Enum.zip(s.raw, infos)
    kept = decode.(u8_parts).() |> Enum.map(&length/1) |> Enum.sum()
    per = length(samples)
    f32_ms = time_ms.(decode.(f32_parts)) / per
    u8_ms = time_ms.(decode.(u8_parts)) / per

    row.(
      "nudenet 320n (real), f32 (dequantized), score > #{thr} (#{kept} kept in #{per})",
      f32_ms,
      nil
    )

    row.("nudenet 320n (real), u8 as the model wrote it, score > #{thr}", u8_ms, nil)
  end
else
  IO.puts("(no real detector outputs at #{real}: the wheel models' test keeps them)")
end

for thr <- [0.25, 0.5] do
  args = [{boxes_xyxy |> f32.(), {n, 4}}, {f32.(scores_nc), {n, c}}]
  [b, s] = args
  kept = Postprocess.nms!(b, s, score_threshold: thr)
  ours = time_ms.(fn -> Postprocess.nms!(b, s, score_threshold: thr) end)

  numpy =
    numpy_ms.(
      [
        op: ~s("nms"),
        boxes: boxes_file,
        scores: scores_file,
        n: n,
        classes: c,
        box_classes: "null",
        format: ~s("xyxy")
      ] ++
        nms_json.(thr)
    )

  row.("nms {8400, 4} x {8400, 80}, score > #{thr} (#{length(kept)} kept)", ours, numpy)

  # without a limit on the kept boxes, as OpenCV's NMSBoxesBatched works (its top_k limits the
  # candidates, not the kept boxes): the same work on both sides
  kept = Postprocess.nms!(b, s, score_threshold: thr, max_detections: nil)
  ours = time_ms.(fn -> Postprocess.nms!(b, s, score_threshold: thr, max_detections: nil) end)
  opencv = opencv_nms_ms.(String.trim(boxes_file, "\""), String.trim(scores_file, "\""), thr)
  row_cv.("nms, the same, no limit (#{length(kept)} kept)", ours, nil, opencv)
end

# BlazeFace's front head: 896 anchors x 16 values, logits, decoded as MediaPipe's graph does
ssd_opts =
  Keyword.merge(Postprocess.ssd_options(:face_detection_short_range), score_threshold: 0.75)

blaze = ssd_opts[:anchors]

raw_boxes = for _ <- 1..(896 * 16), do: :rand.normal() * 20
raw_scores = for _ <- 1..896, do: :rand.normal() * 3
{rb, rs} = {{f32.(raw_boxes), {1, 896, 16}}, {f32.(raw_scores), {1, 896, 1}}}

ours = time_ms.(fn -> Postprocess.ssd!(rb, rs, ssd_opts) end)
anchor_json = "{" <> Enum.map_join(blaze, ", ", fn {k, v} -> ~s("#{k}": #{inspect(v)}) end) <> "}"

numpy =
  numpy_ms.(
    [
      op: ~s("ssd"),
      boxes: ~s("#{file.("raw_boxes", f32.(raw_boxes))}"),
      scores: ~s("#{file.("raw_scores", f32.(raw_scores))}"),
      n: 896,
      coords: 16,
      classes: 1,
      anchor_options: anchor_json,
      x_scale: ssd_opts[:x_scale],
      y_scale: ssd_opts[:y_scale],
      w_scale: ssd_opts[:w_scale],
      h_scale: ssd_opts[:h_scale],
      reverse_output_order: to_string(ssd_opts[:reverse_output_order]),
      apply_exponential_on_box_size: "false",
      sigmoid_score: to_string(ssd_opts[:sigmoid_score]),
      score_clipping_thresh: ssd_opts[:score_clipping_thresh]
    ] ++ Keyword.merge(nms_json.(0.75), iou_threshold: ssd_opts[:iou_threshold])
  )

row.("ssd BlazeFace front, 896 anchors made each call", ours, numpy)

# a 512x512 segmentation output of 21 classes (Pascal VOC), {H, W, C}
seg = for _ <- 1..(512 * 512 * 21), into: <<>>, do: <<:rand.uniform()::float-32-little>>
ours = time_ms.(fn -> Postprocess.mask!({seg, {512, 512, 21}}) end)

numpy =
  numpy_ms.(
    op: ~s("mask"),
    output: ~s("#{file.("seg", seg)}"),
    h: 512,
    w: 512,
    classes: 21,
    layout: ~s("hwc")
  )

row.("mask {512, 512, 21} argmax", ours, numpy)

ours = time_ms.(fn -> Postprocess.top_k!(f32.(logits), 5, softmax: true) end)
numpy = numpy_ms.(op: ~s("top_k"), scores: logits_file, k: 5, softmax: "true")
row.("top_k 5 of 1000, softmax", ours, numpy)
File.rm_rf!(dir)
