# HexagonTpu.Preprocess against the same steps done separately in Nx and in numpy, in one run:
# a 1280x720 RGB frame (HWC u8) to a 224x224 and a 640x640 model input, NHWC u8 quantized
# (ImageNet mean and std), nearest and bilinear; then NV12 frames (1280x720, 1920x1080) to
# 640x640 (letterbox) and 224x224 beside RGB frames of the same size and beside OpenCV
# (cvtColor + resize + numpy). Prints figures; asserts nothing.
#
#   mix run bench/preprocess.exs [RUNS]
#
# Ours: the whole HexagonTpu.Preprocess.image/3 call (options, NIF on a dirty CPU scheduler, the
# output binary). numpy: test/support/preprocess_numpy.py (the QNN venv's Python, when it is
# installed), the same steps vectorized, timed inside Python. Nx: Nx.BinaryBackend (the default
# backend; pure Elixir, so orders of magnitude behind a compiled backend such as EXLA, which this
# package does not depend on), where Nx is loaded (Hex mode), with fewer runs.

alias HexagonTpu.{Preprocess, TensorInfo}

runs = String.to_integer(List.first(System.argv()) || "50")
{w, h} = {1280, 720}
frame = for i <- 0..(w * h * 3 - 1), into: <<>>, do: <<rem(i * 97 + div(i, 3840) * 13, 256)>>
mean = [0.485, 0.456, 0.406]
std = [0.229, 0.224, 0.225]
scale = <<0.018658::float-32>> |> then(fn <<s::float-32>> -> s end)
zp = 114

info = fn size ->
  %TensorInfo{
    name: "image",
    shape: {1, size, size, 3},
    type: {:u, 8},
    data_type: :ufixed_point_8,
    quantization: %{kind: :per_tensor, scale: scale, zero_point: zp, bitwidth: nil},
    byte_size: size * size * 3,
    f32_conversion: true
  }
end

Code.require_file("support.exs", __DIR__)
alias HexagonTpu.BenchSupport

time_ms = fn n, fun -> BenchSupport.time_ms(fun, n) end
python = BenchSupport.python()

numpy_ms = fn size, resize ->
  if python do
    dir = Path.join(System.tmp_dir!(), "hexagon_tpu_bench_preprocess")
    File.mkdir_p!(dir)
    file = Path.join(dir, "frame")
    File.write!(file, frame)

    params =
      ~s({"sw": #{w}, "sh": #{h}, "dw": #{size}, "dh": #{size}, "resize": "#{resize}", ) <>
        ~s("layout": "nhwc", "swap": false, "divisor": 255.0, "mean": #{inspect(mean)}, ) <>
        ~s("std": #{inspect(std)}, "out": {"type": "u8", "scale": #{scale}, ) <>
        ~s("zero_point": #{zp}, "qmin": 0, "qmax": 255}})

    script = Path.expand("../test/support/preprocess_numpy.py", __DIR__)
    {out, 0} = System.cmd(python, [script, "bench", params, file, Integer.to_string(runs)])
    [_, ms] = Regex.run(~r/"median_ms": ([0-9.e+-]+)/, out)
    String.to_float(ms)
  end
end

nx? = Code.ensure_loaded?(Nx)

# The same steps in Nx (nearest: take; bilinear: take and f32 weights), quantized with round half
# to even written out (Nx.round rounds half away from zero).
nx_ms = fn size, resize ->
  if nx? do
    t = frame |> Nx.from_binary({:u, 8}) |> Nx.reshape({h, w, 3})

    taps = fn src, dst ->
      x = Nx.iota({dst}, type: {:f, 64}) |> Nx.add(0.5) |> Nx.multiply(src / dst)
      x = x |> Nx.subtract(0.5) |> Nx.max(0.0)
      i0 = x |> Nx.floor() |> Nx.as_type({:s, 64}) |> Nx.min(src - 1)
      w1 = x |> Nx.subtract(i0) |> Nx.as_type({:f, 32})
      {i0, i0 |> Nx.add(1) |> Nx.min(src - 1), Nx.subtract(1.0, w1), w1}
    end

    nearest = fn src, dst ->
      Nx.iota({dst})
      |> Nx.multiply(2)
      |> Nx.add(1)
      |> Nx.multiply(src)
      |> Nx.quotient(2 * dst)
      |> Nx.min(src - 1)
    end

    run = fn ->
      v =
        if resize == :nearest do
          t
          |> Nx.take(nearest.(h, size), axis: 0)
          |> Nx.take(nearest.(w, size), axis: 1)
          |> Nx.as_type({:f, 32})
        else
          {y0, y1, wy0, wy1} = taps.(h, size)
          {x0, x1, wx0, wx1} = taps.(w, size)
          f = Nx.as_type(t, {:f, 32})
          {wx0, wx1} = {Nx.reshape(wx0, {1, size, 1}), Nx.reshape(wx1, {1, size, 1})}

          row = fn r ->
            Nx.add(
              Nx.multiply(Nx.take(r, x0, axis: 1), wx0),
              Nx.multiply(Nx.take(r, x1, axis: 1), wx1)
            )
          end

          Nx.add(
            Nx.multiply(row.(Nx.take(f, y0, axis: 0)), Nx.reshape(wy0, {size, 1, 1})),
            Nx.multiply(row.(Nx.take(f, y1, axis: 0)), Nx.reshape(wy1, {size, 1, 1}))
          )
        end

      x = v |> Nx.divide(255.0) |> Nx.subtract(Nx.tensor(mean)) |> Nx.divide(Nx.tensor(std))
      r = Nx.divide(x, scale)
      fl = Nx.floor(r)
      diff = Nx.subtract(r, fl)
      up = Nx.add(fl, 1)
      tie = Nx.select(Nx.equal(Nx.remainder(fl, 2), 0), fl, up)
      q = Nx.select(Nx.greater(diff, 0.5), up, Nx.select(Nx.less(diff, 0.5), fl, tie))
      q |> Nx.add(zp) |> Nx.clip(0, 255) |> Nx.as_type({:u, 8}) |> Nx.to_binary()
    end

    time_ms.(3, run)
  end
end

show = fn
  nil -> "      n/a"
  ms -> :io_lib.format("~9.3f", [ms]) |> IO.iodata_to_binary()
end

ratio = fn
  nil, _ -> "     "
  other, ours -> :io_lib.format("~7.1fx", [other / ours]) |> IO.iodata_to_binary()
end

IO.puts(
  "1280x720 RGB u8 -> NHWC u8 (per-tensor, ImageNet mean/std); median ms, #{runs} runs (Nx: 3)"
)

IO.puts("numpy: #{python || "not installed (no QNN venv)"}")

IO.puts(
  "Nx: #{if nx?, do: "Nx.BinaryBackend (pure Elixir: slow by design)", else: "not loaded (offline build)"}"
)

IO.puts("target   resize      ours(ms)  numpy(ms) numpy/ours    Nx(ms)    Nx/ours")

for size <- [224, 640], resize <- [:nearest, :bilinear] do
  target = info.(size)
  opts = [width: w, height: h, resize: resize, mean: mean, std: std]
  ours = time_ms.(runs, fn -> {:ok, _} = Preprocess.image(frame, target, opts) end)
  np = numpy_ms.(size, resize)
  nx = nx_ms.(size, resize)

  IO.puts(
    "#{size}x#{size}  #{String.pad_trailing(Atom.to_string(resize), 9)} #{show.(ours)}  " <>
      "#{show.(np)}  #{ratio.(np, ours)}  #{show.(nx)}  #{ratio.(nx, ours)}"
  )
end

# Camera frames as V4L2 hands them over: NV12 (BT.601 limited range), converted per pixel inside
# the same pass, beside the RGB frame of the same size, and beside OpenCV doing the steps apart
# (cvtColor, resize, copyMakeBorder for the letterbox, then numpy's normalization and
# quantization: test/support/opencv_reference.py, with the opencv-python-headless that
# test/support/real_models.py installs into the cache, timed inside Python).
opencv_site =
  if python do
    case BenchSupport.opencv_site(python) do
      {:ok, site} ->
        site

      {:error, out} ->
        IO.puts("OpenCV: not set up: #{out}")
        nil
    end
  end

opencv_ms = fn fw, fh, size, fit, resize ->
  if opencv_site do
    script = Path.expand("../test/support/opencv_reference.py", __DIR__)
    args = Enum.map([fw, fh, size, size, fit, resize, runs], &to_string/1)

    {out, 0} =
      System.cmd(python, [script, "bench-preprocess" | args], env: [{"PYTHONPATH", opencv_site}])

    String.to_float(String.trim(out))
  end
end

IO.puts(
  "\nNV12 vs RGB frames of the same size -> NHWC u8 (ImageNet mean/std); median ms, #{runs} runs"
)

IO.puts(
  "OpenCV: #{if opencv_site, do: "cvtColor + resize (+ copyMakeBorder) + numpy, its default threads", else: "not installed"}"
)

IO.puts(
  "frame      target   fit        resize     rgb(ms)   nv12(ms)  nv12/rgb  opencv(ms) opencv/nv12"
)

:rand.seed(:exsss, 7)

for {fw, fh} <- [{1280, 720}, {1920, 1080}] do
  rgb = :rand.bytes(fw * fh * 3)
  nv12 = :rand.bytes(div(fw * fh * 3, 2))

  for {size, fit} <- [{640, :letterbox}, {224, :stretch}], resize <- [:nearest, :bilinear] do
    target = info.(size)
    opts = [width: fw, height: fh, resize: resize, fit: fit, mean: mean, std: std]
    ours = time_ms.(runs, fn -> {:ok, _} = Preprocess.image(rgb, target, opts) end)

    yuv =
      time_ms.(runs, fn ->
        {:ok, _} = Preprocess.image(nv12, target, [pixel_format: :nv12] ++ opts)
      end)

    cv = opencv_ms.(fw, fh, size, fit, resize)

    IO.puts(
      "#{String.pad_trailing("#{fw}x#{fh}", 10)} #{String.pad_trailing("#{size}x#{size}", 8)} " <>
        "#{String.pad_trailing(Atom.to_string(fit), 10)} " <>
        "#{String.pad_trailing(Atom.to_string(resize), 9)} #{show.(ours)}  #{show.(yuv)}  " <>
        "#{ratio.(yuv, ours)}  #{show.(cv)}  #{ratio.(cv, yuv)}"
    )
  end
end
