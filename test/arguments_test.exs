defmodule HexagonTpu.ArgumentsTest do
  # The argument convention (HexagonTpu moduledoc, "Arguments and errors"): a wrong type raises
  # an ArgumentError naming the function and the argument, a wrong value returns
  # {:error, %HexagonTpu.Error{}}; messages quote at most 200 bytes of user input; nothing is
  # opened or loaded for a refused call. Not async: the created/alive counters are VM-global,
  # and one test sets an environment variable.
  use ExUnit.Case, async: false

  import HexagonTpu.Test.Numerics, only: [f32: 1]

  alias HexagonTpu.{Args, Context, Error, Graph, Monitor, Runtime, Stats, TensorInfo}
  alias HexagonTpu.Test.Support

  @created [:runtimes_created, :contexts_created, :graphs_created]
  @alive [:runtimes_alive, :contexts_alive, :graphs_alive]

  # A message may quote 200 bytes of input; with its own words it stays well under this.
  @short 700

  setup_all do
    Support.add_graph!()
  end

  # Runs `fun`, which must raise an ArgumentError whose message contains every fragment, is
  # short, and names the function; and checks that nothing was created meanwhile.
  defp assert_type_error(fun, fragments) do
    before = Stats.native()
    error = assert_raise ArgumentError, fun
    after_ = Stats.native()

    for fragment <- List.wrap(fragments),
        do: assert(error.message =~ fragment, "#{inspect(fragment)} not in #{error.message}")

    assert error.message =~ ~r/^HexagonTpu\.[\w.]+[!?]?\/\d: /
    assert byte_size(error.message) < @short, error.message
    assert Map.take(after_, @created) == Map.take(before, @created)
    error
  end

  defp assert_error(result, reason, fragments) do
    assert {:error, %Error{reason: ^reason, message: message}} = result

    for fragment <- List.wrap(fragments),
        do: assert(message =~ fragment, "#{inspect(fragment)} not in #{message}")

    assert byte_size(message) < @short, message
    message
  end

  defp created, do: Map.take(Stats.native(), @created)

  describe "every public function refuses wrong types with an ArgumentError" do
    test "HexagonTpu", %{path: path, runtime: runtime, graph: graph} do
      assert_type_error(fn -> HexagonTpu.load_model(123) end, ["load_model/2", "`path`", "123"])
      assert_type_error(fn -> HexagonTpu.load_model(:model) end, ["`path`", ":model"])
      assert_type_error(fn -> HexagonTpu.load_model(path, :x) end, ["`opts`", "keyword"])
      assert_type_error(fn -> HexagonTpu.load_model(path, bogus: 1) end, ["unknown", ":bogus"])

      assert_type_error(fn -> HexagonTpu.load_model(path, graph: "a", graph: "b") end, [
        ":graph",
        "more than once"
      ])

      assert_type_error(fn -> HexagonTpu.load_model(path, lib_path: 1) end, [":lib_path", "1"])

      assert_type_error(fn -> HexagonTpu.load_model(path, log_level: :loud) end, [
        ":log_level",
        ":loud"
      ])

      assert_type_error(
        fn -> HexagonTpu.load_model(path, runtime: runtime, lib_path: Support.sim_lib()) end,
        [":runtime", "cannot be combined", ":lib_path"]
      )

      assert_type_error(fn -> HexagonTpu.load_model!(123) end, ["load_model/2", "`path`"])
      assert_type_error(fn -> HexagonTpu.predict(:model, []) end, ["predict/3", "`graph`"])
      assert_type_error(fn -> HexagonTpu.predict(graph, [], :x) end, ["predict/3", "`opts`"])

      assert_type_error(fn -> HexagonTpu.predict(graph, [], quantize: :maybe) end, [
        ":quantize",
        ":maybe",
        ":auto, :none"
      ])

      assert_type_error(fn -> HexagonTpu.predict!(:model, []) end, ["predict!/3", "`graph`"])
      assert_type_error(fn -> HexagonTpu.available?(:x) end, ["available?/1", "`opts`"])
      assert_type_error(fn -> HexagonTpu.available?(lib_path: 1) end, [":lib_path"])
      assert_type_error(fn -> HexagonTpu.availability(bogus: 1) end, ["availability/1"])
      assert_type_error(fn -> HexagonTpu.diagnose(:x) end, ["diagnose/1", "`opts`"])
      assert_type_error(fn -> HexagonTpu.diagnose(root: 1) end, ["diagnose/1", ":root"])
      assert_type_error(fn -> HexagonTpu.diagnose(timeout: 0) end, [":timeout", "0"])
      assert_type_error(fn -> HexagonTpu.diagnose(machine: :mips) end, [":machine", ":mips"])
      assert_type_error(fn -> HexagonTpu.diagnose(htp_arch: "68") end, [":htp_arch"])
    end

    test "Runtime" do
      assert_type_error(fn -> Runtime.create(:x) end, ["Runtime.create/1", "`opts`"])
      assert_type_error(fn -> Runtime.create(bogus: 1) end, ["unknown option :bogus"])
      assert_type_error(fn -> Runtime.create(lib_path: 1) end, [":lib_path", "path", "1"])
      assert_type_error(fn -> Runtime.create(system_lib_path: %{}) end, [":system_lib_path"])
      assert_type_error(fn -> Runtime.create(log_level: "warn") end, [":log_level", ~s("warn")])
      assert_type_error(fn -> Runtime.create!(log_level: :loud) end, ["create/1", ":loud"])
      assert_type_error(fn -> Runtime.htp(bogus: 1) end, ["Runtime.htp/1", ":bogus"])
      assert_type_error(fn -> Runtime.htp!(lib_path: 1.5) end, ["htp/1", "1.5"])
      assert_type_error(fn -> Runtime.info(:x) end, ["Runtime.info/1", "`runtime`", ":x"])
      assert_type_error(fn -> Runtime.closed?(nil) end, ["Runtime.closed?/1", "`runtime`"])
      assert_type_error(fn -> Runtime.close("x") end, ["Runtime.close/1", "`runtime`"])
      # a struct that does not hold a NIF resource
      assert_type_error(fn -> Runtime.info(%Runtime{}) end, ["`runtime`"])

      assert_type_error(fn -> Runtime.create(performance: :turbo) end, [":performance", ":turbo"])
      assert_type_error(fn -> Runtime.create(performance_idle: -1) end, [":performance_idle"])

      assert_type_error(
        fn -> Runtime.create(performance_idle: 18_446_744_073_709_551_616) end,
        [":performance_idle", "at most 18446744073709551615"]
      )

      assert_type_error(fn -> Runtime.set_performance(:x, :burst) end, [
        "Runtime.set_performance/2",
        "`runtime`"
      ])

      assert_type_error(fn -> Runtime.performance(nil) end, ["Runtime.performance/1"])
    end

    test "Context", %{runtime: runtime, path: path, context: context} do
      assert_type_error(fn -> Context.from_file(:x, path) end, ["from_file/3", "`runtime`"])
      assert_type_error(fn -> Context.from_file(runtime, 1) end, ["from_file/3", "`path`"])
      assert_type_error(fn -> Context.from_file(runtime, path, :x) end, ["`opts`"])

      assert_type_error(fn -> Context.from_file(runtime, path, max_bytes: 0) end, [
        ":max_bytes",
        "positive integer",
        "0"
      ])

      assert_type_error(fn -> Context.from_file!(runtime, {:path}) end, ["`path`"])
      assert_type_error(fn -> Context.from_binary(:x, <<>>) end, ["from_binary/3", "`runtime`"])
      assert_type_error(fn -> Context.from_binary(runtime, ~c"abc") end, ["`binary`"])
      assert_type_error(fn -> Context.from_binary(runtime, <<1::3>>) end, ["`binary`"])
      assert_type_error(fn -> Context.from_binary(runtime, <<>>, x: 1) end, [":x"])
      assert_type_error(fn -> Context.from_binary!(runtime, 1) end, ["`binary`"])
      assert_type_error(fn -> Context.graphs(:x) end, ["Context.graphs/1", "`context`"])
      assert_type_error(fn -> Context.closed?(runtime) end, ["closed?/1", "`context`"])
      assert_type_error(fn -> Context.close(:x) end, ["Context.close/1", "`context`"])
      assert Context.graphs(context) == ["add"]
    end

    test "Graph", %{context: context, graph: graph} do
      assert_type_error(fn -> Graph.retrieve(:x, "add") end, ["retrieve/3", "`context`"])
      assert_type_error(fn -> Graph.retrieve(context, "add", max_queued: -1) end, [":max_queued"])
      assert_type_error(fn -> Graph.retrieve(context, "add", bogus: 1) end, [":bogus"])
      assert_type_error(fn -> Graph.retrieve(context, :add) end, ["`name`", ":add"])
      assert_type_error(fn -> Graph.retrieve(context, ~c"add") end, ["`name`"])
      assert_type_error(fn -> Graph.retrieve(context, <<"add", 255>>) end, ["UTF-8", "255"])
      assert_type_error(fn -> Graph.retrieve!(context, 1) end, ["`name`"])
      assert_type_error(fn -> Graph.inputs(:x) end, ["Graph.inputs/1", "`graph`"])
      assert_type_error(fn -> Graph.outputs(context) end, ["Graph.outputs/1", "`graph`"])
      assert_type_error(fn -> Graph.execute(:x, []) end, ["Graph.execute/3", "`graph`"])
      assert_type_error(fn -> Graph.execute(graph, [], bogus: 1) end, ["execute/3", ":bogus"])
      assert_type_error(fn -> Graph.execute(graph, [], output: :pixels) end, [":output"])
      assert_type_error(fn -> Graph.execute!(graph, [], dequantize: 1) end, [":dequantize"])
      assert_type_error(fn -> Graph.execute(graph, [], timeout: -5) end, [":timeout", "-5"])
      assert_type_error(fn -> Graph.execute(graph, [], timeout: :never) end, [":timeout"])
      assert_type_error(fn -> Graph.execute(graph, [], performance: :warp) end, [":performance"])

      # integers past what receive or the NIF can hold: refused naming the option and its range
      assert_type_error(fn -> Graph.execute(graph, [], timeout: 4_294_967_296) end, [
        ":timeout",
        "at most 4294967295",
        "4294967296"
      ])

      assert_type_error(fn -> HexagonTpu.predict(graph, [], timeout: 4_294_967_296) end, [
        "HexagonTpu.predict/3",
        "at most 4294967295"
      ])

      assert_type_error(fn -> Graph.await(:x, 4_294_967_296) end, ["Graph.await/2", "`pending`"])

      assert_type_error(
        fn -> Graph.retrieve(context, "add", max_queued: 18_446_744_073_709_551_616) end,
        [":max_queued", "at most 18446744073709551615"]
      )

      assert_type_error(
        fn -> HexagonTpu.diagnose(timeout: 4_294_967_296) end,
        [":timeout", "at most 4294967295"]
      )

      assert_type_error(fn -> Graph.execute_async(:x, []) end, ["execute_async/3", "`graph`"])
      assert_type_error(fn -> Graph.execute_async(graph, [], timeout: 5) end, ["await/2"])
      assert_type_error(fn -> Graph.execute_async(graph, [], bogus: 1) end, [":bogus"])
      assert_type_error(fn -> Graph.await(:x) end, ["Graph.await/2", "`pending`"])
      assert_type_error(fn -> Graph.cancel(graph) end, ["Graph.cancel/1", "`pending`"])
      assert_type_error(fn -> Graph.close(:x) end, ["Graph.close/1", "`graph`"])
    end

    test "TensorInfo", %{graph: graph} do
      assert_type_error(fn -> TensorInfo.size(:x) end, ["TensorInfo.size/1", "`info`"])
      assert TensorInfo.size(hd(Graph.inputs(graph))) == 4
    end

    test "Stats" do
      assert_type_error(fn -> Stats.dirty_utilization(0) end, ["dirty_utilization/1", "0"])
      assert_type_error(fn -> Stats.dirty_utilization("1") end, ["`sample_ms`"])
      assert_type_error(fn -> Stats.with_leak_check(fn _ -> :ok end) end, ["`fun`"])
      assert_type_error(fn -> Stats.leaked(:a, Stats.native()) end, ["leaked/2", "`before`"])
      assert_type_error(fn -> Stats.leaked(Stats.native(), %{}) end, ["`after_`"])
      assert_type_error(fn -> Stats.alive_diff(%{}, Stats.native()) end, ["alive_diff/2"])
      assert_type_error(fn -> Stats.live_report(:x) end, ["live_report/1", "`opts`"])
      assert_type_error(fn -> Stats.live_report(top: -1) end, [":top", "-1"])
    end

    test "Monitor" do
      assert_type_error(fn -> Monitor.start_link(:x) end, ["start_link/1", "`opts`"])
      assert_type_error(fn -> Monitor.start_link(bogus: 1) end, ["unknown option :bogus"])
      assert_type_error(fn -> Monitor.start_link(interval_ms: "1") end, [":interval_ms"])
      assert_type_error(fn -> Monitor.start_link(saturation: 2.0) end, [":saturation"])
      assert_type_error(fn -> Monitor.start_link(metadata: [a: 1]) end, [":metadata"])
      assert_type_error(fn -> Monitor.start_link(name: "monitor") end, [":name"])
      assert_type_error(fn -> Monitor.child_spec(growth_samples: 0) end, ["child_spec/1"])
      assert_type_error(fn -> Monitor.sample("monitor") end, ["sample/1", "`server`"])
      assert %{id: Monitor} = Monitor.child_spec(interval_ms: 10)
    end

    test "QnnLog.flush/1" do
      for timeout <- [:x, -1, 1.5, 0x1_0000_0000_0000_0000] do
        assert_type_error(fn -> HexagonTpu.QnnLog.flush(timeout) end, ["`timeout`"])
      end
    end

    @tag :nx
    test "Tensor", %{graph: graph} do
      info = hd(Graph.inputs(graph))
      tensor = apply(Nx, :tensor, [[1, 2, 3, 4]])
      # Through apply/3: the module exists only where Nx does, and compilers must not mind.
      call = fn fun, args -> fn -> apply(HexagonTpu.Tensor, fun, args) end end
      assert_type_error(call.(:to_input, [:x, info, :auto]), ["`tensor`"])
      assert_type_error(call.(:to_input, [tensor, :x, :auto]), ["`info`"])
      assert_type_error(call.(:to_input, [tensor, info, :x]), ["`quantize`"])
      assert_type_error(call.(:from_output, [:x, info, :f32]), ["`binary`"])
      assert_type_error(call.(:from_output, [<<>>, info, :x]), ["`mode`"])
    end

    test "inspect_model/2 and inspect_model!/2" do
      for fun <- [:inspect_model, :inspect_model!] do
        assert_raise ArgumentError, ~r/`path`/, fn -> apply(HexagonTpu, fun, [:x, []]) end
        assert_raise ArgumentError, ~r/`opts`/, fn -> apply(HexagonTpu, fun, ["m.bin", :x]) end

        assert_raise ArgumentError, ~r/:max_bytes/, fn ->
          apply(HexagonTpu, fun, ["m.bin", [max_bytes: 0]])
        end

        assert_raise ArgumentError, ~r/:system_lib_path/, fn ->
          apply(HexagonTpu, fun, ["m.bin", [system_lib_path: 1]])
        end
      end
    end

    test "the tests above cover every documented public function" do
      tested = %{
        HexagonTpu =>
          ~w(load_model/2 load_model!/2 predict/3 predict!/3 available?/1 availability/1) ++
            ~w(inspect_model/2 inspect_model!/2 diagnose/1),
        Runtime =>
          ~w(create/1 create!/1 htp/1 htp!/1 info/1 closed?/1 close/1) ++
            ~w(set_performance/2 performance/1),
        Context =>
          ~w(from_file/3 from_file!/3 from_binary/3 from_binary!/3 graphs/1 closed?/1 close/1),
        Graph =>
          ~w(retrieve/3 retrieve!/3 inputs/1 outputs/1 execute/3 execute!/3 close/1) ++
            ~w(execute_async/3 await/2 cancel/1),
        TensorInfo => ~w(size/1),
        # the functions of no arguments have no wrong types to be given
        Stats =>
          ~w(dirty_utilization/1 with_leak_check/1 leaked/2 alive_diff/2 live_report/1) ++
            ~w(native/0 live/0 live_by_site/0 memory/0 sweep/0),
        Monitor => ~w(start_link/1 child_spec/1 sample/1),
        HexagonTpu.Tensor => ~w(to_input/3 from_output/3),
        HexagonTpu.Error => [],
        HexagonTpu.Telemetry => ~w(metrics/0),
        HexagonTpu.QnnLog => ~w(flush/1)
      }

      for {module, functions} <- tested, Code.ensure_loaded?(module) do
        {:docs_v1, _, _, _, _, _, docs} = Code.fetch_docs(module)

        documented =
          for {{:function, name, arity}, _, _, doc, _} <- docs,
              doc != :hidden,
              do: "#{name}/#{arity}"

        assert Enum.sort(documented) == Enum.sort(functions), inspect(module)
      end
    end
  end

  describe "numeric options at the extremes of their types (issue 32, item 7)" do
    # Every integer option that reaches the NIF or a receive, fed 0, -1, 2^32, 2^64, a float,
    # an atom, a string and nil through the public function: the answer is a result
    # ({:ok, _}, :ok), an {:error, %HexagonTpu.Error{}}, or an ArgumentError naming the
    # function; never an ErlangError from a decoder or from receive.
    @extremes [0, -1, 4_294_967_296, 18_446_744_073_709_551_616, 1.5, :many, "10", nil]

    test "answer only as documented", %{path: path, runtime: runtime, graph: graph} do
      context = Context.from_file!(runtime, path)
      input = [f32([1, 2, 3, 4]), f32([1, 1, 1, 1])]
      scores = {f32([0.1, 0.9, 0.3]), {3}}
      head = {f32([10, 10, 4, 4, 0.9]), {1, 5, 1}}
      frame = :binary.copy(<<128>>, 4 * 4 * 3)

      image = %TensorInfo{
        hd(Graph.inputs(graph))
        | shape: {1, 2, 2, 3},
          type: {:u, 8},
          byte_size: 12
      }

      cases = [
        {"load_model :max_queued", &HexagonTpu.load_model(path, max_queued: &1)},
        {"load_model :profile_every", &HexagonTpu.load_model(path, profile_every: &1)},
        {"load_model :async_queue_depth", &HexagonTpu.load_model(path, async_queue_depth: &1)},
        {"Runtime.create :performance_idle", &Runtime.create(performance_idle: &1)},
        {"Context.from_file :async_queue_depth",
         &Context.from_file(runtime, path, async_queue_depth: &1)},
        {"Context.from_file :max_bytes", &Context.from_file(runtime, path, max_bytes: &1)},
        {"inspect_model :max_bytes", &HexagonTpu.inspect_model(path, max_bytes: &1)},
        {"Graph.retrieve :max_queued", &Graph.retrieve(context, "add", max_queued: &1)},
        {"Graph.retrieve :profile_every", &Graph.retrieve(context, "add", profile_every: &1)},
        {"Graph.execute :timeout", &Graph.execute(graph, input, timeout: &1)},
        {"HexagonTpu.predict :timeout", &HexagonTpu.predict(graph, input, timeout: &1)},
        {"Graph.await timeout",
         fn v ->
           {:ok, pending} = Graph.execute_async(graph, input)

           try do
             Graph.await(pending, v)
           after
             if v in [0, nil] or not is_integer(v) or v < 0 or v > 4_294_967_295,
               do: Graph.cancel(pending)
           end
         end},
        {"QnnLog.flush", &HexagonTpu.QnnLog.flush/1},
        {"Trace.start :capacity", &HexagonTpu.Trace.start(capacity: &1)},
        {"Postprocess.top_k k", &HexagonTpu.Postprocess.top_k(scores, &1)},
        {"Postprocess.yolov8 :max_detections",
         &HexagonTpu.Postprocess.yolov8(head, max_detections: &1)},
        {"Preprocess.image :width",
         &HexagonTpu.Preprocess.image(frame, image, width: &1, height: 4)},
        {"Preprocess.image :stride",
         &HexagonTpu.Preprocess.image(frame, image, width: 4, height: 4, stride: &1)},
        {"Preprocess.image :crop",
         &HexagonTpu.Preprocess.image(frame, image, width: 4, height: 4, crop: {0, 0, &1, 2})}
      ]

      for {label, call} <- cases, value <- @extremes do
        answer =
          try do
            call.(value)
          rescue
            e in ArgumentError ->
              assert e.message =~ ~r/^HexagonTpu\.[\w.]+[!?]?\/\d: /,
                     "#{label} #{inspect(value)}: #{e.message}"

              :raised
          end

        documented? =
          match?({:ok, _}, answer) or match?({:ok, _, _}, answer) or answer in [:ok, :raised] or
            match?({:error, %Error{}}, answer)

        assert documented?, "#{label} #{inspect(value)} answered #{inspect(answer)}"
      end

      HexagonTpu.Trace.stop()
    end
  end

  describe "a handle whose reference is not one of ours (issue 15, item 3)" do
    # A struct built by hand, or with another struct's reference: the NIF's decoder says which
    # handle it expected, where rustler alone raises a bare "argument error".
    test "raises an ArgumentError naming the handle it expected",
         %{path: path, runtime: runtime, graph: graph} do
      context = graph.context
      foreign = make_ref()

      calls = [
        {"HexagonTpu.Graph", fn -> Graph.execute(%{graph | ref: foreign}, []) end},
        {"HexagonTpu.Graph", fn -> Graph.close(%{graph | ref: context.ref}) end},
        {"HexagonTpu.Context", fn -> Graph.retrieve(%{context | ref: graph.ref}, "add") end},
        {"HexagonTpu.Context", fn -> Context.closed?(%{context | ref: foreign}) end},
        {"HexagonTpu.Context", fn -> Context.close(%{context | ref: runtime.ref}) end},
        {"HexagonTpu.Runtime", fn -> Context.from_file(%{runtime | ref: foreign}, path) end},
        {"HexagonTpu.Runtime", fn -> Runtime.info(%{runtime | ref: context.ref}) end},
        {"HexagonTpu.Runtime", fn -> Runtime.close(%{runtime | ref: foreign}) end}
      ]

      for {kind, call} <- calls do
        error = assert_raise ArgumentError, call
        assert error.message =~ "is not a #{kind} handle", error.message
        assert error.message =~ "never by hand", error.message
      end

      # The real handles were not touched.
      refute Context.closed?(context)

      assert {:ok, [_]} =
               Graph.execute(graph, [f32([0.1, 0.2, 0.3, 0.4]), {{:s, 32}, <<0::128>>}])
    end
  end

  describe "wrong values return {:error, %HexagonTpu.Error{}}" do
    test "empty paths are refused by name, and nothing is opened", %{runtime: runtime} do
      before = created()

      Runtime.create(lib_path: "", system_lib_path: Support.sim_lib())
      |> assert_error(:invalid_argument, ["the :lib_path option is empty"])

      Runtime.create(lib_path: Support.sim_lib(), system_lib_path: "")
      |> assert_error(:invalid_argument, ["the :system_lib_path option is empty"])

      Runtime.htp(lib_path: "") |> assert_error(:invalid_argument, [":lib_path option is empty"])

      HexagonTpu.load_model("/x.bin", lib_path: "", system_lib_path: Support.sim_lib())
      |> assert_error(:invalid_argument, [":lib_path option is empty"])

      Context.from_file(runtime, "") |> assert_error(:invalid_argument, ["`path` is empty"])
      Context.from_file(runtime, ~c"") |> assert_error(:invalid_argument, ["`path` is empty"])
      HexagonTpu.load_model("", Support.runtime_opts()) |> assert_error(:invalid_argument, [])
      refute HexagonTpu.available?(lib_path: "")
      assert {:error, %Error{reason: :invalid_argument}} = HexagonTpu.availability(lib_path: "")
      assert_raise Error, ~r/invalid_argument/, fn -> Runtime.create!(lib_path: "") end
      assert created() == before
    end

    test "an environment variable that is set but empty is refused by name" do
      previous = System.get_env("HEXAGON_TPU_BACKEND_LIB")
      System.put_env("HEXAGON_TPU_BACKEND_LIB", "")

      try do
        Runtime.create(system_lib_path: Support.sim_lib())
        |> assert_error(:invalid_argument, ["HEXAGON_TPU_BACKEND_LIB is empty"])
      after
        if previous,
          do: System.put_env("HEXAGON_TPU_BACKEND_LIB", previous),
          else: System.delete_env("HEXAGON_TPU_BACKEND_LIB")
      end
    end

    test "a path with a NUL byte", %{runtime: runtime, path: path} do
      Context.from_file(runtime, path <> <<0>> <> "x")
      |> assert_error(:invalid_argument, ["`path` contains a NUL byte", "at byte"])

      Runtime.create(lib_path: "lib\0QnnHtp.so")
      |> assert_error(:invalid_argument, [":lib_path option contains a NUL byte"])
    end

    test "a charlist path is a path", %{runtime: runtime, path: path} do
      assert {:ok, context} = Context.from_file(runtime, String.to_charlist(path))
      assert context.source == path
      Context.close(context)
    end
  end

  describe "findings of issue 8, item 5" do
    test "a graph: that is not a string raises before any context is loaded",
         %{path: path, runtime: runtime} do
      Support.quiesce()
      alive = Map.take(Stats.native(), @alive)

      for graph <- [123, :add, ~c"add", {"add"}, <<255>>] do
        assert_type_error(fn -> HexagonTpu.load_model(path, runtime: runtime, graph: graph) end, [
          "the :graph option",
          "string"
        ])

        # not the FunctionClauseError it used to be, and without the shared runtime too
        assert_type_error(fn -> HexagonTpu.load_model(path, graph: graph) end, [":graph"])
      end

      Support.quiesce()
      assert Map.take(Stats.native(), @alive) == alive
    end

    test "a runtime: that is not a runtime raises an ArgumentError naming it", %{path: path} do
      for runtime <- [:cpu, "libQnnHtp.so", %{ref: make_ref()}, %Runtime{}] do
        assert_type_error(fn -> HexagonTpu.load_model(path, runtime: runtime) end, [
          "the :runtime option",
          "HexagonTpu.Runtime"
        ])
      end
    end

    @tag :tmp_dir
    test "non-UTF-8 file names and library paths are opened as the bytes they are",
         %{runtime: runtime, path: path, tmp_dir: dir} do
      model = Path.join(dir, <<"model-", 0xFF, 0xFE, ".bin">>)
      File.cp!(path, model)
      assert {:ok, context} = Context.from_file(runtime, model)
      assert context.source == model
      assert Context.graphs(context) == ["add"]
      Context.close(context)

      assert {:ok, graph} = HexagonTpu.load_model(model, runtime: runtime)
      Context.close(graph.context)

      lib = Path.join(dir, <<"libqnn_sim-", 0xE9, ".so">>)
      File.cp!(Support.sim_lib(), lib)
      assert {:ok, other} = Runtime.create(lib_path: lib, system_lib_path: lib)
      assert other.backend_lib == lib
      Runtime.close(other)

      # missing ones are the ordinary errors, not a bare ArgumentError from decoding
      Context.from_file(runtime, Path.join(dir, <<"missing-", 0xFF, ".bin">>))
      |> assert_error(:io, ["missing-"])

      Runtime.create(lib_path: Path.join(dir, <<"libmissing-", 0xFF, ".so">>))
      |> assert_error(:library_not_found, ["libmissing-"])
    end

    test "lib_path: \"\" says the path is empty instead of opening the VM executable" do
      message =
        Runtime.create(lib_path: "", system_lib_path: Support.sim_lib())
        |> assert_error(:invalid_argument, ["empty"])

      refute message =~ "beam"
      refute message =~ "QnnInterface_getProviders"
    end

    test "a megabyte-long graph name is quoted in at most 200 bytes",
         %{context: context, path: path, runtime: runtime} do
      long = String.duplicate("g", 1_000_000)

      message =
        Graph.retrieve(context, long)
        |> assert_error(:graph_not_found, [String.duplicate("g", 200) <> "…", ~s("add")])

      refute message =~ String.duplicate("g", 201)

      Support.quiesce()
      alive = Map.take(Stats.native(), @alive)

      HexagonTpu.load_model(path, runtime: runtime, graph: long)
      |> assert_error(:graph_not_found, ["…"])

      # the context loaded to look for it is closed again
      Support.quiesce()
      assert Map.take(Stats.native(), @alive) == alive

      assert_type_error(fn -> Graph.retrieve(context, :binary.copy(<<255>>, 1_000_000)) end, [
        "…",
        "1000000 bytes"
      ])
    end

    test "megabyte-long paths are quoted in at most 200 bytes", %{runtime: runtime} do
      long = "/nonexistent/" <> String.duplicate("p", 1_000_000)
      message = Context.from_file(runtime, long) |> assert_error(:io, ["/nonexistent/ppp", "…"])
      refute message =~ String.duplicate("p", 201)

      message = Runtime.create(lib_path: long) |> assert_error(:library_not_found, ["…"])
      refute message =~ String.duplicate("p", 201)

      message =
        Runtime.create(lib_path: Support.sim_lib(), system_lib_path: long)
        |> assert_error(:library_not_found, ["…"])

      refute message =~ String.duplicate("p", 201)

      message =
        Runtime.create(lib_path: long <> <<0>>)
        |> assert_error(:invalid_argument, ["NUL", "…"])

      refute message =~ String.duplicate("p", 201)

      error =
        assert_type_error(
          fn -> Runtime.create(lib_path: String.to_atom(long |> binary_part(0, 255))) end,
          [":lib_path"]
        )

      assert error.message =~ "…"
    end

    test "a map holding both \"a\" and :a is refused, naming the input", %{graph: graph} do
      a = f32([1, 2, 3, 4])
      b = <<0::128>>

      HexagonTpu.predict(graph, %{"a" => a, :a => a, "b" => b})
      |> assert_error(:invalid_input, [~s("a"), "given twice"])

      HexagonTpu.predict(graph, %{"b" => b, :b => b, :a => a})
      |> assert_error(:invalid_input, [~s("b"), "given twice"])

      # once each, in either spelling, is fine
      assert {:ok, [_]} = HexagonTpu.predict(graph, %{"a" => a, :b => b}, output: :binary)
    end

    test "a map key that is not a string or atom is an :invalid_input", %{graph: graph} do
      b = <<0::128>>

      for key <- [{:a, 1}, 1, [?a], %{}, make_ref(), nil] do
        HexagonTpu.predict(graph, %{key => f32([1, 2, 3, 4]), "b" => b})
        |> assert_error(:invalid_input, ["input names must be strings or atoms", "given the key"])
      end

      HexagonTpu.predict(graph, %{{:a, String.duplicate("x", 10_000)} => b, "b" => b})
      |> assert_error(:invalid_input, ["…"])
    end
  end

  describe "inputs are values: {:error, :invalid_input}, with quotes capped" do
    test "unknown names are quoted and listed five at most", %{graph: graph} do
      inputs =
        for i <- 1..9,
            into: %{"a" => f32([1, 2, 3, 4]), "b" => <<0::128>>},
            do: {"unknown#{i}", <<>>}

      message =
        HexagonTpu.predict(graph, inputs)
        |> assert_error(:invalid_input, [~s("unknown1"), "and 4 more", "`a`, `b`"])

      refute message =~ "unknown9"

      HexagonTpu.predict(graph, %{String.duplicate("n", 1_000_000) => <<>>})
      |> assert_error(:invalid_input, ["…", "1000000 bytes"])
    end

    test "a huge term that is not a tensor is quoted in at most 200 bytes", %{graph: graph} do
      HexagonTpu.predict(graph, [List.duplicate(?a, 1_000_000), <<0::128>>])
      |> assert_error(:invalid_input, ["input `a`", "…"])

      HexagonTpu.predict(graph, {String.duplicate("t", 1_000_000)})
      |> assert_error(:invalid_input, ["list", "map", "…"])

      HexagonTpu.predict(graph, [f32([1, 2, 3, 4]) | <<0::128>>])
      |> assert_error(:invalid_input, ["proper list"])
    end

    test "the VM survives all of the above and the counters are at baseline", %{graph: graph} do
      Support.quiesce()
      before = Stats.native()

      for inputs <- [:x, [1], %{1 => 2}, %{"a" => 1, :a => 2}, [<<>>, <<>>], [:a | :b]],
          do: assert({:error, %Error{reason: :invalid_input}} = HexagonTpu.predict(graph, inputs))

      Support.quiesce()
      after_ = Stats.native()
      assert Map.take(after_, @alive ++ @created) == Map.take(before, @alive ++ @created)
      assert after_.executes == before.executes
    end
  end

  describe "quote_input/1" do
    test "short input is inspected whole" do
      assert Args.quote_input("abc") == ~s("abc")
      assert Args.quote_input(<<255, 0>>) == "<<255, 0>>"
      assert Args.quote_input(:x) == ":x"
    end

    test "long input is cut at 200 bytes with a marker and its size" do
      quoted = Args.quote_input(String.duplicate("a", 1000))
      assert quoted == inspect(String.duplicate("a", 200)) <> "… (1000 bytes)"

      # UTF-8 is cut at a character boundary: 66 three-byte characters are 198 bytes
      quoted = Args.quote_input(String.duplicate("€", 100))
      assert quoted == inspect(String.duplicate("€", 66)) <> "… (300 bytes)"

      # not UTF-8 (or not printable): shown as bytes, 50 of them
      quoted = Args.quote_input(:binary.copy(<<255>>, 300))
      assert quoted =~ ~r/^<<255, [0-9, ]*>>… \(300 bytes\)$/
      assert length(String.split(quoted, "255")) - 1 == 50
      assert Args.quote_input(:binary.copy(<<1>>, 50)) == inspect(:binary.copy(<<1>>, 50))
      assert Args.quote_input(:binary.copy(<<1>>, 51)) =~ "… (51 bytes)"
    end

    test "any other term is inspected and cut at 200 bytes" do
      quoted = Args.quote_input(Enum.to_list(1..100_000))
      assert byte_size(quoted) <= 200 + byte_size("…")

      quoted = Args.quote_input({String.duplicate("é", 1000)})
      assert byte_size(quoted) <= 200 + byte_size("…")
      assert String.valid?(quoted)
      assert String.ends_with?(quoted, "…")
    end
  end

  describe "options checked by their schema" do
    @schema Args.schema!(n: [type: :pos_integer, default: 1, type_doc: "a positive integer"])
    @fun "HexagonTpu.ArgumentsTest.cached/1"

    test "a process reuses its last checked options only when they are the same" do
      Process.delete({Args, @fun})
      assert Args.cached_options!([n: 2], @schema, @fun) == [n: 2]
      assert Args.cached_options!([n: 2], @schema, @fun) == [n: 2]
      assert Args.cached_options!([n: 3], @schema, @fun) == [n: 3]
      assert Args.cached_options!([], @schema, @fun) == [n: 1]

      # an error is never kept: the same wrong options raise every time
      for _ <- 1..2 do
        assert_raise ArgumentError,
                     "#{@fun}: the :n option must be a positive integer, given: 0",
                     fn ->
                       Args.cached_options!([n: 0], @schema, @fun)
                     end
      end

      # another schema checked under the same name is checked again
      other = Args.schema!(n: [type: :pos_integer, default: 7, type_doc: "a positive integer"])
      assert Args.cached_options!([], other, @fun) == [n: 7]
      assert Args.cached_options!([], @schema, @fun) == [n: 1]
    end

    test "an option without a type_doc is refused when the schema is made" do
      assert_raise ArgumentError, "the :n option has no :type_doc", fn ->
        Args.schema!(n: [type: :pos_integer])
      end
    end
  end
end
