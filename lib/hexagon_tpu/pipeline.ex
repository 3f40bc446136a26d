defmodule HexagonTpu.Pipeline do
  @moduledoc """
  A stream of frames through a model with the three stages overlapped: while the NPU executes
  frame N, frame N+1 is preprocessed and frame N−1 decoded, with at most `:max_in_flight`
  frames between the start of their preprocessing and the end of their decoding. Throughput
  then tends to `1 / max(pre, execute, post)` instead of `1 / (pre + execute + post)`.

      [output] = HexagonTpu.Graph.outputs(model)
      opts = [width: 1280, height: 720, pixel_format: :nv12, fit: :letterbox]
      {:ok, transform} = HexagonTpu.Preprocess.transform(model, opts)

      HexagonTpu.Pipeline.stream(model, camera_frames,
        # the pass runs in the frame's execute, straight into the input's buffer
        pre: fn frame ->
          with {:ok, input} <- HexagonTpu.Preprocess.frame(frame, model, opts), do: [input]
        end,
        post: fn [raw] ->
          HexagonTpu.Postprocess.yolov8({raw, output.shape},
            letterbox: transform,
            clip: {1280, 720}
          )
        end,
        output: :binary
      )
      |> Enum.each(fn
        {:ok, detections} -> send(ui, {:detections, detections})
        {:error, %HexagonTpu.Error{} = error} -> Logger.warning(Exception.message(error))
      end)

  `stream/3` is lazy: nothing runs until the stream is enumerated, and frames are taken from
  `frames` only as fast as the pipeline has room for them, so `frames` may be endless (a
  camera).

  ## How it runs

  Each frame runs in a process of its own, started by `Task.async_stream/3` (which owns the
  bound and the order): `pre`, then `HexagonTpu.Graph.execute_async/3` and
  `HexagonTpu.Graph.await/2`, then `post`. The execute runs on the graph's own native thread,
  so a frame waiting for the NPU holds no scheduler, and `pre` and `post` (dirty NIFs such as
  `HexagonTpu.Preprocess.image/3` and `HexagonTpu.Postprocess.yolov8/2`) have the dirty CPU
  schedulers to themselves. The graph runs one execute at a time, in the order they were
  started: the frames' order, except that a frame whose `pre` ends before its predecessor's
  executes first (results still come back in the frames' order). Large binaries (frames,
  model outputs) are not copied between processes; only each frame's answer is sent back.

  With the default `max_in_flight: 3`, one frame is in `pre`, one executes and one is in `post`;
  2 overlaps `pre` and `post` with the execute but not with each other; 1 is the serial loop.
  Each frame's execute counts against the graph's `max_queued` like any waiting execute (see
  `HexagonTpu.Graph`, "Concurrency").

  `bench/pipeline.exs` (`bash bench/run.sh pipeline`) measures it on qnn_sim with an execute
  that sleeps 6 ms, a 1280x720 NV12 frame letterboxed to a 640x640 u8 input and YOLOv8n's
  post-processing: on a loaded 2-core machine, pre 0.92 ms, execute 7.3 ms and post 1.9 ms at
  the median alone, 134 frames/s with 3 in flight (127 with 2) against the bound
  `1 / max(pre, execute, post)` of 137.5, where the serial loop makes 87.

  ## Results and errors

  The stream's elements are, in the frames' order, `{:ok, answer}` (what `post` returned) or
  `{:error, reason}`. Each stage (`pre`, the execute, `post`) may fail a frame: `pre` and
  `post` return their value, `{:ok, value}` or `{:error, reason}` (usually a
  `%HexagonTpu.Error{}`, as `HexagonTpu.Preprocess` and `HexagonTpu.Postprocess` return
  them), and an execute's `{:error, %HexagonTpu.Error{}}` (`:invalid_input`, `:timeout`,
  `:overloaded`, a QNN error) is the frame's element. A failed frame skips its later stages;
  the stream goes on with the next.

  A raise, throw or exit in `pre` or `post` is raised again in the process enumerating the
  stream, with its original stacktrace, and the frames in flight are stopped as below.

  ## Stopping early

  When the enumeration stops before the end (`Enum.take/2`, `Stream.take_while/2`, a raise),
  the frames in flight are stopped: their processes exit, so an execute still waiting for
  its turn is skipped and one already running finishes and its answer is dropped (see
  `HexagonTpu.Graph.execute_async/3`). Nothing is left behind: no process, no message, and
  `HexagonTpu.Stats.native/0`'s `executes_waiting` is back where it was once the running
  execute ends. Those executes' `[:hexagon_tpu, :graph, :execute, :start]` events have no
  `:stop`, as for any caller that dies.
  """

  alias HexagonTpu.{Args, Graph}
  alias HexagonTpu.Graph.{Call, Options}

  @default_max_in_flight 3
  @own [
    pre: [
      type: {:or, [nil, {:fun, 1}]},
      default: nil,
      type_doc: "a function of one argument",
      doc: """
      `frame -> inputs`: the inputs of `HexagonTpu.Graph.execute/3` (a list in input order, \
      or a map by name), `{:ok, inputs}` or `{:error, reason}`; `nil`: the frame is the inputs.
      """
    ],
    post: [
      type: {:or, [nil, {:fun, 1}]},
      default: nil,
      type_doc: "a function of one argument",
      doc: """
      `outputs -> answer`: the outputs as `HexagonTpu.Graph.await/2` gives them \
      (`{outputs, profile}` with `:profile`), to the answer, `{:ok, answer}` or \
      `{:error, reason}`; `nil`: the answer is the outputs.
      """
    ],
    max_in_flight: [
      type: :pos_integer,
      default: @default_max_in_flight,
      type_doc: "a positive integer",
      doc: "The most frames between the start of their `pre` and the end of their `post`."
    ]
  ]
  @options Args.schema!(
             @own ++ Args.checked_by(Keyword.keys(Options.options()), "Graph.execute/3")
           )

  @typedoc "What `pre` and `post` return: the value, `{:ok, value}`, or `{:error, reason}`."
  @type stage_result :: term() | {:ok, term()} | {:error, term()}

  @type option ::
          {:pre, (term() -> stage_result())}
          | {:post, (term() -> stage_result())}
          | {:max_in_flight, pos_integer()}
          | Graph.execute_option()

  @doc """
  A lazy stream of the answers for `frames`, in order, each `{:ok, answer}` or
  `{:error, reason}` (see "Results and errors").

  Options:

  #{NimbleOptions.docs(@own)}
  and every option of `HexagonTpu.Graph.execute/3`, for each frame's execute; `:timeout`
  bounds the wait for its answer (`HexagonTpu.Graph.await/2`).

  The arguments are checked when `stream/3` is called (an `ArgumentError` naming the option;
  see `HexagonTpu`, "Arguments and errors"); the frames are not.
  """
  @spec stream(Graph.t(), Enumerable.t(), [option()]) :: Enumerable.t()
  def stream(model, frames, opts \\ []) do
    fun = "HexagonTpu.Pipeline.stream/3"
    graph = Args.handle!(model, Graph, "`model`", fun)

    unless Enumerable.impl_for(frames),
      do: Args.type_error!(fun, "`frames`", "an enumerable", frames)

    own = Args.options!(opts, @options, fun)
    options = Options.check!(Keyword.drop(opts, Keyword.keys(@own)), fun)
    pre = own[:pre] || (&Function.identity/1)
    post = own[:post] || (&Function.identity/1)
    max_in_flight = own[:max_in_flight]

    frames
    |> Task.async_stream(&run_frame(graph, &1, pre, post, options),
      max_concurrency: max_in_flight,
      ordered: true,
      timeout: :infinity
    )
    |> Stream.map(&answer/1)
  end

  # One frame, in its own process: every stage's error is the frame's result; a raise is
  # handed to the consumer (answer/1), which raises it again.
  defp run_frame(graph, frame, pre, post, options) do
    with {:ok, inputs} <- stage(pre.(frame)),
         {:ok, pending} <- Call.run_async(graph, inputs, options),
         {:ok, outputs} <- awaited(Graph.await(pending, options.timeout)) do
      stage(post.(outputs))
    end
  catch
    kind, reason -> {:raised, kind, reason, __STACKTRACE__}
  end

  defp stage({:ok, _value} = ok), do: ok
  defp stage({:error, _reason} = error), do: error
  defp stage(value), do: {:ok, value}

  defp awaited({:ok, outputs, profile}), do: {:ok, {outputs, profile}}
  defp awaited(result), do: result

  defp answer({:ok, {:raised, kind, reason, stacktrace}}),
    do: :erlang.raise(kind, reason, stacktrace)

  defp answer({:ok, result}), do: result
  # Only where the consumer traps exits: a frame's process was killed from outside.
  defp answer({:exit, reason}), do: exit(reason)
end
