defmodule Mix.Tasks.HexagonTpu.Compile do
  @shortdoc "Compiles an ONNX model into a QNN context binary for the Hexagon NPU"

  @moduledoc """
  Compiles an ONNX model into a QNN context binary, without the QAIRT SDK.

      mix hexagon_tpu.compile MODEL.onnx -o MODEL.bin [options]
      mix hexagon_tpu.compile PREFILL.onnx DECODE.onnx -o LLM.bin [options]
      mix hexagon_tpu.compile --setup

  ONNX Runtime's QNN execution provider (PyPI's `onnxruntime-qnn`, pinned in
  `priv/compile/requirements.txt`, installed once into a venv in the cache folder: see
  `HexagonTpu.Compiler`) quantizes the model if it is float, compiles it for the HTP with CPU
  fallback disabled (every node must run on the NPU), and writes the context binary. The task
  then loads the binary with this package, on the wheel's x86-64 HTP emulator, and prints its
  graphs, inputs and outputs as `HexagonTpu.Context.from_file/3` reads them. Several models
  become the graphs of one binary.

  A model that holds QuantizeLinear/DequantizeLinear nodes (QDQ) is compiled as it is. A float
  model is quantized first with ONNX Runtime's QNN configuration, with per-channel weights,
  from calibration data.

  ## Options

    * `-o`, `--output PATH` - the context binary to write (required)
    * `--htp-arch N` - the HTP architecture (default 68, the QCS6490's)
    * `--soc-model N` - QNN's SoC model id (default 35, the QCS6490)
    * `--calibration DIR` - calibration data for a float model: one `.npy` file per sample
      and input, named `<input>_<n>.npy` (n = 0, 1, ...; in `<input>`, every character other
      than letters, digits, `.`, `_` and `-` becomes `_`), each of exactly the input's shape.
      Use inputs like the ones the model will see: they set the quantization ranges
    * `--random-calibration N` - quantize with N random samples (uniform in [-1, 1]) instead;
      only for trying things out: accuracy suffers, and the task says so
    * `--calibration-method minmax|entropy|percentile|distribution` - how ONNX Runtime's
      calibrator picks the activation ranges (default minmax)
    * `--input-shape NAME=1x3x640x640` - the static shape to compile an input for
      (repeatable, one per input), dimension by dimension whatever the model calls or declares
      them (a dimension the model fixes to another size is overridden, and said); the HTP
      needs static shapes
    * `--activations u8|u16|auto` - activation type of a float model (default u8; auto: u8,
      else u8 with only its worst tensors at 16 bits (mixed precision: the 1, 2, 4, ... worst
      by `--debug-layers`' rank), else u16, the first whose every output's answer meets its
      bar on ORT's CPU and then, compiled, on the HTP emulator; a mixed choice names its
      16-bit tensors, and the binary sizes and the emulator's cycles against all-u8 and
      all-u16)
    * `--task classify|detect|landmarks|embed|segment` - what the model answers: chooses each
      output's quality measure (top-1 agreement, the float model's detections found again, the
      error in the output's units, cosine similarity, mask IoU); by default each output's shape
      and values choose it
    * `--no-split-head` - keep a YOLOv8 head (`Concat` of boxes and class scores) or a
      YOLOv5 one (`[1, N, 5 + C]`) as one output; by default it becomes `<output>_boxes` and
      `<output>_scores`, each quantized on its own (`HexagonTpu.Postprocess.yolov8/2` and
      `yolov5/2` take `[boxes, scores]`)
    * `--min-sqnr DB` - choose the activations instead: u8, else u16, the first whose SQNR
      (below) is at least DB on every output, on ORT's CPU and then, compiled, on the HTP
      emulator; an error naming the figures when neither is
    * `--eval DIR` - measure the quantization quality on these samples (same layout as
      `--calibration`) instead of every 5th calibration sample, held out of the calibration
    * `--weights u8|s8` - per-channel weight type of a float model (default s8)
    * `--io quantized|float` - the graph's input and output types: quantized (default: u8/u16
      tensors that this package quantizes and dequantizes on the host), or float (f32 tensors,
      converted on the NPU)
    * `--force` - overwrite the output
    * `--save-qdq` - keep the quantized model beside the output as `<model>_qdq.onnx`
    * `--debug-layers` - find the layer that hurts: the float model and the quantized one
      side by side on ONNX Runtime's CPU, every tensor compared (SQNR, cosine, the drop from
      its worst input, and the model's outputs with only that tensor quantized, which ranks
      them); the top 10 are printed, every tensor written to `MODEL.bin.layers.json` (see
      [`docs/models.md`](models.md), "The layer that hurts")
    * `--save-ctx` - write ONNX Runtime's EP-context model beside the output as
      `<model>_ctx.onnx` (ONNX Runtime runs the binary through it)
    * `--verbose` - print ONNX Runtime's and QNN's own output too, whether the compile
      succeeds or fails, and each node the HTP refuses
    * `--graph-name NAME` - the graph's name (default: the model's file name without
      `.onnx`); once per model for several. ORT names the QNN graph itself
      (`QNNExecutionProvider_QNNExecutionProvider_<hash>_1_0`, with no option to choose it), so
      the names are written to `MODEL.bin.names` beside the binary: keep the two files
      together, and `HexagonTpu.Context.from_file/3` knows the graph by both names
    * `--qairt-target VERSION` - the QAIRT version of the device's runtime (e.g. `2.42`):
      refuse to write a binary of a newer QAIRT, which that runtime would refuse to load
    * `--qnn-sdk PATH` - compile with the x86-64 `libQnnHtp.so` of a QAIRT SDK you have
      (`PATH/lib/x86_64-linux-clang/`, or a directory holding `libQnnHtp.so`) instead of the
      pinned wheel's, e.g. to make binaries for an older device runtime; the binary must carry
      that SDK's build id
    * `--setup` - only create the venv (if needed) and print where it is (see below)

  ## `--setup`

  Creates the venv if it does not exist, then prints three lines on stdout:

      venv: /home/me/.cache/hexagon_tpu/venv-ort-qnn-2.7.0-1a2b3c4d
      python: /home/me/.cache/hexagon_tpu/venv-ort-qnn-2.7.0-1a2b3c4d/bin/python
      qnn_lib_dir: /home/me/.cache/hexagon_tpu/venv-ort-qnn-2.7.0-1a2b3c4d/lib/python3.11/site-packages/onnxruntime_qnn

  `qnn_lib_dir` holds `libQnnHtp.so` (on x86-64, the HTP emulator) and `libQnnSystem.so`.
  Progress goes to stderr. Scripts should pick the lines by their prefix, e.g.
  `mix hexagon_tpu.compile --setup | sed -n 's/^qnn_lib_dir: //p'`.

  ## Quantization quality

  After compiling a float model, the task measures, on samples the calibration did not see,
  the answer each output gives (top-1 agreement, the float model's detections found again,
  mask IoU, landmark error, cosine similarity; `--task`) against the float model on ONNX
  Runtime's CPU EP: the binary run by the HTP emulator, with the QDQ model on the CPU beside
  it, and SQNR as one line among them. Below an output's bar it warns and says what to try.
  The figures are written beside the binary as `MODEL.bin.quality.json`, which `mix
  hexagon_tpu.inspect MODEL.bin` shows. A QDQ model has no float reference: no figures. See
  [`docs/models.md`](models.md), "Quantization quality".

  Errors are printed as one line and the task exits with status 1.
  """

  use Mix.Task

  alias HexagonTpu.Compiler

  @switches [
    output: :string,
    htp_arch: :integer,
    soc_model: :integer,
    calibration: :string,
    random_calibration: :integer,
    activations: :string,
    task: :string,
    no_split_head: :boolean,
    eval: :string,
    min_sqnr: :float,
    weights: :string,
    io: :string,
    force: :boolean,
    save_qdq: :boolean,
    debug_layers: :boolean,
    save_ctx: :boolean,
    verbose: :boolean,
    setup: :boolean,
    qnn_sdk: :string,
    qairt_target: :string,
    graph_name: :keep,
    calibration_method: :string,
    input_shape: :keep
  ]

  @impl Mix.Task
  def run(argv) do
    case OptionParser.parse(argv, strict: @switches, aliases: [o: :output]) do
      {opts, models, []} ->
        if opts[:setup], do: setup(models), else: compile(models, opts)

      {_, _, [{switch, nil} | _]} ->
        fail("unknown option #{switch} (see `mix help hexagon_tpu.compile`)")

      {_, _, [{switch, value} | _]} ->
        fail("invalid value #{inspect(value)} for #{switch}")
    end
  end

  defp setup([]) do
    case Compiler.setup(progress: &progress/1) do
      {:ok, info} ->
        IO.puts("venv: #{info.venv}")
        IO.puts("python: #{info.python}")
        IO.puts("qnn_lib_dir: #{info.qnn_lib_dir}")

      {:error, message} ->
        fail(message)
    end
  end

  defp setup(models), do: fail("--setup takes no model, given #{Enum.join(models, " ")}")

  defp compile([], _opts),
    do: fail("no model given: mix hexagon_tpu.compile MODEL.onnx -o MODEL.bin")

  defp compile(models, opts) do
    output = opts[:output] || fail("no output given: add -o MODEL.bin")

    # The binary is read back through the NIF: make this package's modules loadable.
    Mix.Task.run("compile", [])
    Mix.Task.run("loadpaths", [])

    {verbose, opts} = Keyword.pop(opts, :verbose, false)
    {no_split, opts} = Keyword.pop(opts, :no_split_head, false)
    names = Keyword.get_values(opts, :graph_name)
    names = if names == [], do: [], else: [graph_name: names]
    shapes = [input_shape: Keyword.get_values(opts, :input_shape)]

    opts =
      Keyword.drop(opts, [:output, :setup, :graph_name, :input_shape]) ++
        names ++
        shapes ++
        [split_head: not no_split, verbose: verbose, progress: &progress/1, log: &log/1]

    case Compiler.compile(models, output, opts) do
      {:ok, result} ->
        # warnings and (with --verbose) ORT's output came through log/1 as they came
        sidecars =
          if result.quality,
            do: ", #{output}.names and #{output}.quality.json",
            else: " and #{output}.names"

        Mix.shell().info("wrote #{output} (QAIRT #{result.build_id})#{sidecars}")
        Mix.shell().info(Compiler.describe(result.graphs))
        if result.quality, do: Mix.shell().info(HexagonTpu.Quality.format(result.quality))

      {:error, message} ->
        fail(message)
    end
  end

  defp progress(message), do: IO.puts(:stderr, "==> " <> message)

  defp log("warning: " <> _ = warning), do: Mix.shell().error(warning)
  defp log(line), do: IO.puts(:stderr, line)

  defp fail(message) do
    Mix.shell().error("mix hexagon_tpu.compile: " <> message)
    exit({:shutdown, 1})
  end
end
