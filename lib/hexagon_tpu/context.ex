defmodule HexagonTpu.Context do
  @moduledoc """
  A pre-compiled QNN context binary, loaded into a `HexagonTpu.Runtime`.

  Context binaries are produced ahead of time, from ONNX with `mix hexagon_tpu.compile` or
  with the QAIRT SDK tools (see the guide in [`docs/models.md`](models.md)); loading one only deserializes it (`QnnContext_createFromBinary`), it
  never prepares a graph on the device. Each graph's tensor metadata is read from the binary
  through QnnSystem at load time and cached here: `graphs/1`, `HexagonTpu.Graph.inputs/1`
  and `HexagonTpu.Graph.outputs/1` never call into QNN.

  ## Lifetime

  A context holds its runtime, and a graph holds its context: the garbage collector frees
  them in that order, whichever reference goes first. `close/1` frees the context now: it
  waits for an execute running on one of its graphs to finish, then releases the QNN
  context; later calls on it or its graphs return
  `{:error, %HexagonTpu.Error{reason: :closed}}`.
  """

  require Logger

  alias HexagonTpu.{Args, Error, Native, Runtime, Site, Telemetry, TensorInfo}

  defstruct [
    :ref,
    :runtime,
    :source,
    graphs: [],
    warnings: [],
    execute_queue: :worker,
    buffers: :client
  ]

  @typedoc "Where the context was loaded from: a path, or `{:binary, byte_size}`."
  @type source :: binary() | {:binary, non_neg_integer()}

  @typedoc """
  One graph's metadata, in the binary's order (as the NIF builds it). A graph given a name by
  the binary's `.names` file (see `from_file/3`) has that `name` and its name in the binary as
  `qnn_name`.
  """
  @type graph_info :: %{
          required(:name) => String.t(),
          required(:inputs) => [TensorInfo.t()],
          required(:outputs) => [TensorInfo.t()],
          optional(:qnn_name) => String.t()
        }

  @typedoc """
  A pre-flight finding: a rule the binary does not meet ([`docs/preflight.md`](preflight.md)). Refusals are
  `HexagonTpu.Error`s with the same reason; warnings are kept in `:warnings` and logged.
  """
  @type finding :: %{reason: atom(), evidence: :measured | :read | :own, message: String.t()}

  @type t :: %__MODULE__{
          ref: reference(),
          runtime: Runtime.t(),
          source: source(),
          graphs: [graph_info()],
          warnings: [finding()],
          execute_queue: :worker | {:backend, pos_integer()},
          buffers: :shared | :client | {:client, String.t()}
        }

  @priorities [:default, :low, :normal, :normal_high, :high]

  # How a context is loaded: from_file/3, from_binary/3 and HexagonTpu.load_model/2 take these.
  @load_options [
    preflight: [
      type: {:in, [true, false, :strict]},
      default: true,
      type_doc: "true, false or :strict",
      doc: """
      `true`: measured rules refuse, read rules warn; `:strict`: read rules refuse too; \
      `false`: no verdict, QNN decides and answers with its own codes. Tensor layouts this \
      package cannot size are refused whatever the setting.
      """
    ],
    priority: [
      type: {:in, @priorities},
      default: :default,
      type_doc: "one of #{Enum.map_join(@priorities, ", ", &inspect/1)}",
      doc: """
      The default priority of the context's graphs on the accelerator \
      (`QNN_CONTEXT_CONFIG_OPTION_PRIORITY`); `:default` sets no config (QNN's own). QNN \
      documents every level above `:low` as possibly restricted; a level the backend refuses \
      fails the load with its code.
      """
    ],
    async_queue_depth: [
      type: {:or, [nil, {:in, 1..300}]},
      default: nil,
      type_doc: "1 to 300, or nil",
      doc: """
      Run the graphs' queued executes in the backend's own asynchronous queue \
      (`QnnGraph_executeAsync`), this many deep, where the backend says it has one; every \
      execute of the context is then queued there, handed over by the graph's thread, and \
      answered from the backend's notification. Where the backend has none (Qualcomm's x86 \
      emulator answers "not supported") the context runs as without the option. `nil`: \
      executes queue on each graph's own thread. The context's `:execute_queue` says which: \
      `:worker` or `{:backend, depth}`.
      """
    ],
    recover: [
      type: :boolean,
      default: true,
      type_doc: "true or false",
      doc: """
      Whether the context is created again when the device is reset under an execute (see \
      "Device resets").
      """
    ],
    shared_buffers: [
      type: {:in, [:auto, true, false]},
      default: :auto,
      type_doc: ":auto, true or false",
      doc: """
      Whether the graphs' inputs and outputs live in shared buffers (see "Shared buffers").
      """
    ]
  ]

  # The options in the order their messages have always listed them (preflight before graph_names).
  @from_file_options Args.schema!(
                       [
                         max_bytes: [
                           type: {:or, [nil, :pos_integer]},
                           type_doc: "a positive integer",
                           doc: "The largest file accepted; `nil`: 2 GiB (the NIF's)."
                         ],
                         preflight: @load_options[:preflight],
                         graph_names: [
                           type: {:or, [{:in, [:auto, false]}, {:map, :string, :string}]},
                           default: :auto,
                           type_doc: ":auto, false or a map of strings to strings",
                           doc: """
                           Names for the binary's graphs: `:auto` reads them from the file \
                           `<path>.names` when there is one (see "Graph names"), `false` \
                           ignores it, and a map `%{"qnn graph name" => "name"}` gives them.
                           """
                         ]
                       ] ++ Keyword.delete(@load_options, :preflight)
                     )

  @from_binary_options Args.schema!(
                         [
                           preflight: @load_options[:preflight],
                           graph_names: [
                             type: {:map, :string, :string},
                             default: %{},
                             type_doc: "a map of strings to strings",
                             doc: "Names for the binary's graphs (see `from_file/3`)."
                           ]
                         ] ++ Keyword.delete(@load_options, :preflight)
                       )

  @doc false
  # The load options' schema, for HexagonTpu.load_model/2.
  @spec load_options() :: keyword()
  def load_options, do: @load_options

  @doc """
  Loads a context binary from a file.

  Only a regular file is read: FIFOs, devices, sockets and directories are refused before a
  byte is read, and so is a file larger than the limit. Files are read in 4 MiB chunks, never mapped.

  `path` is a binary or a charlist; a binary that is not UTF-8 is opened as it is (Linux paths
  are bytes). An empty path, or one with a NUL byte, is refused with
  `{:error, %HexagonTpu.Error{reason: :invalid_argument}}`.

  Before QNN is asked, the binary's own metadata (read with QnnSystem) is judged against the
  runtime: a binary made by a newer QAIRT than the runtime's is refused with
  `{:error, %HexagonTpu.Error{reason: :binary_newer_than_runtime}}`, naming both versions and the
  remedy; rules that are only documented, not measured (backend, SoC, HTP arch), are logged as
  warnings and kept in the context's `:warnings`. See [`docs/preflight.md`](preflight.md) for every rule.

  Options:

  #{NimbleOptions.docs(@from_file_options)}
  ## Shared buffers

  Through plain (client) buffers FastRPC copies every input to the DSP and every output back.
  With shared buffers each graph's tensors live in rpcmem memory (`libcdsprpc.so`, the
  runtime's `:rpcmem_lib_path`) registered with the context (`QnnMem_register`), which the
  DSP maps instead: a pool per graph, reused across executes; quantization writes straight
  into an input's buffer, and an output in the model's own type comes back as a binary over
  its buffer, which returns to the pool when the binary is garbage-collected (an output asked
  for as f32 is dequantized from it into a new binary). One buffer per tensor is allocated
  and registered at the load, so a context that cannot have them knows then.

  With `:auto` a context that cannot have them (no rpcmem library, a backend without QnnMem:
  Qualcomm's x86 emulator answers `QnnMem_register` with 1000, "not supported") executes with
  client buffers: the reason is logged once per reason, counted as `shared_buffer_fallbacks`
  in `HexagonTpu.Stats.native/0`, and kept in the context's `:buffers` as `{:client, why}`.
  `true` requires them (the load fails with `:shared_buffers_unavailable`, naming what
  failed); `false` never uses them (`:buffers` is `:client`): ONNX Runtime found some models
  faster without shared memory, so the choice is per model. `:buffers` is `:shared` when the
  context has them.

  ## Device resets

  When the DSP restarts (a subsystem restart, SSR: a crash, a watchdog, a firmware reload),
  every QNN context of the process dies: QNN answers every call on it
  `QNN_COMMON_ERROR_SYSTEM_COMMUNICATION` (1007, or 1011, its fatal variant). With `recover:
  true` the execute that meets it frees the dead context, creates it again from the same
  binary on the runtime's thread (the file is read again, and must hold the same bytes; a
  context loaded with `from_binary/3` keeps its binary for this, which `HexagonTpu.Stats`'
  ledger counts as its `source` bytes), and is retried once. The `HexagonTpu.Graph`s already
  retrieved keep working: each retrieves its handle again at its next execute. An execute of
  the context that arrives meanwhile waits for the recovery, then runs. Whoever gets the
  recovery's answer reports it: `[:hexagon_tpu, :context, :recover]` (see
  `HexagonTpu.Telemetry`), `context_recoveries` in `HexagonTpu.Stats.native/0`, and a
  warning in `Logger`.

  An execute is answered `{:error, %HexagonTpu.Error{reason: :device_reset}}` (counted as
  `device_resets`) when the retry meets another reset, when creating the context again fails
  (the next execute tries again), when `recover: false`, and for an execute in the backend's
  own queue (`async_queue_depth:`) that the reset met after its submission: QNN's thread
  cannot wait for the recovery, which starts for the executes after it.

  ## Graph names

  ONNX Runtime names the graphs it compiles itself
  (`QNNExecutionProvider_QNNExecutionProvider_<hash>_1_0`), so `mix hexagon_tpu.compile` writes
  the names chosen for them (the model's file name, or `--graph-name`) beside the binary, in
  `MODEL.bin.names`: one graph a line, `name qnn_graph_name`; `#` starts a comment. A graph
  named there is listed by `graphs/1` under that name, and `HexagonTpu.Graph.retrieve/3` finds it
  by either name. Lines `graph input|output index name` give the model's name of a graph's
  tensor by its index in the binary (ONNX Runtime renames them: an output `y` is
  `QuantizeLinear_token_17_out0` in the binary; `%`, `#` and whitespace percent-encoded): its
  `HexagonTpu.TensorInfo` then has that `:name` and the binary's as `:qnn_name`. A names file
  that does not parse, or names a graph or tensor the binary does not hold, fails the load with
  `:invalid_model`.

  ## Examples

      {:ok, runtime} = HexagonTpu.Runtime.htp()
      {:ok, context} = HexagonTpu.Context.from_file(runtime, "/data/mobilenet_v2.bin")
      HexagonTpu.Context.graphs(context)
      #=> ["mobilenet_v2"]
  """
  @spec from_file(Runtime.t(), Path.t(), keyword()) :: {:ok, t()} | {:error, Error.t()}
  def from_file(runtime, path, opts \\ []) do
    fun = "HexagonTpu.Context.from_file/3"
    runtime = Args.handle!(runtime, Runtime, "`runtime`", fun)
    path = Args.path!(path, "`path`", fun)

    opts = Args.options!(opts, @from_file_options, fun)
    max_bytes = Args.max_bytes!(opts[:max_bytes], fun)
    load_args = load_args(opts)

    with :ok <- Args.check_path(path, "`path`"),
         {:ok, names} <- graph_names(opts[:graph_names], path) do
      load_args = Map.put(load_args, :site, Site.caller())

      load(runtime, path, names, fn ->
        Native.call(&Native.context_from_file(runtime.ref, path, max_bytes, load_args, &1))
      end)
    end
  end

  @doc """
  Loads a context binary already in memory. It is copied once, for the runtime's own thread
  (where QNN creates every context); that copy is kept while the context lives to create it
  again after a device reset, or freed after the load with `recover: false`. Takes the
  `:preflight`, `:priority`, `:async_queue_depth`, `:recover` and `:shared_buffers` options of
  `from_file/3`, and
  `:graph_names`, a map
  `%{"qnn graph name" => "name"}` (see `from_file/3`).
  """
  @spec from_binary(Runtime.t(), binary(), keyword()) :: {:ok, t()} | {:error, Error.t()}
  def from_binary(runtime, binary, opts \\ []) do
    fun = "HexagonTpu.Context.from_binary/3"
    runtime = Args.handle!(runtime, Runtime, "`runtime`", fun)
    unless is_binary(binary), do: Args.type_error!(fun, "`binary`", "a binary", binary)

    opts = Args.options!(opts, @from_binary_options, fun)
    load_args = Map.put(load_args(opts), :site, Site.caller())

    load(runtime, {:binary, byte_size(binary)}, {opts[:graph_names], []}, fn ->
      Native.call(&Native.context_from_binary(runtime.ref, binary, load_args, &1))
    end)
  end

  @doc "Like `from_file/3`, but raises `HexagonTpu.Error`."
  @spec from_file!(Runtime.t(), Path.t(), keyword()) :: t()
  def from_file!(runtime, path, opts \\ []),
    do: runtime |> from_file(path, opts) |> Error.unwrap!()

  @doc "Like `from_binary/3`, but raises `HexagonTpu.Error`."
  @spec from_binary!(Runtime.t(), binary(), keyword()) :: t()
  def from_binary!(runtime, binary, opts \\ []),
    do: runtime |> from_binary(binary, opts) |> Error.unwrap!()

  @doc false
  # How the NIF loads the context (src/protocol.rs's LoadArg, less the caller's site), from the
  # checked load options (from_file/3, from_binary/3, HexagonTpu.load_model/2).
  @spec load_args(keyword()) :: %{
          preflight: :on | :strict | :off,
          priority: atom(),
          async_queue_depth: pos_integer() | nil,
          recover: boolean(),
          shared_buffers: :auto | :on | :off
        }
  def load_args(opts) do
    %{
      preflight: %{true => :on, :strict => :strict, false => :off}[opts[:preflight]],
      priority: opts[:priority],
      async_queue_depth: opts[:async_queue_depth],
      recover: opts[:recover],
      shared_buffers: %{:auto => :auto, true => :on, false => :off}[opts[:shared_buffers]]
    }
  end

  defp load(runtime, source, names, load_fun) do
    Telemetry.span(
      [:hexagon_tpu, :context, :load],
      %{source: source, backend: runtime.backend_lib},
      fn ->
        # src/terms.rs's LoadedTerm
        with {:ok, %{context: ref, graphs: graphs, warnings: warnings} = loaded} <- load_fun.(),
             {:ok, graphs} <- name_graphs(ref, graphs, names, source) do
          for %{reason: reason, message: message} <- warnings,
              do: Logger.warning("hexagon_tpu pre-flight (#{reason}): #{message}")

          context = %__MODULE__{
            ref: ref,
            runtime: runtime,
            source: source,
            graphs: graphs,
            warnings: warnings,
            execute_queue: loaded.queue,
            buffers: loaded.buffers
          }

          {{:ok, context}, %{}, %{status: :ok, graphs: Enum.map(graphs, & &1.name)}}
        else
          {:error, %Error{reason: reason}} = error ->
            {error, %{}, %{status: :error, error: reason, graphs: []}}
        end
      end
    )
  end

  @names_max_bytes 1024 * 1024

  # {%{qnn graph name => name}, [tensor line]}, from the option (graph names only) or the
  # `.names` file beside the binary.
  defp graph_names(names, _path) when is_map(names), do: {:ok, {names, []}}
  defp graph_names(false, _path), do: {:ok, {%{}, []}}

  defp graph_names(:auto, path) do
    file = path <> ".names"

    case File.stat(file) do
      {:ok, %File.Stat{type: :regular, size: size}} when size <= @names_max_bytes ->
        case File.read(file) do
          {:ok, text} -> parse_names(text, file)
          {:error, reason} -> names_error(file, :file.format_error(reason))
        end

      {:ok, %File.Stat{type: :regular}} ->
        names_error(file, "larger than #{@names_max_bytes} bytes")

      _ ->
        {:ok, {%{}, []}}
    end
  end

  # Two kinds of line: `name qnn_graph_name`, and (since the compile task keeps the model's
  # tensor names) `graph input|output index tensor_name`, where graph is either of the graph's
  # names, index the tensor's position in the binary, and '%', '#' and whitespace in the tensor
  # name are percent-encoded. Public for test/names_fuzz_test.exs only.
  @doc false
  def parse_names(text, file) do
    text
    |> String.split("\n")
    |> Enum.with_index(1)
    |> Enum.reduce_while({:ok, {%{}, []}}, fn {line, n}, {:ok, {names, tensors}} ->
      case String.split(line) do
        [] ->
          {:cont, {:ok, {names, tensors}}}

        ["#" <> _ | _] ->
          {:cont, {:ok, {names, tensors}}}

        [name, qnn] ->
          cond do
            Map.has_key?(names, qnn) ->
              {:halt, names_error(file, "line #{n} names graph #{inspect(qnn)} again")}

            name in Map.values(names) ->
              {:halt, names_error(file, "line #{n} gives the name #{inspect(name)} again")}

            true ->
              {:cont, {:ok, {Map.put(names, qnn, name), tensors}}}
          end

        [graph, kind, index, tensor] when kind in ["input", "output"] ->
          with {i, ""} when i >= 0 <- Integer.parse(index),
               {:ok, tensor} <- percent_decode(tensor) do
            key = {graph, kind, i}

            {:cont, {:ok, {names, [{key, tensor, n} | tensors]}}}
          else
            _ -> {:halt, names_error(file, "line #{n} is not `graph #{kind} index name`")}
          end

        _ ->
          {:halt,
           names_error(
             file,
             "line #{n} is neither `name qnn_graph_name` nor `graph input|output index name`"
           )}
      end
    end)
  end

  # Strict: every '%' starts two hex digits, and the name is UTF-8.
  defp percent_decode(token) do
    decoded = if token =~ ~r/%(?![0-9A-Fa-f]{2})/, do: nil, else: URI.decode(token)
    if decoded && String.valid?(decoded), do: {:ok, decoded}, else: :error
  end

  defp names_error(file, why),
    do: {:error, Error.new(:invalid_model, "#{Args.quote_input(file)}: #{why}")}

  defp name_graphs(_ref, graphs, {names, []}, _source) when map_size(names) == 0,
    do: {:ok, graphs}

  defp name_graphs(ref, graphs, {names, tensors}, source) do
    in_binary = Enum.map(graphs, & &1.name)
    missing = Map.keys(names) -- in_binary

    clash = Enum.find(names, fn {qnn, name} -> name != qnn and name in in_binary end)

    why =
      cond do
        missing != [] ->
          "names graph #{inspect(hd(missing))}, which the binary does not hold (it has " <>
            "#{Enum.map_join(in_binary, ", ", &inspect/1)})"

        clash ->
          "gives the name #{inspect(elem(clash, 1))}, which is another graph's name in the binary"

        true ->
          nil
      end

    named =
      Enum.map(graphs, fn graph ->
        case Map.fetch(names, graph.name) do
          {:ok, name} -> graph |> Map.put(:qnn_name, graph.name) |> Map.put(:name, name)
          :error -> graph
        end
      end)

    result = if why, do: {:error, why}, else: name_tensors(named, tensors)

    case result do
      {:ok, named} ->
        {:ok, named}

      {:error, why} ->
        Native.call(&Native.context_close(ref, &1))
        where = if is_binary(source), do: source <> ".names", else: "the :graph_names option"
        names_error(where, why)
    end
  end

  # The model's names of the graphs' tensors (`TensorInfo` `:name`; the binary's kept as
  # `:qnn_name`), by graph name and position.
  defp name_tensors(graphs, tensors) do
    tensors
    |> Enum.reverse()
    |> Enum.reduce_while({:ok, graphs, MapSet.new()}, fn {{graph, kind, index}, tensor, n},
                                                         {:ok, graphs, seen} ->
      key = if kind == "input", do: :inputs, else: :outputs
      at = Enum.find_index(graphs, &(&1.name == graph or Map.get(&1, :qnn_name) == graph))
      infos = if at, do: Map.fetch!(Enum.at(graphs, at), key), else: []

      cond do
        MapSet.member?(seen, {at, key, index}) ->
          {:halt, {:error, "line #{n} names #{kind} #{index} of graph #{inspect(graph)} again"}}

        at == nil ->
          {:halt,
           {:error,
            "line #{n} names tensors of graph #{inspect(graph)}, which the binary does not hold"}}

        index >= length(infos) ->
          {:halt,
           {:error,
            "line #{n} names #{kind} #{index} of graph #{inspect(graph)}, which has #{length(infos)}"}}

        Enum.any?(Enum.with_index(infos), fn {t, i} -> i != index and t.name == tensor end) ->
          {:halt,
           {:error,
            "line #{n} gives #{kind} #{index} of graph #{inspect(graph)} the name #{inspect(tensor)}, another #{kind}'s"}}

        true ->
          infos =
            List.update_at(infos, index, fn info ->
              if info.name == tensor,
                do: info,
                else: %{info | name: tensor, qnn_name: info.qnn_name || info.name}
            end)

          graphs = List.update_at(graphs, at, &Map.put(&1, key, infos))
          {:cont, {:ok, graphs, MapSet.put(seen, {at, key, index})}}
      end
    end)
    |> case do
      {:ok, graphs, _seen} -> {:ok, graphs}
      error -> error
    end
  end

  @doc """
  The names of the graphs in the context, in the binary's order. Read from the cached
  metadata: this works after `close/1` too.
  """
  @spec graphs(t()) :: [String.t()]
  def graphs(%__MODULE__{graphs: graphs}) when is_list(graphs), do: Enum.map(graphs, & &1.name)
  def graphs(other), do: not_a_context!(other, "graphs/1")

  @doc "Whether `close/1` was called on this context."
  @spec closed?(t()) :: boolean()
  def closed?(%__MODULE__{ref: ref}) when is_reference(ref), do: Native.context_closed(ref)
  def closed?(other), do: not_a_context!(other, "closed?/1")

  @doc """
  Frees the context now instead of at garbage collection.

  Waits for an execute running on one of its graphs, then releases the QNN context (and
  the runtime, if it was closed and this was its last context). Later calls on the context
  or its graphs return `{:error, %HexagonTpu.Error{reason: :closed}}`, and so does a second
  `close/1`.
  """
  @spec close(t()) :: :ok | {:error, Error.t()}
  def close(%__MODULE__{ref: ref}) when is_reference(ref),
    do: Native.call(&Native.context_close(ref, &1))

  def close(other), do: not_a_context!(other, "close/1")

  defp not_a_context!(other, fun),
    do: Args.type_error!("HexagonTpu.Context.#{fun}", "`context`", "a HexagonTpu.Context", other)

  defimpl Inspect do
    def inspect(context, _opts) do
      source =
        case context.source do
          {:binary, size} -> "<<#{size} bytes>>"
          path -> HexagonTpu.Args.quote_input(path)
        end

      "#HexagonTpu.Context<#{source} graphs: #{inspect(HexagonTpu.Context.graphs(context))}>"
    end
  end
end
