defmodule HexagonTpu do
  @moduledoc """
  Inference on the Qualcomm Hexagon NPU (HTP) through QNN, for Elixir and Nerves.

  Models are pre-compiled QNN context binaries: loading one only deserializes it, and each
  graph's tensor metadata (names, shapes, types, quantization) comes from the binary itself.
  Nx tensors in, Nx tensors out, quantized and dequantized with the model's own parameters.

      {:ok, model} = HexagonTpu.load_model("/data/mobilenet_v2.bin")
      {:ok, [scores]} = HexagonTpu.predict(model, [image])

  This module is the one-call API. Underneath is QNN's own object model:
  `HexagonTpu.Runtime` (the backend libraries) -> `HexagonTpu.Context` (a loaded binary) ->
  `HexagonTpu.Graph` (execute). A model is a `HexagonTpu.Graph`.

  Observability: `HexagonTpu.Stats`, `HexagonTpu.Monitor` and the telemetry events listed
  in `HexagonTpu.Telemetry`. Errors: `HexagonTpu.Error`.

  ## Arguments and errors

  Every public function of `hexagon_tpu` checks its arguments before it does any work (no
  library is opened and no context loaded for a call that is then refused), and answers in
  one of two ways:

    * **A wrong type raises `ArgumentError`**: a runtime, context or graph argument that is not
      one, a path that is not a binary or charlist, a graph name that is not a UTF-8 string,
      options that are not a keyword list, an unknown option, an option given twice, or an
      option outside its documented type (`graph: 1`, `runtime: :cpu`, `log_level: :loud`,
      `max_bytes: 0`). These are bugs in the calling code. The message names the function and
      the argument or option, says what was expected, and quotes what was given.
    * **A wrong value returns `{:error, %HexagonTpu.Error{}}`** with a reason to match on: an
      empty path or one with a NUL byte (`:invalid_argument`), a missing or unreadable file
      (`:io`), a library that will not open (`:library_not_found`), an unknown graph
      (`:graph_not_found`), and anything wrong with the inputs of
      `predict/3` (`:invalid_input`): a wrong count, size, type or shape, a key that is not a
      string or atom, a value that is not a tensor, or a map that names one input twice
      (`"image"` and `:image`). Inputs are data from outside, so they never raise.

  The bang variants raise either way: the `ArgumentError`, or the `HexagonTpu.Error`.

  Paths are bytes, as on Linux: a binary that is not UTF-8 is passed to the system as it is.
  A message quotes at most #{HexagonTpu.Args.max_quoted()} bytes of anything the caller gave
  (a longer one is cut and marked `…` with its size), so a megabyte-long name or path never
  ends up whole in a log.
  """

  alias HexagonTpu.{
    Args,
    Batch,
    Context,
    Diagnosis,
    Error,
    Graph,
    ModelInfo,
    Native,
    Runtime,
    Site
  }

  @runtime_opts [:lib_path, :system_lib_path, :rpcmem_lib_path, :log_level]
  @context_opts [:preflight, :priority, :async_queue_depth, :recover, :shared_buffers]

  @inspect_model_options Args.schema!(
                           system_lib_path: [
                             type: {:or, [nil, {:custom, Args, :path, []}]},
                             type_doc: Args.path_type(),
                             doc: """
                             The QnnSystem library; `nil`: `HEXAGON_TPU_SYSTEM_LIB`, else \
                             `/usr/lib/libQnnSystem.so`.
                             """
                           ],
                           max_bytes: [
                             type: {:or, [nil, :pos_integer]},
                             type_doc: "a positive integer",
                             doc: "The largest file read; `nil`: 2 GiB (the NIF's)."
                           ]
                         )

  # The options load_model/2 takes from their owners, in the order its messages list them.
  @borrowed [
    :preflight,
    :max_queued,
    :priority,
    :async_queue_depth,
    :recover,
    :shared_buffers,
    :profile_every | @runtime_opts
  ]
  @owners_options Context.load_options() ++ Graph.retrieve_options() ++ Runtime.options()

  @load_model_options Args.schema!(
                        [
                          graph: [
                            type: {:or, [nil, :any]},
                            type_doc: "a string (a graph name, UTF-8)",
                            doc: """
                            The graph name; may be left out when the context holds a single \
                            graph (otherwise the error lists the names).
                            """
                          ],
                          runtime: [
                            type: :any,
                            type_doc: "a HexagonTpu.Runtime",
                            doc: """
                            A `HexagonTpu.Runtime` to load into. Without it, a runtime is \
                            opened for `:lib_path`, `:system_lib_path`, `:rpcmem_lib_path` \
                            and `:log_level` and shared by every model loaded with the same \
                            ones; with it, those options are refused (`ArgumentError`): the \
                            runtime has its libraries already.
                            """
                          ]
                        ] ++ Enum.map(@borrowed, &{&1, Keyword.fetch!(@owners_options, &1)})
                      )

  @type model :: Graph.t()

  @type load_option ::
          {:graph, String.t()}
          | {:preflight, boolean() | :strict}
          | {:max_queued, non_neg_integer()}
          | {:profile_every, pos_integer()}
          | {:priority, :default | :low | :normal | :normal_high | :high}
          | {:async_queue_depth, pos_integer() | nil}
          | {:recover, boolean()}
          | {:shared_buffers, :auto | boolean()}
          | {:runtime, Runtime.t()}
          | {:lib_path, Path.t()}
          | {:system_lib_path, Path.t()}
          | {:log_level, Runtime.log_level()}

  @doc """
  Loads a context binary and picks one of its graphs: the model.

  Options:

  #{NimbleOptions.docs(@load_model_options)}
  Every option is checked before anything is opened or loaded (see "Arguments and errors").

  The model lives until it is garbage collected; `HexagonTpu.Context.close(model.context)`
  frees it now.

  ## Examples

      {:ok, model} = HexagonTpu.load_model("/data/mobilenet_v2.bin")
      {:ok, model} = HexagonTpu.load_model("/data/detector.bin", graph: "detector_int8")
  """
  @spec load_model(Path.t(), [load_option()]) :: {:ok, model()} | {:error, Error.t()}
  def load_model(path, opts \\ []) do
    # Every argument is checked before anything is opened or loaded.
    fun = "HexagonTpu.load_model/2"
    path = Args.path!(path, "`path`", fun)

    opts = Args.options!(opts, @load_model_options, fun)
    context_opts = Keyword.take(opts, @context_opts)
    Graph.max_queued!(opts[:max_queued], fun)
    graph_opts = Keyword.take(opts, [:max_queued, :profile_every])

    graph = if opts[:graph] != nil, do: Args.name!(opts[:graph], "the :graph option", fun)
    runtime_opts = opts |> Keyword.take(@runtime_opts) |> Runtime.options!(fun)

    runtime =
      case opts[:runtime] do
        nil ->
          nil

        runtime ->
          given = for {key, value} <- runtime_opts, value != nil, do: key

          if given != [] do
            raise ArgumentError,
                  "#{fun}: the :runtime option cannot be combined with " <>
                    "#{Enum.map_join(given, ", ", &inspect/1)} " <>
                    "(a runtime has its libraries and log level already)"
          end

          Args.handle!(runtime, Runtime, "the :runtime option", fun)
      end

    with :ok <- Args.check_path(path, "`path`"),
         {:ok, runtime} <- runtime(runtime, runtime_opts),
         {:ok, context} <-
           Context.from_file(runtime, path, context_opts) do
      case pick_graph(context, graph, graph_opts) do
        {:ok, graph} ->
          {:ok, graph}

        {:error, _} = error ->
          Context.close(context)
          error
      end
    end
  end

  @doc """
  Everything a context binary says about itself, read with the QnnSystem library alone: no
  backend, no device (see `HexagonTpu.ModelInfo`), including which runtimes it loads on.

  Options:

  #{NimbleOptions.docs(@inspect_model_options)}

  ## Examples

      {:ok, info} = HexagonTpu.inspect_model("/data/mobilenet_v2.bin")
      info.qairt_version
      #=> "2.51.0"
      info.loads_on
      #=> ["QAIRT >= 2.51.0", "HTP (6) backend", "SoC model 35", "HTP v68", "VTCM >= 4194304 bytes"]
  """
  @spec inspect_model(Path.t(), keyword()) :: {:ok, ModelInfo.t()} | {:error, Error.t()}
  def inspect_model(path, opts \\ []) do
    fun = "HexagonTpu.inspect_model/2"
    path = Args.path!(path, "`path`", fun)

    opts = Args.options!(opts, @inspect_model_options, fun)
    max_bytes = Args.max_bytes!(opts[:max_bytes], fun)

    {system_lib, what} = Runtime.system_lib(opts[:system_lib_path], fun)

    with :ok <- Args.check_path(path, "`path`"),
         :ok <- Args.check_path(system_lib, what),
         {:ok, info} <- Native.inspect_model(system_lib, path, max_bytes) do
      {:ok, ModelInfo.new(path, info)}
    end
  end

  @doc "Like `inspect_model/2`, but raises `HexagonTpu.Error`."
  @spec inspect_model!(Path.t(), keyword()) :: ModelInfo.t()
  def inspect_model!(path, opts \\ []), do: path |> inspect_model(opts) |> Error.unwrap!()

  @doc "Like `load_model/2`, but raises `HexagonTpu.Error`."
  @spec load_model!(Path.t(), [load_option()]) :: model()
  def load_model!(path, opts \\ []), do: path |> load_model(opts) |> Error.unwrap!()

  @doc """
  Runs the model once: inputs as a list in the model's input order or a map by input name,
  outputs as a list in the model's output order.

  Float inputs are quantized and quantized outputs dequantized with the model's parameters;
  `quantize: :none` / `dequantize: :none` pass the model's own types through. See
  `HexagonTpu.Graph.execute/3` for the accepted values and every option, among them
  `performance:`, an HTP performance mode for the call (`HexagonTpu.Performance`; a batch's
  executes all run at it).

  ## Batches

  With Nx tensors, `predict/3` also runs batches that the model's own shape does not take, as
  several executes of the model (pipelined: the next execute waits on the graph's own thread
  while this one runs), and puts the outputs back together:

    * **The batch axis is the leading one.** An input of the model's rank whose trailing
      dimensions match and whose first differs (`{4, 16}` for a `{1, 16}` input) is a batch of
      4. A model whose leading dimension is N takes N entries per execute: fewer are padded with
      zeros, more run in chunks of N, the last one padded.
    * **Inputs given with the model's own shape** are used as they are by every execute (a
      shared parameter); every batched input must have the same batch size.
    * **Outputs**: an output whose leading dimension is the model's N is concatenated along it
      and cut to the batch's size (`{4, 10}` from four `{1, 10}`); any other output is stacked,
      one entry per execute (`{4, 10}` from four `{10}`). Binary outputs (`output: :binary`,
      4-bit types) are joined the same way, byte for byte.
    * **Vectorized tensors** (`Nx.vectorize/2`) whose entries have the model's shape run entry
      by entry, and the outputs come back vectorized with the same axes. Entries of another
      shape are refused with a message that says "vectorized".

  A batch whose inputs disagree is an `:invalid_input` naming them. The first execute that
  fails stops the batch with its error. Each execute is its own
  `[:hexagon_tpu, :graph, :execute]` telemetry span. Binaries carry no shape, so they never
  batch; `HexagonTpu.Graph.execute/3` runs exactly one execute.

  ## Examples

      {:ok, [scores]} = HexagonTpu.predict(model, [image])
      {:ok, [boxes, classes]} = HexagonTpu.predict(model, %{"image" => image})
      {:ok, [scores]} = HexagonTpu.predict(model, [image], performance: :burst)
      # a {1, 224, 224, 3} model, eight images: scores {8, 1000}
      {:ok, [scores]} = HexagonTpu.predict(model, [Nx.concatenate(images)])
  """
  @spec predict(model(), [Graph.input()] | map(), [Graph.execute_option()]) ::
          {:ok, [Graph.output()]}
          | {:ok, [Graph.output()], HexagonTpu.Profile.t()}
          | {:error, Error.t()}
  def predict(model, inputs, opts \\ []), do: predict(model, inputs, opts, "HexagonTpu.predict/3")

  @doc "Like `predict/3`, but raises `HexagonTpu.Error`; with `:profile`, `{outputs, profile}`."
  @spec predict!(model(), [Graph.input()] | map(), [Graph.execute_option()]) ::
          [Graph.output()] | {[Graph.output()], HexagonTpu.Profile.t()}
  def predict!(model, inputs, opts \\ []),
    do: model |> predict(inputs, opts, "HexagonTpu.predict!/3") |> Error.unwrap!()

  # One execute, or a batch (HexagonTpu.Batch) when Nx tensors say so. Arguments are checked
  # first, so a wrong one raises here, not in the middle of a batch.
  defp predict(model, inputs, opts, fun) do
    model = Args.handle!(model, Graph, "`graph`", fun)
    options = Graph.Options.check!(opts, fun)

    case Graph.Inputs.order(model, inputs) do
      {:ok, ordered} ->
        case Batch.plan(model, ordered) do
          :single -> Graph.Call.run(model, ordered, options)
          {:ok, _plan} when options.profile != nil -> profile_batch!(options.profile, fun)
          {:ok, plan} -> Batch.run(model, plan, ordered, options)
          {:error, %Error{}} = error -> error
        end

      # Refused as any execute refuses it (and reported to telemetry the same way).
      {:error, %Error{}} ->
        Graph.Call.run(model, inputs, options)
    end
  end

  defp profile_batch!(level, fun),
    do:
      raise(
        ArgumentError,
        "#{fun}: the :profile option (#{inspect(level)}) profiles one execute, but these inputs " <>
          "make a batch of several; profile one entry at a time, or sample a model with " <>
          "profile_every: (see HexagonTpu.Profile)"
      )

  @doc """
  Whether inference can run here: the NIF is loaded and the backend libraries open.
  `availability/1` says why not.
  """
  @spec available?([Runtime.option()]) :: boolean()
  def available?(opts \\ []) do
    _ = Runtime.options!(opts, "HexagonTpu.available?/1")
    availability(opts) == :ok
  end

  @doc """
  `:ok` when the NIF is loaded, the backend libraries open, and the doctor's cheap checks find
  no error (with `opts` as for `HexagonTpu.Runtime.create/1`); otherwise the first error:
  `:nif_not_loaded` (the NIF's path and the loader's reason, such as `invalid ELF header` or
  `cannot open shared object file`), an error of opening the runtime (`:library_not_found`
  with every path tried and the `dlerror`, `:missing_symbol`, `:incompatible_api`, or a QNN
  error while creating the backend or device), or `:diagnosis`: the first `:error` of
  `diagnose/1`'s checks but the build ids and the device creation (which the runtime just did),
  as `"check: what was found; remedy"`.

  Opens and closes a runtime to find out; call it at start-up, not per request.
  `diagnose/1` gives every finding.

  A NIF that is missing or does not load never stops the node or the `:hexagon_tpu`
  application from starting: it is reported here, and every other function returns the same
  `:nif_not_loaded` error.
  """
  @spec availability([Runtime.option()]) :: :ok | {:error, Error.t()}
  def availability(opts \\ []) do
    # Checked first, so that a wrong option raises whether or not the NIF is loaded.
    opts = Runtime.options!(opts, "HexagonTpu.availability/1")

    if Native.nif_loaded() do
      with {:ok, runtime} <- Runtime.create(opts) do
        _ = Runtime.close(runtime)
        checks = opts |> Diagnosis.options!("HexagonTpu.availability/1") |> Diagnosis.cheap(false)

        case Diagnosis.first_error(checks) do
          nil -> :ok
          error -> {:error, error}
        end
      end
    else
      {:error, Native.not_loaded_error()}
    end
  end

  @doc """
  The doctor: every check of whether models can run on the NPU here, in order, each `:ok`,
  `:warn` or `:error` with what was found and a one-line remedy (`HexagonTpu.Diagnosis.Check`).
  See `HexagonTpu.Diagnosis` for the checks; `mix hexagon_tpu.doctor` prints them.

  Options:

  #{NimbleOptions.docs(Diagnosis.options())}
  Never raises for what it finds (only for a wrong option), never crashes and never hangs
  longer than the timeout plus bounded file reads.

  ## Examples

      for check <- HexagonTpu.diagnose(), check.status != :ok, do: IO.puts(check.remedy)
  """
  @spec diagnose(keyword()) :: [Diagnosis.Check.t()]
  def diagnose(opts \\ []) do
    Diagnosis.run(opts, "HexagonTpu.diagnose/1")
  end

  defp runtime(nil, runtime_opts), do: shared_runtime(runtime_opts)
  defp runtime(%Runtime{} = runtime, _runtime_opts), do: {:ok, runtime}

  # One runtime per set of library options, kept in :persistent_term (written once per set,
  # so the global GC a :persistent_term update causes is not a concern). A racing second
  # creation is harmless: the loser is garbage collected.
  defp shared_runtime(runtime_opts) do
    key = {__MODULE__, :runtime, Enum.sort(runtime_opts)}

    case :persistent_term.get(key, nil) do
      %Runtime{} = runtime ->
        if Runtime.closed?(runtime),
          do: new_shared_runtime(key, runtime_opts),
          else: {:ok, runtime}

      nil ->
        new_shared_runtime(key, runtime_opts)
    end
  end

  # Its ledger site says it is shared (so `HexagonTpu.Stats.with_leak_check/1` does not take
  # it for a leak) and names the caller it was first opened for.
  defp new_shared_runtime(key, runtime_opts) do
    site = Site.shared_runtime(Site.caller())

    with {:ok, runtime} <- Runtime.create_at(runtime_opts, site) do
      :persistent_term.put(key, runtime)
      {:ok, runtime}
    end
  end

  defp pick_graph(context, nil, opts) do
    case Context.graphs(context) do
      [name] ->
        Graph.retrieve(context, name, opts)

      [] ->
        {:error,
         Error.new(:invalid_model, "context #{Args.quote_input(context.source)} holds no graph")}

      names ->
        {:error,
         Error.new(
           :ambiguous_graph,
           "context #{Args.quote_input(context.source)} holds #{length(names)} graphs " <>
             "(#{Enum.map_join(names, ", ", &"`#{&1}`")}); pick one with graph: name"
         )}
    end
  end

  defp pick_graph(context, name, opts), do: Graph.retrieve(context, name, opts)
end
