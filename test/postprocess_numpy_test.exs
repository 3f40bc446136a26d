defmodule HexagonTpu.PostprocessNumpyTest do
  # HexagonTpu.Postprocess against test/support/postprocess_numpy.py, the definitions written
  # again in numpy (the QNN venv's), on random inputs: the same kept indices, classes, scores and
  # boxes (:qnn_host). The cases worked out by hand are test/postprocess_test.exs's.
  use ExUnit.Case, async: true

  alias HexagonTpu.Postprocess
  alias HexagonTpu.Postprocess.Detection
  alias HexagonTpu.Test.BlazeFace

  defp f32(list), do: for(x <- list, into: <<>>, do: <<x::float-32-little>>)

  defp summary(detections), do: Enum.map(detections, &{&1.index, &1.class, &1.score, &1.box})

  describe "against the definitions written again in numpy" do
    @describetag :qnn_host

    setup do
      {:ok, python} = HexagonTpu.Compiler.python()
      dir = Path.join(System.tmp_dir!(), "hexagon_tpu_post_#{System.unique_integer([:positive])}")
      File.mkdir_p!(dir)
      on_exit(fn -> File.rm_rf!(dir) end)
      :rand.seed(:exsss, {7, 11, 13})
      %{python: python, dir: dir}
    end

    test "nms: every format, class-aware and agnostic, best class and multi-label, K", ctx do
      {n, c} = {600, 6}
      boxes = random_boxes(n)
      scores = random_scores(n * c)

      cases =
        for format <- [:xyxy, :xywh, :cxcywh],
            agnostic <- [false, true],
            multi <- [false, true],
            max <- [nil, 25] do
          opts = [
            format: format,
            class_agnostic: agnostic,
            multi_label: multi,
            max_detections: max,
            score_threshold: 0.3,
            iou_threshold: 0.5
          ]

          got = Postprocess.nms!({f32(boxes), {n, 4}}, {f32(scores), {n, c}}, opts)
          assert length(got) > 5
          if max, do: assert(length(got) == max)

          params =
            nms_params(opts)
            |> Map.merge(%{op: "nms", n: n, classes: c, box_classes: nil, format: format})
            |> Map.merge(files(ctx.dir, boxes: boxes, scores: scores))

          {opts, got, params}
        end

      compare!(ctx, cases)
    end

    test "nms: one score per box, with classes", ctx do
      n = 800
      boxes = random_boxes(n)
      scores = random_scores(n)
      classes = for _ <- 1..n, do: :rand.uniform(4) - 1

      cases =
        for agnostic <- [false, true], iou <- [0.0, 0.3, 0.7] do
          opts = [
            classes: classes,
            class_agnostic: agnostic,
            iou_threshold: iou,
            max_detections: nil
          ]

          got = Postprocess.nms!({f32(boxes), {n, 4}}, {f32(scores), {n}}, opts)

          params =
            nms_params(opts)
            |> Map.merge(%{op: "nms", n: n, classes: 0, box_classes: classes, format: :xyxy})
            |> Map.merge(files(ctx.dir, boxes: boxes, scores: scores))

          {Keyword.delete(opts, :classes), got, params}
        end

      compare!(ctx, cases)
    end

    test "yolov8 and yolov5 heads, with the letterbox and the clip", ctx do
      {n, c} = {2100, 10}
      letterbox = %{scale: 0.5, x_offset: 0.0, y_offset: 140.0}

      cases =
        for version <- [:yolov8, :yolov5], multi <- [false, true], clip <- [nil, {1280, 720}] do
          rows = for _ <- 1..n, do: yolo_row(version, c)

          output =
            if version == :yolov8,
              do: rows |> Enum.zip_with(& &1) |> List.flatten(),
              else: List.flatten(rows)

          shape = if version == :yolov8, do: {1, 4 + c, n}, else: {1, n, 5 + c}
          opts = [multi_label: multi, letterbox: letterbox, clip: clip, score_threshold: 0.2]
          got = apply(Postprocess, :"#{version}!", [{f32(output), shape}, opts])

          params =
            nms_params(opts)
            |> Map.merge(%{
              op: version,
              n: n,
              classes: c,
              letterbox: [letterbox.scale, letterbox.x_offset, letterbox.y_offset],
              clip: clip && Tuple.to_list(clip)
            })
            |> Map.merge(files(ctx.dir, output: output))

          assert length(got) > 5
          {[{:version, version} | opts], got, params}
        end

      compare!(ctx, cases)
    end

    test "masks, both layouts, u8 and u16", ctx do
      cases =
        for {h, w, c} <- [{37, 53, 21}, {9, 11, 300}], layout <- [:hwc, :chw] do
          values = for _ <- 1..(h * w * c), do: :rand.uniform(16) / 16
          shape = if layout == :hwc, do: {h, w, c}, else: {c, h, w}
          {bytes, {^h, ^w}} = Postprocess.mask!({f32(values), shape}, layout: layout)

          got =
            if c > 256,
              do: for(<<k::16-little <- bytes>>, do: k),
              else: :binary.bin_to_list(bytes)

          params =
            Map.merge(
              %{op: "mask", h: h, w: w, classes: c, layout: layout},
              files(ctx.dir, output: values)
            )

          {[layout: layout, classes: c], got, params}
        end

      compare!(ctx, cases)
    end

    test "SSD: anchors of two configurations, and heads decoded and suppressed", ctx do
      # SSD MobileNet v2's anchors in MediaPipe (reduced lowest layer, five aspect ratios)
      mobilenet = [
        num_layers: 6,
        input_size_width: 300,
        input_size_height: 300,
        min_scale: 0.2,
        max_scale: 0.95,
        strides: [16, 32, 64, 128, 256, 512],
        aspect_ratios: [1.0, 2.0, 0.5, 3.0, 0.3333],
        reduce_boxes_in_lowest_layer: true
      ]

      anchor_cases =
        for config <- [BlazeFace.anchors(), mobilenet] do
          {:ok, {bytes, {n, 4}}} = Postprocess.ssd_anchors(config)
          got = for <<a::binary-16 <- bytes>>, do: for(<<v::float-32-little <- a>>, do: v)
          assert length(got) == n
          {config, got, Map.new([{:op, "ssd_anchors"} | config])}
        end

      assert [{_, blaze, _}, {_, mobile, _}] = anchor_cases
      assert {length(blaze), length(mobile)} == {896, 1917}
      compare!(ctx, anchor_cases)

      n = 896
      boxes = for _ <- 1..(n * 16), do: :rand.normal() * 20
      scores = for _ <- 1..n, do: Float.round(:rand.normal() * 3, 2)

      ssd_cases =
        for reverse <- [true, false], iou <- [0.3, 0.5] do
          opts = [
            anchors: BlazeFace.anchors(),
            x_scale: 128,
            y_scale: 128,
            w_scale: 128,
            h_scale: 128,
            reverse_output_order: reverse,
            sigmoid_score: true,
            score_clipping_thresh: 100,
            score_threshold: 0.75,
            iou_threshold: iou
          ]

          got = Postprocess.ssd!({f32(boxes), {1, n, 16}}, {f32(scores), {1, n, 1}}, opts)
          assert length(got) > 5

          params =
            nms_params(opts)
            |> Map.merge(%{
              op: "ssd",
              n: n,
              coords: 16,
              classes: 1,
              anchor_options: Map.new(BlazeFace.anchors()),
              x_scale: 128,
              y_scale: 128,
              w_scale: 128,
              h_scale: 128,
              reverse_output_order: reverse,
              apply_exponential_on_box_size: false,
              sigmoid_score: true,
              score_clipping_thresh: 100
            })
            |> Map.merge(files(ctx.dir, boxes: boxes, scores: scores))

          {opts, got, params}
        end

      compare!(ctx, ssd_cases)
    end

    test "top_k, raw and softmax", ctx do
      scores = for _ <- 1..1000, do: Float.round(:rand.normal() * 4, 1)

      cases =
        for softmax <- [false, true], k <- [1, 5, 1000] do
          got = Postprocess.top_k!(f32(scores), k, softmax: softmax)

          params =
            Map.merge(%{op: "top_k", k: k, softmax: softmax}, files(ctx.dir, scores: scores))

          {[softmax: softmax, k: k], got, params}
        end

      compare!(ctx, cases)
    end
  end

  # -- random inputs -------------------------------------------------------------------------------

  # boxes in clusters (so NMS has work), x1 y1 x2 y2 on a 640 canvas, on a 1/4 pixel grid
  defp random_boxes(n) do
    centres = for _ <- 1..40, do: {:rand.uniform() * 640, :rand.uniform() * 640}

    Enum.flat_map(1..n, fn _ ->
      {cx, cy} = Enum.random(centres)
      {w, h} = {8 + :rand.uniform() * 60, 8 + :rand.uniform() * 60}
      {x, y} = {cx + :rand.normal() * 6, cy + :rand.normal() * 6}
      Enum.map([x - w / 2, y - h / 2, w, h], &(Float.round(&1 * 4) / 4))
    end)
    |> Enum.chunk_every(4)
    |> Enum.flat_map(fn [x, y, w, h] -> [x, y, x + w, y + h] end)
  end

  # on a 1/64 grid, so equal scores (ties) are common
  defp random_scores(count), do: for(_ <- 1..count, do: :rand.uniform(64) / 64)

  defp yolo_row(:yolov8, c) do
    {cx, cy} = {:rand.uniform() * 640, :rand.uniform() * 640}
    [cx, cy, 10 + :rand.uniform() * 80, 10 + :rand.uniform() * 80 | random_sparse(c)]
  end

  defp yolo_row(:yolov5, c) do
    [cx, cy, w, h | scores] = yolo_row(:yolov8, c)
    [cx, cy, w, h, :rand.uniform() | scores]
  end

  # mostly low class scores, a few high ones
  defp random_sparse(c),
    do:
      for(
        _ <- 1..c,
        do: if(:rand.uniform() < 0.05, do: :rand.uniform(), else: :rand.uniform() * 0.1)
      )

  # -- the numpy side ------------------------------------------------------------------------------

  defp nms_params(opts) do
    defaults = [
      score_threshold: 0.25,
      iou_threshold: 0.45,
      max_detections: 300,
      class_agnostic: false,
      multi_label: false
    ]

    defaults |> Keyword.merge(Keyword.take(opts, Keyword.keys(defaults))) |> Map.new()
  end

  defp files(dir, arrays) do
    Map.new(arrays, fn {key, values} ->
      path = Path.join(dir, "#{key}_#{System.unique_integer([:positive])}")
      File.write!(path, f32(values))
      {key, path}
    end)
  end

  # every case's answer against numpy's, in one run of the script
  defp compare!(ctx, cases) do
    expected = numpy!(ctx, Enum.map(cases, &elem(&1, 2)))

    for {{opts, got, _params}, want} <- Enum.zip(cases, expected) do
      got = if match?([%Detection{} | _], got), do: summary(got), else: got
      assert got == want, inspect(opts)
    end
  end

  defp numpy!(%{python: python, dir: dir}, params) do
    out = Path.join(dir, "out_#{System.unique_integer([:positive])}.json")
    script = Path.expand("support/postprocess_numpy.py", __DIR__)

    json =
      params
      |> Enum.map(fn p -> Map.new(p, fn {k, v} -> {k, json_value(v)} end) end)
      |> json_encode()

    {output, status} = System.cmd(python, [script, "run", json, out], stderr_to_stdout: true)
    if status != 0, do: raise("postprocess_numpy.py failed (#{status}): #{output}")

    for answer <- HexagonTpu.JSON.decode!(File.read!(out)) do
      for item <- answer do
        case item do
          [i, c, s, box] when is_list(box) ->
            {i, c, s * 1.0, box |> Enum.map(&(&1 * 1.0)) |> List.to_tuple()}

          [i, s] ->
            {i, s * 1.0}

          class when is_integer(class) ->
            class

          [_, _, _, _] = anchor ->
            Enum.map(anchor, &(&1 * 1.0))
        end
      end
    end
  end

  defp json_value(v) when is_atom(v) and v not in [nil, true, false], do: Atom.to_string(v)
  defp json_value(v) when is_map(v), do: Map.new(v, fn {k, x} -> {k, json_value(x)} end)
  defp json_value(v), do: v

  defp json_encode(nil), do: "null"
  defp json_encode(v) when is_boolean(v), do: to_string(v)
  defp json_encode(v) when is_number(v), do: to_string(v)
  defp json_encode(v) when is_binary(v), do: inspect(v)
  defp json_encode(v) when is_list(v), do: "[" <> Enum.map_join(v, ",", &json_encode/1) <> "]"

  defp json_encode(v) when is_map(v),
    do:
      "{" <>
        Enum.map_join(v, ",", fn {k, x} -> "#{inspect(to_string(k))}:#{json_encode(x)}" end) <>
        "}"
end
