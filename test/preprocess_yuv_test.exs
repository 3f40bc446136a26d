defmodule HexagonTpu.PreprocessYuvTest do
  # HexagonTpu.Preprocess on camera frames as cameras give them: NV12, NV21, I420, YUYV (and
  # RGB/BGR) with padded rows, a crop and a letterbox, against numpy
  # (test/support/preprocess_yuv_numpy.py: the formulas of the moduledoc, :qnn_host, the QNN
  # venv's Python), and the transform back to frame coordinates.
  use ExUnit.Case, async: true

  alias HexagonTpu.{Error, Preprocess, TensorInfo}
  alias HexagonTpu.Preprocess.Transform
  alias HexagonTpu.Test.PreprocessReference, as: Ref

  @imagenet [mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]]

  defp info(shape, type, quantization) do
    {data_type, bytes} =
      case type do
        {:u, 8} -> {:ufixed_point_8, 1}
        {:s, 8} -> {:sfixed_point_8, 1}
        {:f, 32} -> {:float_32, 4}
      end

    %TensorInfo{
      name: "image",
      shape: shape,
      type: type,
      data_type: data_type,
      quantization: quantization,
      byte_size: (shape |> Tuple.to_list() |> Enum.product()) * bytes,
      f32_conversion: quantization != :none
    }
  end

  defp per_tensor(scale, zp),
    do: %{kind: :per_tensor, scale: Ref.f32(scale), zero_point: zp, bitwidth: nil}

  # bytes of a frame with these strides (chroma planes whole, as V4L2 hands them over)
  defp frame_size(format, w, h, opts) do
    row = %{rgb: 3 * w, bgr: 3 * w, yuyv: 2 * w}[format] || w
    stride = opts[:stride] || row
    offset = opts[:chroma_offset] || h * stride

    case format do
      f when f in [:nv12, :nv21] -> offset + div(h, 2) * (opts[:chroma_stride] || stride)
      :i420 -> offset + 2 * div(h, 2) * (opts[:chroma_stride] || div(stride, 2))
      _ -> h * stride
    end
  end

  # the numpy case of `opts` on `info`
  defp case_params(info, format, w, h, opts) do
    {layout, dh, dw} =
      case info.shape do
        {1, dh, dw, 3} -> {:nhwc, dh, dw}
        {1, 3, dh, dw} -> {:nchw, dh, dw}
      end

    out =
      case {info.type, info.quantization} do
        {{:f, 32}, :none} ->
          "f32"

        {{kind, 8}, %{scale: scale, zero_point: zp}} ->
          {qmin, qmax} = if kind == :u, do: {0, 255}, else: {-128, 127}
          %{type: "#{kind}8", scale: scale, zero_point: zp, qmin: qmin, qmax: qmax}
      end

    pad = opts[:pad] || 114

    %{
      sw: w,
      sh: h,
      dw: dw,
      dh: dh,
      resize: opts[:resize] || :bilinear,
      layout: layout,
      swap: format == :bgr,
      divisor: 255.0,
      mean: opts[:mean],
      std: opts[:std],
      out: out,
      format: format,
      matrix: opts[:color_matrix] || :bt601,
      range: opts[:color_range] || :limited,
      stride: opts[:stride],
      chroma_stride: opts[:chroma_stride],
      chroma_offset: opts[:chroma_offset],
      crop: if(c = opts[:crop], do: Tuple.to_list(c)),
      fit: opts[:fit] || :stretch,
      pad: if(is_list(pad), do: pad, else: [pad, pad, pad])
    }
  end

  defp numpy!(cases) do
    {:ok, python} = HexagonTpu.Compiler.python()
    dir = Path.join(System.tmp_dir!(), "hexagon_tpu_yuv_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)

    try do
      cases
      |> Enum.with_index()
      |> Enum.each(fn {{frame, _p}, i} -> File.write!(Path.join(dir, "frame#{i}"), frame) end)

      json = HexagonTpu.JSON.encode(Enum.map(cases, &elem(&1, 1)))
      File.write!(Path.join(dir, "cases.json"), json)
      script = Path.expand("support/preprocess_yuv_numpy.py", __DIR__)
      {output, status} = System.cmd(python, [script, dir], stderr_to_stdout: true)
      if status != 0, do: raise("preprocess_yuv_numpy.py failed (#{status}): #{output}")

      outs = for i <- 0..(length(cases) - 1), do: File.read!(Path.join(dir, "out#{i}"))
      {outs, output}
    after
      File.rm_rf!(dir)
    end
  end

  defp max_diff(a, b, {:f, 32}) do
    xs = for <<x::float-32-little <- a>>, do: x
    ys = for <<y::float-32-little <- b>>, do: y
    xs |> Enum.zip(ys) |> Enum.map(fn {x, y} -> abs(x - y) end) |> Enum.max()
  end

  defp max_diff(a, b, {kind, 8}) do
    decode = fn bin ->
      for <<q::8 <- bin>>, do: if(kind == :s and q >= 128, do: q - 256, else: q)
    end

    decode.(a) |> Enum.zip(decode.(b)) |> Enum.map(fn {x, y} -> abs(x - y) end) |> Enum.max()
  end

  describe "against the formulas done separately in numpy" do
    @describetag :qnn_host

    test "every format, matrix and range; strides, crop and letterbox; byte for byte" do
      :rand.seed(:exsss, 25)

      infos = [
        info({1, 24, 32, 3}, {:u, 8}, per_tensor(0.018658, 114)),
        info({1, 3, 20, 20}, {:f, 32}, :none),
        info({1, 3, 17, 30}, {:s, 8}, per_tensor(0.0213, -3))
      ]

      colours =
        [{:rgb, :bt601, :limited}, {:bgr, :bt601, :limited}] ++
          for f <- [:nv12, :nv21, :i420, :yuyv],
              m <- [:bt601, :bt709],
              r <- [:limited, :full],
              do: {f, m, r}

      strides = fn format, w, h ->
        row = %{rgb: 3 * w, bgr: 3 * w, yuyv: 2 * w}[format] || w
        planar = format in [:nv12, :nv21, :i420]
        # packed; odd padded rows; planar: an own chroma stride and a later chroma plane
        [[], [stride: row + 5]] ++
          if planar,
            do: [[stride: row + 8, chroma_stride: row + 3, chroma_offset: h * (row + 8) + 7]],
            else: []
      end

      placements = [
        [],
        [crop: {3, 5, 30, 15}, fit: :letterbox, pad: [114, 0, 255]],
        [fit: :letterbox]
      ]

      cases =
        for {w, h} <- [{64, 48}, {38, 22}],
            {format, matrix, range} <- colours,
            layout <- strides.(format, w, h),
            place <- placements,
            resize <- [:nearest, :bilinear],
            info <- infos do
          opts =
            [width: w, height: h, pixel_format: format, resize: resize] ++
              [color_matrix: matrix, color_range: range] ++ layout ++ place ++ @imagenet

          frame = :rand.bytes(frame_size(format, w, h, opts))
          {info, opts, frame}
        end

      {numpy, summary} =
        numpy!(
          for {info, opts, frame} <- cases,
              do:
                {frame, case_params(info, opts[:pixel_format], opts[:width], opts[:height], opts)}
        )

      # the fixed-point conversion is within one of the float formula, rounded
      assert %{"float_max_diff" => float_diff} = HexagonTpu.JSON.decode!(summary)
      assert float_diff <= 1

      diffs =
        for {{info, opts, frame}, want} <- Enum.zip(cases, numpy) do
          {:ok, got} = Preprocess.image(frame, info, opts)
          assert byte_size(got) == byte_size(want)
          diff = max_diff(got, want, info.type)
          assert got == want, "#{inspect(info.shape)} #{inspect(opts)}: max diff #{diff}"
          diff
        end

      IO.puts(
        "\n  YUV numpy comparison: #{length(cases)} cases, #{Enum.count(diffs, &(&1 == 0))} " <>
          "byte-exact, max diff #{Enum.max(diffs)}; fixed point vs float formula: max #{float_diff}"
      )
    end
  end

  describe "known values" do
    test "limited-range white and black NV12 are 255 and 0; full range keeps 128 grey" do
      input = info({1, 2, 2, 3}, {:u, 8}, per_tensor(1 / 255, 0))
      y = <<235, 16, 235, 16>> <> <<16, 235, 16, 235>>
      nv12 = y <> <<128, 128, 128, 128>>
      opts = [width: 4, height: 2, pixel_format: :nv12, resize: :nearest]
      # columns 0 and 2 (nearest of 4 -> 2 is 1 and 3): row 0 -> 16, row 1 -> 235
      assert {:ok, <<0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255>>} =
               Preprocess.image(nv12, input, opts)

      grey = :binary.copy(<<128>>, 12)

      assert {:ok, :binary.copy(<<128>>, 12)} ==
               Preprocess.image(grey, input, opts ++ [color_range: :full, color_matrix: :bt709])
    end
  end

  describe "the transform back to the frame" do
    test "letterbox 1280x720 into 640x640: scale 2, content centred, 140 rows of padding" do
      input = info({1, 640, 640, 3}, {:u, 8}, per_tensor(1 / 255, 0))

      assert {:ok, %Transform{content: {0, 140, 640, 360}} = t} =
               Preprocess.transform(input, width: 1280, height: 720, fit: :letterbox)

      assert t.x_scale == 2.0 and t.y_scale == 2.0
      assert Transform.to_frame(t, {0, 140, 640, 500}) == {0.0, 0.0, 1280.0, 720.0}
      assert Transform.to_frame(t, {320, 320}) == {640.0, 360.0}
    end

    test "a crop, an odd padding (rounded down on the top/left), and stretch" do
      input = info({1, 24, 32, 3}, {:u, 8}, per_tensor(1 / 255, 0))
      # crop 30x15 into 32x24: the width binds, height round(15 * 32 / 30) = 16, top (24-16)/2
      opts = [width: 64, height: 48, crop: {3, 5, 30, 15}, fit: :letterbox]
      assert {:ok, %Transform{content: {0, 4, 32, 16}} = t} = Preprocess.transform(input, opts)
      assert Transform.to_frame(t, {0, 4}) == {3.0, 5.0}
      assert Transform.to_frame(t, {32, 20}) == {33.0, 20.0}

      # 10x30 into 32x24: the height binds, width round(10 * 24 / 30) = 8, left 12
      assert {:ok, %Transform{content: {12, 0, 8, 24}}} =
               Preprocess.transform(input, width: 10, height: 30, fit: :letterbox)

      assert {:ok, %Transform{content: {0, 0, 32, 24}, x_scale: 2.0, y_scale: 2.0}} =
               Preprocess.transform(input, width: 64, height: 48)
    end

    test "the pad value is normalized and quantized like a pixel" do
      input = info({1, 4, 4, 3}, {:u, 8}, per_tensor(1 / 255, 0))
      frame = :binary.copy(<<10, 20, 30>>, 4 * 2)
      opts = [width: 4, height: 2, fit: :letterbox, pad: [1, 2, 3], resize: :nearest]
      {:ok, out} = Preprocess.image(frame, input, opts)
      pad_row = :binary.copy(<<1, 2, 3>>, 4)
      content_row = :binary.copy(<<10, 20, 30>>, 4)
      assert out == pad_row <> content_row <> content_row <> pad_row
    end
  end

  describe "errors" do
    setup do
      %{info: info({1, 4, 4, 3}, {:u, 8}, per_tensor(0.02, 128))}
    end

    test "short buffers, odd 4:2:0 and 4:2:2 sizes, crops outside: :invalid_input", %{info: info} do
      for {frame, opts, says} <- [
            {<<0::size(1000)-unit(8)>>,
             [width: 640, height: 480, pixel_format: :nv12, stride: 704],
             "expected a nv12 frame of 640x480 (stride 704, chroma at byte 337920 with stride " <>
               "704) of at least 506816 bytes, got 1000 bytes"},
            {<<0::size(100)-unit(8)>>, [width: 7, height: 4, pixel_format: :yuyv],
             "a yuyv frame needs an even width (4:2:2), got 7x4"},
            {<<0::size(100)-unit(8)>>, [width: 8, height: 5, pixel_format: :i420],
             "a i420 frame needs an even width and height (4:2:0), got 8x5"},
            {<<0::size(100)-unit(8)>>, [width: 4, height: 4, stride: 10],
             "the stride of a rgb frame 4 pixels wide must be at least 12, got 10"},
            {<<0::size(48)-unit(8)>>, [width: 4, height: 4, crop: {2, 0, 3, 4}],
             "the crop {x: 2, y: 0, w: 3, h: 4} is not a non-empty rectangle inside 4x4"},
            {<<0::size(48)-unit(8)>>, [width: 4, height: 4, chroma_stride: 4],
             "a rgb frame has no chroma plane"}
          ] do
        assert {:error, %Error{reason: :invalid_input, message: message}} =
                 Preprocess.image(frame, info, opts)

        assert message =~ says
      end
    end

    test "options of the wrong type raise ArgumentError", %{info: info} do
      frame = Ref.frame(4, 4)

      for {opts, says} <- [
            {[pixel_format: :nv16], ":rgb, :bgr, :nv12, :nv21, :i420 or :yuyv"},
            {[color_matrix: :bt2020], ":bt601 or :bt709"},
            {[color_range: :tv], ":limited or :full"},
            {[stride: 0], "the :stride option must be a positive integer"},
            {[crop: {0, 0, 0, 4}], "the :crop option must be {x, y, width, height}"},
            {[fit: :cover], ":stretch or :letterbox"},
            {[pad: 256], "the :pad option must be an integer 0..255"},
            {[pad: [1, 2]], "the :pad option must be an integer 0..255"}
          ] do
        error =
          assert_raise ArgumentError, fn ->
            Preprocess.image(frame, info, [width: 4, height: 4] ++ opts)
          end

        assert error.message =~ says
      end

      assert_raise ArgumentError, ~r/transform\/2: needs the frame's :width and :height/, fn ->
        Preprocess.transform(info, fit: :letterbox)
      end
    end
  end
end
