defmodule HexagonTpu.Profile do
  @moduledoc """
  What the backend reports about one execute: QNN's profiling events, typed.

  Ask for a profile with the `:profile` option of `HexagonTpu.Graph.execute/3` or
  `HexagonTpu.predict/3`; the call then returns `{:ok, outputs, %HexagonTpu.Profile{}}`:

    * `:basic` - the execute's totals (`QNN_PROFILE_LEVEL_BASIC`)
    * `:detailed` - the totals and one entry per op in `:ops` (`QNN_PROFILE_LEVEL_DETAILED`)
    * `:optrace` - a detailed profile with the backend's op trace turned on
      (`QNN_PROFILE_CONFIG_OPTION_ENABLE_OPTRACE`, which QNN 2.41 and later need set
      explicitly): its trace events appear in `:events`. A backend that cannot
      (`profileSetConfig` refuses) fails the execute with `:qnn_error`.

  A profile is collected through a QnnProfile handle that the graph keeps, one per level,
  created on the runtime's own thread the first time an execute asks for that level (that
  first execute waits for the runtime's thread once) and freed when the graph is closed or
  garbage collected. Without `:profile` (and `profile_every:`) no handle exists and nothing is
  read: `HexagonTpu.Stats.native/0`'s `profiles_created` does not move.

  ## Fields

  Every figure is what the backend reported, or `nil` where it reported nothing (Qualcomm's
  x86 emulator, for instance, reports no VTCM or power-up times):

    * `:execute_us` - the whole execute (`QNN_PROFILE_EVENTTYPE_EXECUTE`), in microseconds
    * `:accelerator_cycles` / `:accelerator_us` - time on the accelerator, in cycles and in
      microseconds (HTP: `GRAPH_EXECUTE_ACCEL_TIME_CYCLE` / `_MICROSEC`)
    * `:host_rpc_us` / `:htp_rpc_us` - the remote call, seen from the host and from the HTP
    * `:misc_accelerator_us` - accelerator time outside the ops
    * `:resource_power_up_us` - waiting for HVX and HMX and turning them on
    * `:vtcm_acquire_us` - waiting for VTCM
    * `:ops` - for `:detailed` and `:optrace`, one map per op in the order the backend
      reported them: `%{name: op_name, cycles: cycles | nil, us: microseconds | nil}`
    * `:events` - every event as reported, nested: a map with the keys `:kind`
      (`qnn_event_type`), `:name` (`atom | nil`), `:unit`, `:value` (`integer`), `:identifier`
      (`string`), `:timestamp_us` (`integer | nil`) and `:sub_events` (`[event]`), where `unit`
      is one of `:us`, `:bytes`, `:cycles`, `:count`, `:object`, `:none`, `:other`
    * `:level` and `:sampled` (`true` for a profile taken because of `profile_every:`)

  ## Example

      {:ok, [scores], profile} = HexagonTpu.predict(model, [image], profile: :detailed)

      profile.accelerator_cycles
      #=> 1_234_567

      # the five most expensive ops
      profile.ops
      |> Enum.sort_by(& &1.cycles, :desc)
      |> Enum.take(5)
      |> Enum.each(fn op -> IO.puts("\#{op.name}: \#{op.cycles} cycles") end)

  ## Sampled profiling

  `profile_every: n` (an option of `HexagonTpu.Graph.retrieve/3` and
  `HexagonTpu.load_model/2`) profiles one execute in `n` at the detailed level, the first
  included. The handle is created when the graph is retrieved, so a sampled execute never waits
  for anything; reading its events adds to that execute alone. Each sample's per-op cycles
  are added to the graph's table, read with `table/1`, and sent as the telemetry event
  `[:hexagon_tpu, :execute, :profile]` (see `HexagonTpu.Telemetry`). Sampled executes return
  `{:ok, outputs}` as usual.

      {:ok, model} = HexagonTpu.load_model("model.bin", profile_every: 100)
      for frame <- frames, do: HexagonTpu.predict!(model, [frame])

      HexagonTpu.Profile.table(model)
      #=> %{every: 100, samples: 10,
      #     ops: [%{op: "conv_1", total_cycles: 812_340, samples: 10, max_cycles: 81_990}, ...]}
  """

  alias HexagonTpu.{Args, Error, Graph, Native, Telemetry}

  defstruct [
    :level,
    :execute_us,
    :accelerator_cycles,
    :accelerator_us,
    :host_rpc_us,
    :htp_rpc_us,
    :misc_accelerator_us,
    :resource_power_up_us,
    :vtcm_acquire_us,
    sampled: false,
    ops: [],
    events: []
  ]

  @type level :: :basic | :detailed | :optrace
  @type unit :: :us | :bytes | :cycles | :count | :object | :none | :other
  @type op :: %{name: String.t(), cycles: non_neg_integer() | nil, us: non_neg_integer() | nil}
  @type event :: %{
          kind: non_neg_integer(),
          name: atom() | nil,
          unit: unit(),
          value: non_neg_integer(),
          identifier: String.t(),
          timestamp_us: non_neg_integer() | nil,
          sub_events: [event()]
        }
  @type t :: %__MODULE__{
          level: level(),
          sampled: boolean(),
          execute_us: non_neg_integer() | nil,
          accelerator_cycles: non_neg_integer() | nil,
          accelerator_us: non_neg_integer() | nil,
          host_rpc_us: non_neg_integer() | nil,
          htp_rpc_us: non_neg_integer() | nil,
          misc_accelerator_us: non_neg_integer() | nil,
          resource_power_up_us: non_neg_integer() | nil,
          vtcm_acquire_us: non_neg_integer() | nil,
          ops: [op()],
          events: [event()]
        }

  @type table :: %{
          every: non_neg_integer(),
          samples: non_neg_integer(),
          ops: [
            %{
              op: String.t(),
              total_cycles: non_neg_integer(),
              samples: non_neg_integer(),
              max_cycles: non_neg_integer()
            }
          ]
        }

  @levels [:basic, :detailed, :optrace]
  @units %{
    "us" => :us,
    "bytes" => :bytes,
    "cycles" => :cycles,
    "count" => :count,
    "object" => :object,
    "none" => :none,
    "other" => :other
  }

  @doc """
  The per-op table of a graph's sampled executes (`profile_every:`): how many executes were
  sampled and, per op, the total and largest cycle count and the samples that reported it,
  the ops by total cycles, largest first. Empty (`samples: 0`) when the graph does not sample.
  """
  @spec table(Graph.t()) :: table()
  def table(graph) do
    graph = Args.handle!(graph, Graph, "`graph`", "HexagonTpu.Profile.table/1")

    case Native.graph_profile_table(graph.ref) do
      {:ok, table} -> table
      {:error, %Error{}} = error -> Error.unwrap!(error)
    end
  end

  @doc false
  # The levels, for the execute options' schema (HexagonTpu.Graph.Options).
  @spec levels() :: [level()]
  def levels, do: @levels

  @doc false
  # Turns sampling on for a graph just retrieved (creating its detailed handle).
  @spec sample(Graph.t(), pos_integer() | nil) :: {:ok, Graph.t()} | {:error, Error.t()}
  def sample(graph, nil), do: {:ok, graph}

  def sample(graph, every) do
    case Native.graph_profile_every(graph.ref, every) do
      :ok -> {:ok, graph}
      {:error, %Error{}} = error -> error
    end
  end

  @doc false
  # The NIF's map (src/profile.rs's ProfileTerm, an execute answer's `:profile`) as a struct.
  @spec from_native(map()) :: t()
  def from_native(map) do
    %__MODULE__{
      struct(__MODULE__, Map.drop(map, [:level, :events]))
      | level: String.to_existing_atom(map.level),
        events: Enum.map(map.events, &event/1)
    }
  end

  # The event kinds the NIF names (qnn::profile::event_type_name): a fixed set, so an event's
  # name is one of these atoms (nil for a kind it does not name), never an atom made from what
  # the backend says. Op names stay strings (`:ops`, an event's `:identifier`).
  @event_names ~w(init finalize execute node execute_queue_wait execute_preprocess
                  execute_device execute_postprocess deinit trace host_rpc htp_rpc
                  accelerator_cycles accelerator_us misc_accelerator yield_release yield_wait
                  yield_restore yield_count vtcm_acquire resource_power_up
                  accelerator_excluding_wait node_wait node_overlap node_wait_overlap
                  node_resource_mask node_critical_bg_op node_wait_bg_op critical_path_cycles
                  hvx_threads)a
  @event_atoms Map.new(@event_names, &{Atom.to_string(&1), &1})

  defp event(e) do
    %{
      e
      | name: e.name && Map.get(@event_atoms, e.name),
        unit: Map.fetch!(@units, e.unit),
        sub_events: Enum.map(e.sub_events, &event/1)
    }
  end

  @doc false
  # After an execute: a sampled profile goes to telemetry; the reply carries an asked-for one.
  @spec reply(Graph.t(), list(), t() | nil, level() | nil) ::
          {:ok, list()} | {:ok, list(), t()}
  def reply(graph, outputs, profile, asked) do
    if profile != nil and profile.sampled do
      Telemetry.execute(
        [:hexagon_tpu, :execute, :profile],
        %{
          accelerator_cycles: profile.accelerator_cycles || 0,
          execute_us: profile.execute_us || 0
        },
        %{graph: graph.name, context: graph.context.source, profile: profile}
      )
    end

    if asked != nil and profile != nil, do: {:ok, outputs, profile}, else: {:ok, outputs}
  end
end
