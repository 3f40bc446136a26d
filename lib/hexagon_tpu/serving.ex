defmodule HexagonTpu.Serving do
  @moduledoc """
  An `Nx.Serving` for a model: batching across callers, partitions, and distribution across
  nodes, as `Nx.Serving` does them for EXLA or Bumblebee models.

      serving = HexagonTpu.Serving.new("/data/classifier.bin", partitions: 2)

      children = [
        {Nx.Serving, serving: serving, name: MyApp.Classifier, batch_timeout: 20, partitions: true}
      ]

      # from any process (on any node of the cluster):
      [scores] = Nx.Serving.batched_run(MyApp.Classifier, image)

  Needs Nx (it is asked for at run time, like the rest of the Nx integration).

  ## Inputs and outputs

  Each caller's input is an `Nx.Tensor` (a model with one input), a tuple of tensors in the
  model's input order, or a map from input name to tensor; every tensor has the model's rank,
  its leading axis the caller's batch (`{1, 224, 224, 3}` for one image on a
  `{1, 224, 224, 3}` model, `{4, 224, 224, 3}` for four). `Nx.Serving` concatenates the
  callers' inputs along that axis, and the batch runs through `HexagonTpu.predict/3` (see its
  "Batches": as many executes as the model's batch size needs, pipelined). Each caller gets its
  own rows of every output back, as a list in the model's output order.

  `Nx.Serving.client_preprocessing/2` and `client_postprocessing/2` replace that: a
  preprocessing function returns `{Nx.Batch.concatenate([input]), info}` for an input of the
  form above; a postprocessing function receives `{outputs, metadata}` with the outputs as a
  tuple (see the image classifier in [Models, graphs and tensors](inference.md)).

  ## Batch size and partitions

  The serving's batch size is the model's batch dimension (the leading dimension of its first
  input), so a batch fills one execute; `batch_size:` here or on `Nx.Serving.start_link/1`
  sets another (larger batches run as several executes).

  `partitions: n` loads the binary `n` times, one context per partition, so `n` batches run at
  once, each on its own context; start the serving with `partitions: true`, as every
  `Nx.Serving` with partitions is. Without it `Nx.Serving` runs one partition.
  """

  alias HexagonTpu.{Args, Context, Error, Graph}

  # Nx is optional: asked for when a serving is made.
  @compile {:no_warn_undefined, [Nx, Nx.Serving, Nx.Batch, Nx.Defn]}

  @load_options [:graph, :runtime, :preflight, :lib_path, :system_lib_path, :log_level]
  @own_options [
    batch_size: [
      type: :pos_integer,
      type_doc: "a positive integer",
      doc: "The batch the serving runs; the model's batch dimension when not given."
    ],
    partitions: [
      type: :pos_integer,
      default: 1,
      type_doc: "a positive integer",
      doc: "Contexts of the binary, one per partition."
    ]
  ]
  # The load options are HexagonTpu.load_model/2's, checked there.
  @options Args.schema!(
             Keyword.take(Graph.Options.options(), [:quantize, :dequantize]) ++
               @own_options ++
               Args.checked_by(@load_options, "HexagonTpu.load_model/2")
           )

  @doc """
  An `Nx.Serving` for the model at `path`, or for a loaded `HexagonTpu.Graph`.

  Options: those of `HexagonTpu.load_model/2` (`:graph`, `:runtime`, ... ; for a path),
  `:quantize` and `:dequantize` (see `HexagonTpu.Graph.execute/3`), and

  #{NimbleOptions.docs(@own_options)}
  The model is loaded here, so a binary that cannot load is an error now, not when
  the serving starts. A graph given as loaded serves partition 0; more partitions load its
  binary again from its context's file.
  """
  @spec new(Path.t() | Graph.t(), keyword()) :: {:ok, struct()} | {:error, Error.t()}
  def new(model, opts \\ []) do
    fun = "HexagonTpu.Serving.new/2"

    Args.keyword!(opts, Keyword.keys(@options.schema), fun)

    unless HexagonTpu.Optional.available?(Nx),
      do: raise(ArgumentError, "#{fun}: needs Nx, which is not loaded")

    checked = Args.options!(opts, @options, fun)

    partitions = checked[:partitions]
    execute_opts = Keyword.take(opts, [:quantize, :dequantize])

    with {:ok, graph, reload} <- first_graph(model, Keyword.take(opts, @load_options), fun),
         :ok <- reloadable(reload, partitions) do
      batch_size = Keyword.get_lazy(checked, :batch_size, fn -> model_batch(graph) end)

      arg = %{graph: graph, reload: reload, execute_opts: execute_opts}

      serving =
        __MODULE__
        |> Nx.Serving.new(arg, compiler: __MODULE__, hexagon_tpu_partitions: partitions)
        |> Nx.Serving.batch_size(batch_size)
        |> Nx.Serving.client_preprocessing(&preprocess/1)
        |> Nx.Serving.client_postprocessing(&postprocess/2)

      {:ok, serving}
    end
  end

  @doc "Like `new/2`, but raises `HexagonTpu.Error`."
  @spec new!(Path.t() | Graph.t(), keyword()) :: struct()
  def new!(model, opts \\ []), do: model |> new(opts) |> Error.unwrap!()

  defp first_graph(%Graph{} = graph, load_opts, fun) do
    if load_opts != [],
      do:
        raise(
          ArgumentError,
          "#{fun}: a loaded graph takes no load options, given #{inspect(Keyword.keys(load_opts))}"
        )

    reload =
      case graph.context do
        %Context{source: source, runtime: runtime} when is_binary(source) ->
          {source, graph: graph.name, runtime: runtime}

        _ ->
          nil
      end

    {:ok, graph, reload}
  end

  defp first_graph(path, load_opts, _fun) do
    with {:ok, graph} <- HexagonTpu.load_model(path, load_opts) do
      # The same runtime for every partition: the first load's (shared or given).
      {:ok, graph, {path, Keyword.merge(load_opts, graph: graph.name) |> same_runtime(graph)}}
    end
  end

  defp same_runtime(opts, graph) do
    opts
    |> Keyword.drop([:lib_path, :system_lib_path, :log_level, :runtime])
    |> Keyword.put(:runtime, graph.context.runtime)
  end

  defp reloadable(nil, partitions) when partitions > 1,
    do:
      {:error,
       Error.new(
         :invalid_argument,
         "partitions: #{partitions} loads the binary once per partition, and this graph's " <>
           "context was loaded from memory: give the binary's path"
       )}

  defp reloadable(_reload, _partitions), do: :ok

  defp model_batch(%Graph{inputs: [%{shape: shape} | _]}) when tuple_size(shape) >= 1,
    do: max(elem(shape, 0), 1)

  defp model_batch(_graph), do: 1

  # The client side: one caller's input as a batch of its leading axis.
  defp preprocess(input), do: {Nx.Batch.concatenate([input]), :ok}

  defp postprocess({outputs, _metadata}, :ok), do: Tuple.to_list(outputs)

  ## Nx.Serving callbacks (Nx is optional, so no @behaviour: the module must compile without it)

  @doc false
  def init(_type, arg, partitions) do
    %{graph: graph, reload: reload} = arg

    others =
      for _ <- tl(partitions) do
        {path, opts} = reload
        HexagonTpu.load_model!(path, opts)
      end

    {:ok, %{graphs: List.to_tuple([graph | others]), execute_opts: arg.execute_opts}}
  end

  @doc false
  def handle_batch(batch, partition, state) do
    graph = elem(state.graphs, partition)

    execute = fn ->
      inputs =
        case Nx.Defn.jit_apply(&Function.identity/1, [batch]) do
          tuple when is_tuple(tuple) -> Tuple.to_list(tuple)
          other -> if is_struct(other, Nx.Tensor), do: [other], else: other
        end

      outputs = HexagonTpu.predict!(graph, inputs, state.execute_opts)
      {List.to_tuple(outputs), %{partition: partition, graph: graph.name}}
    end

    {:execute, execute, state}
  end

  # Nx.Serving asks the "compiler" named in the serving's options how many partitions to run
  # (EXLA answers one per device): here, the contexts asked for in new/2.
  @doc false
  def __partitions_options__(options) do
    List.duplicate(options, Keyword.fetch!(options, :hexagon_tpu_partitions))
  end
end
