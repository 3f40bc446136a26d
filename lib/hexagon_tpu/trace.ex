defmodule HexagonTpu.Trace do
  @moduledoc """
  A trace of every phase of the package's work, exported as Chrome / Perfetto trace-event JSON
  (open the file in [ui.perfetto.dev](https://ui.perfetto.dev) or `chrome://tracing`).

      :ok = HexagonTpu.Trace.start()
      {:ok, model} = HexagonTpu.load_model("/data/mobilenet_v2.bin")
      for _ <- 1..3, do: {:ok, _} = HexagonTpu.predict(model, [image])
      :ok = HexagonTpu.Trace.stop()
      {:ok, %{held: 25, dropped: 0}} = HexagonTpu.Trace.export("/tmp/hexagon_tpu.json")

  Off by default, and off it costs one relaxed atomic load per phase: no clock read, no
  allocation, no lock. On, each phase reads the clock twice and its event is pushed into a ring
  of fixed capacity (allocated by `start/1`); when the ring is full the oldest event is
  overwritten, and `info/0` counts the events `emitted` and those `dropped` that way. The
  recording is process-wide (every runtime, context and graph of the VM), and stays after
  `stop/0` until the next `start/1`.

  ## Events

  Every event has `cat` `"hexagon_tpu"`, `pid` (the OS process), `tid` (the trace's number of
  the thread it ran on, named by a `thread_name` metadata event: a dirty scheduler such as
  `1_dirty_cpu_s #3`, a runtime's `qnn-runtime` thread, a busy graph's `qnn-graph` worker), `ts`
  and `dur` in µs (with ns precision), and one argument naming what it concerns (`backend`,
  `context`, `graph`). Events of one thread nest: a phase's children lie within it.

  Runtime creation:

    * `runtime.create` (`backend`: the library path) - `HexagonTpu.Runtime.create/1` on the
      caller's thread: the libraries opened (cached per VM), the handles' creation handed to
      the runtime's own thread.
    * `runtime.handles` - on the runtime's thread, enclosing `QnnLog_create`,
      `QnnBackend_create` and `QnnDevice_create` (with `deviceGetPlatformInfo`).

  Context loading (`context`: the path, or `<binary N bytes>`):

    * `context.read` - the binary read from its file (`from_file/3`; this package reads
      binaries, it does not map them).
    * `context.load` - on the caller's thread, enclosing `QnnSystemContext_getMetadata` (the
      binary's metadata read with QnnSystem, and the pre-flight verdict), then handing the
      creation to the runtime's thread.
    * `QnnContext_createFromBinary` - on the runtime's thread.

  Graphs (`graph`: the graph's name in the binary, which for a binary with a names file
  (`MODEL.bin.names`) is the compiler's name behind the one you retrieve it by):

    * `QnnGraph_retrieve` - `HexagonTpu.Graph.retrieve/3`.
    * `execute.wait` - an execute queued behind a busy graph, from the queueing (the caller's
      thread) to its start on the graph's worker: an async event (`ph` `b`/`e` with an `id`).
    * `execute` - one execute on the thread that runs it, enclosing:
      * `execute.quantize` - the inputs checked and converted to the model's types (on the
        direct path only: a queued execute converts its inputs on the caller's thread before
        it is queued, outside any `execute` span);
      * `QnnGraph_execute` - QNN's `graphExecute`; a profiled execute's per-op events (`op`,
        argument `op`) are laid inside it;
      * `execute.dequantize` - the outputs converted to f32.

  Closing and freeing:

    * `QnnContext_free` - on the runtime's thread, when a context is closed or collected.
    * `runtime.free` - on the runtime's thread: the device, backend and log handles freed.
    * `context.recover` - on the runtime's thread: a context created again after a device
      reset (its dead handle freed; `QnnContext_createFromBinary` inside).

  `otherData` holds the recording's counts: `emitted`, `dropped`, `capacity`.
  """

  alias HexagonTpu.{Args, Error, Native}

  @default_capacity 65_536
  @max_capacity 16 * 1024 * 1024

  @start_options Args.schema!(
                   capacity: [
                     type: {:in, 1..@max_capacity},
                     default: @default_capacity,
                     type_doc: "an integer in 1..#{@max_capacity}",
                     doc: "The events the ring holds (an event takes about 100 bytes)."
                   ]
                 )

  @typedoc "A recording's counts; see `info/0`."
  @type info :: %{
          recording: boolean(),
          capacity: non_neg_integer(),
          emitted: non_neg_integer(),
          dropped: non_neg_integer(),
          held: non_neg_integer()
        }

  @doc """
  Starts a recording into a fresh ring (the previous recording is discarded).

  Options:

  #{NimbleOptions.docs(@start_options)}
  """
  @spec start(keyword()) :: :ok | {:error, Error.t()}
  def start(opts \\ []) do
    fun = "HexagonTpu.Trace.start/1"
    opts = Args.options!(opts, @start_options, fun)

    case Native.trace_start(opts[:capacity]) do
      :ok -> :ok
      {:error, %Error{}} = error -> error
      {:error, message} -> {:error, Error.new(:invalid_argument, message)}
    end
  end

  @doc "Stops recording; the recording stays for `export/1` until the next `start/1`."
  @spec stop() :: :ok
  def stop, do: Native.trace_stop()

  @doc """
  The recording's counts: `:recording` (whether it is on), `:capacity`, `:emitted` (events
  recorded since `start/1`), `:dropped` (of those, overwritten because the ring was full) and
  `:held` (in the ring now, `emitted - dropped`).
  """
  @spec info() :: info()
  def info, do: Native.trace_info()

  @doc """
  Writes the recording (while it goes on, or after `stop/0`) to `path` as trace-event JSON;
  returns `info/0`'s counts as of the export. An empty path, or one with a NUL byte, is an
  `:invalid_argument` error; one that cannot be written, an `:io` error.
  """
  @spec export(Path.t()) :: {:ok, info()} | {:error, Error.t()}
  def export(path) do
    path = Args.path!(path, "`path`", "HexagonTpu.Trace.export/1")

    with :ok <- Args.check_path(path, "`path`"),
         json when is_binary(json) <- Native.trace_export(),
         info = info(),
         :ok <- write(path, json) do
      {:ok, info}
    end
  end

  defp write(path, json) do
    case File.write(path, json) do
      :ok ->
        :ok

      {:error, reason} ->
        {:error, Error.new(:io, "cannot write #{inspect(path)}: #{:file.format_error(reason)}")}
    end
  end
end
