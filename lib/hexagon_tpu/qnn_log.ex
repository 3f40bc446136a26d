defmodule HexagonTpu.QnnLog do
  @moduledoc """
  QNN's own log, in `Logger`.

  Every runtime gives QNN a log callback (`QnnLog_create`) at the level of its `:log_level`
  option (default `:warn`; see `HexagonTpu.Runtime.create/1`). QNN calls it on its own threads;
  the NIF formats the line there, passes it through a rate limit and a bounded queue, and a
  native thread sends it to this process, which logs it. Nothing of QNN's goes to stdout or
  stderr (on Nerves that is the console), and QNN's threads never wait for the VM.

  Lines are logged with the Logger level that matches QNN's (`:error`, `:warning`, `:info`;
  QNN's verbose and debug become `:debug`), the prefix `QNN:` and the metadata `qnn_backend:`
  (the backend library's path). One exception, so that at the default level a `[warning]`
  means something is wrong: the start-up chatter Qualcomm's HTP libraries log at WARN on every
  runtime and load when nothing is wrong is logged at `:debug`. Those are exactly these lines
  (matched whole; `N` is the HTP architecture's number):

    * `Initializing HtpProvider`
    * `No op packages found for architecture N; falling back to no-arch bucket`
    * `m_CFBCallbackInfoObj is not initialized, return emptyList`
    * `Sanitizing the value for hvx_threads and setting to default`

  Errors are never demoted: QNN's explanation of a failure arrives at `:error`. At most #{50} lines a second are forwarded on average, in
  bursts of up to #{200}; beyond that they are dropped, counted in
  `HexagonTpu.Stats.native/0` as `log_dropped`, and a warning says how many.

  A line reaches `Logger` a moment after QNN logs it. `flush/1` waits for the lines logged so
  far: call it before stopping the VM, or before reading what a failed call explained.

  Started by the `:hexagon_tpu` application. The QNN emulator in `onnxruntime-qnn` prints one
  line of its own when it is loaded (`# LIBNATIVE: ...`) with `printf`, before any log handle
  exists: no setting silences it (see [Measuring and observing](observability.md)). The device's libraries do not print it.
  """

  use GenServer

  require Logger

  # The NIF's timeout is a u64 of milliseconds (beyond the clock's range it waits without a
  # deadline).
  @max_timeout 0xFFFF_FFFF_FFFF_FFFF
  # How long flush/1 then waits for this process to have logged what arrived.
  @logging_timeout 5000

  @doc """
  Waits until every line QNN logged before the call has been logged in `Logger`: at most
  `timeout` milliseconds (default 5000) for the lines to arrive here, then at most
  #{@logging_timeout} ms for this process to log them. QNN logs what a call explains on the
  calling thread before the call returns, so after `{:error, _}` the explanation is in `Logger`
  once this returns `:ok`.

  Returns `{:error, :timeout}` when the lines did not all get through in time (a `Logger`
  handler that blocks, say). Without the NIF, or with the application stopped, there is
  nothing to wait for: `:ok`.

      {:error, _} = HexagonTpu.Context.from_file(runtime, "model.bin")
      :ok = HexagonTpu.QnnLog.flush()
      System.stop(1)
  """
  @spec flush(non_neg_integer()) :: :ok | {:error, :timeout}
  def flush(timeout \\ 5000)

  def flush(timeout) when is_integer(timeout) and timeout in 0..@max_timeout do
    pid = Process.whereis(__MODULE__)

    cond do
      pid == nil or not HexagonTpu.Native.nif_loaded() ->
        :ok

      HexagonTpu.Native.log_flush(timeout) ->
        # The drain sent them; this process logs them in order, before answering.
        try do
          _ = :sys.get_state(pid, @logging_timeout)
          :ok
        catch
          :exit, _ -> {:error, :timeout}
        end

      true ->
        {:error, :timeout}
    end
  end

  def flush(timeout) do
    HexagonTpu.Args.type_error!(
      "HexagonTpu.QnnLog.flush/1",
      "`timeout`",
      "a non-negative integer of milliseconds",
      timeout
    )
  end

  # The application starts it; no user's supervisor does.
  @doc false
  def child_spec(opts), do: super(opts)

  @doc false
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts, name: __MODULE__)

  @impl true
  def init(_opts) do
    # Without the NIF there is no QNN to listen to: say why once, and start anyway (the
    # application must start; availability/1 and every call report the same error).
    if HexagonTpu.Native.nif_loaded() do
      HexagonTpu.Native.log_forward_to(self())
    else
      Logger.warning("hexagon_tpu: " <> HexagonTpu.Native.not_loaded_error().message)
    end

    {:ok, nil}
  end

  @impl true
  def handle_info({:hexagon_tpu_log, level, backend, message}, state) do
    Logger.log(level, "QNN: " <> message, qnn_backend: backend)
    {:noreply, state}
  end
end
