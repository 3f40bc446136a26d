defmodule HexagonTpu.Stats do
  @moduledoc """
  Observability for the NIF layer: native resource accounting (the leak guard),
  dirty-scheduler utilization and memory snapshots.

  The three signals to watch in production:

    * `native/0` - `runtimes_alive`, `contexts_alive` and `graphs_alive` must stay bounded.
      Growth without end means QNN resources are leaking: references held forever (in a
      process state, an ETS table, `:persistent_term`), or destructors that never run.
    * `dirty_utilization/1` - inference runs on dirty CPU schedulers, library and context
      loading on dirty IO ones. Sustained saturation there starves other NIFs and file I/O.
    * `memory/0` - output tensors are refc binaries: growth in `:binary` without a matching
      growth in workload points at tensors being retained.

  When the alive counters grow, `live/0` and `live_by_site/0` say where the live objects
  came from: the NIF keeps a ledger of every live runtime, context and graph with its
  creation site (the first caller outside this package, e.g.
  `"MyApp.Vision.init/1 (lib/my_app/vision.ex:42)"`), age and what it holds. The ledger and
  the alive counters are kept by the same code under one lock, so they always agree; it is
  touched when an object is created or freed, never by an execute. Each entry also records
  the bytes the object holds, and `live_report/1` prints them by creation site, largest first,
  and by source file.

  `HexagonTpu.Monitor` samples all of them periodically, emits `[:hexagon_tpu, :monitor, :stats]` and
  logs warnings that name the top creation sites of a growing kind.
  """

  alias HexagonTpu.Native
  alias HexagonTpu.Stats.{LeakCheck, Ledger, Schedulers}

  @typedoc "The native counters; see `native/0`."
  @type counters :: %{
          required(:runtimes_alive) => non_neg_integer(),
          required(:contexts_alive) => non_neg_integer(),
          required(:graphs_alive) => non_neg_integer(),
          required(:runtimes_created) => non_neg_integer(),
          required(:contexts_created) => non_neg_integer(),
          required(:graphs_created) => non_neg_integer(),
          required(:executes) => non_neg_integer(),
          required(:execute_errors) => non_neg_integer(),
          required(:execute_ns_total) => non_neg_integer(),
          required(:execute_ns_last) => non_neg_integer(),
          optional(atom()) => non_neg_integer()
        }

  @type utilization :: %{dirty_cpu: float(), dirty_io: float(), scheduler: float()}

  @typedoc "The kinds of QNN object the ledger tracks."
  @type kind :: :runtime | :context | :graph

  @typedoc "One live object; see `live/0`."
  @type live_entry :: %{
          id: pos_integer(),
          kind: kind(),
          site: String.t(),
          age_ms: non_neg_integer(),
          detail: String.t(),
          bytes: non_neg_integer(),
          held: [{:binary | :spill_fill | :source, non_neg_integer()}]
        }

  @typedoc "Live objects of one kind created at one site, and how many there are."
  @type site_count :: {site :: String.t(), kind(), count :: pos_integer()}

  # native/0's docs, and the counters' names: each documented name opens a bullet or a
  # `name - ` / `name / ` pair in the list (stats_test holds them to the NIF's, whole).
  @native_doc """
  Native counters from the NIF.

    * `runtimes_alive` / `contexts_alive` / `graphs_alive` - QNN objects not yet freed (the
      leak guard: these return to their baseline after `sweep/0` once the references are
      dropped and the runtime's thread has run the frees, or at once after `close/1`)
    * `runtimes_created` / `contexts_created` / `graphs_created` - lifetime totals
    * `executes` / `execute_errors` - calls that reached QNN's `graphExecute`, and those of
      them QNN failed (inputs rejected before QNN is called count in neither)
    * `execute_ns_total` / `execute_ns_last` - time spent in QNN, in nanoseconds:
      `graphExecute` alone or, on a context whose executes run in the backend's queue
      (`async_queue_depth:`), from the submission to QNN's notification, the queue's wait in
      it (the whole call, conversions and scheduling included, is the telemetry `duration`)
    * `release_errors` - QNN free calls that reported an error (the handle is gone either way)
    * `executes_waiting` - executes queued for a busy graph's turn now;
      `executes_overloaded` - those refused because the queue was at its `max_queued`;
      `executes_timed_out` - those whose caller gave up (`timeout:`) before the answer;
      `executes_skipped` - queued ones not run because their caller had died or given up
      (see `HexagonTpu.Graph`, "Concurrency")
    * `profiles_created` / `profiles_alive` - QnnProfile handles made (one per graph and level
      the first time an execute asks for `profile:`, or when `profile_every:` is set) and not
      yet freed: with profiling off both stay where they were (see `HexagonTpu.Profile`);
      `profile_samples` / `profile_errors` - executes profiled by `profile_every:`, and those
      whose events could not be read (the execute itself succeeded)
    * `tensors_converted` / `convert_ns_total` - tensors converted on the host for executes
      (inputs quantized or narrowed from f32, outputs dequantized or widened to f32), and the
      nanoseconds those conversions took: the host's share of an inference beside
      `execute_ns_total`; `quantize_ns_total` / `dequantize_ns_total` - of those nanoseconds,
      the inputs' and the outputs' (`HexagonTpu.Bench` reports them per execute)
    * `performance_votes` / `performance_votes_refused` - HTP performance votes sent, and those
      refused by the backend or for want of its perf infrastructure (see
      `HexagonTpu.Performance`)
    * `runtime_jobs_pending` - loads, closes and frees handed to runtimes' own threads (where
      QNN's handles are created and freed) and not yet done
    * `context_recoveries` / `device_resets` - contexts created again after a device reset
      (a DSP restart) killed them, and executes answered `:device_reset` because recovering
      did not bring them through (see "Device resets" in `HexagonTpu.Context.from_file/3`)
    * `shared_buffer_contexts` / `shared_buffer_fallbacks` - contexts loaded whose executes
      use shared buffers, and contexts that would have (`shared_buffers: :auto`) and use client
      buffers because rpcmem or QnnMem was missing or refused (the reason is logged once; see
      "Shared buffers" in `HexagonTpu.Context.from_file/3`)
    * `shared_buffers_alive` - rpcmem buffers allocated and not yet freed: pooled, in an
      execute, or under an output binary (back to the pool when the binary is collected)
    * `shared_buffer_registrations` - shared buffers registered with a context
      (`QnnMem_register`; again after a device reset)
    * `client_buffer_bytes_total` - bytes handed to QNN in client buffers, which FastRPC
      copies to the DSP (inputs) and back (outputs) on the device; none for tensors in shared
      buffers
    * `host_copy_bytes_total` - bytes the package copied on the host for an execute: inputs
      given in the model's own type, into their shared buffer or into an execute queued in the
      backend (`async_queue_depth:`)
    * `log_lines` / `log_dropped` - lines of QNN's log forwarded to `Logger`, and those dropped
      by the rate limit (see `HexagonTpu.QnnLog`)

  Reading them costs a few atomic loads; it runs on a normal scheduler. Without the NIF
  (see `HexagonTpu.availability/1`) no QNN object can exist, and every counter is 0.
  """
  @counter_names ~r/`([a-z_]+)`\s+[-\/]\s/
                 |> Regex.scan(@native_doc, capture: :all_but_first)
                 |> Enum.map(fn [name] -> String.to_atom(name) end)

  @doc false
  # The counters' names, as native/0's docs list them; the NIF's stub answers 0 for each.
  @spec counter_names() :: [atom()]
  def counter_names, do: @counter_names

  @doc @native_doc
  @spec native() :: counters()
  def native, do: Native.counters()

  @doc """
  Every live runtime, context and graph, oldest first, from the NIF's ledger.

  Each entry is a map:

    * `:kind` - `:runtime`, `:context` or `:graph`
    * `:site` - where it was created: the first stack frame outside this package and
      outside Elixir's and Erlang's standard library (the `:elixir`, `:stdlib` and `:kernel`
      applications, so a `for`, `Enum.map/2`, `Stream` or `Task` in between is skipped on
      every Elixir version), formatted as `"MyApp.Vision.init/1 (lib/my_app/vision.ex:42)"`
      (a frame of an anonymous function reads `"anonymous fn/N in MyApp.Vision.init/1
      (...)"`, N counting the variables it captures). Tail calls leave no frame, so the site
      is the nearest caller still on the stack; when the stack holds none (a `Task.async/1`
      fn that ends in the call, or a stack deeper than the VM's `:backtrace_depth`), the
      caller's function with its source file and no line. The runtime
      `HexagonTpu.load_model/2` keeps for reuse reads
      `"HexagonTpu.load_model/2 shared runtime, opened for "` and the site it was opened for
    * `:age_ms` - milliseconds since it was created
    * `:detail` - runtime: the backend library path; context: the file it was loaded from
      or `<binary N bytes>`, and its graph names; graph: the graph name
    * `:id` - issued in creation order across all kinds, starting at 1: the n-th object
      created in this VM has id n (`leaked/2` relies on it)
    * `:bytes` - the host memory the object accounts for, the sum of `:held`
    * `:held` - that memory by part, a keyword list: a context's `binary:` (the size of the
      context binary QNN was given: QNN deserializes it and keeps its copy on the host until
      the context is freed), where QnnSystem reports it, `spill_fill:` (the spill-fill
      buffer the HTP backend allocates for the context's graphs, the largest of them, as
      their graph blob info says), and for a context loaded from memory with `recover: true`
      (the default) `source:` (the binary this package keeps to create the context again
      after a device reset; one loaded from a file reads the file again). `[]` for runtimes
      and graphs (a graph's memory is its context's)

  An object is listed from its creation until its QNN handles are freed: by `close/1`, or
  by the garbage collector once no process references it (see `sweep/0`). A closed runtime
  stays listed while a context of it lives, as `runtimes_alive` counts it. The entries of
  each kind always number exactly what `native/0`'s `*_alive` counter says.

  Copies the ledger under a lock that only object creation and release take; it runs on a
  normal scheduler. Without the NIF the list is empty.

      iex> HexagonTpu.Stats.live()
      [
        %{id: 1, kind: :runtime, site: "MyApp.Application.start/2 (lib/my_app/application.ex:12)",
          age_ms: 3_600_512, detail: "/usr/lib/libQnnHtp.so", bytes: 0, held: []},
        %{id: 7, kind: :context, site: "MyApp.Vision.init/1 (lib/my_app/vision.ex:42)",
          age_ms: 1_203, detail: "/data/mobilenet_v2.bin (graphs: mobilenet_v2)",
          bytes: 4_227_072, held: [binary: 3_702_784, spill_fill: 524_288]}
      ]
  """
  @spec live() :: [live_entry()]
  def live, do: Native.ledger_live()

  @doc """
  Live objects counted by creation site and kind: `[{site, kind, count}]`, largest count
  first (ties by site, then kind).

  The first place to look when an `*_alive` counter keeps growing:

      iex> HexagonTpu.Stats.live_by_site()
      [
        {"MyApp.Vision.handle_call/3 (lib/my_app/vision.ex:57)", :context, 212},
        {"MyApp.Vision.handle_call/3 (lib/my_app/vision.ex:58)", :graph, 212},
        {"MyApp.Application.start/2 (lib/my_app/application.ex:12)", :runtime, 1}
      ]
  """
  @spec live_by_site() :: [site_count()]
  defdelegate live_by_site(), to: Ledger, as: :by_site

  @doc """
  A report of the live objects and the memory they hold, as text (`IO.puts/1` it): the total;
  the creation sites by bytes held, largest first (ties: more objects first, then the site),
  the first `top` of them one a line with their objects and the parts of their bytes, the rest
  folded into one line; then the same bytes and objects rolled up by source file.

  Options:

  #{NimbleOptions.docs(HexagonTpu.Stats.Ledger.report_options())}

      iex> IO.puts(HexagonTpu.Stats.live_report(top: 2))
      hexagon_tpu: 1 runtime, 3 contexts, 3 graphs alive; 8,474,624 bytes held
      by creation site, largest first:
        4,227,072 bytes  1 context, 1 graph  MyApp.Vision.init/1 (lib/my_app/vision.ex:42)  [binary 3,702,784, spill_fill 524,288]
        4,194,304 bytes  1 context  MyApp.Faces.init/1 (lib/my_app/faces.ex:17)  [binary 4,194,304]
           53,248 bytes  1 runtime, 1 context, 2 graphs in 2 more sites
      by file:
        4,280,320 bytes  lib/my_app/vision.ex (5 objects)
        4,194,304 bytes  lib/my_app/faces.ex (1 object)
                0 bytes  lib/my_app/application.ex (1 object)

  A site's file is the path in its parentheses (`"... (lib/my_app/vision.ex:42)"`), or the part
  before `:LINE` for a site a Rust caller named (`"qnn/src/exec/context.rs:12"`). Reads the ledger
  once (`live/0`).
  """
  @spec live_report(keyword()) :: String.t()
  defdelegate live_report(opts \\ []), to: Ledger, as: :report

  @doc """
  The objects created between two `native/0` snapshots that are still alive now, counted
  by site like `live_by_site/0`: `[]` when nothing created in between leaked.

  Made for the snapshots `with_leak_check/1` returns, to say where a leak came from:

      {_, before, after_} = HexagonTpu.Stats.with_leak_check(fn -> run_inference() end)
      assert HexagonTpu.Stats.leaked(before, after_) == []
      # on a leak:
      # [{"MyApp.Vision.run/1 (lib/my_app/vision.ex:80)", :context, 1}]

  Objects are attributed by creation order (see `live/0`'s `:id`), so objects created by
  other processes in the window count too, as they do in `alive_diff/2`. The ledger is read
  when this is called: something freed after `after_` was taken is not listed. The runtimes
  `HexagonTpu.load_model/2` keeps for reuse are not leaks and are never listed (see
  `with_leak_check/1`).
  """
  @spec leaked(counters(), counters()) :: [site_count()]
  defdelegate leaked(before, after_), to: LeakCheck

  @doc """
  Samples dirty CPU / dirty IO scheduler utilization over `sample_ms` (default 1000) using
  microstate accounting.

  Returns `%{dirty_cpu: float, dirty_io: float, scheduler: float}`, each the busy share
  (`0.0..1.0`) of that scheduler class over the window: time not spent sleeping, averaged
  over the class's threads. A dirty scheduler running a NIF counts as busy, including a
  NIF that is waiting on the NPU.

  Blocks the caller for `sample_ms`.

  Microstate accounting is a VM-global flag. This function switches it on for the window
  (and off again if it was off) and computes differences, so it never resets the counters;
  but a concurrent sampler that resets them (`:msacc.start/0,1`, for example
  `prometheus.erl`'s msacc collector) corrupts the other samplers' windows, and one that
  switches it off ends them. Run one sampler per node - `HexagonTpu.Monitor` is the
  intended one.
  """
  @spec dirty_utilization(pos_integer()) :: utilization()
  defdelegate dirty_utilization(sample_ms \\ 1000), to: Schedulers

  @doc """
  Memory snapshot relevant to the NIF, in bytes: `:binary` (refc binaries, where output
  tensors live), `:processes` and `:total` BEAM memory.
  """
  @spec memory() :: %{
          binary: non_neg_integer(),
          processes: non_neg_integer(),
          total: non_neg_integer()
        }
  def memory do
    %{
      binary: :erlang.memory(:binary),
      processes: :erlang.memory(:processes),
      total: :erlang.memory(:total)
    }
  end

  @doc """
  Forces a garbage collection of every process (twice), so the destructors of dropped NIF
  resources run (a resource is freed when the last process holding a reference to it
  collects it).

  Resources referenced from ETS tables, `:persistent_term` or live process state stay
  alive, as they should. Expensive on a busy node: meant for tests, diagnostics and leak
  hunts, not for a hot path.
  """
  @spec sweep() :: :ok
  defdelegate sweep(), to: LeakCheck

  @doc """
  Runs `fun`, forces a full GC sweep, and returns `{result, before_stats, after_stats}` of
  the native counters.

  Each snapshot is taken once the alive counters have settled: the sweep is repeated (about
  50 ms of sweeps, plus up to 5 s for the runtimes' pending jobs) until two in a row agree.

  Useful in tests to assert no resources leaked across an operation:

      {_, before, after_} = HexagonTpu.Stats.with_leak_check(fn -> run_inference() end)
      assert HexagonTpu.Stats.alive_diff(before, after_) == %{
               runtimes_alive: 0, contexts_alive: 0, graphs_alive: 0}

  When the diff is not all zero, `leaked/2` on the same snapshots names the creation sites
  of the objects `fun` left alive:

      HexagonTpu.Stats.leaked(before, after_)
      #=> [{"MyApp.Vision.run/1 (lib/my_app/vision.ex:80)", :context, 1}]

  The sweep runs before the first snapshot too, so garbage from earlier work does not
  count. `fun` runs in the calling process: what it returns is still referenced by the
  result, so return plain data, not the resources themselves.

  The runtime `HexagonTpu.load_model/2` opens on its first call (one per set of library
  options, kept for every later call) is not a leak: `live/0` lists it with the site
  `"HexagonTpu.load_model/2 shared runtime, opened for "` followed by the caller it was
  opened for, each snapshot here counts such runtimes under `:shared_runtimes`, and
  `alive_diff/2` and `leaked/2` leave them out. So a check around the first
  `load_model/2` reports only what the model itself left alive.
  """
  @spec with_leak_check((... -> result)) :: {result, counters(), counters()} when result: term()
  defdelegate with_leak_check(fun), to: LeakCheck

  @doc """
  The change in each `*_alive` counter between two `native/0` snapshots: all zero when
  nothing leaked.

  When both snapshots come from `with_leak_check/1`, runtimes that `HexagonTpu.load_model/2`
  opened for reuse in between (their `:shared_runtimes` count) are not counted in
  `runtimes_alive`.
  """
  @spec alive_diff(counters(), counters()) :: %{atom() => integer()}
  defdelegate alive_diff(before, after_), to: LeakCheck
end
