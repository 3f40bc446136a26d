defmodule HexagonTpu.Test.RealModels do
  @moduledoc false
  # Real pretrained models from PyPI wheels (mediapipe's BlazeFace converted by tflite2onnx,
  # rapidocr-onnxruntime's PaddleOCR text detector) and scikit-image's sample images, set up by
  # test/support/real_models.py in the cache folder once per pin set
  # (test/support/real_models/requirements.txt). The float inputs, calibration sets and
  # compiled binaries of a run go to dir/0, emptied with the :qnn_host models each run.

  alias HexagonTpu.{Compiler, Preprocess, TensorInfo}
  alias HexagonTpu.Test.QnnHost

  import Bitwise, only: [&&&: 2, |||: 2]

  @script Path.expand("real_models.py", __DIR__)

  @doc """
  The set-up folder (models/, images/), made once; returns %{dir:, times: %{step => s}}
  (times only when this call made it).
  """
  def setup! do
    :global.trans({__MODULE__, :setup}, fn ->
      {:ok, python} = Compiler.python()

      case System.cmd(python, [@script, "setup", "--cache", Compiler.cache_dir()],
             stderr_to_stdout: true
           ) do
        {output, 0} ->
          [_, dir] = Regex.run(~r/^dir: (.+)$/m, output)

          times =
            for [_, step, s] <- Regex.scan(~r/^time (\w+): ([\d.]+)$/m, output),
                into: %{},
                do: {step, String.to_float(s)}

          %{dir: dir, times: times}

        {output, status} ->
          raise "real_models.py setup failed (#{status}):\n#{output}"
      end
    end)
  end

  def model(setup, file), do: Path.join([setup.dir, "models", file])

  @doc "The set-up's pip-installed pins (tflite2onnx, cv2), for PYTHONPATH."
  def site(setup), do: Path.join(setup.dir, "site")

  @doc "A sample image as {rgb bytes, width, height}."
  def image!(setup, name) do
    %{type: {:u, 8}, shape: {h, w, 3}, data: data} =
      QnnHost.read_npy!(Path.join([setup.dir, "images", "#{name}.npy"]))

    {data, w, h}
  end

  def dir, do: Path.join(QnnHost.dir(), "real_models")

  @doc "A float model input: the TensorInfo the float ONNX model's input would have."
  def float_input(name, shape) do
    size = shape |> Tuple.to_list() |> Enum.product()

    %TensorInfo{
      name: name,
      shape: shape,
      type: {:f, 32},
      data_type: :float_32,
      quantization: :none,
      byte_size: size * 4
    }
  end

  @doc """
  Writes each image, preprocessed by `HexagonTpu.Preprocess.image/3` into the float input
  `info` with `opts`, as `<dir>/<input>_<n>.npy` (the compile task's calibration layout and
  onnx_models.py's sample layout); returns `dir`.
  """
  def samples!(setup, dir, images, %TensorInfo{} = info, opts) do
    File.mkdir_p!(dir)

    images
    |> Enum.with_index()
    |> Enum.each(fn {name, n} ->
      {rgb, w, h} = image!(setup, name)
      bytes = Preprocess.image!(rgb, info, [width: w, height: h] ++ opts)
      write_npy!(Path.join(dir, "#{info.name}_#{n}.npy"), bytes, info.shape)
    end)

    dir
  end

  @doc "Writes little-endian f32 `bytes` of `shape` as an .npy file."
  def write_npy!(path, bytes, shape) do
    dims = shape |> Tuple.to_list() |> Enum.map_join(", ", &Integer.to_string/1)
    dims = if tuple_size(shape) == 1, do: dims <> ",", else: dims
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (#{dims}), }"
    # the header, padded with spaces and a newline to a multiple of 64 bytes (npy format 1.0)
    pad = 64 - rem(10 + byte_size(header) + 1, 64)
    header = header <> String.duplicate(" ", rem(pad, 64)) <> "\n"
    File.write!(path, [<<0x93, "NUMPY", 1, 0, byte_size(header)::little-16>>, header, bytes])
  end

  @doc "Intersection over union of two boolean masks given as equal-sized lists of 0/1."
  def mask_iou(a, b) do
    {inter, union} =
      Enum.zip_reduce(a, b, {0, 0}, fn x, y, {i, u} -> {i + (x &&& y), u + (x ||| y)} end)

    if union == 0, do: 1.0, else: inter / union
  end

  @doc "Box IoU of two `{x1, y1, x2, y2}`."
  def box_iou({ax1, ay1, ax2, ay2}, {bx1, by1, bx2, by2}) do
    iw = max(min(ax2, bx2) - max(ax1, bx1), 0)
    ih = max(min(ay2, by2) - max(ay1, by1), 0)
    inter = iw * ih
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    if union <= 0, do: 0.0, else: inter / union
  end
end
