# A real face detector on a real photograph, from the PNG to the PNG with the faces boxed:
# compile -> load -> preprocess -> predict -> postprocess, on Qualcomm's HTP emulator (the
# x86-64 libQnnHtp.so of the compile task's venv) or, on the device, on the NPU itself.
#
# The model is mediapipe 0.10.14's BlazeFace (short range), converted from the .tflite its
# wheel bundles by tflite2onnx; the photograph is scikit-image's astronaut. Both come out of
# their PyPI wheels (pinned by sha256, never committed) with one command:
#
#   mix run examples/face_boxes.exs --fetch examples/data
#
# then:
#
#   mix run examples/face_boxes.exs --model examples/data/face_detection_short_range.onnx \
#     --image examples/data/astronaut.png --out astronaut_faces.png
#
# Options: --calibration A.png,B.png (the compile's calibration images; default the image
# itself), --work DIR (where the binary goes; default a temporary directory), --threshold S
# (the face score threshold, default 0.5), --device (the device's own QNN libraries, not the
# emulator). Boxes are drawn in green (3 px, inside the box), the six keypoints (eyes, nose,
# mouth, ears) as red 5 x 5 squares; each face is printed as a line
# `face N: score S box X1 Y1 X2 Y2 points X Y ...` in the image's pixels.

Code.require_file("png.ex", __DIR__)

defmodule HexagonTpu.Examples.FaceBoxes do
  alias HexagonTpu.{Compiler, Graph, Postprocess, Preprocess, TensorInfo}
  alias HexagonTpu.Examples.PNG
  alias HexagonTpu.Preprocess.Transform

  @box_colour <<0, 255, 0>>
  @box_width 3
  @point_colour <<255, 0, 0>>
  @point_radius 2

  # BlazeFace short range: a {1, 3, 128, 128} input, RGB in [-1, 1]; MediaPipe's
  # face_detection_short_range graph's SsdAnchorsCalculator and TensorsToDetectionsCalculator
  # options, and its NMS threshold
  @input %TensorInfo{
    name: "input",
    shape: {1, 3, 128, 128},
    type: {:f, 32},
    data_type: :float_32,
    quantization: :none,
    byte_size: 3 * 128 * 128 * 4
  }
  @preprocess [mean: 0.5, std: 0.5]
  # MediaPipe's face_detection_short_range graph: anchors, box decoding, NMS
  @decode HexagonTpu.Postprocess.ssd_options(:face_detection_short_range)

  def main(argv) do
    {opts, rest} =
      OptionParser.parse!(argv,
        strict: [
          model: :string,
          image: :string,
          out: :string,
          calibration: :string,
          work: :string,
          threshold: :float,
          device: :boolean,
          fetch: :string
        ]
      )

    if rest != [], do: usage!("unexpected arguments #{Enum.join(rest, " ")}")

    if dir = opts[:fetch], do: fetch!(dir), else: run!(opts)
  end

  defp run!(opts) do
    model_path = opts[:model] || usage!("--model is required")
    image_path = opts[:image] || usage!("--image is required")
    out_path = opts[:out] || usage!("--out is required")
    calibration = String.split(opts[:calibration] || image_path, ",", trim: true)

    work =
      opts[:work] ||
        Path.join(System.tmp_dir!(), "face_boxes_#{System.unique_integer([:positive])}")

    File.mkdir_p!(work)

    {rgb, w, h} = PNG.read!(image_path)
    IO.puts("image     #{image_path}: #{w}x#{h}")

    # 1. compile: the float model quantized with the calibration images, preprocessed as the
    #    model will be fed, written as <input>_<n>.npy
    calib = Path.join(work, "calibration")
    File.mkdir_p!(calib)

    for {png, n} <- Enum.with_index(calibration) do
      {c_rgb, c_w, c_h} = PNG.read!(png)
      bytes = Preprocess.image!(c_rgb, @input, [width: c_w, height: c_h] ++ @preprocess)
      write_npy!(Path.join(calib, "input_#{n}.npy"), bytes, @input.shape)
    end

    bin = Path.join(work, "face_detection_short_range.bin")

    {us, result} =
      :timer.tc(fn -> Compiler.compile(model_path, bin, calibration: calib, force: true) end)

    case result do
      {:ok, _} ->
        IO.puts("compiled  #{bin} in #{ms(us)} ms (#{length(calibration)} calibration images)")

      {:error, message} ->
        fail!("cannot compile #{model_path}: #{message}")
    end

    # 2. load: on the emulator unless --device
    {:ok, model} = HexagonTpu.load_model(bin, runtime_opts(opts[:device]))

    # 3. + 4. preprocess (the whole image stretched to 128x128, as MediaPipe does) and predict
    frame = [width: w, height: h] ++ @preprocess

    {us, {:ok, outputs}} =
      :timer.tc(fn -> Preprocess.predict(model, rgb, [output: :binary] ++ frame) end)

    IO.puts("predicted in #{ms(us)} ms")

    # 5. postprocess: decode against the anchors, threshold, NMS; the outputs told apart by
    #    shape ({1, 896, 16} boxes and keypoints, {1, 896, 1} scores)
    by_shape =
      Map.new(Enum.zip(Graph.outputs(model), outputs), fn {info, data} -> {info.shape, data} end)

    raw_boxes =
      by_shape[{1, 896, 16}] || fail!("no {1, 896, 16} output in #{inspect(Map.keys(by_shape))}")

    raw_scores = by_shape[{1, 896, 1}] || fail!("no {1, 896, 1} output")

    faces =
      Postprocess.ssd!(
        {raw_boxes, {1, 896, 16}},
        {raw_scores, {1, 896, 1}},
        Keyword.merge(@decode, score_threshold: opts[:threshold] || 0.5)
      )

    # the boxes are in the input's units (0..1): to its pixels, then back to the image's
    {:ok, t} = Preprocess.transform(model, frame)
    {:ok, {anchors, _}} = Postprocess.ssd_anchors(@decode[:anchors])

    faces =
      for f <- faces do
        {x1, y1, x2, y2} = f.box
        box = Transform.to_frame(t, {x1 * 128, y1 * 128, x2 * 128, y2 * 128})

        points =
          for {x, y} <- keypoints(raw_boxes, anchors, f.index),
              do: Transform.to_frame(t, {x * 128, y * 128})

        %{score: f.score, box: box, points: points}
      end

    for {f, n} <- Enum.with_index(faces, 1) do
      {x1, y1, x2, y2} = f.box
      points = Enum.flat_map(f.points, &Tuple.to_list/1)

      IO.puts(
        "face #{n}: score #{Float.round(f.score, 3)} box #{join([x1, y1, x2, y2])} points #{join(points)}"
      )
    end

    # 6. drawn on the image and saved
    drawn = draw(rgb, w, h, faces)
    PNG.write!(out_path, drawn, w, h)
    IO.puts("wrote     #{out_path} (#{length(faces)} faces)")
  end

  # BlazeFace's six keypoints of anchor i, decoded as its box centre is (reverse order: x, y)
  defp keypoints(raw_boxes, anchors, i) do
    <<_::binary-size(i * 64), row::binary-64, _::binary>> = raw_boxes

    <<_::binary-size(i * 16), cx::float-32-little, cy::float-32-little, aw::float-32-little,
      ah::float-32-little, _::binary>> = anchors

    <<_box::binary-16, points::binary-48>> = row

    for <<x::float-32-little, y::float-32-little <- points>>,
      do: {x / 128 * aw + cx, y / 128 * ah + cy}
  end

  @doc """
  `rgb` with each face's box outlined (`@box_width` px inside the box's pixels, clipped to the
  image) and its keypoints marked; the box drawn last, over the points.
  """
  def draw(rgb, w, h, faces) do
    pixels =
      Enum.reduce(faces, %{}, fn f, acc ->
        acc = Enum.reduce(f.points, acc, &paint(&2, point_pixels(&1, w, h), @point_colour, w))
        paint(acc, box_pixels(f.box, w, h), @box_colour, w)
      end)

    # the image rebuilt from the untouched runs between painted pixels
    {parts, last} =
      pixels
      |> Enum.sort()
      |> Enum.reduce({[], 0}, fn {offset, colour}, {acc, from} ->
        {[colour, binary_part(rgb, from, offset - from) | acc], offset + 3}
      end)

    IO.iodata_to_binary(Enum.reverse([binary_part(rgb, last, byte_size(rgb) - last) | parts]))
  end

  @doc "The pixels `{x, y}` of a box's outline: rows and columns of its rounded edges, inward."
  def box_pixels({x1, y1, x2, y2}, w, h) do
    {l, t, r, b} = {round(x1), round(y1), round(x2) - 1, round(y2) - 1}
    {l, t, r, b} = {max(l, 0), max(t, 0), min(r, w - 1), min(b, h - 1)}
    k = @box_width - 1

    if l > r or t > b do
      []
    else
      rows =
        for y <- Enum.uniq(Enum.to_list(t..min(t + k, b)) ++ Enum.to_list(max(b - k, t)..b)),
            x <- l..r,
            do: {x, y}

      cols =
        for x <- Enum.uniq(Enum.to_list(l..min(l + k, r)) ++ Enum.to_list(max(r - k, l)..r)),
            y <- t..b,
            do: {x, y}

      rows ++ cols
    end
  end

  @doc "The pixels of a keypoint's square (clipped to the image)."
  def point_pixels({x, y}, w, h) do
    {cx, cy} = {trunc(Float.floor(x)), trunc(Float.floor(y))}

    for py <- (cy - @point_radius)..(cy + @point_radius),
        px <- (cx - @point_radius)..(cx + @point_radius),
        px in 0..(w - 1),
        py in 0..(h - 1),
        do: {px, py}
  end

  def box_colour, do: @box_colour
  def box_width, do: @box_width
  def point_radius, do: @point_radius

  defp paint(acc, pixels, colour, w),
    do: Enum.reduce(pixels, acc, fn {x, y}, acc -> Map.put(acc, (y * w + x) * 3, colour) end)

  defp runtime_opts(true), do: [log_level: :error]

  defp runtime_opts(_) do
    case Compiler.qnn_lib_dir() do
      {:ok, dir} ->
        [
          lib_path: Path.join(dir, "libQnnHtp.so"),
          system_lib_path: Path.join(dir, "libQnnSystem.so"),
          log_level: :error
        ]

      {:error, message} ->
        fail!("no emulator (#{message}); run `mix hexagon_tpu.compile --setup`, or pass --device")
    end
  end

  # the model and images out of their wheels, by test/support/real_models.py in the venv
  defp fetch!(dir) do
    python =
      case Compiler.python() do
        {:ok, python} -> python
        {:error, message} -> fail!("#{message}; run `mix hexagon_tpu.compile --setup` first")
      end

    script = Path.expand("../test/support/real_models.py", __DIR__)

    case System.cmd(python, [script, "example", "--cache", Compiler.cache_dir(), "--out", dir],
           stderr_to_stdout: true
         ) do
      {output, 0} ->
        for line <- String.split(output, "\n"), line =~ ~r/^(model|image): /, do: IO.puts(line)

      {output, status} ->
        fail!("real_models.py example failed (#{status}): #{String.trim(output)}")
    end
  end

  # a little-endian f32 .npy (format 1.0: the header padded to a multiple of 64 bytes)
  defp write_npy!(path, bytes, shape) do
    dims = shape |> Tuple.to_list() |> Enum.join(", ")
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (#{dims}), }"

    header =
      header <> String.duplicate(" ", rem(64 - rem(10 + byte_size(header) + 1, 64), 64)) <> "\n"

    File.write!(path, [<<0x93, "NUMPY", 1, 0, byte_size(header)::little-16>>, header, bytes])
  end

  defp join(values), do: Enum.map_join(values, " ", &:erlang.float_to_binary(&1, decimals: 2))

  defp ms(us), do: Float.round(us / 1000, 1)

  defp usage!(message) do
    fail!(
      "#{message}\nusage: mix run examples/face_boxes.exs --model MODEL.onnx --image IMAGE.png --out OUT.png " <>
        "[--calibration A.png,B.png] [--work DIR] [--threshold 0.5] [--device]\n" <>
        "       mix run examples/face_boxes.exs --fetch DIR"
    )
  end

  defp fail!(message) do
    IO.puts(:stderr, "face_boxes: #{message}")
    System.halt(1)
  end
end

HexagonTpu.Examples.FaceBoxes.main(System.argv())
