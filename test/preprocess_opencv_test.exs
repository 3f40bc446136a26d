defmodule HexagonTpu.PreprocessOpencvTest do
  # HexagonTpu.Preprocess against OpenCV (opencv-python-headless, pinned in
  # test/support/real_models/requirements.txt; test/support/opencv_reference.py): its YUV -> RGB
  # (BT.601, limited range: the default) against cvtColor (COLOR_YUV2RGB_NV12, _NV21, _I420,
  # _YUYV), each frame converted whole by the pass (an identity input: the frame's own size,
  # u8, nearest, no normalization) and by OpenCV (the frame repacked without its padding); its
  # bilinear resize (crop, stretch or letterbox) against cvtColor, resize(INTER_LINEAR) and
  # copyMakeBorder. :qnn_host, as the numpy comparisons: the compile venv's Python runs OpenCV.
  use ExUnit.Case, async: false

  @moduletag :qnn_host
  @moduletag timeout: 300_000

  alias HexagonTpu.{Preprocess, TensorInfo}
  alias HexagonTpu.JSON
  alias HexagonTpu.Test.RealModels

  # random frames (random chroma: every saturation path), then scikit-image's astronaut and
  # cameraman put into YUV by formulas of this test, with rows padded as V4L2 may pad them
  # (width, height, the bytes each row is padded by)
  @sizes [{64, 48, 0}, {1280, 720, 64}, {1920, 1080, 0}]

  test "NV12, NV21, I420 and YUYV to RGB: byte for byte OpenCV's cvtColor" do
    setup = RealModels.setup!()
    :rand.seed(:exsss, {25, 4, 1})

    random =
      for {w, h, padding} <- @sizes, format <- [:nv12, :nv21, :i420, :yuyv] do
        stride = if padding > 0, do: row_bytes(format, w) + padding

        {"random #{w}x#{h}#{if stride, do: " stride #{stride}"}", format, w, h, stride,
         random_frame(format, w, h, stride)}
      end

    real =
      for name <- ["astronaut", "camera"], format <- [:nv12, :nv21, :i420, :yuyv] do
        {rgb, w, h} = RealModels.image!(setup, name)
        stride = row_bytes(format, w) + 64

        {"#{name} #{w}x#{h} stride #{stride}", format, w, h, stride,
         from_rgb(format, rgb, w, h, stride)}
      end

    cases = random ++ real

    opencv =
      opencv!(
        setup,
        "yuv",
        for {_, format, w, h, stride, frame} <- cases do
          {stride, {cs, _}} = layout(format, w, h, stride)
          {%{format: format, width: w, height: h, stride: stride, chroma_stride: cs}, frame}
        end
      )

    results =
      for {{label, format, w, h, stride, frame}, want} <- Enum.zip(cases, opencv) do
        opts = [width: w, height: h, pixel_format: format, resize: :nearest, pixel_scale: :byte]
        opts = if stride, do: [stride: stride] ++ opts, else: opts
        got = Preprocess.image!(frame, identity(w, h), opts)
        assert byte_size(got) == byte_size(want)
        {off, max} = diff(got, want)
        IO.puts("  #{format} #{label}: #{off} of #{w * h} pixels differ, max #{max}")
        {label, format, off, max}
      end

    pixels = cases |> Enum.map(fn {_, _, w, h, _, _} -> w * h end) |> Enum.sum()
    IO.puts("  OpenCV cvtColor comparison: #{length(cases)} frames, #{pixels} pixels")

    for {label, format, off, max} <- results,
        do: assert({off, max} == {0, 0}, "#{format} #{label}: #{off} pixels differ (max #{max})")
  end

  # {format, width, height, row padding, crop, model width, model height, fit}: the issue 31
  # geometries (camera frames to YOLO's letterbox and ImageNet's 224), upscales, odd crops
  @resize_cases [
    {:nv12, 1280, 720, 64, nil, 640, 640, :letterbox},
    {:nv12, 1920, 1080, 0, nil, 640, 640, :letterbox},
    {:nv12, 1280, 720, 0, nil, 224, 224, :stretch},
    {:nv21, 640, 480, 0, {3, 5, 301, 211}, 416, 416, :letterbox},
    {:i420, 320, 240, 32, nil, 640, 480, :stretch},
    {:yuyv, 352, 288, 0, {1, 1, 350, 286}, 97, 61, :stretch},
    {:rgb, 161, 97, 5, nil, 56, 40, :stretch},
    {:rgb, 33, 17, 0, {2, 3, 29, 13}, 101, 59, :letterbox}
  ]

  test "bilinear (stretch, letterbox, crops): byte for byte OpenCV's resize(INTER_LINEAR)" do
    setup = RealModels.setup!()
    :rand.seed(:exsss, {31, 1, 1})

    cases =
      for {format, w, h, padding, crop, dw, dh, fit} <- @resize_cases do
        stride = if padding > 0, do: row_bytes(format, w) + padding
        {format, w, h, stride, crop, dw, dh, fit, random_frame(format, w, h, stride)}
      end

    opencv =
      opencv!(
        setup,
        "resize",
        for {format, w, h, stride, crop, dw, dh, fit, frame} <- cases do
          {stride, {cs, _}} = layout(format, w, h, stride)
          crop = if crop, do: Tuple.to_list(crop)

          {%{
             format: format,
             width: w,
             height: h,
             stride: stride,
             chroma_stride: cs,
             crop: crop,
             dw: dw,
             dh: dh,
             fit: fit,
             pad: 114
           }, frame}
        end
      )

    for {{format, w, h, stride, crop, dw, dh, fit, frame}, want} <- Enum.zip(cases, opencv) do
      opts = [width: w, height: h, pixel_format: format, resize: :bilinear, pixel_scale: :byte]
      opts = opts ++ [fit: fit, pad: 114]
      opts = if stride, do: [stride: stride] ++ opts, else: opts
      opts = if crop, do: [crop: crop] ++ opts, else: opts
      got = Preprocess.image!(frame, identity(dw, dh), opts)
      {off, max} = diff(got, want)
      label = "#{format} #{w}x#{h} #{inspect(crop)} -> #{dw}x#{dh} #{fit}"
      IO.puts("  bilinear #{label}: #{off} of #{dw * dh} pixels differ, max #{max}")
      assert {off, max} == {0, 0}, label
    end
  end

  # -- frames ----------------------------------------------------------------------------------

  defp row_bytes(:rgb, w), do: 3 * w
  defp row_bytes(:yuyv, w), do: 2 * w
  defp row_bytes(_, w), do: w

  # the whole buffer: Y rows of `stride` (row_bytes by default), chroma right after it with
  # the package's default chroma strides (NV12/NV21: the stride; I420: half of it)
  defp layout(format, w, _h, stride) do
    stride = stride || row_bytes(format, w)

    chroma =
      case format do
        f when f in [:rgb, :yuyv] -> {0, 0}
        f when f in [:nv12, :nv21] -> {stride, 1}
        :i420 -> {div(stride, 2), 2}
      end

    {stride, chroma}
  end

  defp random_frame(format, w, h, stride) do
    {stride, {cs, planes}} = layout(format, w, h, stride)
    :rand.bytes(h * stride + planes * div(h, 2) * cs)
  end

  # an RGB image in YUV (BT.601 limited, rounded; the chroma of each 2x2 block, or pixel pair,
  # that of its top-left pixel): the frame is the input, any YUV will do
  defp from_rgb(format, rgb, w, h, stride) do
    {stride, {cs, _}} = layout(format, w, h, stride)

    px = fn x, y ->
      <<r, g, b>> = binary_part(rgb, (y * w + x) * 3, 3)
      {r, g, b}
    end

    yv = fn {r, g, b} -> clamp(round(16 + 0.257 * r + 0.504 * g + 0.098 * b)) end

    uv = fn {r, g, b} ->
      {clamp(round(128 - 0.148 * r - 0.291 * g + 0.439 * b)),
       clamp(round(128 + 0.439 * r - 0.368 * g - 0.071 * b))}
    end

    pad = fn row, bytes -> [row, :binary.copy(<<0>>, bytes - IO.iodata_length(row))] end

    case format do
      :yuyv ->
        for y <- 0..(h - 1) do
          row =
            for x <- 0..(w - 1)//2 do
              {u, v} = uv.(px.(x, y))
              <<yv.(px.(x, y)), u, yv.(px.(x + 1, y)), v>>
            end

          pad.(row, stride)
        end

      _ ->
        ys = for y <- 0..(h - 1), do: pad.(for(x <- 0..(w - 1), do: yv.(px.(x, y))), stride)
        chroma = for y <- 0..(h - 1)//2, x <- 0..(w - 1)//2, do: {y, uv.(px.(x, y))}
        rows = Enum.chunk_every(chroma, div(w, 2))

        planes =
          case format do
            :nv12 ->
              for r <- rows, do: pad.(for({_, {u, v}} <- r, do: <<u, v>>), cs)

            :nv21 ->
              for r <- rows, do: pad.(for({_, {u, v}} <- r, do: <<v, u>>), cs)

            :i420 ->
              [
                for(r <- rows, do: pad.(for({_, {u, _}} <- r, do: u), cs)),
                for(r <- rows, do: pad.(for({_, {_, v}} <- r, do: v), cs))
              ]
          end

        [ys, planes]
    end
    |> IO.iodata_to_binary()
  end

  defp clamp(v), do: v |> max(0) |> min(255)

  defp identity(w, h) do
    %TensorInfo{
      name: "rgb",
      shape: {1, h, w, 3},
      type: {:u, 8},
      data_type: :ufixed_point_8,
      quantization: :none,
      byte_size: w * h * 3
    }
  end

  # pixels (of 3 bytes) that differ, and the largest byte difference
  defp diff(a, b) do
    if a == b do
      {0, 0}
    else
      Enum.zip(for(<<p::binary-3 <- a>>, do: p), for(<<p::binary-3 <- b>>, do: p))
      |> Enum.reduce({0, 0}, fn
        {p, p}, acc ->
          acc

        {<<a1, a2, a3>>, <<b1, b2, b3>>}, {n, m} ->
          {n + 1, Enum.max([m, abs(a1 - b1), abs(a2 - b2), abs(a3 - b3)])}
      end)
    end
  end

  # runs `opencv_reference.py COMMAND` on `cases` ({params, frame}); the outputs, in order
  defp opencv!(setup, command, cases) do
    {:ok, python} = HexagonTpu.Compiler.python()
    dir = Path.join(System.tmp_dir!(), "hexagon_tpu_opencv_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)

    try do
      params =
        for {{params, frame}, i} <- Enum.with_index(cases) do
          File.write!(Path.join(dir, "frame#{i}"), frame)
          params
        end

      File.write!(Path.join(dir, "cases.json"), JSON.encode(params))
      script = Path.expand("support/opencv_reference.py", __DIR__)

      {output, status} =
        System.cmd(python, [script, command, dir],
          env: [{"PYTHONPATH", RealModels.site(setup)}],
          stderr_to_stdout: true
        )

      if status != 0, do: raise("opencv_reference.py #{command} failed (#{status}): #{output}")
      for i <- 0..(length(cases) - 1), do: File.read!(Path.join(dir, "out#{i}"))
    after
      File.rm_rf!(dir)
    end
  end
end
