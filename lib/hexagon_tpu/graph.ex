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
      otherwise (and always with `quantize: :none`) data in the model's own type.

  Binaries are little-endian, in row-major order, exactly the tensor's size.

  Outputs come back in the graph's output order: dequantized to f32 where the output is
  quantized or f16 (`dequantize: :auto`), or in the model's own type (`dequantize: :none`,
  and for outputs that have no f32 conversion, see `HexagonTpu.TensorInfo`). They are
  `Nx.Tensor`s where Nx is available and binaries otherwise (`output: :binary` asks for
  binaries either way).

  Data in the model's own type is never copied on the host: QNN reads the input binary
  where it is and writes each output straight into the binary that is returned. The only
  host-side pass over the data is the (de)quantization itself.

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

  alias HexagonTpu.{Args, Context, Error, Native, Optional, Performance, Profile, Site}
  alias HexagonTpu.{Telemetry, TensorInfo}

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

    * `:max_queued` - how many executes may wait for this graph's turn when it is busy
      (default #{@default_max_queued}); an execute beyond that returns
      `{:error, %HexagonTpu.Error{reason: :overloaded}}` at once (see "Concurrency")
    * `:profile_every` - profile one execute in this many (a positive integer; default off)
      and add each sample's per-op cycles to the table `HexagonTpu.Profile.table/1` reads (see
      `HexagonTpu.Profile`, "Sampled profiling")
  """
  @spec retrieve(Context.t(), String.t(), [{:max_queued, non_neg_integer()}]) ::
          {:ok, t()} | {:error, Error.t()}
  def retrieve(context, name, opts \\ []) do
    fun = "HexagonTpu.Graph.retrieve/3"
    context = Args.handle!(context, Context, "`context`", fun)
    name = Args.name!(name, "`name`", fun)
    opts = Args.keyword!(opts, [max_queued: @default_max_queued, profile_every: nil], fun)
    max_queued = max_queued!(opts[:max_queued], fun)
    profile_every = Profile.every!(opts[:profile_every], fun)

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
  @spec retrieve!(Context.t(), String.t(), [{:max_queued, non_neg_integer()}]) :: t()
  def retrieve!(context, name, opts \\ []),
    do: context |> retrieve(name, opts) |> Error.unwrap!()

  @doc false
  # The :max_queued option (Graph.retrieve/3, HexagonTpu.load_model/2).
  @spec max_queued!(term(), String.t()) :: non_neg_integer()
  def max_queued!(value, _fun) when is_integer(value) and value >= 0, do: value

  def max_queued!(value, fun),
    do: Args.type_error!(fun, "the :max_queued option", "a non-negative integer", value)

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

    * `:quantize` - `:auto` (default) quantizes float inputs with each tensor's parameters;
      `:none` requires every input in the model's own type and passes it through
    * `:dequantize` - `:auto` (default) returns quantized and f16 outputs as f32; `:none`
      returns the model's own type
    * `:output` - `:tensor` (the default where Nx is available) or `:binary`
    * `:timeout` - the most milliseconds to wait for the answer (default `:infinity`). When it
      passes, `{:error, %HexagonTpu.Error{reason: :timeout}}` is returned, and the answer never
      reaches the caller: an execute still waiting for its turn is skipped, one already running
      (QNN cannot stop it) finishes and its result is dropped. With a timeout the execute always
      waits on the graph's own thread, never on the caller's scheduler, so the caller is free to
      stop waiting
    * `:performance` - an HTP performance mode for this call (see `HexagonTpu.Performance`):
      voted before the execute unless it is already in force, and kept while calls keep coming;
      the runtime's own mode is voted again once the runtime has been idle for its
      `:performance_idle` delay (counted from the end of the call; for `execute_async/3`,
      and so for each execute of a `HexagonTpu.predict/3` batch, from its start). Default: the
      runtime's mode
    * `:profile` - `:basic`, `:detailed` or `:optrace`: the call returns
      `{:ok, outputs, %HexagonTpu.Profile{}}`, what the backend reported about this execute
      (see `HexagonTpu.Profile`); `nil` (default) collects nothing

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
  def execute(graph, inputs, opts \\ []),
    do: execute(graph, inputs, opts, "HexagonTpu.Graph.execute/3")

  @doc false
  # execute/3, with the name of the public function called for ArgumentError messages
  # (HexagonTpu.predict/3 calls this).
  @spec execute(t(), term(), term(), String.t()) :: {:ok, [output()]} | {:error, Error.t()}
  def execute(graph, inputs, opts, fun) do
    graph = Args.handle!(graph, __MODULE__, "`graph`", fun)
    execute_checked(graph, inputs, execute_options!(opts, fun))
  end

  @doc false
  # execute/4 once its graph and options were checked (execute_options!/2): predict/3 checks
  # them once for a whole batch.
  @spec execute_checked(t(), term(), map()) :: {:ok, [output()]} | {:error, Error.t()}
  def execute_checked(graph, inputs, %{performance: mode} = options) when mode != nil,
    do:
      Performance.during(graph.context.runtime, mode, fn ->
        execute_voted(graph, inputs, options)
      end)

  def execute_checked(graph, inputs, options), do: execute_voted(graph, inputs, options)

  defp execute_voted(graph, inputs, options) do
    %{quantize: quantize, dequantize: dequantize, output: output, timeout: timeout} = options
    profile = Map.get(options, :profile)

    Telemetry.span(
      [:hexagon_tpu, :graph, :execute],
      %{graph: graph.name, context: graph.context.source},
      fn ->
        case run(graph, inputs, {quantize, dequantize, output, profile}, timeout) do
          {:ok, outputs, execute_ns, reported} ->
            reply = Profile.reply(graph, outputs, reported, profile)

            stop =
              Telemetry.put_present(%{status: :ok},
                performance: options[:performance],
                profile: reported
              )

            {reply, %{execute_ns: execute_ns}, stop}

          {:error, %Error{reason: reason}} = error ->
            {error, %{execute_ns: 0}, %{status: :error, error: reason}}
        end
      end
    )
  end

  @doc false
  # The options of execute/3, checked (an ArgumentError naming `fun` for a wrong one).
  @spec execute_options!(term(), String.t()) :: %{
          quantize: :auto | :none,
          dequantize: :auto | :none,
          output: :tensor | :binary,
          timeout: timeout(),
          performance: Performance.mode() | nil,
          profile: Profile.level() | nil
        }
  def execute_options!(opts, fun) do
    opts =
      Args.keyword!(
        opts,
        [
          quantize: :auto,
          dequantize: :auto,
          output: default_output(),
          timeout: :infinity,
          performance: nil,
          profile: nil
        ],
        fun
      )

    %{
      quantize: option!(opts, :quantize, [:auto, :none], fun),
      dequantize: option!(opts, :dequantize, [:auto, :none], fun),
      output: option!(opts, :output, output_kinds(), fun),
      timeout: timeout!(opts[:timeout], fun),
      performance: opts[:performance] && Performance.mode!(opts[:performance], fun),
      profile: Profile.level!(opts[:profile], fun)
    }
  end

  @doc "Like `execute/3`, but raises `HexagonTpu.Error`."
  @spec execute!(t(), [input()] | map(), [execute_option()]) :: [output()]
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

  defp timeout!(:infinity, _fun), do: :infinity
  defp timeout!(ms, _fun) when is_integer(ms) and ms >= 0, do: ms

  defp timeout!(other, fun),
    do: Args.type_error!(fun, "the :timeout option", "a non-negative integer or :infinity", other)

  defp run(graph, inputs, {quantize, dequantize, output, profile}, timeout) do
    tag = make_ref()
    # With a deadline the execute always waits on the graph's thread, so the caller can leave.
    always_queue = timeout != :infinity

    with {:ok, answer, output_modes} <-
           start(graph, inputs, {quantize, dequantize, profile}, always_queue, tag),
         {:ok, result} <- Native.reply(answer, tag, timeout) do
      {binaries, execute_ns, reported} = Profile.split(result)
      {:ok, build_outputs(binaries, graph.outputs, output_modes, output), execute_ns, reported}
    end
  end

  # Checks and orders the inputs and calls the execute NIF with `tag`: its first answer (a
  # result, or `{:queued, ticket}`), and the output modes it was given.
  defp start(graph, inputs, {quantize, dequantize, profile}, always_queue, tag) do
    with {:ok, ordered} <- order_inputs(graph, inputs),
         {:ok, binaries, input_modes} <- prepare_inputs(graph.inputs, ordered, quantize) do
      output_modes = Enum.map(graph.outputs, &output_mode(&1, dequantize))

      answer =
        Native.graph_execute(
          graph.ref,
          binaries,
          input_modes,
          output_modes,
          graph.max_queued,
          always_queue,
          tag,
          profile
        )

      {:ok, answer, output_modes}
    end
  end

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

    execute_async_checked(graph, inputs, execute_options!(opts, fun))
  end

  @doc false
  # execute_async/3 once its graph and options were checked (predict/3's batches).
  @spec execute_async_checked(t(), term(), map()) ::
          {:ok, HexagonTpu.Pending.t()} | {:error, Error.t()}
  def execute_async_checked(graph, inputs, options) do
    %{quantize: quantize, dequantize: dequantize, output: output} = options
    :ok = Performance.vote(graph.context.runtime, options.performance)
    profile = Map.get(options, :profile)
    metadata = %{graph: graph.name, context: graph.context.source}
    span = Telemetry.start_span([:hexagon_tpu, :graph, :execute], metadata)
    tag = make_ref()

    case start(graph, inputs, {quantize, dequantize, profile}, true, tag) do
      {:ok, {:queued, ticket}, output_modes} ->
        {:ok,
         %HexagonTpu.Pending{
           ref: tag,
           ticket: ticket,
           owner: self(),
           graph: graph,
           output_modes: output_modes,
           output: output,
           span: span,
           profile: profile
         }}

      {:ok, {:error, %Error{}} = error, _} ->
        stop_span(span, error)

      {:error, %Error{}} = error ->
        stop_span(span, error)
    end
  end

  @doc """
  The result of an execute started with `execute_async/3`, as `execute/3` returns it. Waits at
  most `timeout` ms (default `:infinity`); when it passes, returns
  `{:error, %HexagonTpu.Error{reason: :timeout}}` and the execute is given up as with
  `cancel/1`. Only the process that started the execute may await it, once.
  """
  @spec await(HexagonTpu.Pending.t(), timeout()) ::
          {:ok, [output()]} | {:ok, [output()], Profile.t()} | {:error, Error.t()}
  def await(pending, timeout \\ :infinity) do
    pending = owned!(pending, "await/2")
    timeout = timeout!(timeout, "HexagonTpu.Graph.await/2")

    case Native.reply({:queued, pending.ticket}, pending.ref, timeout) do
      {:ok, result} ->
        {binaries, execute_ns, reported} = Profile.split(result)
        %{graph: graph, output_modes: modes, output: output} = pending
        outputs = build_outputs(binaries, graph.outputs, modes, output)
        stop = Telemetry.put_present(%{status: :ok}, profile: reported)
        Telemetry.stop_span(pending.span, %{execute_ns: execute_ns}, stop)
        Profile.reply(graph, outputs, reported, pending.profile)

      {:error, %Error{}} = error ->
        stop_span(pending.span, error)
    end
  end

  @doc """
  Gives up an execute started with `execute_async/3`: one still waiting for its turn is
  skipped, one already running finishes and its result is dropped, one already answered is
  taken out of the mailbox. Returns `:ok`. Only the process that started it may cancel it.
  """
  @spec cancel(HexagonTpu.Pending.t()) :: :ok
  def cancel(pending) do
    pending = owned!(pending, "cancel/1")

    case Native.give_up(pending.ref, pending.ticket) do
      :given_up -> Telemetry.stop_span(pending.span, %{execute_ns: 0}, %{status: :cancelled})
      {:sent, result} -> stop_span(pending.span, result)
    end

    :ok
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

  defp stop_span(span, {:error, %Error{reason: reason}} = error) do
    Telemetry.stop_span(span, %{execute_ns: 0}, %{status: :error, error: reason})
    error
  end

  defp stop_span(span, {:ok, result}) do
    {_binaries, execute_ns, _profile} = Profile.split(result)
    Telemetry.stop_span(span, %{execute_ns: execute_ns}, %{status: :ok})
  end

  @doc false
  # The inputs as a list in the graph's order, from a list or a map by name.
  @spec order_inputs(t(), term()) :: {:ok, list()} | {:error, Error.t()}
  def order_inputs(graph, inputs) when is_list(inputs) do
    if proper_length(inputs),
      do: {:ok, inputs},
      else:
        invalid(
          "graph `#{graph.name}`: inputs must be a proper list, given #{Args.quote_input(inputs)}"
        )
  end

  def order_inputs(graph, inputs) when is_map(inputs) and not is_struct(inputs) do
    with {:ok, by_name} <- inputs_by_name(graph, inputs) do
      order_by_name(graph, by_name)
    end
  end

  def order_inputs(graph, other) do
    invalid(
      "graph `#{graph.name}`: inputs must be a list (in input order) or a map by input name, " <>
        "given #{Args.quote_input(other)}"
    )
  end

  defp proper_length(list) do
    length(list)
  rescue
    ArgumentError -> nil
  end

  # Keys are strings or atoms; "image" and :image name the same input, so a map holding both
  # is ambiguous and refused rather than one of them being used.
  defp inputs_by_name(graph, inputs) do
    Enum.reduce_while(inputs, {:ok, %{}}, fn {key, value}, {:ok, by_name} ->
      name = if is_atom(key) and key != nil, do: Atom.to_string(key), else: key

      cond do
        not is_binary(name) ->
          {:halt,
           invalid(
             "graph `#{graph.name}`: input names must be strings or atoms, " <>
               "given the key #{Args.quote_input(key)}"
           )}

        Map.has_key?(by_name, name) ->
          {:halt,
           invalid(
             "graph `#{graph.name}`: input #{Args.quote_input(name)} is given twice, " <>
               "as a string and as an atom; give it once"
           )}

        true ->
          {:cont, {:ok, Map.put(by_name, name, value)}}
      end
    end)
  end

  defp order_by_name(graph, by_name) do
    expected = Enum.map(graph.inputs, & &1.name)

    case Enum.reject(Map.keys(by_name), &(&1 in expected)) do
      [] ->
        case Enum.reject(expected, &Map.has_key?(by_name, &1)) do
          [] ->
            {:ok, Enum.map(expected, &Map.fetch!(by_name, &1))}

          missing ->
            invalid(
              "graph `#{graph.name}`: missing input(s) #{quote_names(missing)}; " <>
                "its inputs are #{names(graph.inputs)}"
            )
        end

      unknown ->
        invalid(
          "graph `#{graph.name}` has no input(s) named #{quote_given(unknown)}; " <>
            "its inputs are #{names(graph.inputs)}"
        )
    end
  end

  # The count is the NIF's to check (qnn::io names the graph's inputs in its message): a list
  # of another length goes on as placeholders, unprepared, for it to report.
  defp prepare_inputs(infos, values, _quantize) when length(values) != length(infos),
    do: {:ok, Enum.map(values, fn _ -> "" end), []}

  defp prepare_inputs(infos, values, quantize) do
    infos
    |> Enum.zip(values)
    |> Enum.reduce_while({:ok, [], []}, fn {info, value}, {:ok, binaries, modes} ->
      case prepare_input(value, info, quantize) do
        {:ok, binary, mode} -> {:cont, {:ok, [binary | binaries], [mode | modes]}}
        {:error, _} = error -> {:halt, error}
      end
    end)
    |> case do
      {:ok, binaries, modes} -> {:ok, Enum.reverse(binaries), Enum.reverse(modes)}
      error -> error
    end
  end

  # Byte sizes are the NIF's to check (qnn::io), against the form the mode says.
  defp prepare_input(binary, info, quantize) when is_binary(binary),
    do: {:ok, binary, binary_input_mode(info, quantize)}

  defp prepare_input({{kind, bits} = type, binary}, info, quantize)
       when kind in [:u, :s, :f, :bf] and is_integer(bits) and is_binary(binary) do
    cond do
      type == info.type ->
        prepare_input(binary, info, :none)

      type == {:f, 32} and quantize == :auto and info.f32_conversion ->
        prepare_input(binary, info, :auto)

      true ->
        invalid(
          "input `#{info.name}`: expected #{expected_types(info, quantize)}, given #{inspect(type)}"
        )
    end
  end

  defp prepare_input(tensor, info, quantize) when is_struct(tensor, Nx.Tensor),
    do: HexagonTpu.Tensor.to_input(tensor, info, quantize)

  defp prepare_input(other, info, _quantize) do
    accepted =
      if Optional.available?(Nx),
        do: "an Nx tensor, a binary or {type, binary}",
        else: "a binary or {type, binary}"

    invalid("input `#{info.name}`: expected #{accepted}, given #{Args.quote_input(other)}")
  end

  defp expected_types(info, quantize) do
    model = "#{inspect(info.type || info.data_type)} (the model's type)"

    if quantize == :auto and info.f32_conversion and info.type != {:f, 32},
      do: "#{model} or {:f, 32} (quantized with the tensor's parameters)",
      else: model
  end

  defp binary_input_mode(info, quantize) do
    if quantize == :auto and info.f32_conversion and info.type != {:f, 32}, do: :f32, else: :model
  end

  defp output_mode(info, dequantize) do
    if dequantize == :auto and info.f32_conversion and info.type != {:f, 32},
      do: :f32,
      else: :model
  end

  defp build_outputs(binaries, _infos, _modes, :binary), do: binaries

  defp build_outputs(binaries, infos, modes, :tensor) do
    [binaries, infos, modes]
    |> Enum.zip()
    |> Enum.map(fn {binary, info, mode} -> HexagonTpu.Tensor.from_output(binary, info, mode) end)
  end

  # Tensors where Nx is loaded, asked at run time (see HexagonTpu.Optional).
  defp default_output, do: if(Optional.available?(Nx), do: :tensor, else: :binary)
  defp output_kinds, do: if(Optional.available?(Nx), do: [:tensor, :binary], else: [:binary])

  defp option!(opts, key, allowed, fun) do
    value = Keyword.fetch!(opts, key)

    if value in allowed,
      do: value,
      else:
        Args.type_error!(
          fun,
          "the #{inspect(key)} option",
          "one of #{Enum.map_join(allowed, ", ", &inspect/1)}",
          value
        )
  end

  defp names(infos), do: infos |> Enum.map(& &1.name) |> quote_names()
  defp quote_names(names), do: Enum.map_join(names, ", ", &"`#{&1}`")

  # Names the caller gave (not the model's): each quoted with its length capped, five at most.
  defp quote_given(names) do
    {shown, rest} = names |> Enum.sort() |> Enum.split(5)
    more = if rest == [], do: "", else: " and #{length(rest)} more"
    Enum.map_join(shown, ", ", &Args.quote_input/1) <> more
  end

  defp invalid(message), do: {:error, Error.new(:invalid_input, message)}

  defimpl Inspect do
    def inspect(graph, _opts) do
      ins = Enum.map_join(graph.inputs, ", ", &HexagonTpu.TensorInfo.describe/1)
      outs = Enum.map_join(graph.outputs, ", ", &HexagonTpu.TensorInfo.describe/1)
      "#HexagonTpu.Graph<#{inspect(graph.name)} (#{ins}) -> (#{outs})>"
    end
  end
end
