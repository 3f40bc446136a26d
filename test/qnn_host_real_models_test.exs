defmodule HexagonTpu.QnnHostRealModelsTest do
  # Real pretrained networks this project did not write, from PyPI wheels, compiled AS SHIPPED
  # by HexagonTpu.Compiler.compile/3 and run on Qualcomm's HTP emulator (test/support/real_models.ex):
  #
  #   * BlazeFace short range (mediapipe 0.10.14's .tflite, converted by tflite2onnx 0.4.1):
  #     a face detector, 896 SSD anchors;
  #   * PaddleOCR's PP-OCRv4 text detector (rapidocr-onnxruntime 1.4.4's ONNX, exported by
  #     paddle2onnx): a probability map, i.e. a segmenter of text.
  #
  # Inputs are scikit-image's bundled photographs and scans, preprocessed by
  # HexagonTpu.Preprocess; calibration images and evaluation images are disjoint. Each model is
  # checked two ways: (a) this package's outputs equal ONNX Runtime's QNN EP on the same binary
  # bit for bit; (b) the answer (boxes through HexagonTpu.Postprocess.ssd/3, the text mask) agrees
  # with ONNX Runtime CPU on the float model as shipped.
  use ExUnit.Case, async: false

  @moduletag :qnn_host
  @moduletag timeout: 900_000

  alias HexagonTpu.{Compiler, Graph, Preprocess, TensorInfo}
  alias HexagonTpu.Test.{BlazeFace, QnnHost, RealModels}

  @calibration ~w(coffee chelsea motorcycle_left coins brick grass gravel color logo text horse moon cell ihc)

  # BlazeFace: scikit-image holds two photographs of a face (the astronaut, the cameraman), and
  # the ranges of the score and box outputs are set by the faces calibration sees (without one
  # the face's score saturates below the float model's and its box is clipped: the cameraman's
  # came back at IoU 0.63, measured). So two binaries, each calibrated with one photograph and
  # evaluated on the other: no image is both.
  @blazeface %{
    file: "face_detection_short_range.onnx",
    input: "input",
    shape: {1, 3, 128, 128},
    # MediaPipe's face detection: RGB stretched to 128x128, values in [-1, 1]
    preprocess: [mean: 0.5, std: 0.5],
    # 16-bit activations, as the task's quality figures say: with u8 the regressors measure
    # 15.5-15.7 dB and the classificators 7.5-10.8 dB (below its 20 dB bar) and the astronaut's
    # box comes back at IoU 0.89; with u16, 0.95 and 0.96 (measured)
    compile: [activations: :u16]
  }

  @models %{
    "blazeface_astronaut" =>
      Map.merge(@blazeface, %{calibration: ["camera"], eval: ["astronaut"]}),
    "blazeface_camera" => Map.merge(@blazeface, %{calibration: ["astronaut"], eval: ["camera"]}),
    "ppocr_det" => %{
      file: "ch_PP-OCRv4_det_infer.onnx",
      input: "x",
      # dynamic as shipped (N, 3, H, W): fixed here, multiples of 32 (a page scan and a clock
      # face are the samples on which the float model finds text)
      shape: {1, 3, 224, 448},
      # RapidOCR's det: BGR (OpenCV's order), mean 0.5 and std 0.5 on [0, 1]
      preprocess: [mean: 0.5, std: 0.5, channels: :bgr],
      # 16-bit activations: with the default u8 the text mask's IoU with the float model's is
      # 0.77 on the page scan (0.96 with u16), measured
      compile: [input_shape: ["x=1x3x224x448"], activations: :u16],
      calibration: [],
      eval: ~w(page clock_motion)
    }
  }

  setup_all do
    started = System.monotonic_time(:millisecond)
    setup = RealModels.setup!()

    IO.puts(
      "real models: set up in #{System.monotonic_time(:millisecond) - started} ms #{inspect(setup.times)}"
    )

    %{setup: setup, runtime: QnnHost.runtime!()}
  end

  # The float model's evaluation inputs and the compiled binary of `name`, made once per run.
  defp prepared!(%{setup: setup}, name) do
    m = @models[name]
    out = Path.join(RealModels.dir(), name)
    info = RealModels.float_input(m.input, m.shape)
    inputs = Path.join(out, "inputs")
    bin = Path.join(out, "#{name}.bin")
    model = RealModels.model(setup, m.file)

    :global.trans({__MODULE__, name}, fn ->
      unless File.exists?(bin) do
        RealModels.samples!(
          setup,
          Path.join(out, "calibration"),
          @calibration ++ m.calibration,
          info,
          m.preprocess
        )

        RealModels.samples!(setup, inputs, m.eval, info, m.preprocess)
        started = System.monotonic_time(:millisecond)

        # the evaluation images measure the quantization (the task's quality figures), so every
        # calibration image calibrates (none is held out)
        opts =
          [calibration: Path.join(out, "calibration"), eval: inputs, save_ctx: true] ++ m.compile

        case Compiler.compile(model, bin, opts) do
          {:ok, _} ->
            IO.puts("#{name}: compiled in #{System.monotonic_time(:millisecond) - started} ms")

          {:error, message} ->
            flunk("#{name} (#{m.file} as shipped) does not compile: #{message}")
        end
      end
    end)

    %{
      model: model,
      bin: bin,
      ctx: Path.join(out, Path.basename(m.file, ".onnx") <> "_ctx.onnx"),
      inputs: inputs,
      eval: m.eval,
      preprocess: m.preprocess
    }
  end

  for name <- ["blazeface_astronaut", "blazeface_camera", "ppocr_det"] do
    test "#{name}: as shipped, equals ONNX Runtime's QNN EP on the same binary bit for bit",
         ctx do
      p = prepared!(ctx, unquote(name))
      graph = QnnHost.graph!(p.bin, ctx.runtime)
      ort = QnnHost.reference!(p.ctx, p.inputs, :qnn)
      assert length(ort.outputs) == length(p.eval)

      for {inputs, expected} <- Enum.zip(ort.inputs, ort.outputs) do
        ours = Graph.execute!(graph, Enum.map(inputs, & &1.data), output: :binary)
        assert length(ours) == length(expected)

        for {out, want, info} <- Enum.zip([ours, expected, Graph.outputs(graph)]) do
          assert out == as_f32(want, info), "output #{info.name} differs"
        end
      end
    end
  end

  for name <- ["blazeface_astronaut", "blazeface_camera"] do
    test "#{name}: the face the float model finds, found on the emulator (box IoU >= 0.9)",
         ctx do
      p = prepared!(ctx, unquote(name))
      graph = QnnHost.graph!(p.bin, ctx.runtime)
      float = QnnHost.reference!(p.model, p.inputs, :cpu)

      for {image, float_outputs} <- Enum.zip(p.eval, float.outputs) do
        want = faces(float_outputs)
        # one face in each of the two photographs (the astronaut, the cameraman)
        assert [_] = want, "#{image}: the float model finds #{length(want)} faces"

        {rgb, w, h} = RealModels.image!(ctx.setup, image)

        {:ok, outputs} =
          Preprocess.predict(graph, rgb, [width: w, height: h, output: :binary] ++ p.preprocess)

        got = faces(Enum.zip(outputs, Graph.outputs(graph)))

        assert length(got) == length(want),
               "#{image}: #{length(got)} faces, float #{length(want)}"

        for f <- want do
          {iou, d} = got |> Enum.map(&{RealModels.box_iou(&1.box, f.box), &1}) |> Enum.max()

          IO.puts(
            "blazeface #{image}: IoU #{Float.round(iou, 3)}, score #{Float.round(d.score, 3)} (float #{Float.round(f.score, 3)})"
          )

          assert iou >= 0.9, "#{image}: best IoU #{iou} with the float model's face #{inspect(f)}"
          # measured with u16: the astronaut's face 0.19 below the float model's score, the
          # cameraman's 0.01 above
          assert abs(d.score - f.score) <= 0.25
        end
      end
    end
  end

  # The bar: 0.85. Measured 0.95 on the page scan (16.7k text pixels) and 0.90 on the clock
  # face (2.8k pixels, where the mask's border is a larger share of it).
  test "ppocr_det: the text the float model finds, found on the emulator (text mask IoU >= 0.85)",
       ctx do
    p = prepared!(ctx, "ppocr_det")
    graph = QnnHost.graph!(p.bin, ctx.runtime)
    float = QnnHost.reference!(p.model, p.inputs, :cpu)

    for {image, [prob]} <- Enum.zip(p.eval, float.outputs) do
      want = text_mask(prob.data)
      assert Enum.sum(want) > 500, "#{image}: the float model finds little text"
      {rgb, w, h} = RealModels.image!(ctx.setup, image)

      {:ok, [out]} =
        Preprocess.predict(graph, rgb, [width: w, height: h, output: :binary] ++ p.preprocess)

      iou = RealModels.mask_iou(text_mask(out), want)
      IO.puts("ppocr_det #{image}: text mask IoU #{Float.round(iou, 3)} (#{Enum.sum(want)} px)")
      assert iou >= 0.85
    end

    # The task's own figures say the same at DB's 0.3, and why 0.5 fails: with no text in the
    # calibration images, the output's range ends below the float model's text probabilities
    {:ok, %{"graphs" => [%{"outputs" => [o]}]}} = HexagonTpu.Quality.read(p.bin)
    assert o["answer"]["mask_iou_by_threshold"]["0.3"] >= 0.85
    assert o["answer"]["clipped"] =~ "the quantized output is never above "
  end

  # BlazeFace's faces from its two outputs ({1, 896, 16} boxes and keypoints, {1, 896, 1}
  # scores), told apart by shape: the compiled graph's outputs need not keep the ONNX names.
  defp faces(outputs) do
    tensors =
      Map.new(outputs, fn
        %{shape: shape, data: data} -> {shape, data}
        {data, %TensorInfo{shape: shape}} -> {shape, data}
      end)

    BlazeFace.faces!(tensors)
  end

  # DB's text mask: probability above 0.3 (RapidOCR's and PaddleOCR's `thresh`)
  defp text_mask(f32s), do: for(<<p::float-32-little <- f32s>>, do: if(p > 0.3, do: 1, else: 0))

  defp as_f32(%{type: {:f, 32}, data: data}, _info), do: data

  defp as_f32(%{type: {:u, bits}, data: data}, %TensorInfo{quantization: q}) do
    for v <- QnnHost.uints(data, bits),
        into: <<>>,
        do: <<(v - q.zero_point) * q.scale::float-32-little>>
  end
end
