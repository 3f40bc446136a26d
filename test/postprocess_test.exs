defmodule HexagonTpu.PostprocessTest do
  # HexagonTpu.Postprocess on cases worked out by hand, and its errors; against the definitions
  # written again in numpy: test/postprocess_numpy_test.exs.
  use ExUnit.Case, async: true

  alias HexagonTpu.{Error, Postprocess}
  alias HexagonTpu.Postprocess.Detection
  alias HexagonTpu.Test.BlazeFace

  # Nx is optional: the :nx tests run where it is loaded.
  @compile {:no_warn_undefined, [Nx]}

  defp f32(list), do: for(x <- list, into: <<>>, do: <<x::float-32-little>>)

  # the value as f32 reads it back
  defp r(x), do: x |> List.wrap() |> f32() |> then(fn <<y::float-32-little>> -> y end)

  describe "by hand" do
    test "top_k: by score, ties by lower index, softmax" do
      scores = f32([0.1, 0.7, 0.3, 0.7])
      assert {:ok, [{1, a}, {3, a}, {2, b}]} = Postprocess.top_k(scores, 3)
      assert {a, b} == {r(0.7), r(0.3)}
      assert {:ok, []} = Postprocess.top_k(scores, 0)
      assert {:ok, all} = Postprocess.top_k({scores, {1, 4}}, 10)
      assert length(all) == 4

      {:ok, probs} = Postprocess.top_k(f32([1000.0, 1000.0, 999.0]), 3, softmax: true)
      e = :math.exp(-1.0)
      assert probs == [{0, r(1 / (2 + e))}, {1, r(1 / (2 + e))}, {2, r(e / (2 + e))}]
    end

    test "nms: greedy, IoU > threshold suppresses, class-aware or agnostic" do
      # 0 and 1 overlap with IoU 2/6; 2 is far away
      boxes = {f32([0, 0, 2, 2, 1, 0, 3, 2, 10, 10, 11, 11]), {3, 4}}
      scores = {f32([0.9, 0.8, 0.7]), {3}}
      run = fn opts -> boxes |> Postprocess.nms!(scores, opts) |> Enum.map(& &1.index) end

      assert run.(iou_threshold: 0.3) == [0, 2]
      assert run.(iou_threshold: 0.5) == [0, 1, 2]
      assert run.(iou_threshold: 0.3, classes: [0, 1, 0]) == [0, 1, 2]
      assert run.(iou_threshold: 0.3, classes: [0, 1, 0], class_agnostic: true) == [0, 2]
      assert run.(iou_threshold: 0.3, max_detections: 1) == [0]
      assert run.(score_threshold: 0.8) == [0]

      assert [_, _, %Detection{box: {10.0, 10.0, 11.0, 11.0}, class: 0, index: 2, score: s}] =
               Postprocess.nms!(boxes, scores)

      assert s == r(0.7)
    end

    test "yolov8 and yolov5, the letterbox and the clip" do
      # one box of YOLOv8n's layout {1, 5, 1}: cx, cy, w, h, one class
      out = {f32([50, 50, 20, 20, 0.9]), {1, 5, 1}}
      assert [%Detection{box: {40.0, 40.0, 60.0, 60.0}}] = Postprocess.yolov8!(out)

      letterbox = %{scale: 0.5, x_offset: 0, y_offset: 140}

      assert [%Detection{box: {80.0, -200.0, 120.0, -160.0}}] =
               Postprocess.yolov8!(out, letterbox: letterbox)

      assert [%Detection{box: {80.0, +0.0, 120.0, +0.0}}] =
               Postprocess.yolov8!(out, letterbox: letterbox, clip: {1280, 720})

      # YOLOv5: objectness times the class score
      out = {f32([50, 50, 20, 20, 0.5, 0.9, 0.2]), {1, 1, 7}}
      assert [%Detection{class: 0, score: score}] = Postprocess.yolov5!(out)
      assert score == r(r(0.5) * r(0.9))
      assert [] = Postprocess.yolov5!(out, score_threshold: 0.5)
    end

    test "yolov8 from a head the compile task split: [boxes, scores] answer as the whole" do
      # three anchors, two classes: {1, 6, 3} rows cx, cy, w, h, class 0, class 1
      boxes = [50, 52, 200, 50, 52, 90, 20, 20, 30, 20, 20, 30]
      scores = [0.9, 0.3, 0.1, 0.2, 0.8, 0.7]
      whole = {f32(boxes ++ scores), {1, 6, 3}}
      parts = [{f32(boxes), {1, 4, 3}}, {f32(scores), {1, 2, 3}}]

      assert [_, _, _] = detections = Postprocess.yolov8!(whole, iou_threshold: 0.9)
      assert Postprocess.yolov8!(parts, iou_threshold: 0.9) == detections

      assert Postprocess.yolov8!([{f32(boxes), {4, 3}}, {f32(scores), {2, 3}}]) ==
               Postprocess.yolov8!(whole)

      letterbox = %{scale: 0.5, x_offset: 0, y_offset: 140}

      assert Postprocess.yolov8!(parts, letterbox: letterbox, clip: {1280, 720}) ==
               Postprocess.yolov8!(whole, letterbox: letterbox, clip: {1280, 720})

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               Postprocess.yolov8([{f32(boxes), {1, 4, 3}}, {f32([0.5, 0.5]), {1, 1, 2}}])

      assert message ==
               "[boxes, scores]: expected shapes {1, 4, N} and {1, C, N} (or {4, N} and {C, N}), " <>
                 "got {1, 4, 3} and {1, 1, 2}"
    end

    test "yolov5 from a head the compile task split: [boxes, scores] answer as the whole" do
      # three anchors, two classes: {1, 3, 7} rows cx, cy, w, h, objectness, class 0, class 1
      boxes = [50, 50, 200, 200, 80, 80, 200, 200, 20, 20, 30, 30]
      scores = [0.9, 0.8, 0.3, 0.8, 0.7, 0.3, 0.5, 0.1, 0.9]
      rows = Enum.zip(Enum.chunk_every(boxes, 4), Enum.chunk_every(scores, 3))
      whole = {f32(Enum.flat_map(rows, fn {b, s} -> b ++ s end)), {1, 3, 7}}
      parts = [{f32(boxes), {1, 3, 4}}, {f32(scores), {1, 3, 3}}]

      assert [_, _, _] = detections = Postprocess.yolov5!(whole, iou_threshold: 0.9)
      assert Postprocess.yolov5!(parts, iou_threshold: 0.9) == detections
      # the first two, both class 0, overlap (IoU 0.57): one is kept at the default threshold
      assert [_, _] = Postprocess.yolov5!(parts)

      assert Postprocess.yolov5!([{f32(boxes), {3, 4}}, {f32(scores), {3, 3}}]) ==
               Postprocess.yolov5!(whole)

      letterbox = %{scale: 0.5, x_offset: 0, y_offset: 140}

      for opts <- [[letterbox: letterbox, clip: {1280, 720}], [multi_label: true]],
          do: assert(Postprocess.yolov5!(parts, opts) == Postprocess.yolov5!(whole, opts))

      for {boxes_shape, scores_shape, bytes} <- [
            # N differs
            {{1, 3, 4}, {1, 2, 3}, 6},
            # boxes not 4 wide
            {{1, 2, 6}, {1, 2, 3}, 6},
            # no class after the objectness
            {{1, 3, 4}, {1, 3, 1}, 3},
            # YOLOv8's layout
            {{1, 4, 3}, {1, 3, 3}, 9}
          ] do
        box_count = Tuple.product(boxes_shape)

        assert {:error, %Error{reason: :invalid_input, message: message}} =
                 Postprocess.yolov5([
                   {f32(Enum.take(Stream.cycle(boxes), box_count)), boxes_shape},
                   {f32(Enum.take(Stream.cycle(scores), bytes)), scores_shape}
                 ])

        assert message ==
                 "[boxes, scores]: expected shapes {1, N, 4} and {1, N, 1 + C} (or {N, 4} and " <>
                   "{N, 1 + C}) with C >= 1, got #{inspect(boxes_shape)} and #{inspect(scores_shape)}"
      end

      # the parts of a head, and nothing else: two of them
      for wrong <- [[], [hd(parts)], parts ++ [hd(parts)]] do
        assert_raise ArgumentError,
                     ~r/^HexagonTpu.Postprocess.yolov5\/2: output must be the head, or its two parts \[boxes, scores\], given: \[/,
                     fn -> Postprocess.yolov5(wrong) end
      end

      # a part whose bytes do not fit its shape names it
      assert {:error,
              %Error{message: "scores: shape {1, 3, 3} is 9 f32 values (36 bytes), got 32 bytes"}} =
               Postprocess.yolov5([hd(parts), {binary_part(f32(scores), 0, 32), {1, 3, 3}}])
    end

    test "yolov8 through Preprocess's own transform: the same boxes as the letterbox map" do
      # 1280x720 letterboxed into 640x640: scale 2 back, content at rows 140..500
      input = %HexagonTpu.TensorInfo{
        name: "images",
        shape: {1, 640, 640, 3},
        type: {:u, 8},
        data_type: :ufixed_point_8,
        quantization: %{kind: :per_tensor, scale: 1 / 255, zero_point: 0, bitwidth: nil},
        byte_size: 640 * 640 * 3,
        f32_conversion: true
      }

      {:ok, transform} =
        HexagonTpu.Preprocess.transform(input, width: 1280, height: 720, fit: :letterbox)

      # one box inside the content and one reaching into the bottom padding
      out = {f32([320, 600, 320, 480, 100, 40, 50, 50, 0.9, 0.8]), {1, 5, 2}}
      by_map = Postprocess.yolov8!(out, letterbox: %{scale: 0.5, x_offset: 0, y_offset: 140})
      by_transform = Postprocess.yolov8!(out, letterbox: transform)
      assert Enum.map(by_transform, & &1.box) == Enum.map(by_map, & &1.box)

      assert [{540.0, 310.0, 740.0, 410.0}, {1160.0, 630.0, 1240.0, 730.0}] ==
               Enum.map(by_transform, & &1.box)

      clipped = Postprocess.yolov8!(out, letterbox: transform, clip: {1200, 700})

      assert [{540.0, 310.0, 740.0, 410.0}, {1160.0, 630.0, 1200.0, 700.0}] ==
               Enum.map(clipped, & &1.box)
    end
  end

  describe "SSD" do
    test "BlazeFace's anchors, and a head decoded against them" do
      {:ok, {anchors, {896, 4}}} = Postprocess.ssd_anchors(BlazeFace.anchors())
      <<a0::binary-16, _::binary-496, a32::binary-16, _::binary>> = anchors
      assert a0 == f32([0.03125, 0.03125, 1, 1])
      # anchors 0 and 1 share the first cell: anchor 32 is the second of cell 16 (row 1)
      assert a32 == f32([0.03125, 0.09375, 1, 1])

      # one face at anchor 2 (cell (1, 0)): x, y, w, h in 1/128ths, and 12 keypoint values
      n = 896

      boxes =
        for i <- 0..(n - 1),
            j <- 0..15,
            do: if(i == 2 and j < 4, do: Enum.at([12.8, 0, 64, 32], j), else: 0)

      scores = for i <- 0..(n - 1), do: if(i == 2, do: 3.0, else: -5.0)

      opts = Postprocess.ssd_options(:face_detection_short_range)

      assert [%Detection{index: 2, class: 0, score: score, box: {x1, y1, x2, y2}}] =
               Postprocess.ssd!({f32(boxes), {1, n, 16}}, {f32(scores), {1, n, 1}}, opts)

      assert score == r(1 / (1 + :math.exp(-3.0)))
      cx = r(r(0.09375) + r(0.1))

      assert {x1, y1, x2, y2} ==
               {r(cx - 0.25), r(0.03125 - 0.125), r(cx + 0.25), r(0.03125 + 0.125)}

      assert_raise ArgumentError, ~r/:strides option must be a non-empty list/, fn ->
        Postprocess.ssd_anchors(Keyword.put(BlazeFace.anchors(), :strides, []))
      end

      assert {:error,
              %Error{message: "boxes: expected a shape {1, N, K} or {N, K} with N = 896" <> _}} =
               Postprocess.ssd({f32(boxes), {n, 8, 2}}, {f32(scores), {n}}, opts)
    end
  end

  describe "masks" do
    test "argmax per pixel, both layouts, ties by the lower class" do
      # 2 x 2 pixels, 3 classes, {H, W, C}
      hwc = [[0.1, 0.9, 0.2], [0.5, 0.5, 0.1], [0, 0, 1], [0.3, 0.2, 0.1]]

      assert {:ok, {<<1, 0, 2, 0>>, {2, 2}}} =
               Postprocess.mask({f32(List.flatten(hwc)), {2, 2, 3}})

      chw = hwc |> Enum.zip_with(& &1) |> List.flatten()
      assert {<<1, 0, 2, 0>>, {2, 2}} = Postprocess.mask!({f32(chw), {1, 3, 2, 2}}, layout: :chw)

      assert {:error, %Error{message: "output: expected a shape {C, H, W} or {1, C, H, W}" <> _}} =
               Postprocess.mask({f32(chw), {1, 1, 3, 2, 2}}, layout: :chw)

      assert_raise ArgumentError, ~r/:layout option must be :hwc or :chw/, fn ->
        Postprocess.mask({f32(chw), {3, 2, 2}}, layout: :nchw)
      end
    end
  end

  describe "errors" do
    test "options outside their type raise ArgumentError naming them" do
      boxes = {f32([0, 0, 1, 1]), {1, 4}}
      scores = {f32([0.5]), {1}}

      assert_raise ArgumentError,
                   ~r/top_k\/3: `k` must be a non-negative integer, given: -1/,
                   fn ->
                     Postprocess.top_k(f32([1.0]), -1)
                   end

      for {opt, message} <- [
            {[iou_threshold: 1.5], ~r/:iou_threshold option must be a number in \[0, 1\]/},
            {[iou_threshold: -0.1], ~r/:iou_threshold option must be a number in \[0, 1\]/},
            {[score_threshold: :high], ~r/:score_threshold option must be a number/},
            {[max_detections: -1], ~r/:max_detections option must be a non-negative integer/},
            {[format: :yxyx], ~r/:format option must be :xyxy, :xywh or :cxcywh/},
            {[class_agnostic: 1], ~r/:class_agnostic option must be a boolean/},
            {[classes: [-1]], ~r/:classes option must be a list of class indices/},
            {[bogus: 1], ~r/bogus/}
          ] do
        assert_raise ArgumentError, message, fn -> Postprocess.nms(boxes, scores, opt) end
      end

      assert_raise ArgumentError,
                   ~r/nms\/3: boxes must be an Nx.Tensor or \{binary, shape\}/,
                   fn ->
                     Postprocess.nms([1, 2, 3, 4], scores)
                   end

      assert_raise ArgumentError, ~r/:letterbox option must be a map/, fn ->
        Postprocess.yolov8({f32([0, 0, 1, 1, 1]), {5, 1}}, letterbox: %{scale: 0})
      end
    end

    test "data that does not fit returns :invalid_input naming the argument" do
      nan = <<0, 0, 192, 127>>
      boxes = {f32([0, 0, 1, 1, 0, 0, 2, 2]), {2, 4}}

      for {call, message} <- [
            {fn -> Postprocess.nms({f32([0, 0, 1]), {1, 4}}, {f32([1]), {1}}) end,
             "boxes: shape {1, 4} is 4 f32 values (16 bytes), got 12 bytes"},
            {fn -> Postprocess.nms(boxes, {f32([1, 2, 3]), {3}}) end,
             "scores: expected a shape {N} or {N, C} with N = 2 (the boxes'), got {3}"},
            {fn -> Postprocess.nms(boxes, {f32([0.5]) <> nan, {2}}) end,
             "scores: value 1 is NaN"},
            {fn -> Postprocess.nms(boxes, {f32([0.5, 0.6]), {2}}, classes: [1]) end,
             "classes: expected 2 class indices (one per box), got 1"},
            {fn -> Postprocess.top_k(f32([1.0]) <> nan, 1) end, "scores: value 1 is NaN"},
            {fn -> Postprocess.top_k({f32([1.0, 2.0]), {2, 1}}, 1) end,
             "scores: expected a shape {C} or {1, C}, got {2, 1}"},
            {fn -> Postprocess.yolov8({f32([0, 0, 1, 1]), {1, 4, 1}}) end,
             "output: expected a shape {1, 4 + C, N} or {4 + C, N} with C >= 1, got {1, 4, 1}"},
            {fn -> Postprocess.yolov5({f32([0, 0, 1, 1, 0.5]) <> nan, {1, 6}}) end,
             "output: box 0's objectness or a class score is NaN"}
          ] do
        assert {:error, %Error{reason: :invalid_input, message: ^message}} = call.()
      end
    end
  end

  describe "model outputs in their own type" do
    # Levels, their TensorInfo, and the values predict/3 would dequantize them to:
    # (q - zero_point) * scale in f32 (the f64 product of two f32 values is exact, so rounding
    # it to f32 is f32's own multiply).
    defp quantized(levels, bits, scale, zero_point, shape) do
      scale = r(scale)

      info = %HexagonTpu.TensorInfo{
        name: "out",
        shape: shape,
        type: {:u, bits},
        data_type: :"ufixed_point_#{bits}",
        quantization: %{kind: :per_tensor, scale: scale, zero_point: zero_point, bitwidth: bits},
        byte_size: length(levels) * div(bits, 8)
      }

      bytes = for q <- levels, into: <<>>, do: <<q::size(bits)-little>>
      values = for q <- levels, do: r((q - zero_point) * scale)
      {{bytes, info}, {f32(values), shape}}
    end

    defp levels(n, bits), do: for(_ <- 1..n, do: :rand.uniform(Integer.pow(2, bits)) - 1)

    test "u8 and u16 heads answer as their dequantized f32, bit for bit" do
      {n, c} = {300, 6}

      for {bits, scale, zp} <- [
            {8, 0.0039, 0},
            {8, 0.02, 128},
            {16, 1.7e-5, 0},
            {16, 0.003, 30_000}
          ],
          threshold <- [0.1, 0.5, 0.9] do
        opts = [score_threshold: threshold, iou_threshold: 0.5]
        {box_q, box_f} = quantized(levels(4 * n, 8), 8, 1.5, 0, {1, 4, n})
        {score_q, score_f} = quantized(levels(c * n, bits), bits, scale, zp, {1, c, n})

        want = Postprocess.yolov8!([box_f, score_f], opts)
        assert Postprocess.yolov8!([box_q, score_q], opts) == want
        # a head in the model's own type beside one already dequantized
        assert Postprocess.yolov8!([box_f, score_q], opts) == want

        {head_q, head_f} = quantized(levels(n * (5 + c), bits), bits, scale, zp, {1, n, 5 + c})
        assert Postprocess.yolov5!(head_q, opts) == Postprocess.yolov5!(head_f, opts)

        # a split YOLOv5 head: boxes {1, N, 4}, objectness and classes {1, N, 1 + C}
        {v5_box_q, v5_box_f} = quantized(levels(4 * n, 8), 8, 1.5, 0, {1, n, 4})

        {v5_score_q, v5_score_f} =
          quantized(levels(n * (1 + c), bits), bits, scale, zp, {1, n, 1 + c})

        want = Postprocess.yolov5!([v5_box_f, v5_score_f], opts)
        assert Postprocess.yolov5!([v5_box_q, v5_score_q], opts) == want
        assert Postprocess.yolov5!([v5_box_f, v5_score_q], opts) == want

        {top_q, top_f} = quantized(levels(1000, bits), bits, scale, zp, {1, 1000})

        for softmax <- [false, true],
            do:
              assert(
                Postprocess.top_k!(top_q, 5, softmax: softmax) ==
                  Postprocess.top_k!(top_f, 5, softmax: softmax)
              )

        ssd = [
          anchors: BlazeFace.anchors(),
          x_scale: 128,
          y_scale: 128,
          w_scale: 128,
          h_scale: 128,
          sigmoid_score: true,
          score_threshold: threshold
        ]

        {ssd_boxes_q, ssd_boxes_f} = quantized(levels(896 * 4, 8), 8, 0.5, 128, {1, 896, 4})

        {ssd_scores_q, ssd_scores_f} =
          quantized(levels(896, bits), bits, scale * 40, zp, {1, 896, 1})

        assert Postprocess.ssd!(ssd_boxes_q, ssd_scores_q, ssd) ==
                 Postprocess.ssd!(ssd_boxes_f, ssd_scores_f, ssd)
      end
    end

    test "what the decoders cannot read is refused, naming it" do
      {{bytes, info}, _} = quantized([1, 2, 3, 4, 5], 8, 0.1, 0, {1, 5, 1})

      per_axis = %{
        info
        | quantization: %{kind: :per_axis, axis: 1, scales: [0.1], zero_points: [0], bitwidth: 8}
      }

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               Postprocess.yolov8({bytes, per_axis})

      assert message ==
               ~s(output: "out" is {:u, 8} with quantization :per_axis; the decoders read f32 ) <>
                 "and u8 or u16 quantized per tensor: give it dequantized (predict/3's default)"

      assert {:error, %Error{message: ~s(output: "out" {1, 5, 1} of {:u, 8} is 5 bytes, got 4)}} =
               Postprocess.yolov8({binary_part(bytes, 0, 4), info})

      zero_scale = %{info | shape: {1, 5}, quantization: %{info.quantization | scale: 0.0}}

      assert {:error,
              %Error{message: "scores: the quantization scale must be finite and > 0, got 0"}} =
               Postprocess.top_k({bytes, zero_scale}, 1)

      assert_raise ArgumentError,
                   ~r/output must be an Nx.Tensor or a binary with its TensorInfo/,
                   fn ->
                     Postprocess.yolov8({[1, 2], info})
                   end
    end
  end

  describe "Nx tensors" do
    @describetag :nx

    test "f32 and other float types give the binaries' answers" do
      list = [0, 0, 2, 2, 1, 0, 3, 2, 10, 10, 11, 11]
      scores = [0.9, 0.8, 0.7]
      expected = Postprocess.nms!({f32(list), {3, 4}}, {f32(scores), {3}}, iou_threshold: 0.3)

      for type <- [{:f, 32}, {:f, 64}, {:f, 16}] do
        boxes = list |> Nx.tensor(type: type) |> Nx.reshape({3, 4})

        got =
          Postprocess.nms!(boxes, Nx.tensor([0.875, 0.75, 0.625], type: type), iou_threshold: 0.3)

        assert Enum.map(got, & &1.index) == Enum.map(expected, & &1.index)
      end

      assert {:error, %Error{message: "boxes: expected a float tensor" <> _}} =
               Postprocess.nms(Nx.iota({1, 4}), Nx.tensor([0.5]))
    end

    test "a model output's tensor with its TensorInfo: quantized as it is, or dequantized" do
      info = %HexagonTpu.TensorInfo{
        name: "out",
        shape: {1, 5, 2},
        type: {:u, 8},
        data_type: :ufixed_point_8,
        quantization: %{kind: :per_tensor, scale: 0.5, zero_point: 10, bitwidth: 8},
        byte_size: 10
      }

      levels = [110, 30, 110, 30, 40, 20, 40, 20, 12, 11]
      raw = Nx.tensor(levels, type: {:u, 8}) |> Nx.reshape({1, 5, 2})
      dequantized = raw |> Nx.subtract(10) |> Nx.multiply(0.5)

      # box 0: cx, cy (110 - 10) * 0.5 = 50, w, h (40 - 10) * 0.5 = 15; its score (12 - 10) * 0.5
      assert [%Detection{index: 0, score: 1.0, box: {42.5, 42.5, 57.5, 57.5}}] =
               Postprocess.yolov8!({raw, info}, score_threshold: 0.6)

      assert Postprocess.yolov8!({dequantized, info}, score_threshold: 0.6) ==
               Postprocess.yolov8!({raw, info}, score_threshold: 0.6)

      assert {:error, %Error{message: message}} =
               Postprocess.yolov8({Nx.as_type(raw, {:s, 16}), info})

      assert message =~
               "a tensor of type {:s, 16} given with the description of \"out\", whose type is {:u, 8}"
    end
  end
end
