defmodule HexagonTpu.QnnHostYoloSplitTest do
  # Issue 33: a YOLOv5 head split by `mix hexagon_tpu.compile` (hexagon_tpu_prepare.split_heads)
  # so that its boxes and scores are quantized apart. The model is test/support/onnx_rewrites.py's
  # yolov5_head: Ultralytics' Detect layer as its export writes it (per level Reshape, Transpose,
  # Sigmoid, Split, the grid and anchor math, Concat on the last axis, Reshape; the levels
  # concatenated), output0 {1, 960, 8}, boxes in hundreds of pixels. Split, the emulator's
  # answer finds the float model's detections (Postprocess.yolov5/2 on [boxes, scores]); unsplit,
  # one u8 step (3.5) for boxes and scores, it does not. And what the rewrite keeps: the split
  # model computes the float model's head exactly; an SSD regressor of a YOLOv5 head's shape
  # ({1, 896, 16}, made by a Transpose) is left whole.
  use ExUnit.Case, async: false

  @moduletag :qnn_host
  @moduletag timeout: 600_000

  alias HexagonTpu.{Graph, Postprocess, Quality}
  alias HexagonTpu.Test.{QnnHost, RealModels}

  @n 960

  # The binary of yolov5_head (split or not), its quality measured on the test's own samples;
  # the float model's answers and the emulator's on them.
  defp run!(key, opts) do
    dir = QnnHost.model!("yolov5_head")
    inputs = Path.join(dir, "inputs")
    %{bin: bin} = QnnHost.compiled!(key, ["yolov5_head"], [eval: inputs] ++ opts)

    {float, graph, ours} =
      QnnHost.float_and_binary!(Path.join(dir, "yolov5_head.onnx"), inputs, bin)

    {:ok, quality} = Quality.read(bin)
    %{bin: bin, graph: graph, float: float, ours: ours, quality: quality}
  end

  # [{float model's detections, the emulator's}] per sample
  defp decoded(float, ours, decode) do
    for {[want], got} <- Enum.zip(float.outputs, ours),
        do: {Postprocess.yolov5!({want.data, want.shape}), decode.(got)}
  end

  defp matched?(%{class: c, box: box}, found),
    do: Enum.any?(found, &(&1.class == c and RealModels.box_iou(&1.box, box) >= 0.5))

  # {found of the float model's, all of them, of ours that are the float model's, all of ours}
  defp figures(pairs) do
    Enum.reduce(pairs, {0, 0, 0, 0}, fn {want, got}, {found, wanted, right, ours} ->
      {found + Enum.count(want, &matched?(&1, got)), wanted + length(want),
       right + Enum.count(got, &matched?(&1, want)), ours + length(got)}
    end)
  end

  test "split: the float model's detections are found again; unsplit they are not" do
    %{bin: bin, graph: graph, float: float, ours: ours, quality: quality} =
      run!("yolov5_split", [])

    assert [
             %{name: "output0_boxes", shape: {1, @n, 4}},
             %{name: "output0_scores", shape: {1, @n, 4}}
           ] = Graph.outputs(graph)

    assert File.read!(bin <> ".names") =~
             "the model's output output0 [1, 960, 8] is split into output0_boxes (its columns 0-3) " <>
               "and output0_scores (columns 4-7), quantized apart; Postprocess.yolov5/2 takes " <>
               "[output0_boxes, output0_scores]"

    assert [%{"outputs" => [_boxes, scores]}] = quality["graphs"]
    assert scores["answer"]["kind"] == "detections"

    pairs =
      decoded(float, ours, fn [boxes, scores] ->
        Postprocess.yolov5!([{boxes, {1, @n, 4}}, {scores, {1, @n, 4}}])
      end)

    {found, wanted, right, got} = figures(pairs)

    IO.puts(
      "yolov5_head split: the emulator finds #{found} of the float model's #{wanted} detections; #{right} of its #{got} are the float model's"
    )

    # measured: all 14, and one more (of 15) that is not the float model's
    assert wanted >= 10
    recall = found / wanted
    assert recall >= 0.9
    assert right / got >= 0.9

    # the task's figures are the binary's on the emulator, on the same samples: the ones
    # measured here
    assert scores["answer"]["recall"] == recall
    assert scores["answer"]["precision"] == right / got
    assert scores["meets_bar"]

    assert_quantized_parts_answer_alike!(graph, float)

    # unsplit: the scores get the boxes' u8 step (3.5) and lose their meaning
    %{graph: whole_graph, float: float, ours: lost, quality: unsplit} =
      run!("yolov5_unsplit", split_head: false)

    assert [%{name: "output0", shape: {1, @n, 8}}] = Graph.outputs(whole_graph)
    assert [%{"outputs" => [whole]}] = unsplit["graphs"]
    refute whole["meets_bar"]

    pairs = decoded(float, lost, fn [output] -> Postprocess.yolov5!({output, {1, @n, 8}}) end)
    {found, wanted, right, got} = figures(pairs)

    IO.puts(
      "yolov5_head unsplit: the emulator finds #{found} of #{wanted}; #{right} of its #{got} are the float model's"
    )

    assert whole["answer"]["recall"] == found / wanted
    assert whole["answer"]["precision"] == right / got
    # measured: the emulator's scores come out as levels of their own step read at the boxes'
    # (up to 894, where ORT's CPU rounds them all to 0): every box a detection, 22% of them right
    assert right / got < 0.5
  end

  # The parts in the model's own type (u8, read as they are) answer as the dequantized parts.
  defp assert_quantized_parts_answer_alike!(graph, float) do
    [input] = Graph.inputs(graph)
    infos = Graph.outputs(graph)

    for [sample] <- float.inputs, threshold <- [0.25, 0.01] do
      inputs = %{input.name => sample.data}
      {:ok, raw} = Graph.execute(graph, inputs, output: :binary, dequantize: :none)
      {:ok, [boxes, scores]} = Graph.execute(graph, inputs, output: :binary)
      opts = [score_threshold: threshold]
      want = Postprocess.yolov5!([{boxes, {1, @n, 4}}, {scores, {1, @n, 4}}], opts)
      assert want != []
      assert Postprocess.yolov5!(Enum.zip(raw, infos), opts) == want
    end
  end

  # test/support/onnx_models.py prepared-diff --split: the task's rewrite on ORT's CPU EP, the
  # split outputs joined again, against the model as shipped (4 random samples).
  defp prepared_diff!(name, shape, low) do
    model = Path.join(QnnHost.model!(name), "#{name}.onnx")

    said =
      QnnHost.python!([
        "prepared-diff",
        model,
        "--input-shape",
        shape,
        "--split",
        "--low",
        "#{low}"
      ])

    [_, diff] = Regex.run(~r/^max_abs_diff (\S+)$/m, said)
    [_, largest] = Regex.run(~r/^max_abs (\S+)$/m, said)
    [_, outputs] = Regex.run(~r/^outputs: (.*)$/m, said)
    {diff, ""} = Float.parse(diff)
    {largest, ""} = Float.parse(largest)
    %{said: said, diff: diff, largest: largest, outputs: String.split(outputs)}
  end

  test "the split model computes the float model's head exactly; an SSD regressor is left whole" do
    split = prepared_diff!("yolov5_head", "images=1x3x256x256", 0.0)
    assert split.outputs == ["output0_boxes", "output0_scores"]

    assert split.said =~
             "output 'output0' [1, 960, 8] (YOLOv5 boxes, objectness and class scores) split into " <>
               "'output0_boxes' [1, 960, 4] and 'output0_scores' [1, 960, 4] (objectness, then the " <>
               "class scores), each quantized on its own"

    assert split.said =~ "Postprocess.yolov5/2 takes [boxes, scores]"
    assert split.largest > 100.0
    assert split.diff == 0.0, split.said

    # {1, 896, 16} from Conv -> Transpose -> Reshape per level: not a YOLOv5 head
    ssd = prepared_diff!("ssd_regressor", "x=1x3x128x128", -1.0)
    assert ssd.outputs == ["regressors"]
    refute ssd.said =~ "split"
    assert ssd.largest > 0.1
    assert ssd.diff == 0.0, ssd.said
  end
end
