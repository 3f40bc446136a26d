defmodule HexagonTpu.Compiler do
  @moduledoc """
  Compiles ONNX models into QNN context binaries without the QAIRT SDK: the engine of
  `mix hexagon_tpu.compile`.

  The work is done by ONNX Runtime's QNN execution provider from PyPI's `onnxruntime-qnn`
  wheel, which carries Qualcomm's QAIRT libraries (2.51 for `onnxruntime-qnn` 2.7.0). The
  first use creates a Python venv with the pinned packages of `priv/compile/requirements.txt`
  in a cache folder; later uses reuse it. Qualcomm's files are downloaded from PyPI into that
  venv on the user's machine; this package never ships them.

  ## The cache folder

  `$HEXAGON_TPU_CACHE`, or else `$XDG_CACHE_HOME/hexagon_tpu`, or else
  `~/.cache/hexagon_tpu`. The venv's directory is named after the pin set
  (`venv-ort-qnn-2.7.0-<hash of requirements.txt>`), so a new pin set makes a new venv. It is
  built in a temporary directory and renamed into place when complete: a crash during the
  installation never leaves a half-made venv behind. `$HEXAGON_TPU_COMPILE_REQUIREMENTS` may
  name a requirements file of your own instead (another `onnxruntime-qnn`, to match the QAIRT
  version of a device's runtime: see [docs/models.md](models.md), "The version rule"); it gets its own venv. Only the venv's `bin/python` is used
  (a renamed venv's own scripts, such as `bin/pip`, point at the temporary path).

  The Python interpreter that creates the venv is `$HEXAGON_TPU_PYTHON`, or `python3` on the
  `PATH`; it needs the `venv` module (Debian: `apt-get install python3-venv`).

  ## The x86-64 HTP emulator

  On an x86-64 host the wheel's `libQnnHtp.so` is an HTP emulator that executes real context
  binaries; `qnn_lib_dir/0` finds it (with `libQnnSystem.so`), so tests and demos can run
  compiled models without a device:

      {:ok, dir} = HexagonTpu.Compiler.qnn_lib_dir()

      {:ok, runtime} =
        HexagonTpu.Runtime.create(
          lib_path: Path.join(dir, "libQnnHtp.so"),
          system_lib_path: Path.join(dir, "libQnnSystem.so")
        )

  Errors are `{:error, message}`: one line saying what was wrong.
  """

  alias HexagonTpu.{Context, Elf, Python, Runtime}

  @script "hexagon_tpu_compile.py"

  @typedoc "A compiled binary and its graphs, as `HexagonTpu.Context.from_file/3` reads them."
  @type result :: %{
          output: Path.t(),
          graphs: [Context.graph_info()],
          warnings: [String.t()],
          messages: [String.t()],
          build_id: String.t(),
          quality: HexagonTpu.Quality.t() | nil
        }

  @type compile_option ::
          {:htp_arch, pos_integer()}
          | {:soc_model, pos_integer()}
          | {:calibration, Path.t()}
          | {:random_calibration, pos_integer()}
          | {:calibration_method, :minmax | :entropy | :percentile | :distribution}
          | {:input_shape, %{String.t() => tuple() | [pos_integer()]} | [{String.t(), tuple()}]}
          | {:activations, :u8 | :u16 | :auto}
          | {:task, :classify | :detect | :landmarks | :embed | :segment}
          | {:split_head, boolean()}
          | {:eval, Path.t()}
          | {:min_sqnr, number()}
          | {:weights, :u8 | :s8}
          | {:io, :quantized | :float}
          | {:force, boolean()}
          | {:save_qdq, boolean()}
          | {:debug_layers, boolean()}
          | {:save_ctx, boolean()}
          | {:qnn_sdk, Path.t()}
          | {:qairt_target, String.t()}
          | {:graph_name, String.t() | [String.t()]}
          | {:verbose, boolean()}
          | {:progress, (String.t() -> any())}
          | {:log, (String.t() -> any())}

  @type setup_info :: %{venv: Path.t(), python: Path.t(), qnn_lib_dir: Path.t()}

  @doc "The cache folder (see \"The cache folder\"); it may not exist yet."
  @spec cache_dir() :: Path.t()
  defdelegate cache_dir(), to: Python

  @doc "The directory of this package's Python files: the compile script and its pins."
  @spec priv_dir() :: Path.t()
  defdelegate priv_dir(), to: Python

  @doc "The venv directory of the current pin set (it may not exist yet)."
  @spec venv_dir() :: Path.t()
  defdelegate venv_dir(), to: Python

  @doc """
  The directory holding the venv's `libQnnHtp.so` and `libQnnSystem.so` (the `onnxruntime_qnn`
  package directory), if the venv exists. Never creates anything: `setup/1` does.
  """
  @spec qnn_lib_dir() :: {:ok, Path.t()} | {:error, String.t()}
  defdelegate qnn_lib_dir(), to: Python

  @doc "The venv's Python interpreter, if the venv exists (see `qnn_lib_dir/0`)."
  @spec python() :: {:ok, Path.t()} | {:error, String.t()}
  defdelegate python(), to: Python

  @doc """
  Ensures the venv exists, creating it once (this downloads about 200 MB from PyPI).

  Options: `:progress`, a function given each progress message (default: none).
  """
  @spec setup(keyword()) :: {:ok, setup_info()} | {:error, String.t()}
  defdelegate setup(opts \\ []), to: Python

  @doc """
  Compiles `models` (one ONNX file, or several that become the graphs of one binary) into
  the context binary `output`, then loads it on the venv's emulator and returns its graphs
  as this package reads them.

  Options (defaults in brackets): `:htp_arch` [68], `:soc_model` [35, the QCS6490],
  `:calibration` (a directory of `<input>_<n>.npy` files), `:random_calibration` (a sample
  count), `:activations` [`:u8`], `:u16` or `:auto` (u8, else u8 with its worst tensors
  at 16 bits, by the layer debugger's rank, else u16: the first whose every output's answer
  meets its bar, on ORT's CPU and then on the HTP emulator; a mixed choice is in the quality
  record's `"mixed_precision"`), `:weights` [`:s8`] or `:u8` (per channel),
  `:eval` (a directory like `:calibration`'s: the samples the quantization quality is measured
  on, instead of every 5th calibration sample held out), `:task` (`:classify`, `:detect`,
  `:landmarks`, `:embed` or `:segment`: what the model answers, which chooses each output's
  quality measure; by default each output's shape and values choose it), `:min_sqnr` (a bar in
  dB: the cheapest activations, u8 then u16, that meet it on every output, on ORT's CPU and then
  on the HTP emulator; not with
  `:activations`), `:split_head` [true] (a YOLOv8 or YOLOv5 head's boxes and scores become two
  outputs, each quantized on its own),
  `:io` [`:quantized`] or `:float` (the graph's input and output types), `:force` [false]
  (overwrite `output`), `:save_qdq` / `:save_ctx` [false] (keep the quantized models and ORT's
  EP-context models beside `output`, as `<model>_qdq.onnx` and `<model>_ctx.onnx`),
  `:debug_layers` [false] (rank the QDQ model's tensors by the error each adds, against the
  float model on ORT's CPU: info lines, and `<output>.layers.json`; see [docs/models.md](models.md), "The
  layer that hurts"),
  `:verbose` [false] (also return ORT's and QNN's own output in `:messages`), `:progress`
  (a function given each progress message), `:log` (a function given, as they come and whether
  the compile succeeds or fails, each warning line, `"warning: ..."`, and with `:verbose` each
  line of ORT's and QNN's own output), `:calibration_method` [`:minmax`], `:entropy`,
  `:percentile` or `:distribution` (ONNX Runtime's calibrators).

  Models as exporters write them are rewritten before they are quantized (see [docs/models.md](models.md),
  "Models as exporters write them"): unnamed nodes are named, initializers listed as inputs
  are taken out of them, weights as `Constant` nodes become initializers, an opset older than
  13 is converted to 13, constants are folded (a constant `If` with them), a `Clip` with a
  computed bound becomes `Max`/`Min`, and a YOLOv8 or YOLOv5 head is split in two; a custom op is
  refused by name. `:input_shape` fixes inputs by position, `%{"image" => {1, 3, 640, 640}}`
  (or a list of such pairs), whatever their dimensions are called or declared: the HTP needs
  static shapes.

  When nodes cannot run on the HTP, the error names each (op type, name, the tensor it makes,
  QNN's code and a reason in words, e.g. `QNN error 3110: float op on v68: not quantized`, or
  for a graph finalize failure QNN's own words and what works instead); more than 8 are
  summarised by op type and code, and listed one a line in `<output>.refused.txt`.

  Graph inputs and outputs keep the model's names: ONNX Runtime names the binary's own
  (an output `y` becomes `QuantizeLinear_token_17_out0`), so `<output>.names` records the
  model's name of each, which `HexagonTpu.Context.from_file/3` presents (`TensorInfo` `:name`;
  the binary's is `:qnn_name`). The binary keeps ONNX Runtime's order of the outputs, which
  may differ from the model's.

  Names and versions:

    * `:graph_name` - the graph's name (a list, one per model, for several); default: the
      model's file name without `.onnx`. ORT names the QNN graph itself
      (`QNNExecutionProvider_QNNExecutionProvider_<hash>_1_0`) and offers no way to choose it, so
      the name is written beside the binary, in `<output>.names`, which
      `HexagonTpu.Context.from_file/3` reads: the graph is then known by both names.
    * `:qairt_target` - the QAIRT version of the device's runtime (`"2.42"`, `"2.42.0"`): a
      binary of a newer QAIRT is refused, naming both versions, and nothing is written (a
      runtime refuses binaries of a newer QAIRT than its own).
    * `:qnn_sdk` - compile with the x86-64 `libQnnHtp.so` of a QAIRT SDK you have (the SDK's
      root, whose `lib/x86_64-linux-clang/` holds it, or that directory itself) instead of the
      wheel's: ORT's QNN EP is told to accept another QAIRT's backend
      (`skip_qnn_version_check`), and the binary written must carry that SDK's build id.

  The result's `:build_id` is the QAIRT build id the binary carries. The binary is read back on
  the pinned wheel's emulator, which loads binaries of its own QAIRT or an older one.

  A model with QuantizeLinear/DequantizeLinear nodes is compiled as it is; a float model is
  quantized first and needs `:calibration` or `:random_calibration`.

  The quantization quality of the float models (see `HexagonTpu.Quality`) is written beside
  the binary as `<output>.quality.json` and returned in `:quality` (`nil` for QDQ models only);
  figures below the bar are also in `:warnings`, with what to try.
  """
  @spec compile(Path.t() | [Path.t()], Path.t(), [compile_option()]) ::
          {:ok, result()} | {:error, String.t()}
  def compile(models, output, opts \\ []) do
    models = List.wrap(models)

    opts =
      Keyword.validate!(opts,
        htp_arch: 68,
        soc_model: 35,
        calibration: nil,
        random_calibration: nil,
        activations: nil,
        eval: nil,
        min_sqnr: nil,
        task: nil,
        split_head: true,
        weights: :s8,
        io: :quantized,
        force: false,
        save_qdq: false,
        debug_layers: false,
        save_ctx: false,
        verbose: false,
        qnn_sdk: nil,
        qairt_target: nil,
        graph_name: nil,
        calibration_method: :minmax,
        input_shape: [],
        progress: fn _ -> :ok end,
        log: fn _ -> :ok end
      )

    with :ok <- check_models(models),
         :ok <- check_output(output, opts[:force]),
         {:ok, args} <- script_args(models, output, opts),
         {:ok, setup} <- Python.setup(progress: opts[:progress]),
         {:ok, messages, warnings, build_id} <- run_script(setup.python, args, opts),
         {:ok, quality} <- quality(output) do
      case read_back(output, setup.qnn_lib_dir) do
        {:ok, graphs} ->
          {:ok,
           %{
             output: output,
             graphs: graphs,
             warnings: warnings,
             messages: messages,
             build_id: build_id,
             quality: quality
           }}

        {:error, message} ->
          {:error, "wrote #{output}, but cannot load it back on #{setup.qnn_lib_dir}: #{message}"}
      end
    end
  end

  defp quality(output) do
    case HexagonTpu.Quality.read(output) do
      :none -> {:ok, nil}
      other -> other
    end
  end

  defp check_models([]), do: {:error, "no model given"}

  defp check_models(models) do
    case Enum.reject(models, &File.regular?/1) do
      [] -> :ok
      [missing | _] -> {:error, "model #{missing} does not exist"}
    end
  end

  defp check_output(output, force) do
    cond do
      File.dir?(output) ->
        {:error, "the output #{output} is a directory"}

      File.exists?(output) and not force ->
        {:error, "#{output} already exists (use --force to overwrite it)"}

      true ->
        :ok
    end
  end

  defp script_args(models, output, opts) do
    with {:ok, activations} <- activations(opts),
         {:ok, task} <- task(opts),
         :ok <- boolean(opts, :split_head),
         {:ok, weights} <- choice(opts, :weights, [:u8, :s8]),
         {:ok, io} <- choice(opts, :io, [:quantized, :float]),
         {:ok, method} <-
           choice(opts, :calibration_method, [:minmax, :entropy, :percentile, :distribution]),
         {:ok, shapes} <- input_shapes(opts[:input_shape]),
         :ok <- positive(opts, :htp_arch),
         :ok <- positive(opts, :soc_model),
         :ok <- calibration(opts),
         :ok <- evaluation(opts),
         {:ok, names} <- graph_names(opts[:graph_name], length(models)),
         {:ok, target} <- qairt_target(opts[:qairt_target]),
         {:ok, backend} <- qnn_sdk(opts[:qnn_sdk]) do
      args =
        [Path.join(Python.priv_dir(), @script) | Enum.map(models, &Path.expand/1)] ++
          ["-o", Path.expand(output)] ++
          ~w(--htp-arch #{opts[:htp_arch]} --soc-model #{opts[:soc_model]}) ++
          if(activations, do: ["--activations", activations], else: []) ++
          if(task, do: ["--task", task], else: []) ++
          if(opts[:split_head], do: [], else: ["--no-split-head"]) ++
          ~w(--weights #{weights} --io #{io}) ++
          ["--calibration-method", Atom.to_string(method)] ++
          Enum.flat_map(shapes, &["--input-shape", &1]) ++
          if(opts[:eval], do: ["--eval", Path.expand(opts[:eval])], else: []) ++
          if(opts[:min_sqnr], do: ["--min-sqnr", to_string(opts[:min_sqnr])], else: []) ++
          if(opts[:calibration], do: ["--calibration", Path.expand(opts[:calibration])], else: []) ++
          if(opts[:random_calibration],
            do: ["--random-calibration", to_string(opts[:random_calibration])],
            else: []
          ) ++
          flags(opts, [:force, :save_qdq, :save_ctx, :debug_layers, :verbose]) ++
          Enum.flat_map(names, &["--graph-name", &1]) ++
          if(target, do: ["--qairt-target", target], else: []) ++
          if(backend, do: ["--backend-path", backend], else: [])

      {:ok, args}
    end
  end

  @shape ~s({"name", {1, 3, 640, 640}} or "name=1x3x640x640")

  # ["name=1x3x640x640"] from a map or list of {name, dims}, or of such strings (the Mix task's).
  defp input_shapes(shapes) when is_map(shapes), do: input_shapes(Map.to_list(shapes))

  defp input_shapes(shapes) when is_list(shapes) do
    Enum.reduce_while(shapes, {:ok, []}, fn shape, {:ok, acc} ->
      case input_shape(shape) do
        {:ok, spec} -> {:cont, {:ok, acc ++ [spec]}}
        :error -> {:halt, {:error, "invalid input_shape #{inspect(shape)}: expected " <> @shape}}
      end
    end)
  end

  defp input_shapes(other),
    do: {:error, "invalid input_shape #{inspect(other)}: expected a map or list of " <> @shape}

  defp input_shape(spec) when is_binary(spec) do
    if spec =~ ~r/^[^=]+=[1-9]\d*(x[1-9]\d*)*$/, do: {:ok, spec}, else: :error
  end

  defp input_shape({name, dims}) when is_binary(name) and name != "" and is_tuple(dims),
    do: input_shape({name, Tuple.to_list(dims)})

  defp input_shape({name, [_ | _] = dims}) when is_binary(name) and name != "" do
    if Enum.all?(dims, &(is_integer(&1) and &1 > 0)),
      do: {:ok, name <> "=" <> Enum.map_join(dims, "x", &Integer.to_string/1)},
      else: :error
  end

  defp input_shape(_), do: :error

  defp graph_names(nil, _count), do: {:ok, []}

  defp graph_names(names, count) do
    names = List.wrap(names)

    cond do
      not Enum.all?(names, &is_binary/1) ->
        {:error, "invalid graph_name #{inspect(names)}: expected a string or a list of strings"}

      bad = Enum.find(names, &(not (&1 =~ ~r/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/))) ->
        {:error,
         "invalid graph name #{inspect(bad)}: use letters, digits, '_', '.' and '-' (at most 128)"}

      length(names) != count ->
        {:error, "give one graph name per model: #{length(names)} for #{count} model(s)"}

      length(Enum.uniq(names)) != count ->
        {:error, "graph names must be distinct, given #{Enum.join(names, ", ")}"}

      true ->
        {:ok, names}
    end
  end

  defp qairt_target(nil), do: {:ok, nil}

  defp qairt_target(version) do
    if is_binary(version) and version =~ ~r/^v?\d+\.\d+(\.\d+)?(\.\d+)?$/,
      do: {:ok, version},
      else:
        {:error,
         "invalid qairt_target #{inspect(version)}: expected a QAIRT version such as 2.42 or 2.42.0"}
  end

  # PATH/lib/x86_64-linux-clang/libQnnHtp.so as the SDK lays it out, PATH/libQnnHtp.so, or
  # PATH itself; x86-64 only (ORT runs here, so does the SDK library it loads).
  defp qnn_sdk(nil), do: {:ok, nil}

  defp qnn_sdk(path) do
    path = Path.expand(path)

    found =
      Enum.find(
        [Path.join(path, "lib/x86_64-linux-clang/libQnnHtp.so"), Path.join(path, "libQnnHtp.so")],
        &File.regular?/1
      ) || if(File.regular?(path) and Path.basename(path) == "libQnnHtp.so", do: path)

    case found && Elf.machine(found) do
      nil ->
        {:error,
         "--qnn-sdk #{path}: no libQnnHtp.so in #{path}/lib/x86_64-linux-clang or #{path} " <>
           "(give a QAIRT SDK's root or its x86-64 library directory)"}

      {:ok, :x86_64} ->
        {:ok, found}

      other ->
        {:error,
         "--qnn-sdk: #{found} is not an x86-64 library (#{machine_name(other)}): give the SDK's root, whose " <>
           "lib/x86_64-linux-clang/ holds the x86-64 one"}
    end
  end

  defp machine_name({:ok, machine}), do: Elf.machine_name(machine)
  defp machine_name({:error, _}), do: "not an ELF file"

  defp choice(opts, key, allowed) do
    value = opts[key]

    value =
      if is_binary(value), do: Enum.find(allowed, &(Atom.to_string(&1) == value)), else: value

    if value in allowed,
      do: {:ok, value},
      else:
        {:error,
         "invalid #{key} #{inspect(opts[key])}: expected one of #{Enum.map_join(allowed, ", ", &to_string/1)}"}
  end

  defp positive(opts, key) do
    if is_integer(opts[key]) and opts[key] > 0,
      do: :ok,
      else: {:error, "invalid #{key} #{inspect(opts[key])}: expected a positive integer"}
  end

  defp calibration(opts) do
    cond do
      opts[:calibration] && opts[:random_calibration] ->
        {:error, "give a calibration directory or a random calibration count, not both"}

      opts[:calibration] && not File.dir?(opts[:calibration]) ->
        {:error, "the calibration directory #{opts[:calibration]} does not exist"}

      opts[:random_calibration] &&
          not (is_integer(opts[:random_calibration]) and opts[:random_calibration] > 0) ->
        {:error,
         "invalid random_calibration #{inspect(opts[:random_calibration])}: expected a positive count"}

      true ->
        :ok
    end
  end

  # u8 unless given; --min-sqnr chooses it instead
  defp activations(opts) do
    cond do
      opts[:activations] && opts[:min_sqnr] ->
        {:error, "give activations or min_sqnr (which chooses the activations), not both"}

      opts[:activations] ->
        with {:ok, a} <- choice(opts, :activations, [:u8, :u16, :auto]),
             do: {:ok, Atom.to_string(a)}

      opts[:min_sqnr] ->
        {:ok, nil}

      true ->
        {:ok, "u8"}
    end
  end

  defp task(opts) do
    if opts[:task] do
      with {:ok, t} <- choice(opts, :task, [:classify, :detect, :landmarks, :embed, :segment]),
           do: {:ok, Atom.to_string(t)}
    else
      {:ok, nil}
    end
  end

  defp boolean(opts, key) do
    if is_boolean(opts[key]),
      do: :ok,
      else: {:error, "invalid #{key} #{inspect(opts[key])}: expected true or false"}
  end

  defp evaluation(opts) do
    cond do
      opts[:eval] && not File.dir?(opts[:eval]) ->
        {:error, "the evaluation directory #{opts[:eval]} does not exist"}

      opts[:min_sqnr] != nil and not is_number(opts[:min_sqnr]) ->
        {:error, "invalid min_sqnr #{inspect(opts[:min_sqnr])}: expected a number of dB"}

      true ->
        :ok
    end
  end

  defp flags(opts, keys) do
    for key <- keys, opts[key], do: "--" <> String.replace(Atom.to_string(key), "_", "-")
  end

  defp run_script(python, args, opts) do
    {output, status} = Python.cmd(python, args, [{"PYTHONNOUSERSITE", "1"}])
    lines = String.split(output, "\n", trim: true)
    own = for "hexagon_tpu_compile: " <> rest <- lines, do: rest
    errors = for "error: " <> message <- own, do: message
    warnings = for "warning: " <> message <- own, do: message
    build_id = List.last(for("info: build id " <> id <- own, do: id), "")

    for "info: " <> message <- own, do: opts[:progress].(message)

    # warnings always, ORT's and QNN's own lines with :verbose: failing or not
    for line <- lines do
      case line do
        "hexagon_tpu_compile: warning: " <> message -> opts[:log].("warning: " <> message)
        "hexagon_tpu_compile: " <> _ -> :ok
        other -> if opts[:verbose], do: opts[:log].(other)
      end
    end

    messages = if opts[:verbose], do: lines, else: own

    case {status, errors} do
      {0, _} ->
        {:ok, messages, warnings, build_id}

      {_, [_ | _]} ->
        {:error, List.last(errors)}

      {status, []} ->
        {:error, "#{@script} exited with status #{status}: #{Python.last_line(output)}"}
    end
  end

  @doc """
  Loads a context binary on the emulator in `lib_dir` and returns its graphs' metadata
  (then frees everything it created).
  """
  @spec read_back(Path.t(), Path.t()) :: {:ok, [Context.graph_info()]} | {:error, String.t()}
  def read_back(binary, lib_dir) do
    opts = [
      lib_path: Path.join(lib_dir, "libQnnHtp.so"),
      system_lib_path: Path.join(lib_dir, "libQnnSystem.so"),
      log_level: :error
    ]

    case Runtime.create(opts) do
      {:ok, runtime} ->
        result = Context.from_file(runtime, binary, shared_buffers: false)
        Runtime.close(runtime)

        case result do
          {:ok, context} ->
            Context.close(context)
            {:ok, context.graphs}

          {:error, error} ->
            {:error, Exception.message(error)}
        end

      {:error, error} ->
        {:error, Exception.message(error)}
    end
  end

  @doc "The graphs of a binary, described one tensor a line (what `mix hexagon_tpu.compile` prints)."
  @spec describe([Context.graph_info()]) :: String.t()
  def describe(graphs) do
    Enum.map_join(graphs, "\n", fn graph ->
      qnn = if graph[:qnn_name], do: " (QNN graph #{graph.qnn_name})", else: ""

      [
        "graph #{graph.name}#{qnn}"
        | tensor_lines("input", graph.inputs) ++ tensor_lines("output", graph.outputs)
      ]
      |> Enum.join("\n")
    end)
  end

  defp tensor_lines(kind, tensors) do
    for t <- tensors do
      qnn = if t.qnn_name, do: ", in the binary #{t.qnn_name}", else: ""

      "  #{kind} #{HexagonTpu.TensorInfo.describe(t)}#{quantization(t.quantization)} (#{t.data_type}#{qnn})"
    end
  end

  defp quantization(%{kind: :per_tensor, scale: scale, zero_point: zp}),
    do: " scale=#{Float.round(scale, 8)} zero_point=#{zp}"

  defp quantization(%{kind: :per_axis, axis: axis, scales: scales}),
    do: " per-axis(#{axis}, #{length(scales)} scales)"

  defp quantization(%{kind: :unsupported, encoding: encoding}), do: " #{encoding}"
  defp quantization(:none), do: ""

  @doc """
  The pin set: `$HEXAGON_TPU_COMPILE_REQUIREMENTS` if set (a requirements file of your own,
  for example an older `onnxruntime-qnn` whose QAIRT matches your device's runtime), else
  `priv/compile/requirements.txt`.
  """
  @spec requirements() :: Path.t()
  defdelegate requirements(), to: Python
end
