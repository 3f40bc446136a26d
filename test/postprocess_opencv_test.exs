defmodule HexagonTpu.PostprocessOpencvTest do
  # HexagonTpu.Postprocess.nms/3 against OpenCV's cv2.dnn.NMSBoxes (class-agnostic) and
  # NMSBoxesBatched (per class), opencv-python-headless pinned in
  # test/support/real_models/requirements.txt, run by test/support/opencv_reference.py: the same
  # kept boxes, in the same order, on random boxes and on BlazeFace's decoded boxes of the float
  # model on scikit-image's astronaut. :qnn_host, as the numpy comparisons (the compile venv's
  # Python runs OpenCV).
  #
  # Where the two definitions differ (so not compared): OpenCV's `top_k` keeps the k best
  # candidates before suppressing, `max_detections` stops once k are kept (compared as OpenCV's
  # unlimited answer cut at k); OpenCV's `eta < 1` lowers the threshold as it goes, which nms/3
  # does not do; two boxes of zero area have OpenCV's overlap 1 (one suppresses the other) and
  # IoU 0 here (both kept; tested below); OpenCV computes IoU in f64 on its Rect2d boxes, nms/3
  # in f32, which could only part them on a pair at the threshold to within f32 rounding.
  use ExUnit.Case, async: false

  @moduletag :qnn_host
  @moduletag timeout: 300_000

  alias HexagonTpu.Postprocess
  alias HexagonTpu.JSON
  alias HexagonTpu.Test.{BlazeFace, QnnHost, RealModels}

  setup_all do
    setup = RealModels.setup!()
    dir = Path.join(System.tmp_dir!(), "hexagon_tpu_cv_nms_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{setup: setup, dir: dir}
  end

  test "random boxes: the same kept boxes as NMSBoxes and NMSBoxesBatched", ctx do
    :rand.seed(:exsss, {25, 5, 2})

    cases =
      for n <- [50, 400, 2000],
          classes <- [nil, 3, 12],
          {score, iou} <- [{0.25, 0.45}, {0.5, 0.3}, {0.1, 0.7}, {0.0, 0.0}] do
        boxes = for _ <- 1..n, do: random_box()
        scores = for _ <- 1..n, do: f32(:rand.uniform())
        box_classes = if classes, do: for(_ <- 1..n, do: :rand.uniform(classes) - 1)
        %{boxes: boxes, scores: scores, classes: box_classes, score: score, iou: iou}
      end

    want = opencv!(ctx, cases)

    kept =
      for {c, want} <- Enum.zip(cases, want) do
        got = ours(c, max_detections: nil)

        label =
          "#{length(c.boxes)} boxes, #{if c.classes, do: "per class", else: "agnostic"}, score #{c.score} IoU #{c.iou}"

        assert got == want,
               "#{label}: kept #{inspect(Enum.take(got, 10), charlists: :as_lists)}, OpenCV #{inspect(Enum.take(want, 10), charlists: :as_lists)}"

        # max_detections: OpenCV's answer cut at k
        k = div(length(want), 2)
        assert ours(c, max_detections: k) == Enum.take(want, k), "#{label}, at most #{k}"
        length(got)
      end

    IO.puts(
      "  NMSBoxes comparison: #{length(cases)} random cases, #{Enum.sum(kept)} kept boxes, the same"
    )
  end

  test "BlazeFace's boxes on the astronaut (float model): the same kept boxes as NMSBoxes", ctx do
    model = RealModels.model(ctx.setup, "face_detection_short_range.onnx")
    info = RealModels.float_input("input", {1, 3, 128, 128})

    inputs =
      RealModels.samples!(ctx.setup, Path.join(ctx.dir, "inputs"), ["astronaut", "camera"], info,
        mean: 0.5,
        std: 0.5
      )

    %{outputs: outputs} = QnnHost.reference!(model, inputs, :cpu)

    cases =
      for sample <- outputs, threshold <- [0.05, 0.5] do
        by_shape = Map.new(sample, &{&1.shape, &1.data})

        # every candidate decoded, none suppressed (IoU > 1 never holds), in input pixels
        candidates =
          BlazeFace.faces!(by_shape,
            score_threshold: threshold,
            iou_threshold: 1.0,
            max_detections: nil
          )

        boxes =
          for %{box: {x1, y1, x2, y2}} <- candidates,
              do: Enum.map([x1, y1, x2 - x1, y2 - y1], &f32(&1 * 128))

        %{
          boxes: boxes,
          scores: Enum.map(candidates, & &1.score),
          classes: nil,
          score: threshold,
          iou: 0.3
        }
      end

    assert Enum.all?(cases, &(length(&1.boxes) > 1))
    want = opencv!(ctx, cases)

    for {c, want} <- Enum.zip(cases, want) do
      got = ours(c, max_detections: nil)

      IO.puts(
        "  BlazeFace, score > #{c.score}: #{length(c.boxes)} candidates, #{length(got)} kept (OpenCV #{length(want)})"
      )

      assert got == want
    end
  end

  test "a definitional difference: two boxes of zero area (OpenCV's overlap 1, IoU 0 here)",
       ctx do
    c = %{
      boxes: [[10.0, 10.0, 0.0, 5.0], [10.0, 10.0, 0.0, 5.0]],
      scores: [0.9, 0.8],
      classes: nil,
      score: 0.1,
      iou: 0.5
    }

    assert opencv!(ctx, [c]) == [[0]]
    assert ours(c, max_detections: nil) == [0, 1]
  end

  # -- helpers ---------------------------------------------------------------------------------

  # x, y, w, h in a 640 x 640 image, f32: crowded, so that many pairs overlap
  defp random_box do
    [w, h] = for _ <- 1..2, do: 4 + :rand.uniform() * 120
    [f32(:rand.uniform() * (640 - w)), f32(:rand.uniform() * (640 - h)), f32(w), f32(h)]
  end

  defp f32(x),
    do:
      (
        <<v::float-32>> = <<x::float-32>>
        v
      )

  defp ours(c, opts) do
    n = length(c.boxes)
    boxes = for b <- c.boxes, v <- b, into: <<>>, do: <<v::float-32-little>>
    scores = for s <- c.scores, into: <<>>, do: <<s::float-32-little>>
    class_opts = if c.classes, do: [classes: c.classes], else: [class_agnostic: true]

    Postprocess.nms!(
      {boxes, {n, 4}},
      {scores, {n}},
      [format: :xywh, score_threshold: c.score, iou_threshold: c.iou] ++ class_opts ++ opts
    )
    |> Enum.map(& &1.index)
  end

  defp opencv!(%{setup: setup, dir: dir}, cases) do
    {:ok, python} = HexagonTpu.Compiler.python()
    sub = Path.join(dir, "nms#{System.unique_integer([:positive])}")
    File.mkdir_p!(sub)

    params =
      for {c, i} <- Enum.with_index(cases) do
        File.write!(
          Path.join(sub, "boxes#{i}"),
          for(b <- c.boxes, v <- b, into: <<>>, do: <<v::float-32-little>>)
        )

        File.write!(
          Path.join(sub, "scores#{i}"),
          for(s <- c.scores, into: <<>>, do: <<s::float-32-little>>)
        )

        %{
          boxes: "boxes#{i}",
          scores: "scores#{i}",
          classes: c.classes,
          score_threshold: c.score,
          iou_threshold: c.iou,
          eta: 1.0,
          top_k: 0
        }
      end

    File.write!(Path.join(sub, "cases.json"), JSON.encode(params))
    script = Path.expand("support/opencv_reference.py", __DIR__)

    {output, status} =
      System.cmd(python, [script, "nms", sub],
        env: [{"PYTHONPATH", RealModels.site(setup)}],
        stderr_to_stdout: true
      )

    if status != 0, do: raise("opencv_reference.py nms failed (#{status}): #{output}")
    JSON.decode!(File.read!(Path.join(sub, "out.json")))
  end
end
