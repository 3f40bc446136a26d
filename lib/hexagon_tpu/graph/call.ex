defmodule HexagonTpu.Graph.Call do
  @moduledoc false
  # One execute, the same on every path: HexagonTpu.Graph.execute/3 (and so
  # HexagonTpu.predict/3), execute_async/3 then await/2 or cancel/1, and each execute of a
  # batch. start/4 calls the execute NIF with the options as one map; stop/2 and finish/2 build
  # the telemetry stop and the reply once for all of them, so every path emits the same stop
  # metadata (HexagonTpu.Telemetry, "Inference").

  alias HexagonTpu.{Error, Graph, Native, Pending, Profile, Telemetry, Tensor}
  alias HexagonTpu.Graph.Inputs

  @event [:hexagon_tpu, :graph, :execute]

  @enforce_keys [:graph, :options, :output_modes]
  defstruct [:graph, :options, :output_modes]

  @type t :: %__MODULE__{
          graph: Graph.t(),
          options: Graph.Options.t(),
          output_modes: [:model | :f32]
        }

  @doc false
  # execute/3 with checked options: a span around the execute and its answer, which comes
  # within the :timeout option.
  @spec run(Graph.t(), term(), Graph.Options.t()) ::
          {:ok, list()} | {:ok, list(), Profile.t()} | {:error, Error.t()}
  def run(graph, inputs, options) do
    call = new(graph, options)

    Telemetry.span(@event, start_metadata(graph), fn ->
      tag = make_ref()
      timeout = options.timeout
      # With a deadline the execute always waits on the graph's thread, so the caller can leave.
      result =
        case start(call, inputs, timeout != :infinity, tag) do
          {:ok, answer} -> Native.reply(answer, tag, timeout)
          {:error, %Error{}} = error -> error
        end

      finish(call, result)
    end)
  end

  @doc false
  # execute_async/3 with checked options: the span's start now, its stop when await/2 or
  # cancel/1 returns.
  @spec run_async(Graph.t(), term(), Graph.Options.t()) ::
          {:ok, Pending.t()} | {:error, Error.t()}
  def run_async(graph, inputs, options) do
    call = new(graph, options)
    span = Telemetry.start_span(@event, start_metadata(graph))
    tag = make_ref()

    case start(call, inputs, true, tag) do
      {:ok, {:queued, ticket}} ->
        {:ok, %Pending{ref: tag, ticket: ticket, owner: self(), call: call, span: span}}

      {:ok, {:error, %Error{}} = error} ->
        stop_span(span, call, error)

      {:error, %Error{}} = error ->
        stop_span(span, call, error)
    end
  end

  @doc false
  # The answer of an execute started with run_async/3, within `timeout`.
  @spec await(Pending.t(), timeout()) ::
          {:ok, list()} | {:ok, list(), Profile.t()} | {:error, Error.t()}
  def await(%Pending{call: call} = pending, timeout) do
    result = Native.reply({:queued, pending.ticket}, pending.ref, timeout)
    {reply, measurements, metadata} = finish(call, result)
    Telemetry.stop_span(pending.span, measurements, metadata)
    reply
  end

  @doc false
  # Gives up an execute started with run_async/3.
  @spec cancel(Pending.t()) :: :ok
  def cancel(%Pending{call: call} = pending) do
    case Native.give_up(pending.ref, pending.ticket) do
      :given_up -> stop_span(pending.span, call, :cancelled)
      {:sent, result} -> stop_span(pending.span, call, result)
    end

    :ok
  end

  defp new(graph, options) do
    modes = Enum.map(graph.outputs, &Inputs.mode(&1, options.dequantize))
    %__MODULE__{graph: graph, options: options, output_modes: modes}
  end

  defp start_metadata(graph), do: %{graph: graph.name, context: graph.context.source}

  # Orders and prepares the inputs and calls the execute NIF with `tag`: its first answer (a
  # result, or `{:queued, ticket}`).
  defp start(%__MODULE__{graph: graph, options: options} = call, inputs, always_queue, tag) do
    with {:ok, ordered} <- Inputs.order(graph, inputs),
         {:ok, binaries, input_modes, frames} <- Inputs.prepare(graph, ordered, options.quantize) do
      # src/protocol.rs's ExecuteArg: every key required.
      native =
        Map.merge(Graph.Options.native(options), %{
          input_modes: input_modes,
          frames: frames,
          output_modes: call.output_modes,
          max_queued: graph.max_queued,
          always_queue: always_queue,
          runtime: graph.context.runtime.ref
        })

      {:ok, Native.graph_execute(graph.ref, binaries, native, tag)}
    end
  end

  @doc false
  # The reply to the caller and the telemetry stop's measurements and metadata, from the
  # execute's answer (src/terms.rs's ExecutedTerm: %{outputs, execute_ns, profile,
  # recovery_ns}).
  @spec finish(t(), {:ok, map()} | {:error, Error.t()}) :: {term(), map(), map()}
  def finish(call, {:ok, executed}) do
    reported = reported(call, executed)
    outputs = outputs(executed.outputs, call)
    {measurements, metadata} = stop_of(call, executed.execute_ns, %{status: :ok}, reported)
    {Profile.reply(call.graph, outputs, reported, call.options.profile), measurements, metadata}
  end

  def finish(call, {:error, %Error{}} = error) do
    {measurements, metadata} = stop(call, error)
    {error, measurements, metadata}
  end

  @doc false
  # The telemetry stop of an execute that answered `result` (or was `:cancelled`).
  @spec stop(t(), {:ok, map()} | {:error, Error.t()} | :cancelled) :: {map(), map()}
  def stop(call, {:ok, executed}),
    do: stop_of(call, executed.execute_ns, %{status: :ok}, reported(call, executed))

  def stop(call, {:error, %Error{reason: reason}}),
    do: stop_of(call, 0, %{status: :error, error: reason}, nil)

  def stop(call, :cancelled), do: stop_of(call, 0, %{status: :cancelled}, nil)

  # The profile an answer reports (nil when none), once its recovery, if it waited for one,
  # is reported as its own event.
  defp reported(call, executed) do
    recovered(call, executed.recovery_ns)
    if executed.profile, do: Profile.from_native(executed.profile)
  end

  defp recovered(_call, nil), do: :ok

  defp recovered(call, recovery_ns) do
    Telemetry.execute(
      [:hexagon_tpu, :context, :recover],
      %{duration: System.convert_time_unit(recovery_ns, :nanosecond, :native)},
      start_metadata(call.graph)
    )
  end

  defp stop_of(call, execute_ns, status, profile) do
    metadata =
      Telemetry.put_present(status, performance: call.options.performance, profile: profile)

    {%{execute_ns: execute_ns}, metadata}
  end

  defp stop_span(span, call, result) do
    {measurements, metadata} = stop(call, result)
    Telemetry.stop_span(span, measurements, metadata)
    result
  end

  defp outputs(binaries, %__MODULE__{options: %{output: :binary}}), do: binaries

  defp outputs(binaries, %__MODULE__{graph: graph, output_modes: modes}) do
    [binaries, graph.outputs, modes]
    |> Enum.zip()
    |> Enum.map(fn {binary, info, mode} -> Tensor.from_output(binary, info, mode) end)
  end
end
