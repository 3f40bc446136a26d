defmodule HexagonTpu.Graph.Options do
  @moduledoc false
  # The options of an execute (HexagonTpu.Graph.execute/3, documented there), checked once per
  # call (once per batch for HexagonTpu.predict/3): an ArgumentError naming the public function
  # for a wrong one. An option the NIF takes as it is is named in @native: it goes into the map
  # HexagonTpu.Graph.Call builds (start/4), src/protocol.rs's ExecuteArg, under its own name.

  alias HexagonTpu.{Args, Optional, Performance, Profile}

  @type t :: %{
          quantize: :auto | :none,
          dequantize: :auto | :none,
          output: :tensor | :binary,
          timeout: timeout(),
          performance: Performance.mode() | nil,
          profile: Profile.level() | nil
        }

  @native [:performance, :profile]

  @doc false
  # The checked options the execute NIF takes as they are.
  @spec native(t()) :: map()
  def native(options), do: Map.take(options, @native)

  @options [
    quantize: [
      type: {:in, [:auto, :none]},
      default: :auto,
      type_doc: "one of :auto, :none",
      doc:
        "`:auto` quantizes float inputs with each tensor's parameters; `:none` " <>
          "requires every input in the model's own type and passes it through."
    ],
    dequantize: [
      type: {:in, [:auto, :none]},
      default: :auto,
      type_doc: "one of :auto, :none",
      doc:
        "`:auto` returns quantized and f16 outputs as f32; `:none` returns the " <>
          "model's own type."
    ],
    output: [
      type: :any,
      type_doc: "one of :tensor, :binary",
      doc:
        "`:tensor` (the default where Nx is available; see `HexagonTpu.Tensor`) or " <>
          "`:binary`."
    ],
    timeout: [
      type: :timeout,
      default: :infinity,
      type_doc: "a non-negative integer or :infinity",
      doc: """
      The most milliseconds to wait for the answer. When it passes, `{:error, \
      %HexagonTpu.Error{reason: :timeout}}` is returned, and the answer never reaches \
      the caller: an execute still waiting for its turn is skipped, one already \
      running (QNN cannot stop it) finishes and its result is dropped. With a timeout \
      the execute always waits on the graph's own thread, never on the caller's \
      scheduler, so the caller is free to stop waiting.
      """
    ],
    performance: [
      type: {:in, [nil | Performance.modes()]},
      default: nil,
      type_doc: Performance.type_doc(),
      doc: """
      An HTP performance mode for this call (see `HexagonTpu.Performance`): voted \
      before the execute unless it is already in force, and kept while calls keep \
      coming; the runtime's own mode is voted again once the runtime has been idle for \
      its `:performance_idle` delay (no execute running, counted from the end of the \
      last one, whichever way it ran: directly, queued, or started with \
      `HexagonTpu.Graph.execute_async/3`). `nil`: the runtime's mode.
      """
    ],
    profile: [
      type: {:in, [nil | Profile.levels()]},
      default: nil,
      type_doc: "one of #{Enum.map_join(Profile.levels(), ", ", &inspect/1)}",
      doc: """
      The call returns `{:ok, outputs, %HexagonTpu.Profile{}}`, what the backend \
      reported about this execute (see `HexagonTpu.Profile`); `nil` collects nothing.
      """
    ]
  ]
  @schema Args.schema!(@options)

  @doc false
  # The options' docs, for the functions that take them.
  @spec docs() :: String.t()
  def docs, do: NimbleOptions.docs(@schema)

  @doc false
  @spec check!(term(), String.t()) :: t()
  # No options, the common case, skips the schema: an execute's cost above QNN's is measured.
  def check!([], _fun), do: defaults()

  def check!(opts, fun), do: Args.cached_options!(opts, @schema, fun, &finish!(&1, fun))

  # The checked options as the call reads them, with what the schema cannot check.
  defp finish!(opts, fun) do
    %{
      quantize: opts[:quantize],
      dequantize: opts[:dequantize],
      output: output!(Keyword.get(opts, :output, default_output()), fun),
      timeout: timeout!(opts[:timeout], fun),
      performance: opts[:performance],
      profile: opts[:profile]
    }
  end

  @doc false
  # The options' schema, for a function that takes them beside its own (HexagonTpu.Pipeline,
  # HexagonTpu.Serving).
  @spec options() :: keyword()
  def options, do: @options

  # The schema's defaults; :output's is asked at run time.
  @defaults for {key, spec} <- @schema.schema,
                Keyword.has_key?(spec, :default),
                into: %{},
                do: {key, spec[:default]}

  defp defaults, do: Map.put(@defaults, :output, default_output())

  @doc false
  # A timeout: :infinity or milliseconds.
  @spec timeout!(term(), String.t()) :: timeout()
  def timeout!(:infinity, _fun), do: :infinity

  def timeout!(ms, fun) when is_integer(ms) and ms >= 0 do
    if ms > Args.max_timeout(),
      do:
        Args.too_large!(
          fun,
          "the :timeout option",
          Args.max_timeout(),
          "receive's limit; or :infinity",
          ms
        )

    ms
  end

  def timeout!(other, fun),
    do: Args.type_error!(fun, "the :timeout option", "a non-negative integer or :infinity", other)

  # Tensors where Nx is loaded, asked at run time (see HexagonTpu.Optional).
  defp default_output, do: if(Optional.available?(Nx), do: :tensor, else: :binary)
  defp output_kinds, do: if(Optional.available?(Nx), do: [:tensor, :binary], else: [:binary])

  defp output!(output, fun) do
    if output in output_kinds(),
      do: output,
      else:
        Args.type_error!(
          fun,
          "the :output option",
          "one of #{Enum.map_join(output_kinds(), ", ", &inspect/1)}",
          output
        )
  end
end
