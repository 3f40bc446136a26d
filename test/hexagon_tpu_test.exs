defmodule HexagonTpuTest do
  use ExUnit.Case, async: true

  import HexagonTpu.Test.Numerics

  alias HexagonTpu.{Context, Graph, Runtime, TensorInfo}
  alias HexagonTpu.Test.{Models, Support}

  doctest HexagonTpu.TensorInfo

  setup_all do
    x = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    b = Models.t(:float_32, [1, 4])
    out = Models.t(:float_32, [1, 4])
    %{path: Models.build!(Models.add(x, b, out))}
  end

  test "available?/1 and availability/1" do
    assert HexagonTpu.available?(Support.runtime_opts())
    assert :ok = HexagonTpu.availability(Support.runtime_opts())
    refute HexagonTpu.available?(lib_path: "/nonexistent/libQnnHtp.so")

    assert {:error, %HexagonTpu.Error{reason: :library_not_found, message: message}} =
             HexagonTpu.availability(lib_path: "/nonexistent/libQnnHtp.so")

    assert message =~ "/nonexistent/libQnnHtp.so"
  end

  test "load_model/2 and predict/3, inputs as a list or a map", %{path: path} do
    {:ok, model} = HexagonTpu.load_model(path, Support.runtime_opts())
    assert %Graph{name: "add"} = model
    assert Enum.map(Graph.inputs(model), & &1.name) == ["a", "b"]

    xs = f32([0.5, -1.0, 2.0, 0.0])
    bs = f32([1.0, 1.0, 1.0, 1.0])
    {:ok, [by_list]} = HexagonTpu.predict(model, [xs, bs], output: :binary)
    {:ok, [by_name]} = HexagonTpu.predict(model, %{"b" => bs, "a" => xs}, output: :binary)
    {:ok, [by_atom]} = HexagonTpu.predict(model, %{a: xs, b: bs}, output: :binary)

    assert by_list == by_name and by_name == by_atom
    assert_close(from_f32(by_list), [1.5, 0.0, 3.0, 1.0], 0.05)
    assert [_] = HexagonTpu.predict!(model, [xs, bs])
  end

  test "load_model/2 reuses one runtime per set of library options", %{path: path} do
    {:ok, first} = HexagonTpu.load_model(path, Support.runtime_opts())
    {:ok, second} = HexagonTpu.load_model(path, Support.runtime_opts())
    assert first.context.runtime.ref == second.context.runtime.ref
    refute first.context.ref == second.context.ref

    # :warning is Logger's name for :warn: the same options, the same runtime
    {:ok, warn} = HexagonTpu.load_model(path, Support.runtime_opts() ++ [log_level: :warn])
    {:ok, warning} = HexagonTpu.load_model(path, Support.runtime_opts() ++ [log_level: :warning])
    assert warn.context.runtime.ref == warning.context.runtime.ref

    runtime = Support.runtime!()
    {:ok, third} = HexagonTpu.load_model(path, runtime: runtime)
    assert third.context.runtime == runtime
  end

  test "the layered API", %{path: path} do
    runtime = Support.runtime!()
    assert {:ok, info} = Runtime.info(runtime)
    assert info.backend_lib == Support.sim_lib()
    # qnn_sim reports the HTP's id (QNN_BACKEND_ID_HTP), as the device's backend does.
    assert info.backend_id == 6

    assert {:ok, %Version{major: 2}} = Version.parse(info.core_api)
    assert {:ok, %Version{}} = Version.parse(info.backend_api)
    assert {:ok, %Version{}} = Version.parse(info.system_api)

    context = Context.from_binary!(runtime, File.read!(path))
    assert Context.graphs(context) == ["add"]
    graph = Graph.retrieve!(context, "add")
    assert [%TensorInfo{name: "a"}, %TensorInfo{name: "b", type: {:f, 32}}] = Graph.inputs(graph)
    assert [%TensorInfo{name: "sum", shape: {1, 4}, byte_size: 16}] = Graph.outputs(graph)

    assert {:ok, [_]} = Graph.execute(graph, [f32([0, 0, 0, 0]), f32([1, 2, 3, 4])])
    assert :ok = Graph.close(graph)
    assert :ok = Context.close(context)
    assert :ok = Runtime.close(runtime)
  end

  test "inspect never calls the NIF and says what the thing is", %{path: path} do
    {:ok, model} = HexagonTpu.load_model(path, runtime: Support.runtime!())
    Context.close(model.context)

    assert inspect(model) ==
             ~s|#HexagonTpu.Graph<"add" (a u8[1][4], b f32[1][4]) -> (sum f32[1][4])>|

    assert inspect(model.context) =~ ~s(graphs: ["add"])
    assert inspect(model.context.runtime) =~ "libqnn_sim.so"
    assert inspect(hd(Graph.inputs(model))) =~ "zero_point=128"
  end

  test "Runtime options are validated" do
    assert_raise ArgumentError, fn -> Runtime.create(bogus: 1) end
    assert_raise ArgumentError, fn -> Runtime.create(log_level: :loud) end
    assert {:ok, runtime} = Runtime.create(Support.runtime_opts() ++ [log_level: :warn])
    Runtime.close(runtime)
  end
end
