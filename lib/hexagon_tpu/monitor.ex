defmodule HexagonTpu.Monitor do
  alias HexagonTpu.Args

  @options Args.schema!(
             interval_ms: [
               type: :pos_integer,
               default: 30_000,
               type_doc: "a positive integer",
               doc: "Milliseconds between samples."
             ],
             growth_samples: [
               type: :pos_integer,
               default: 5,
               type_doc: "a positive integer",
               doc: """
               Warn when `runtimes_alive`, `contexts_alive` or `graphs_alive` has risen in \
               this many consecutive samples.
               """
             ],
             saturation: [
               type: {:custom, __MODULE__, :saturation, []},
               default: 0.9,
               type_doc: "a number in (0.0, 1.0]",
               doc: "Dirty CPU utilization counted as saturated."
             ],
             saturation_samples: [
               type: :pos_integer,
               default: 3,
               type_doc: "a positive integer",
               doc: "Warn when this many consecutive samples are saturated."
             ],
             metadata: [
               type: :map,
               default: %{},
               type_doc: "a map",
               doc: "Merged into the event metadata."
             ],
             name: [
               type: {:custom, __MODULE__, :name, []},
               default: nil,
               type_doc: "nil, an atom, {:global, term} or {:via, module, term}",
               doc: "A name to register the process under."
             ]
           )

  @moduledoc """
  Samples `HexagonTpu.Stats` periodically, emits `[:hexagon_tpu, :monitor, :stats]` and logs warnings
  on sustained growth of live QNN resources (leak suspicion) and on sustained dirty CPU
  scheduler saturation.

  Add it to your supervision tree, once per node:

      children = [
        {HexagonTpu.Monitor, interval_ms: 30_000}
      ]

  Each sample reads `HexagonTpu.Stats.native/0` and `HexagonTpu.Stats.memory/0`, and the
  dirty scheduler utilization over the whole interval since the previous sample (microstate
  accounting is switched on while the Monitor runs and never reset by it; it is switched off
  again when the Monitor stops, if it was off when it started). Sampling never blocks the
  Monitor or anyone else. The event's measurements and metadata are listed in
  `HexagonTpu.Telemetry`.

  ## Options

  #{NimbleOptions.docs(@options)}

  A warning repeats every further `:growth_samples` (or `:saturation_samples`) samples while
  the condition lasts.

  A growth warning names where the growth was created: the three sites with the most live
  objects of the growing kind created since the growth began (`HexagonTpu.Stats.leaked/2`
  between the sample before it and this one, read only when warning; the runtimes
  `HexagonTpu.load_model/2` keeps for reuse are never named):

      [warning] hexagon_tpu: contexts_alive grew 3 → 9 in 5 consecutive samples; top creation
      sites: MyApp.Vision.handle_call/3 (lib/my_app/vision.ex:57) ×6, MyApp.Boot.run/0
      (lib/my_app/boot.ex:9) ×3. QNN resources may be leaking (references kept alive, or
      close/1 never called). See HexagonTpu.Stats.live/0.
  """

  use GenServer

  require Logger

  alias HexagonTpu.{Stats, Telemetry}
  alias HexagonTpu.Stats.Schedulers

  @alive [:runtimes_alive, :contexts_alive, :graphs_alive]
  @kinds %{runtimes_alive: :runtime, contexts_alive: :context, graphs_alive: :graph}
  @top_sites 3

  @type option ::
          {:interval_ms, pos_integer()}
          | {:growth_samples, pos_integer()}
          | {:saturation, float()}
          | {:saturation_samples, pos_integer()}
          | {:metadata, map()}
          | {:name, GenServer.name()}

  @doc """
  The child specification for `{HexagonTpu.Monitor, opts}`. The options are checked here, so
  a wrong one raises when the supervision tree is built.
  """
  @spec child_spec([option()]) :: Supervisor.child_spec()
  def child_spec(opts) do
    options!(opts, "HexagonTpu.Monitor.child_spec/1")
    %{id: __MODULE__, start: {__MODULE__, :start_link, [opts]}}
  end

  @doc "Starts a Monitor (see the module documentation for the options)."
  @spec start_link([option()]) :: GenServer.on_start()
  def start_link(opts \\ []) do
    opts = options!(opts, "HexagonTpu.Monitor.start_link/1")
    gen_opts = if opts[:name], do: [name: opts[:name]], else: []
    GenServer.start_link(__MODULE__, opts, gen_opts)
  end

  @doc """
  Takes a sample now (as a tick does: event, warnings) and returns its measurements. The
  utilization covers the time since the previous sample.
  """
  @spec sample(GenServer.server()) :: map()
  def sample(server) do
    unless server?(server),
      do:
        Args.type_error!(
          "HexagonTpu.Monitor.sample/1",
          "`server`",
          "a pid or a GenServer name",
          server
        )

    GenServer.call(server, :sample)
  end

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)
    was_on = :erlang.system_flag(:microstate_accounting, true)

    state = %{
      opts: Map.new(opts),
      msacc_was_on: was_on,
      msacc: Schedulers.msacc_snapshot(),
      last: nil,
      # Per counter: {consecutive rises, value before the first of them}.
      growth: Map.new(@alive, &{&1, {0, nil}}),
      saturated: 0,
      timer: nil
    }

    {:ok, schedule(state)}
  end

  @impl true
  def handle_info(:tick, state) do
    {_measurements, state} = take_sample(state)
    {:noreply, schedule(state)}
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def handle_call(:sample, _from, state) do
    {measurements, state} = take_sample(state)
    {:reply, measurements, state}
  end

  @impl true
  def terminate(_reason, %{msacc_was_on: false}) do
    :erlang.system_flag(:microstate_accounting, false)
    :ok
  end

  def terminate(_reason, _state), do: :ok

  defp schedule(state) do
    if state.timer, do: Process.cancel_timer(state.timer)
    %{state | timer: Process.send_after(self(), :tick, state.opts.interval_ms)}
  end

  defp take_sample(state) do
    native = Stats.native()
    memory = Stats.memory()
    msacc = Schedulers.msacc_snapshot()
    utilization = Schedulers.utilization(state.msacc, msacc)

    measurements =
      native
      |> Map.merge(utilization)
      |> Map.merge(%{memory_binary: memory.binary, memory_total: memory.total})

    Telemetry.execute(
      [:hexagon_tpu, :monitor, :stats],
      measurements,
      Map.merge(%{node: node()}, state.opts.metadata)
    )

    state =
      state
      |> check_growth(native)
      |> check_saturation(utilization)
      |> Map.merge(%{msacc: msacc, last: native})

    {measurements, state}
  end

  defp check_growth(%{last: nil} = state, _native), do: state

  defp check_growth(%{last: previous} = state, native) do
    n = state.opts.growth_samples

    growth =
      Map.new(@alive, fn key ->
        # `since`: the sample before the growth began.
        {streak, since} = state.growth[key]

        {streak, since} =
          cond do
            native[key] <= previous[key] -> {0, nil}
            streak == 0 -> {1, previous}
            true -> {streak + 1, since}
          end

        if streak > 0 and rem(streak, n) == 0 do
          Logger.warning(
            "hexagon_tpu: #{key} grew #{since[key]} → #{native[key]} in #{streak} consecutive " <>
              "samples; #{top_sites(@kinds[key], since, native)}. QNN resources may be " <>
              "leaking (references kept alive, or close/1 never called). See " <>
              "HexagonTpu.Stats.live/0."
          )
        end

        {key, {streak, since}}
      end)

    %{state | growth: growth}
  end

  defp top_sites(kind, since, now) do
    case Enum.filter(Stats.leaked(since, now), &(elem(&1, 1) == kind)) do
      [] ->
        "no #{kind} created since is alive on the ledger now"

      sites ->
        "top creation sites: " <>
          (sites
           |> Enum.take(@top_sites)
           |> Enum.map_join(", ", fn {site, _kind, count} -> "#{site} ×#{count}" end))
    end
  end

  defp check_saturation(state, %{dirty_cpu: dirty_cpu}) do
    threshold = state.opts.saturation
    n = state.opts.saturation_samples
    streak = if dirty_cpu >= threshold, do: state.saturated + 1, else: 0

    if streak > 0 and rem(streak, n) == 0 do
      Logger.warning(
        "hexagon_tpu: dirty CPU schedulers #{round(dirty_cpu * 100)}% busy, at or above " <>
          "#{round(threshold * 100)}% for #{streak} consecutive samples: inference is " <>
          "saturating them, which delays every other dirty NIF (+SDcpu sets their number)"
      )
    end

    %{state | saturated: streak}
  end

  defp options!(opts, fun), do: Args.options!(opts, @options, fun)

  @doc false
  # The :saturation option's type.
  def saturation(value) when is_number(value) and value > 0 and value <= 1, do: {:ok, value}
  def saturation(_value), do: {:error, "not in (0.0, 1.0]"}

  @doc false
  # The :name option's type: what GenServer.start_link/3 registers.
  def name(name), do: if(valid_name?(name), do: {:ok, name}, else: {:error, "not a name"})

  defp valid_name?(name) when is_atom(name), do: not is_boolean(name)
  defp valid_name?({:global, _}), do: true
  defp valid_name?({:via, module, _}) when is_atom(module), do: true
  defp valid_name?(_), do: false

  defp server?(server) when is_pid(server), do: true
  defp server?({name, node}) when is_atom(name) and is_atom(node), do: true
  defp server?(server), do: server != nil and valid_name?(server)
end
