# Frame to model input: HexagonTpu.Preprocess.image/3 against OpenCV as an expert writes it for
# a u8 input (bench/opencv_steps.py: cvtColor NV12, resize, copyMakeBorder, LUT for the
# quantized normalization, a transpose to NCHW, all u8), with one OpenCV thread (our pass runs
# on one dirty scheduler) and with OpenCV's default threads, and a memcpy of the output (numpy's
# copyto: the floor of writing it once), interleaved in one run: ROUNDS rounds of CALLS calls of
# each, the four after one another in every round. Before timing, each case's output is checked
# byte for byte against OpenCV's. Prints figures; asserts nothing.
#
#   mix run bench/preprocess_opencv.exs [ROUNDS [CALLS]]      (default 5 rounds of 60 calls)
#
# Ours: the whole public call (options, the NIF on a dirty CPU scheduler, the output binary).
# OpenCV: opencv-python-headless, as test/support/real_models.py installs it into the cache,
# timed inside Python (its interpreter's time per call included: a few microseconds).

alias HexagonTpu.{Preprocess, TensorInfo}

[rounds, calls] =
  case System.argv() do
    [r, c | _] -> [String.to_integer(r), String.to_integer(c)]
    [r] -> [String.to_integer(r), 60]
    [] -> [5, 60]
  end

Code.require_file("support.exs", __DIR__)
alias HexagonTpu.BenchSupport

python = BenchSupport.python() || raise "the QNN venv's Python is not set up (scripts/setup.sh)"

site =
  case BenchSupport.opencv_site(python) do
    {:ok, site} -> site
    {:error, out} -> raise "OpenCV is not set up: #{out}"
  end

dir = Path.join(System.tmp_dir!(), "hexagon_tpu_bench_preprocess_opencv")
File.mkdir_p!(dir)

u8_input = fn shape, scale, zero_point ->
  <<scale::float-32>> = <<scale::float-32>>

  %TensorInfo{
    name: "image",
    shape: shape,
    type: {:u, 8},
    data_type: :ufixed_point_8,
    quantization: %{kind: :per_tensor, scale: scale, zero_point: zero_point, bitwidth: 8},
    byte_size: shape |> Tuple.to_list() |> Enum.product(),
    f32_conversion: true
  }
end

letterbox = [fit: :letterbox, pad: 114]
imagenet = [mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]]

# bench/opencv_steps.py's cases (and count_preprocess.rs's): frame, model input, our options
cases = [
  {"letterbox720", {1280, 720}, u8_input.({1, 3, 640, 640}, 1 / 255, 0), letterbox},
  {"letterbox1080", {1920, 1080}, u8_input.({1, 3, 640, 640}, 1 / 255, 0), letterbox},
  {"imagenet224", {1280, 720}, u8_input.({1, 224, 224, 3}, 0.018658, 114), imagenet},
  {"nearest720", {1280, 720}, u8_input.({1, 3, 640, 640}, 1 / 255, 0),
   letterbox ++ [resize: :nearest]}
]

port =
  Port.open({:spawn_executable, python}, [
    :binary,
    {:line, 1_000_000},
    args: [Path.expand("opencv_steps.py", __DIR__), "serve"],
    env: [{~c"PYTHONPATH", String.to_charlist(site)}]
  ])

ask = fn line ->
  Port.command(port, line <> "\n")

  receive do
    {^port, {:data, {:eol, "ok"}}} -> :ok
    {^port, {:data, {:eol, answer}}} -> answer |> String.split() |> Enum.map(&String.to_float/1)
  after
    600_000 -> raise "opencv_steps.py did not answer #{line}"
  end
end

prepared =
  for {name, {w, h}, info, opts} <- cases do
    # a deterministic NV12 frame (a smooth pattern with noise, as a camera's)
    frame =
      for y <- 0..(div(h * 3, 2) - 1), x <- 0..(w - 1), into: <<>> do
        <<rem(x * 3 + y * 5 + rem(x * y, 13), 256)>>
      end

    path = Path.join(dir, "#{name}.nv12")
    File.write!(path, frame)
    opts = [width: w, height: h, pixel_format: :nv12] ++ opts
    {:ok, ours} = Preprocess.image(frame, info, opts)
    out = Path.join(dir, "#{name}.opencv")
    :ok = ask.("out #{name} #{path} #{out}")
    same = if File.read!(out) == ours, do: "yes", else: "NO"
    %{name: name, frame: frame, path: path, info: info, opts: opts, same: same}
  end

ours_times = fn c ->
  for _ <- 1..calls do
    {us, {:ok, _}} = :timer.tc(fn -> Preprocess.image(c.frame, c.info, c.opts) end)
    us / 1000
  end
end

empty = Map.new(prepared, &{&1.name, %{ours: [], one: [], default: [], memcpy: []}})

times =
  Enum.reduce(1..rounds, empty, fn _round, acc ->
    Enum.reduce(prepared, acc, fn c, acc ->
      round = %{
        ours: ours_times.(c),
        one: ask.("#{c.name} #{c.path} 1 #{calls}"),
        default: ask.("#{c.name} #{c.path} 0 #{calls}"),
        memcpy: ask.("memcpy #{c.info.byte_size} #{calls}")
      }

      Map.update!(acc, c.name, &Map.merge(&1, round, fn _k, a, b -> a ++ b end))
    end)
  end)

Port.close(port)

median = &BenchSupport.median/1

ms = &:erlang.float_to_binary(&1, decimals: 3)
x = &:erlang.float_to_binary(&1, decimals: 2)

IO.puts(
  "#{rounds} rounds x #{calls} calls, interleaved; median ms (#{System.schedulers_online()} schedulers)"
)

IO.puts(
  "case           ours      OpenCV 1 thr  OpenCV default  memcpy    ours/1thr  ours/default  same bytes"
)

for c <- prepared do
  t = Map.new(times[c.name], fn {k, v} -> {k, median.(v)} end)

  IO.puts(
    String.pad_trailing(c.name, 14) <>
      String.pad_leading(ms.(t.ours), 7) <>
      String.pad_leading(ms.(t.one), 14) <>
      String.pad_leading(ms.(t.default), 16) <>
      String.pad_leading(ms.(t.memcpy), 10) <>
      String.pad_leading(x.(t.ours / t.one), 11) <>
      String.pad_leading(x.(t.ours / t.default), 14) <> "  " <> c.same
  )
end
