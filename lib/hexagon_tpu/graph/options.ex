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

  @doc false
  @spec check!(term(), String.t()) :: t()
  def check!(opts, fun) do
    opts = Args.keyword!(opts, defaults(), fun)

    %{
      quantize: option!(opts, :quantize, [:auto, :none], fun),
      dequantize: option!(opts, :dequantize, [:auto, :none], fun),
      output: option!(opts, :output, output_kinds(), fun),
      timeout: timeout!(opts[:timeout], fun),
      performance: opts[:performance] && Performance.mode!(opts[:performance], fun),
      profile: Profile.level!(opts[:profile], fun)
    }
  end

  @doc false
  # The options' names, for a function that takes them beside its own (HexagonTpu.Pipeline).
  @spec names() :: [atom()]
  def names, do: Keyword.keys(defaults())

  defp defaults,
    do: [
      quantize: :auto,
      dequantize: :auto,
      output: default_output(),
      timeout: :infinity,
      performance: nil,
      profile: nil
    ]

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
end
