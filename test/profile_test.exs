defmodule HexagonTpu.ProfileTest do
  # Counts profile handles (VM-global and qnn_sim-global) and attaches telemetry handlers.
  use ExUnit.Case, async: false

  @compile {:no_warn_undefined, [Nx]}

  import HexagonTpu.Test.Numerics, only: [f32: 1]

  alias HexagonTpu.{Context, Graph, Profile, Stats}
  alias HexagonTpu.Test.{Models, Support}

  # qnn_sim's deterministic cycles (qnn_sim/src/ffi/profile.rs): 500 per op code plus one per
  # element of the op's output; fully_connected is code 5, softmax 6, both outputs [1, 3].
  @logits_cycles 500 * 5 + 3
  @probs_cycles 500 * 6 + 3
  @total @logits_cycles + @probs_cycles

  setup do
    Support.quiesce()
    path = Models.build!(Models.classifier([0.01, 0.02, 0.03], Enum.to_list(1..12), [0, 0, 0]))
    %{graph: Graph.retrieve!(Context.from_file!(Support.runtime!(), path), "classifier")}
  end

  defp input, do: [f32([0.1, 0.2, 0.3, 0.4])]

  defp handles do
    sim = Support.qnn_sim_counters()
    native = Stats.native()
    {sim.profiles_created, sim.profiles_live, native.profiles_created, native.profiles_alive}
  end

  test "op names from models never become atoms: the atom table stays flat" do
    # classifiers whose two ops are named after a fresh integer each: 20 models, 40 names
    run = fn i ->
      spec = Models.classifier([0.01, 0.02, 0.03], Enum.to_list(1..12), [0, 0, 0])

      [logits, probs] =
        names = for op <- ~w(logits probs), do: "#{op}_#{i}_#{System.unique_integer([:positive])}"

      spec =
        update_in(spec, [:graphs, Access.at(0)], fn graph ->
          [fc, softmax] = graph.nodes
          fc = put_in(fc, [:output, :name], logits)
          softmax = %{put_in(softmax, [:output, :name], probs) | inputs: [logits]}
          %{graph | nodes: [fc, softmax], outputs: names}
        end)

      context = Context.from_file!(Support.runtime!(), Models.build!(spec))
      graph = Graph.retrieve!(context, "classifier")
      {:ok, [_, _], %Profile{ops: ops}} = Graph.execute(graph, input(), profile: :detailed)
      Context.close(context)
      Enum.map(ops, & &1.name)
    end

    run.(0)
    atoms = :erlang.system_info(:atom_count)
    seen = Enum.flat_map(1..20, run)
    assert length(Enum.uniq(seen)) == 40
    assert :erlang.system_info(:atom_count) == atoms
  end

  test "a detailed profile: totals, one op per node with its cycles and µs, units", %{graph: g} do
    {:ok, [_probs], %Profile{} = p} = Graph.execute(g, input(), profile: :detailed)

    assert p.level == :detailed
    refute p.sampled
    assert p.accelerator_cycles == @total
    assert p.accelerator_us == div(@total + 999, 1000)
    assert p.execute_us == p.accelerator_us + 2
    assert p.host_rpc_us == p.accelerator_us + 1
    assert p.vtcm_acquire_us == 1
    assert p.resource_power_up_us == 3
    assert p.htp_rpc_us == nil

    assert p.ops == [
             %{name: "logits", cycles: @logits_cycles, us: 3},
             %{name: "probs", cycles: @probs_cycles, us: 4}
           ]

    assert Enum.map(p.events, &{&1.name, &1.unit, &1.value}) == [
             {:execute, :us, p.execute_us},
             {:host_rpc, :us, p.host_rpc_us},
             {:accelerator_cycles, :cycles, @total},
             {:accelerator_us, :us, p.accelerator_us},
             {:vtcm_acquire, :us, 1},
             {:resource_power_up, :us, 3}
           ]

    cycles = Enum.find(p.events, &(&1.name == :accelerator_cycles))

    assert Enum.map(cycles.sub_events, &{&1.kind, &1.name, &1.identifier, &1.unit, &1.value}) ==
             [
               {404, :node, "logits", :cycles, @logits_cycles},
               {404, :node, "probs", :cycles, @probs_cycles}
             ]

    # read through the extended event data: qnn_sim stamps each event with its index
    assert Enum.map(p.events, & &1.timestamp_us) == [0, 1, 2, 3, 8, 9]
  end

  test "basic: totals only; optrace: a detailed profile plus the trace event", %{graph: g} do
    {:ok, _, basic} = HexagonTpu.predict(g, input(), profile: :basic)
    assert basic.level == :basic
    assert basic.ops == []
    assert basic.accelerator_cycles == @total
    assert length(basic.events) == 4
    assert Enum.all?(basic.events, &(&1.sub_events == []))

    {:ok, _, optrace} = HexagonTpu.predict(g, input(), profile: :optrace)
    assert optrace.level == :optrace
    assert length(optrace.ops) == 2
    assert List.last(optrace.events).name == :trace
  end

  test "one handle per graph and level, reused, freed when the graph closes", %{graph: g} do
    {sim_created, sim_live, created, alive} = handles()

    for _ <- 1..5, do: {:ok, _, _} = Graph.execute(g, input(), profile: :detailed)
    {:ok, _, _} = Graph.execute(g, input(), profile: :basic)
    # an execute without the option gets no profile, and passes no handle
    assert {:ok, [_]} = Graph.execute(g, input())

    assert handles() == {sim_created + 2, sim_live + 2, created + 2, alive + 2}

    :ok = Graph.close(g)

    freed? = fn -> Support.qnn_sim_counters().profiles_live == sim_live end
    Support.wait_until(freed?, sweep: true)

    assert handles() == {sim_created + 2, sim_live, created + 2, alive}
  end

  test "off means no handle at all", %{graph: g} do
    before = handles()
    for _ <- 1..20, do: {:ok, [_]} = HexagonTpu.predict(g, input())
    assert handles() == before
  end

  test "profile_every: one execute in N, aggregated into the table, sent as telemetry" do
    path = Models.build!(Models.classifier([0.01, 0.02, 0.03], Enum.to_list(1..12), [0, 0, 0]))
    {_, _, created, _} = handles()
    {:ok, model} = HexagonTpu.load_model(path, Support.runtime_opts() ++ [profile_every: 4])
    # the handle exists as soon as the model does: no sampled execute waits for it
    {_, _, created_now, _} = handles()
    assert created_now == created + 1
    samples = Stats.native().profile_samples

    Support.attach_events([[:hexagon_tpu, :execute, :profile]])
    for _ <- 1..10, do: {:ok, [_]} = HexagonTpu.predict(model, input())

    # executes 1, 5 and 9 of 10
    assert Stats.native().profile_samples == samples + 3

    assert Profile.table(model) == %{
             every: 4,
             samples: 3,
             ops: [
               %{
                 op: "probs",
                 total_cycles: 3 * @probs_cycles,
                 samples: 3,
                 max_cycles: @probs_cycles
               },
               %{
                 op: "logits",
                 total_cycles: 3 * @logits_cycles,
                 samples: 3,
                 max_cycles: @logits_cycles
               }
             ]
           }

    for _ <- 1..3 do
      assert_received {:event, [:hexagon_tpu, :execute, :profile], measurements, meta}
      assert measurements.accelerator_cycles == @total
      assert meta.graph == "classifier"
      assert meta.profile.sampled
    end

    refute_received {:event, [:hexagon_tpu, :execute, :profile], _, _}
    # no handle was made per sample
    {_, _, created_after, _} = handles()
    assert created_after == created + 1
  end

  test "execute_async with :profile: await returns the profile; sampled ones go to the table",
       %{graph: g} do
    {:ok, pending} = Graph.execute_async(g, input(), profile: :detailed)
    {:ok, [_], %Profile{level: :detailed} = p} = Graph.await(pending)
    assert p.accelerator_cycles == @total

    {:ok, sampled} = Graph.retrieve(g.context, "classifier", profile_every: 2)
    pendings = for _ <- 1..4, do: elem(Graph.execute_async(sampled, input()), 1)
    assert Enum.all?(pendings, &match?({:ok, [_]}, Graph.await(&1)))
    assert Profile.table(sampled).samples == 2
  end

  test "a graph that does not sample has an empty table", %{graph: g} do
    assert Profile.table(g) == %{every: 0, samples: 0, ops: []}
  end

  test "bad option values name the option", %{graph: g} do
    assert_raise ArgumentError, ~r/the :profile option.*one of :basic, :detailed, :optrace/, fn ->
      Graph.execute(g, input(), profile: :everything)
    end

    assert_raise ArgumentError, ~r/HexagonTpu.predict\/3.*the :profile option/, fn ->
      HexagonTpu.predict(g, input(), profile: "detailed")
    end

    for bad <- [0, -1, 1.5, :often] do
      assert_raise ArgumentError, ~r/the :profile_every option.*a positive integer/, fn ->
        Graph.retrieve(g.context, "classifier", profile_every: bad)
      end
    end

    assert_raise ArgumentError, ~r/HexagonTpu.Profile.table\/1.*`graph`/, fn ->
      Profile.table(:not_a_graph)
    end

    assert_raise ArgumentError, ~r/load_model\/2.*the :profile_every option/, fn ->
      HexagonTpu.load_model("unused.bin", profile_every: 0)
    end
  end

  @tag :nx
  test "a predict that makes a batch refuses :profile, naming it", %{graph: g} do
    batch = Nx.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]], type: :f32)

    assert_raise ArgumentError, ~r/the :profile option \(:detailed\).*batch/, fn ->
      HexagonTpu.predict(g, [batch], profile: :detailed)
    end
  end

  test "the bang variants return the outputs and the profile", %{graph: g} do
    {[_probs], %Profile{level: :basic}} = Graph.execute!(g, input(), profile: :basic)
  end

  test "predict!/3: the outputs, with :profile the outputs and the profile, or a raise", %{
    graph: g
  } do
    assert [probs] = HexagonTpu.predict!(g, input(), output: :binary)
    assert byte_size(probs) > 0
    {:ok, [expected]} = HexagonTpu.predict(g, input(), output: :binary)
    assert probs == expected

    assert {[^expected], %Profile{level: :basic, sampled: false}} =
             HexagonTpu.predict!(g, input(), profile: :basic, output: :binary)

    error =
      assert_raise HexagonTpu.Error, ~r/graph `classifier` takes 1 input\(s\)/, fn ->
        HexagonTpu.predict!(g, [], output: :binary)
      end

    assert error.reason == :invalid_input
  end
end
