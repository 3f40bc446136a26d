defmodule HexagonTpu.Graph do
  @moduledoc """
  One graph of a loaded `HexagonTpu.Context`: its tensors, and `execute/3`.

  ## Inputs and outputs

  `execute/3` takes the inputs as a list in the graph's input order, or as a map from input
  name (string or atom) to value. A map that names one input twice (`"image"` and `:image`)
  is refused rather than one of them used. Inputs are data, so everything wrong with them (not
  a list or map, a key that is not a string or atom, a value that is not a tensor, a wrong
  size) is an `{:error, %HexagonTpu.Error{reason: :invalid_input}}`, never a raise. Each
  value is:

    * an `Nx.Tensor` (where Nx is available) with the input's shape, either in the model's
      own type (passed through untouched) or in a float type (`{:f, 32}`, `{:f, 16}`,
      `{:f, 64}`, `{:bf, 16}`), which is cast to f32 and quantized with the tensor's own
      parameters;
    * `{type, binary}`, a binary tagged with its Nx-style type: the model's own type (passed
      through untouched), or `{:f, 32}` for a quantized or f16 input (quantized);
    * a plain binary: f32 data when the input is quantized or f16 and `quantize: :auto`,
      otherwise (and always with `quantize: :none`) data in the model's own type;
    * a `HexagonTpu.Preprocess.Frame` made for this input (`HexagonTpu.Preprocess.frame/3`):
      a camera frame, preprocessed by the execute straight into the input's buffer.

  Binaries are little-endian, in row-major order, exactly the tensor's size.

  Outputs come back in the graph's output order: dequantized to f32 where the output is
  quantized or f16 (`dequantize: :auto`), or in the model's own type (`dequantize: :none`,
  and for outputs that have no f32 conversion, see `HexagonTpu.TensorInfo`). They are
  `Nx.Tensor`s where Nx is available and binaries otherwise (`output: :binary` asks for
  binaries either way).

  With client buffers, data in the model's own type is not copied on the host: QNN reads the
  input binary where it is and writes each output straight into the binary that is returned.
  The only host-side pass over the data is the (de)quantization itself, with one exception: on
  a context loaded with `async_queue_depth:` (executes in the backend's queue), inputs in the
  model's type are copied once, as the execute outlives the call that gave them. With shared
  buffers (`HexagonTpu.Context`, `shared_buffers:`), an input in the model's type is copied
  once into its shared buffer (a `HexagonTpu.Preprocess.Frame` is written there directly, and
  f32 is quantized there), and an output in the model's type is handed out in its shared buffer,
  not copied. `Stats.native/0` counts both: `host_copy_bytes_total`,
  `client_buffer_bytes_total`.

  ## Quantization

  Quantizing follows the conventions of ONNX Runtime's `QuantizeLinear`:
  `q = saturate(round_half_to_even(x / scale) + zero_point)`. Values beyond the type's range
  saturate to its minimum or maximum, NaN becomes the zero point (so it dequantizes to 0.0),
  and infinities saturate. Dequantizing is `(q - zero_point) * scale` in f32. Per-axis
  tensors use the scale and zero point of each index along their axis.

  ## Concurrency

  Any number of processes may execute the same graph: QNN promises nothing about concurrent
  `graphExecute` calls on one graph handle, so they run one at a time. An execute on an idle
  graph runs directly on a dirty CPU scheduler; one that finds the graph busy is queued and run,
  in order, on the graph's own native thread, while its caller waits in `receive`. No scheduler
  ever waits for another caller's execute, so a slow model saturated by many callers does not
  hold up other models. Different graphs and different contexts run in parallel.

  The queue is bounded: at most `max_queued` executes wait (default 64, an option of
  `retrieve/3` and `HexagonTpu.load_model/2`); one more is answered
  `{:error, %HexagonTpu.Error{reason: :overloaded}}` at once. A queued execute whose caller
  has died, or has given up (`timeout:`), by its turn is skipped, not run. `Stats.native/0`
  counts each: `executes_waiting` (now), `executes_overloaded`, `executes_timed_out`,
  `executes_skipped`.
  """

  alias HexagonTpu.{Args, Context, Error, Native, Performance, Profile, Site, TensorInfo}
  alias HexagonTpu.Graph.{Call, Options}

  # Executes that may wait for a busy graph's turn, per caller's graph (see "Concurrency").
  @default_max_queued 64

  defstruct [:ref, :name, :context, inputs: [], outputs: [], max_queued: @default_max_queued]

  @type t :: %__MODULE__{
          ref: reference(),
          name: String.t(),
          context: Context.t(),
          inputs: [TensorInfo.t()],
          outputs: [TensorInfo.t()],
          max_queued: non_neg_integer()
        }

  @typedoc "An input value: an `Nx.Tensor` (where Nx is available), a binary, or a typed binary."
  @type input :: binary() | {TensorInfo.type(), binary()} | struct()

  @typedoc "An output value: an `Nx.Tensor` (where Nx is available) or a binary."
  @type output :: binary() | struct()

  @retrieve_options [
    max_queued: [
      type: :non_neg_integer,
      default: @default_max_queued,
      type_doc: "a non-negative integer",
      doc: """
      How many executes may wait for this graph's turn when it is busy; an execute beyond \
      that returns `{:error, %HexagonTpu.Error{reason: :overloaded}}` at once (see \
      "Concurrency").
      """
    ],
    profile_every: [
      type: {:or, [nil, {:in, 1..4_294_967_295}]},
      default: nil,
      type_doc: "a positive integer",
      doc: """
      Profile one execute in this many and add each sample's per-op cycles to the table \
      `HexagonTpu.Profile.table/1` reads (see `HexagonTpu.Profile`, "Sampled profiling"); \
      `nil`: off.
      """
    ]
  ]
  @retrieve_schema Args.schema!(@retrieve_options)

  @doc false
  # The retrieve options' schema, for HexagonTpu.load_model/2.
  @spec retrieve_options() :: keyword()
  def retrieve_options, do: @retrieve_options

  @typedoc "An option of `retrieve/3`."
  @type retrieve_option ::
          {:max_queued, non_neg_integer()} | {:profile_every, pos_integer() | nil}

  @type execute_option ::
          {:quantize, :auto | :none}
          | {:dequantize, :auto | :none}
          | {:output, :tensor | :binary}
          | {:timeout, timeout()}
          | {:performance, Performance.mode()}
          | {:profile, Profile.level() | nil}

  @doc """
  Retrieves the graph called `name` from a context.

  `name` is a UTF-8 string (anything else raises `ArgumentError`): the graph's name in the
  binary, or the name given to it in the binary's `.names` file (see
  `HexagonTpu.Context.from_file/3`); the graph is then called by the latter. Fails with
  `:graph_not_found` (the message lists the graphs there are) or `:closed`.

  Options:

  #{NimbleOptions.docs(@retrieve_schema)}
  """
  @spec retrieve(Context.t(), String.t(), [retrieve_option()]) ::
          {:ok, t()} | {:error, Error.t()}
  def retrieve(context, name, opts \\ []) do
    fun = "HexagonTpu.Graph.retrieve/3"
    context = Args.handle!(context, Context, "`context`", fun)
    name = Args.name!(name, "`name`", fun)
    opts = Args.options!(opts, @retrieve_schema, fun)
    max_queued = max_queued!(opts[:max_queued], fun)
    profile_every = opts[:profile_every]

    # The metadata is the context's, read when it was loaded; the NIF returns only the handle.
    # A graph named in the binary's `.names` file is found by that name or by QNN's.
    info = Enum.find(context.graphs, &(&1.name == name or Map.get(&1, :qnn_name) == name))
    qnn_name = if info, do: Map.get(info, :qnn_name, info.name), else: name

    case Native.graph_retrieve(context.ref, qnn_name, Site.caller()) do
      {:ok, ref} ->
        Profile.sample(
          %__MODULE__{
            ref: ref,
            name: info.name,
            context: context,
            inputs: info.inputs,
            outputs: info.outputs,
            max_queued: max_queued
          },
          profile_every
        )

      {:error, %Error{reason: :graph_not_found}} = error ->
        if Enum.any?(context.graphs, &Map.has_key?(&1, :qnn_name)),
          do: {:error, Error.new(:graph_not_found, not_found(name, context.graphs))},
          else: error

      {:error, %Error{}} = error ->
        error
    end
  end

  defp not_found(name, graphs) do
    have =
      Enum.map_join(graphs, ", ", fn graph ->
        case graph do
          %{qnn_name: qnn} -> "#{inspect(graph.name)} (QNN graph #{inspect(qnn)})"
          _ -> inspect(graph.name)
        end
      end)

    "graph #{Args.quote_input(name)} does not exist; the context has #{have}"
  end

  @doc "Like `retrieve/3`, but raises `HexagonTpu.Error`."
  @spec retrieve!(Context.t(), String.t(), [retrieve_option()]) :: t()
  def retrieve!(context, name, opts \\ []),
    do: context |> retrieve(name, opts) |> Error.unwrap!()

  @doc false
  # The :max_queued option past its schema (retrieve/3, HexagonTpu.load_model/2): at most what
  # the NIF holds.
  @spec max_queued!(non_neg_integer() | nil, String.t()) :: non_neg_integer() | nil
  def max_queued!(value, fun),
    do: Args.at_most!(value, Args.max_u64(), :max_queued, "an unsigned 64-bit count", fun)

  @doc "The graph's inputs, in order (cached metadata; never calls QNN)."
  @spec inputs(t()) :: [TensorInfo.t()]
  def inputs(%__MODULE__{inputs: inputs}) when is_list(inputs), do: inputs
  def inputs(other), do: not_a_graph!(other, "inputs/1")

  @doc "The graph's outputs, in order (cached metadata; never calls QNN)."
  @spec outputs(t()) :: [TensorInfo.t()]
  def outputs(%__MODULE__{outputs: outputs}) when is_list(outputs), do: outputs
  def outputs(other), do: not_a_graph!(other, "outputs/1")

  @doc """
  Runs the graph once.

  Options:

  #{Options.docs()}
  Every input is checked (count, names, type, shape, byte size) before QNN is called; a
  mismatch returns `{:error, %HexagonTpu.Error{reason: :invalid_input}}` naming the tensor,
  what was expected and what was given.

  Runs on a dirty CPU scheduler and emits `[:hexagon_tpu, :graph, :execute, :start | :stop |
  :exception]` (see `HexagonTpu.Telemetry`).

  ## Examples

      {:ok, [scores]} = HexagonTpu.Graph.execute(graph, [image])
      {:ok, [scores]} = HexagonTpu.Graph.execute(graph, %{"image" => image})

      # pre-quantized in, raw out: no conversion at all
      {:ok, [raw]} = HexagonTpu.Graph.execute(graph, [u8_image], quantize: :none, dequantize: :none)
  """
  @spec execute(t(), [input()] | %{optional(String.t() | atom()) => input()}, [execute_option()]) ::
          {:ok, [output()]} | {:ok, [output()], Profile.t()} | {:error, Error.t()}
  def execute(graph, inputs, opts \\ []) do
    fun = "HexagonTpu.Graph.execute/3"
    graph = Args.handle!(graph, __MODULE__, "`graph`", fun)
    Call.run(graph, inputs, Options.check!(opts, fun))
  end

  @doc "Like `execute/3`, but raises `HexagonTpu.Error`; with `:profile`, `{outputs, profile}`."
  @spec execute!(t(), [input()] | map(), [execute_option()]) ::
          [output()] | {[output()], Profile.t()}
  def execute!(graph, inputs, opts \\ []), do: graph |> execute(inputs, opts) |> Error.unwrap!()

  @doc """
  Frees the graph handle now instead of at garbage collection, once the executes running or
  queued before it are done (the caller waits in `receive`, not on a scheduler).
  Later calls return `{:error, %HexagonTpu.Error{reason: :closed}}`. The context stays
  loaded; close it with `HexagonTpu.Context.close/1`.
  """
  @spec close(t()) :: :ok | {:error, Error.t()}
  def close(%__MODULE__{ref: ref}) when is_reference(ref),
    do: Native.call(&Native.graph_close(ref, &1))

  def close(other), do: not_a_graph!(other, "close/1")

  defp not_a_graph!(other, fun),
    do: Args.type_error!("HexagonTpu.Graph.#{fun}", "`graph`", "a HexagonTpu.Graph", other)

  @doc """
  Starts an execute and returns at once: `{:ok, pending}`, whose result `await/2` takes, or
  `{:error, %HexagonTpu.Error{}}` when the inputs are wrong or the graph's queue is full.

  The inputs are checked and quantized before this returns (on a dirty CPU scheduler); the
  execute itself waits for its turn and runs on the graph's own native thread, in the order
  the executes were started, while the caller goes on. Several may be in flight on one graph:
  starting input k+1 (quantizing it) overlaps the execute of input k, so a caller that keeps
  two in flight hides its conversions behind the executes:

      {:ok, first} = HexagonTpu.Graph.execute_async(graph, [frame0])
      {:ok, second} = HexagonTpu.Graph.execute_async(graph, [frame1])
      {:ok, outputs0} = HexagonTpu.Graph.await(first)
      {:ok, outputs1} = HexagonTpu.Graph.await(second)

  Takes the options of `execute/3` but `:timeout`, which belongs to `await/2` (with
  `:profile`, `await/2` returns `{:ok, outputs, %HexagonTpu.Profile{}}`). Counts against
  the graph's `max_queued` like any waiting execute. The result arrives as a message to the
  calling process, so only that process may `await/2` or `cancel/1` it. An execute whose
  caller has died, or has cancelled it, before its turn is skipped, not run; its answer never
  reaches a mailbox.

  Emits `[:hexagon_tpu, :graph, :execute, :start]` here and `:stop` when `await/2` returns.
  """
  @spec execute_async(t(), [input()] | map(), [execute_option()]) ::
          {:ok, HexagonTpu.Pending.t()} | {:error, Error.t()}
  def execute_async(graph, inputs, opts \\ []) do
    fun = "HexagonTpu.Graph.execute_async/3"
    graph = Args.handle!(graph, __MODULE__, "`graph`", fun)

    if Keyword.keyword?(opts) and Keyword.has_key?(opts, :timeout),
      do: raise(ArgumentError, "#{fun}: the :timeout option belongs to await/2")

    Call.run_async(graph, inputs, Options.check!(opts, fun))
  end

  @doc """
  The result of an execute started with `execute_async/3`, as `execute/3` returns it. Waits at
  most `timeout` ms (default `:infinity`); when it passes, returns
  `{:error, %HexagonTpu.Error{reason: :timeout}}` and the execute is given up as with
  `cancel/1`. Only the process that started the execute may await it, once (a second await or
  cancel of it raises `ArgumentError`).
  """
  @spec await(HexagonTpu.Pending.t(), timeout()) ::
          {:ok, [output()]} | {:ok, [output()], Profile.t()} | {:error, Error.t()}
  def await(pending, timeout \\ :infinity) do
    pending = owned!(pending, "await/2")
    timeout = Options.timeout!(timeout, "HexagonTpu.Graph.await/2")
    pending |> claimed!("await/2") |> Call.await(timeout)
  end

  @doc """
  Gives up an execute started with `execute_async/3`: one still waiting for its turn is
  skipped, one already running finishes and its result is dropped, one already answered is
  taken out of the mailbox. Returns `:ok`. Only the process that started it may cancel it,
  once, and not after awaiting it (either raises `ArgumentError`).
  """
  @spec cancel(HexagonTpu.Pending.t()) :: :ok
  def cancel(pending), do: pending |> owned!("cancel/1") |> claimed!("cancel/1") |> Call.cancel()

  # Each pending execute is awaited or cancelled once: its answer is then taken or given up,
  # and a second await or cancel would wait for a message that never comes.
  defp claimed!(pending, fun) do
    unless Native.execute_claim(pending.ticket) do
      raise ArgumentError,
            "HexagonTpu.Graph.#{fun}: this execute's answer was already taken or given up " <>
              "(an earlier await/2 or cancel/1 of it): a pending execute is awaited or " <>
              "cancelled once"
    end

    pending
  end

  defp owned!(%HexagonTpu.Pending{owner: owner} = pending, fun) do
    if owner != self() do
      raise ArgumentError,
            "HexagonTpu.Graph.#{fun}: the execute was started by #{inspect(owner)}, and its " <>
              "answer goes to that process only"
    end

    pending
  end

  defp owned!(other, fun),
    do:
      Args.type_error!(
        "HexagonTpu.Graph.#{fun}",
        "`pending`",
        "a HexagonTpu.Pending from execute_async/3",
        other
      )

  defimpl Inspect do
    def inspect(graph, _opts) do
      ins = Enum.map_join(graph.inputs, ", ", &HexagonTpu.TensorInfo.describe/1)
      outs = Enum.map_join(graph.outputs, ", ", &HexagonTpu.TensorInfo.describe/1)
      "#HexagonTpu.Graph<#{inspect(graph.name)} (#{ins}) -> (#{outs})>"
    end
  end
end
