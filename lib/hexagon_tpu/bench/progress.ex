defmodule HexagonTpu.Bench.Progress do
  @moduledoc false
  # The progress line of a long benchmark (HexagonTpu.Bench, `progress:`): one line on
  # standard error, rewritten in place ("\r", then the line, then "erase to the end"). Nothing
  # is written in a run's first second, so a short run prints nothing, and then at most five
  # times a second; `done/1` erases the line it wrote. The times live in an :atomics array, so
  # ticking allocates nothing and needs no process state.

  @first_after_ms 1_000
  @every_ms 200

  @enforce_keys [:times]
  defstruct [:times]

  @type t :: %__MODULE__{times: :atomics.atomics_ref() | nil}

  @doc "A progress line, or a silent one (`enabled` false)."
  @spec new(boolean()) :: t()
  def new(false), do: %__MODULE__{times: nil}

  def new(true) do
    # 1: when the run started; 2: when the line was last written; 3: 1 once it was.
    # (Monotonic time may be negative: no time value stands for "never".)
    times = :atomics.new(3, signed: true)
    started = now()
    :atomics.put(times, 1, started)
    :atomics.put(times, 2, started - @every_ms)
    %__MODULE__{times: times}
  end

  @doc "Shows `what` (a phase) at `done` of `total`, if the line is due."
  @spec tick(t(), String.t(), non_neg_integer(), pos_integer()) :: :ok
  def tick(%__MODULE__{times: nil}, _what, _done, _total), do: :ok

  def tick(%__MODULE__{times: times}, what, done, total) do
    now = now()
    last = :atomics.get(times, 2)

    if now - :atomics.get(times, 1) >= @first_after_ms and now - last >= @every_ms do
      :atomics.put(times, 2, now)
      :atomics.put(times, 3, 1)
      IO.write(:standard_error, "\rhexagon_tpu.bench: #{what} #{done}/#{total}\e[K")
    end

    :ok
  end

  @doc "Erases the line, if one was written."
  @spec done(t()) :: :ok
  def done(%__MODULE__{times: nil}), do: :ok

  def done(%__MODULE__{times: times}) do
    if :atomics.get(times, 3) == 1, do: IO.write(:standard_error, "\r\e[K")
    :ok
  end

  defp now, do: System.monotonic_time(:millisecond)
end
