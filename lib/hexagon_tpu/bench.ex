defmodule HexagonTpu.Bench do
  alias HexagonTpu.{Args, Performance}

  @sections [:latency, :throughput, :modes, :profile]
  @load_opts [
    :graph,
    :runtime,
    :lib_path,
    :system_lib_path,
    :log_level,
    :preflight,
    :priority,
    :async_queue_depth,
    :max_queued
  ]
  @own_options [
    iterations: [
      type: :pos_integer,
      default: 100,
      type_doc: "a positive integer",
      doc: "Executes timed for the latency."
    ],
    warmup: [
      type: :non_neg_integer,
      default: 5,
      type_doc: "a non-negative integer",
      doc: "Executes before them, not timed."
    ],
    in_flight: [
      type: {:custom, Args, :positive_integers, []},
      default: [1, 2, 4],
      type_doc: "a non-empty list of positive integers",
      doc: "The throughput levels."
    ],
    throughput_executes: [
      type: {:or, [nil, :pos_integer]},
      default: nil,
      type_doc: "a positive integer",
      doc: "Executes per throughput level; `nil`: `:iterations`."
    ],
    modes: [
      type: {:or, [nil, {:list, :any}]},
      default: nil,
      type_doc: "a list of performance modes",
      doc: "Performance modes to compare; `nil`: every mode; `[]` skips them."
    ],
    mode_iterations: [
      type: :pos_integer,
      default: 20,
      type_doc: "a positive integer",
      doc: "Executes timed per mode."
    ],
    performance: [
      type: {:in, [nil | Performance.modes()]},
      default: nil,
      type_doc: Performance.type_doc(),
      doc: "The mode of every other execute; `nil`: the runtime's."
    ],
    profile: [
      type: {:in, [:detailed, :optrace, false]},
      default: :detailed,
      type_doc: ":detailed, :optrace or false",
      doc: "The profile's level; `false` skips the profile."
    ],
    top_ops: [
      type: :non_neg_integer,
      default: 10,
      type_doc: "a non-negative integer",
      doc: "How many ops to list."
    ],
    inputs: [
      type: :any,
      default: nil,
      type_doc: "inputs as HexagonTpu.Graph.execute/3 takes them, or nil",
      doc: "The inputs; `nil`: random ones."
    ],
    seed: [type: :integer, default: 0, type_doc: "an integer", doc: "The random inputs' seed."],
    only: [
      type: {:custom, __MODULE__, :sections, []},
      default: @sections,
      type_doc: "a non-empty list of #{Enum.map_join(@sections, ", ", &inspect/1)}",
      doc: """
      The sections to run: `:latency` (with the host figures), `:throughput`, `:modes` and \
      `:profile`; load, first execute and memory always run.
      """
    ],
    progress: [
      type: :boolean,
      default: true,
      type_doc: "a boolean",
      doc: """
      A progress line on standard error on runs longer than a second, rewritten in place and \
      erased at the end.
      """
    ]
  ]
  # The load options are load_model/2's, checked there.
  @options Args.schema!(Args.checked_by(@load_opts, "HexagonTpu.load_model/2") ++ @own_options)

  @moduledoc """
  Measures one model the way a user needs before shipping it: load time, first execute,
  latency percentiles, throughput with executes in flight, each HTP performance mode, where
  the time goes between the host and QNN, the most expensive ops, and memory.

  It runs wherever the package runs, Mix or not: in IEx on a Nerves board,

      iex> {:ok, result} = HexagonTpu.Bench.run("/data/mobilenet_v2.bin")
      iex> IO.puts(HexagonTpu.Bench.format(result, :table))

  and on a host as `mix hexagon_tpu.bench MODEL.bin`, which calls `run/2` and prints
  `format/2`. [`docs/bench.md`](bench.md) shows a table and documents the JSON (`format(result, :json)`)
  key by key.

  ## What is measured

  In this order, on one model (`HexagonTpu.Graph.execute/3`, outputs as binaries, so Nx's own
  cost is not in the figures):

    1. **load** (when given a path): `HexagonTpu.load_model/2` with the load options given;
    2. **first execute**: the first after the load (or the first of the run), which pays for
       what QNN sets up lazily;
    3. **warm-up**: `:warmup` executes, not measured;
    4. **latency**: `:iterations` executes one after another, each timed on its own: min, mean,
       p50, p90, p99 (nearest rank: the smallest time that many percent of the executes
       did not exceed) and max, in microseconds. The whole call, as a caller sees it;
    5. **host against QNN**, from the package's own counters (`HexagonTpu.Stats.native/0`)
       across the latency executes, per execute: `graphExecute`'s own time (`execute_ns_total`),
       the inputs' quantize (`quantize_ns_total`), the outputs' dequantize
       (`dequantize_ns_total`), and the rest of the call (checks, scheduling, the NIF's
       allocations, the reply). The counters are the VM's: `exclusive` says whether the
       executes they counted were exactly the bench's (nothing else ran meanwhile);
    6. **throughput**: for each level of `:in_flight` (default `[1, 2, 4]`), `:throughput_executes`
       executes kept that many in flight with `HexagonTpu.Graph.execute_async/3` (a new one
       started as the oldest is awaited): executes per second. On one graph QNN runs one
       execute at a time, so more in flight overlaps the host's conversions with the execute
       before them; a model loaded with `async_queue_depth:` hands them to the backend's own
       queue, where they overlap there too;
    7. **performance modes**: for each mode of `:modes` (default every one of
       `HexagonTpu.Performance.modes/0`), one execute that votes it, then `:mode_iterations`
       executes with `performance:` that mode: their p50, and the votes sent and refused
       (a backend without a perf infrastructure refuses every mode but `:default`);
    8. **profile**: one execute with `profile: :detailed` (`:profile` option): the backend's
       totals and the `:top_ops` most expensive ops, with each op's share of the ops' total
       (`nil` when the backend reports no ops);
    9. **memory**: the bytes the package's ledger holds (`HexagonTpu.Stats.live/0`) before the
       load, with the model, and at the end, and the process's resident set (`VmRSS` of
       `/proc/self/status`, `nil` where there is none) before the load, after it and after
       the run.

  A model given by path is closed (graph and context) when the run ends, whatever happened, so
  the bench leaves nothing alive but the runtime `HexagonTpu.load_model/2` keeps for reuse; a
  model given loaded stays as it was. Every execute the run made is counted in
  `executes` (`total`), beside the package's own count of them (`counted`).

  ## Inputs

  Random data of each input's shape and type (from its `HexagonTpu.TensorInfo`), the same
  for the same `:seed`: f32 values spread over the range a quantized input represents (so
  the figures include the quantize a caller with float data pays), values in [-1, 1) for an
  f32 input, random bytes in the model's own type otherwise. Or the caller's: `inputs:` takes
  what `HexagonTpu.Graph.execute/3` takes (a list in input order, or a map by name).

  ## Options

  Load options, with a path only (see `HexagonTpu.load_model/2`): `:graph`, `:runtime`,
  `:lib_path`, `:system_lib_path`, `:log_level`, `:preflight`, `:priority`,
  `:async_queue_depth`, `:max_queued`.

  #{NimbleOptions.docs(@own_options)}
  A wrong option raises `ArgumentError` naming it, as everywhere in the package (nothing is
  loaded or run first). What the model answers comes back as `{:error,
  %HexagonTpu.Error{}}`, as from `HexagonTpu.load_model/2` and `HexagonTpu.Graph.execute/3`:
  a file that is missing or not a model, a graph that is not there, inputs that do not fit.
  """

  alias HexagonTpu.{Context, Error, Graph, Profile, Stats}
  alias HexagonTpu.Bench.{Format, Inputs, Progress}

  defstruct [
    :model,
    :settings,
    :load_us,
    :first_execute_us,
    :latency,
    :host,
    :throughput,
    :modes,
    :profile,
    :memory,
    :executes
  ]

  @typedoc "Microseconds, with nanosecond resolution."
  @type us :: float()

  @typedoc """
  A run's figures; [`docs/bench.md`](bench.md) documents each (the JSON has the same keys). A section
  not run (`:only`, `modes: []`, `profile: false`) is `nil`.
  """
  @type t :: %__MODULE__{
          model: %{
            path: String.t() | nil,
            graph: String.t(),
            backend: String.t(),
            inputs: [tensor()],
            outputs: [tensor()]
          },
          settings: map(),
          load_us: us() | nil,
          first_execute_us: us(),
          latency: latency() | nil,
          host: host() | nil,
          throughput: [throughput()] | nil,
          modes: [mode()] | nil,
          profile: profile() | nil,
          memory: memory(),
          executes: %{total: non_neg_integer(), counted: non_neg_integer()}
        }

  @type tensor :: %{name: String.t(), type: String.t(), shape: [non_neg_integer()], form: atom()}
  @type latency :: %{
          iterations: pos_integer(),
          min_us: us(),
          mean_us: us(),
          p50_us: us(),
          p90_us: us(),
          p99_us: us(),
          max_us: us()
        }
  @type host :: %{
          executes: non_neg_integer(),
          exclusive: boolean(),
          call_us: us(),
          graph_execute_us: us(),
          quantize_us: us(),
          dequantize_us: us(),
          other_us: us(),
          tensors_converted: float()
        }
  @type throughput :: %{
          in_flight: pos_integer(),
          executes: pos_integer(),
          elapsed_us: us(),
          executes_per_s: float()
        }
  @type mode :: %{
          mode: Performance.mode(),
          iterations: pos_integer(),
          p50_us: us(),
          votes: non_neg_integer(),
          votes_refused: non_neg_integer()
        }
  @type profile :: %{
          level: Profile.level(),
          execute_us: non_neg_integer() | nil,
          accelerator_us: non_neg_integer() | nil,
          accelerator_cycles: non_neg_integer() | nil,
          ops: non_neg_integer(),
          top_ops: [
            %{
              name: String.t(),
              cycles: non_neg_integer() | nil,
              us: non_neg_integer() | nil,
              share: float() | nil
            }
          ]
        }
  @type memory :: %{
          ledger_bytes_before: non_neg_integer(),
          ledger_bytes_model: non_neg_integer() | nil,
          ledger_bytes_after: non_neg_integer(),
          rss_before_bytes: non_neg_integer() | nil,
          rss_loaded_bytes: non_neg_integer() | nil,
          rss_after_bytes: non_neg_integer() | nil,
          rss_change_bytes: integer() | nil
        }

  @doc """
  Benchmarks a model: a path (loaded with the load options given, closed at the end) or a
  model `HexagonTpu.load_model/2` returned. Returns `{:ok, %HexagonTpu.Bench{}}` or
  `{:error, %HexagonTpu.Error{}}`. See the module doc for what is measured and the options.
  """
  @spec run(Path.t() | Graph.t(), keyword()) :: {:ok, t()} | {:error, Error.t()}
  def run(path_or_model, opts \\ []) do
    fun = "HexagonTpu.Bench.run/2"
    {load_opts, opts} = Keyword.split(Args.options!(opts, @options, fun), @load_opts)
    source = source!(path_or_model, load_opts, fun)
    settings = settings!(opts, fun)
    progress = Progress.new(settings.progress)

    try do
      bench(source, load_opts, settings, progress)
    catch
      {__MODULE__, %Error{} = error} -> {:error, error}
    after
      Progress.done(progress)
    end
  end

  @doc """
  A run's figures as text: `:table` (sections of aligned lines, for people) or `:json` (one
  JSON object, the schema in [`docs/bench.md`](bench.md)).
  """
  @spec format(t(), :table | :json) :: String.t()
  def format(%__MODULE__{} = result, :table), do: Format.table(result)
  def format(%__MODULE__{} = result, :json), do: Format.json(result)

  def format(%__MODULE__{}, other),
    do: Args.type_error!("HexagonTpu.Bench.format/2", "`format`", "one of :table, :json", other)

  def format(other, _format),
    do: Args.type_error!("HexagonTpu.Bench.format/2", "`result`", "a HexagonTpu.Bench", other)

  # --- arguments

  defp source!(%Graph{} = model, load_opts, fun) do
    model = Args.handle!(model, Graph, "`path_or_model`", fun)

    if load_opts != [] do
      raise ArgumentError,
            "#{fun}: the load options #{Enum.map_join(Keyword.keys(load_opts), ", ", &inspect/1)} " <>
              "apply to a path, and a loaded model was given"
    end

    {:model, model}
  end

  defp source!(path, _load_opts, fun) when is_binary(path) or is_list(path),
    do: {:path, Args.path!(path, "`path_or_model`", fun)}

  defp source!(other, _load_opts, fun),
    do: Args.type_error!(fun, "`path_or_model`", "a path or a HexagonTpu.Graph", other)

  defp settings!(opts, fun) do
    iterations = opts[:iterations]
    # each mode named as the mode an execute takes
    for mode <- opts[:modes] || [], do: Performance.mode!(mode, fun)

    opts
    |> Map.new()
    |> Map.merge(%{
      modes: opts[:modes] || Performance.modes(),
      throughput_executes: opts[:throughput_executes] || iterations,
      profile: opts[:profile] || nil
    })
  end

  @doc false
  # The :only option's type.
  def sections(only) do
    if is_list(only) and only != [] and Enum.all?(only, &(&1 in @sections)),
      do: {:ok, only},
      else: {:error, "not sections"}
  end

  # --- the run

  defp bench(source, load_opts, settings, progress) do
    memory_before = memory()

    with {:ok, model, load_us} <- open(source, load_opts) do
      memory_loaded = memory()

      {result, memory_run} =
        try do
          result = measure(model, settings, progress, load_us)
          {result, memory()}
        after
          close(source, model)
        end

      memory = memory_figures(source, model, memory_before, memory_loaded, memory_run)
      {:ok, %__MODULE__{result | memory: memory}}
    end
  end

  defp open({:model, model}, _load_opts), do: {:ok, model, nil}

  defp open({:path, path}, load_opts) do
    started = now()

    with {:ok, model} <- HexagonTpu.load_model(path, load_opts),
         do: {:ok, model, us(now() - started)}
  end

  # A model the bench loaded is freed now (graph, then context), whatever happened.
  defp close({:model, _model}, _), do: :ok

  defp close({:path, _path}, model) do
    Graph.close(model)
    Context.close(model.context)
    :ok
  end

  defp measure(model, settings, progress, load_us) do
    ctx = %{
      model: model,
      settings: settings,
      progress: progress,
      inputs: settings.inputs || Inputs.random(model, settings.seed),
      opts: if(settings.performance, do: [performance: settings.performance], else: [])
    }

    before = Stats.native()
    {first_ns, _} = timed(ctx, ctx.opts)
    warm_up(ctx)

    {latency, host} = if :latency in settings.only, do: latency(ctx), else: {nil, nil}

    throughput = if :throughput in settings.only, do: throughput(ctx)
    modes = if :modes in settings.only and settings.modes != [], do: modes(ctx)
    profiled? = :profile in settings.only and settings.profile != nil
    profile = if profiled?, do: profile(ctx)
    counted = Stats.native().executes - before.executes

    total =
      1 + settings.warmup +
        if(latency, do: settings.iterations, else: 0) +
        if(throughput, do: length(settings.in_flight) * settings.throughput_executes, else: 0) +
        if(modes, do: length(settings.modes) * (1 + settings.mode_iterations), else: 0) +
        if profiled?, do: 1, else: 0

    %__MODULE__{
      model: describe(model),
      settings: %{
        Map.delete(settings, :progress)
        | inputs: if(settings.inputs, do: :given, else: :random)
      },
      load_us: load_us,
      first_execute_us: us(first_ns),
      latency: latency,
      host: host,
      throughput: throughput,
      modes: modes,
      profile: profile,
      executes: %{total: total, counted: counted}
    }
  end

  defp describe(model) do
    %{
      path: if(is_binary(model.context.source), do: model.context.source),
      graph: model.name,
      backend: model.context.runtime.backend_lib,
      inputs: Enum.map(model.inputs, &tensor/1),
      outputs: Enum.map(model.outputs, &tensor/1)
    }
  end

  defp tensor(info) do
    type =
      case info.type do
        {kind, bits} -> "#{kind}#{bits}"
        nil -> Atom.to_string(info.data_type)
      end

    %{name: info.name, type: type, shape: Tuple.to_list(info.shape), form: Inputs.form(info)}
  end

  defp warm_up(ctx) do
    n = ctx.settings.warmup

    for i <- 1..n//1 do
      Progress.tick(ctx.progress, "warm-up", i, n)
      timed(ctx, ctx.opts)
    end
  end

  defp latency(ctx) do
    n = ctx.settings.iterations
    before = Stats.native()

    times =
      for i <- 1..n do
        Progress.tick(ctx.progress, "latency", i, n)
        {ns, _} = timed(ctx, ctx.opts)
        ns
      end

    after_ = Stats.native()
    sorted = Enum.sort(times)
    total = Enum.sum(times)

    latency = %{
      iterations: n,
      min_us: us(hd(sorted)),
      mean_us: us(total / n),
      p50_us: us(rank(sorted, 50)),
      p90_us: us(rank(sorted, 90)),
      p99_us: us(rank(sorted, 99)),
      max_us: us(List.last(sorted))
    }

    delta = fn key -> Map.fetch!(after_, key) - Map.fetch!(before, key) end
    per = fn ns -> us(ns / n) end
    execute = delta.(:execute_ns_total)
    quantize = delta.(:quantize_ns_total)
    dequantize = delta.(:dequantize_ns_total)

    host = %{
      executes: delta.(:executes),
      exclusive: delta.(:executes) == n,
      call_us: per.(total),
      graph_execute_us: per.(execute),
      quantize_us: per.(quantize),
      dequantize_us: per.(dequantize),
      other_us: per.(total - execute - quantize - dequantize),
      tensors_converted: delta.(:tensors_converted) / n
    }

    {latency, host}
  end

  # Nearest rank: the smallest value that `p` percent of the values do not exceed.
  defp rank(sorted, p), do: Enum.at(sorted, max(ceil(p * length(sorted) / 100) - 1, 0))

  defp throughput(ctx) do
    total = ctx.settings.throughput_executes

    for level <- ctx.settings.in_flight do
      started = now()
      keep_in_flight(ctx, level, total, :queue.new(), 0, 0)
      elapsed = now() - started

      %{
        in_flight: level,
        executes: total,
        elapsed_us: us(elapsed),
        executes_per_s: Float.round(total / max(elapsed, 1) * 1.0e9, 1)
      }
    end
  end

  # Keeps `level` executes in flight until `total` have been awaited: starts one whenever
  # fewer are in flight and more are due, else awaits the oldest.
  defp keep_in_flight(_ctx, _level, total, _queue, _started, total), do: :ok

  defp keep_in_flight(ctx, level, total, queue, started, done) do
    if started < total and started - done < level do
      {:ok, pending} = ok!(Graph.execute_async(ctx.model, ctx.inputs, output(ctx.opts)))
      keep_in_flight(ctx, level, total, :queue.in(pending, queue), started + 1, done)
    else
      {{:value, pending}, queue} = :queue.out(queue)
      ok!(Graph.await(pending))
      Progress.tick(ctx.progress, "throughput, #{level} in flight", done + 1, total)
      keep_in_flight(ctx, level, total, queue, started, done + 1)
    end
  end

  defp modes(ctx) do
    n = ctx.settings.mode_iterations

    for mode <- ctx.settings.modes do
      before = Stats.native()
      # The first execute in a mode votes it; the timed ones run at it.
      timed(ctx, performance: mode)

      times =
        for i <- 1..n do
          Progress.tick(ctx.progress, "mode #{mode}", i, n)
          {ns, _} = timed(ctx, performance: mode)
          ns
        end

      after_ = Stats.native()

      %{
        mode: mode,
        iterations: n,
        p50_us: us(rank(Enum.sort(times), 50)),
        votes: after_.performance_votes - before.performance_votes,
        votes_refused: after_.performance_votes_refused - before.performance_votes_refused
      }
    end
  end

  defp profile(ctx) do
    level = ctx.settings.profile
    Progress.tick(ctx.progress, "profile", 1, 1)

    case timed(ctx, [{:profile, level} | ctx.opts]) do
      {_ns, {:ok, _outputs, %Profile{} = profile}} -> profile_figures(profile, level, ctx)
      # a backend that reports nothing
      {_ns, {:ok, _outputs}} -> nil
    end
  end

  defp profile_figures(profile, level, ctx) do
    ops = profile.ops
    {weight, key} = if Enum.any?(ops, & &1.cycles), do: {:cycles, :cycles}, else: {:us, :us}
    sum = ops |> Enum.map(&(Map.get(&1, key) || 0)) |> Enum.sum()

    top =
      ops
      |> Enum.sort_by(&(Map.get(&1, weight) || 0), :desc)
      |> Enum.take(ctx.settings.top_ops)
      |> Enum.map(fn op ->
        share = if sum > 0 and Map.get(op, weight), do: Map.get(op, weight) / sum
        %{name: op.name, cycles: op.cycles, us: op.us, share: share}
      end)

    %{
      level: level,
      execute_us: profile.execute_us,
      accelerator_us: profile.accelerator_us,
      accelerator_cycles: profile.accelerator_cycles,
      ops: length(ops),
      top_ops: top
    }
  end

  # One execute, timed: {nanoseconds, its answer}; an error stops the run with it.
  defp timed(ctx, opts) do
    started = now()
    answer = ok!(Graph.execute(ctx.model, ctx.inputs, output(opts)))
    {now() - started, answer}
  end

  defp output(opts), do: [{:output, :binary} | opts]

  defp ok!({:error, %Error{}} = error), do: throw({__MODULE__, elem(error, 1)})
  defp ok!(answer), do: answer

  # --- memory

  defp memory, do: %{ledger: ledger_bytes(), rss: rss()}

  defp memory_figures(source, model, before, loaded, run) do
    after_ = ledger_bytes()

    model_bytes =
      case source do
        {:path, _} -> loaded.ledger - before.ledger
        {:model, _} -> context_bytes(model.context)
      end

    %{
      ledger_bytes_before: before.ledger,
      ledger_bytes_model: model_bytes,
      ledger_bytes_after: after_,
      rss_before_bytes: before.rss,
      rss_loaded_bytes: loaded.rss,
      rss_after_bytes: run.rss,
      rss_change_bytes: if(before.rss && run.rss, do: run.rss - before.rss)
    }
  end

  defp ledger_bytes, do: Stats.live() |> Enum.map(& &1.bytes) |> Enum.sum()

  # The ledger's entries for contexts loaded from the model's file; nil for one from a binary.
  defp context_bytes(%Context{source: source}) when is_binary(source) do
    Stats.live()
    |> Enum.filter(&(&1.kind == :context and String.starts_with?(&1.detail, source <> " ")))
    |> Enum.map(& &1.bytes)
    |> Enum.sum()
  end

  defp context_bytes(_context), do: nil

  # VmRSS, in bytes, where /proc/self/status has it.
  defp rss do
    with {:ok, status} <- File.read("/proc/self/status"),
         [_, kb] <- Regex.run(~r/^VmRSS:\s+(\d+) kB$/m, status) do
      String.to_integer(kb) * 1024
    else
      _ -> nil
    end
  end

  defp now, do: System.monotonic_time(:nanosecond)

  # Nanoseconds to microseconds, kept to the nanosecond.
  defp us(ns), do: Float.round(ns / 1000, 3)
end
