defmodule HexagonTpu.ErrorsTest do
  # Every kind of bad input gets an {:error, %HexagonTpu.Error{}} with a stable reason and a
  # message naming the tensor or handle, what was expected and what was given, and the VM
  # survives. That the counters stay consistent across all of this is checked in
  # stats_test.exs (counters are global, so that test runs alone).
  use ExUnit.Case, async: true

  import HexagonTpu.Test.Numerics, only: [f32: 1]

  alias HexagonTpu.{Context, Error, Graph, Runtime}
  alias HexagonTpu.Test.{Models, Support}

  setup context do
    Map.merge(context, Support.add_graph!())
  end

  defp assert_error(result, reason, fragments) do
    assert {:error, %Error{reason: ^reason, message: message} = error} = result
    for fragment <- List.wrap(fragments), do: assert(message =~ fragment)
    # Exception.message/1 works on it
    assert Exception.message(error) =~ Atom.to_string(reason)
    error
  end

  describe "inputs" do
    test "wrong number of inputs", %{graph: graph} do
      Graph.execute(graph, [f32([1, 2, 3, 4])])
      |> assert_error(:invalid_input, ["`add`", "2 input", "`a`", "`b`", "given 1"])
    end

    test "unknown input name", %{graph: graph} do
      Graph.execute(graph, %{"a" => f32([1, 2, 3, 4]), "b" => <<0::128>>, "c" => <<>>})
      |> assert_error(:invalid_input, [~s("c"), "`a`, `b`"])
    end

    test "missing input name", %{graph: graph} do
      Graph.execute(graph, %{a: f32([1, 2, 3, 4])})
      |> assert_error(:invalid_input, ["missing", "`b`"])
    end

    test "wrong byte size", %{graph: graph} do
      Graph.execute(graph, [f32([1, 2, 3]), <<0::128>>])
      |> assert_error(:invalid_input, ["`a`", "expected 16 bytes", "f32", "given 12 bytes"])

      Graph.execute(graph, [<<1, 2, 3>>, <<0::128>>], quantize: :none)
      |> assert_error(:invalid_input, [
        "`a`",
        "expected 4 bytes",
        "ufixed_point_8",
        "given 3 bytes"
      ])

      Graph.execute(graph, [f32([1, 2, 3, 4]), <<0::64>>])
      |> assert_error(:invalid_input, ["`b`", "expected 16 bytes", "int_32", "given 8 bytes"])
    end

    test "wrong dtype", %{graph: graph} do
      Graph.execute(graph, [{{:s, 16}, <<0::64>>}, <<0::128>>])
      |> assert_error(:invalid_input, ["`a`", "{:u, 8}", "{:f, 32}", "given {:s, 16}"])

      # int32 without quantization has no f32 conversion
      Graph.execute(graph, [f32([1, 2, 3, 4]), {{:f, 32}, f32([1, 2, 3, 4])}])
      |> assert_error(:invalid_input, ["`b`", "{:s, 32}", "given {:f, 32}"])

      # quantize: :none accepts only the model's type
      Graph.execute(graph, [{{:f, 32}, f32([1, 2, 3, 4])}, <<0::128>>], quantize: :none)
      |> assert_error(:invalid_input, ["`a`", "given {:f, 32}"])
    end

    test "a term that is not a tensor", %{graph: graph} do
      Graph.execute(graph, [:not_a_tensor, <<0::128>>])
      |> assert_error(:invalid_input, ["`a`", "expected", ":not_a_tensor"])

      Graph.execute(graph, [[1, 2, 3, 4], <<0::128>>])
      |> assert_error(:invalid_input, ["`a`", "[1, 2, 3, 4]"])

      Graph.execute(graph, {f32([1, 2, 3, 4]), <<0::128>>})
      |> assert_error(:invalid_input, ["list", "map"])
    end

    test "bad options raise ArgumentError", %{graph: graph} do
      assert_raise ArgumentError, fn -> Graph.execute(graph, [], quantize: :maybe) end
      assert_raise ArgumentError, fn -> Graph.execute(graph, [], bogus: 1) end
    end
  end

  describe "closed handles" do
    test "a closed runtime", %{runtime: runtime, path: path} do
      assert :ok = Runtime.close(runtime)
      assert Runtime.closed?(runtime)
      Runtime.close(runtime) |> assert_error(:closed, "runtime")
      Runtime.info(runtime) |> assert_error(:closed, "runtime")
      Context.from_file(runtime, path) |> assert_error(:closed, "runtime")
      # inspect never calls the NIF: still fine
      assert inspect(runtime) =~ "HexagonTpu.Runtime"
    end

    test "a closed context", %{context: ctx, graph: graph} do
      assert :ok = Context.close(ctx)
      assert Context.closed?(ctx)
      Context.close(ctx) |> assert_error(:closed, "context")
      Graph.retrieve(ctx, "add") |> assert_error(:closed, "context")
      Graph.execute(graph, [f32([1, 2, 3, 4]), <<0::128>>]) |> assert_error(:closed, [])
      assert Context.graphs(ctx) == ["add"]
      assert inspect(ctx) =~ "add"
    end

    test "a closed graph", %{graph: graph} do
      assert :ok = Graph.close(graph)
      Graph.execute(graph, [f32([1, 2, 3, 4]), <<0::128>>]) |> assert_error(:closed, "graph")
      Graph.close(graph) |> assert_error(:closed, "graph")
      assert inspect(graph) =~ "add"
    end
  end

  describe "libraries" do
    test "a missing library names the path" do
      Runtime.create(lib_path: "/nonexistent/libQnnHtp.so", system_lib_path: Support.sim_lib())
      |> assert_error(:library_not_found, "/nonexistent/libQnnHtp.so")

      Runtime.create(lib_path: Support.sim_lib(), system_lib_path: "/nonexistent/libQnnSystem.so")
      |> assert_error(:library_not_found, "/nonexistent/libQnnSystem.so")
    end

    test "the device defaults, absent on a host" do
      if File.exists?("/usr/lib/libQnnHtp.so") do
        :ok
      else
        Runtime.htp() |> assert_error(:library_not_found, "/usr/lib/libQnnHtp.so")
        refute HexagonTpu.available?(lib_path: "/usr/lib/libQnnHtp.so")
      end
    end

    test "a library that is not a QNN backend" do
      # the NIF itself, whichever loader put it where (offline: libhexagon_tpu_nif.so; a forced
      # build: hexagon_tpu_nif.so): a valid shared library without QnnInterface_getProviders
      not_qnn = HexagonTpu.Native.nif_path()

      Runtime.create(lib_path: not_qnn, system_lib_path: Support.sim_lib())
      |> assert_error(:missing_symbol, "QnnInterface_getProviders")
    end

    test "a file that is not a library at all", %{path: model_path} do
      Runtime.create(lib_path: model_path, system_lib_path: Support.sim_lib())
      |> assert_error(:library_not_found, model_path)
    end
  end

  describe "context binaries" do
    test "a missing file", %{runtime: runtime} do
      Context.from_file(runtime, "/nonexistent/model.bin")
      |> assert_error(:io, "/nonexistent/model.bin")

      HexagonTpu.load_model("/nonexistent/model.bin", Support.runtime_opts())
      |> assert_error(:io, "/nonexistent/model.bin")
    end

    @tag :tmp_dir
    test "an empty binary", %{runtime: runtime, tmp_dir: dir} do
      Context.from_binary(runtime, <<>>) |> assert_error(:invalid_model, "empty")
      empty = Path.join(dir, "empty.bin")
      File.write!(empty, "")
      Context.from_file(runtime, empty) |> assert_error(:invalid_model, "empty")
    end

    test "a truncated binary", %{runtime: runtime, path: path} do
      bytes = File.read!(path)
      truncated = binary_part(bytes, 0, div(byte_size(bytes), 2))

      # QnnSystem rejects it: QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY
      error = Context.from_binary(runtime, truncated) |> assert_error(:qnn_error, "MALFORMED")
      assert error.qnn_code == 30010
    end

    test "a corrupt binary", %{runtime: runtime, path: path} do
      bytes = File.read!(path)
      middle = div(byte_size(bytes), 2)
      <<head::binary-size(middle), _::binary-size(16), tail::binary>> = bytes
      corrupt = head <> :binary.copy(<<0xA5>>, 16) <> tail
      error = Context.from_binary(runtime, corrupt) |> assert_error(:qnn_error, "MALFORMED")
      assert error.qnn_code == 30010

      error = Context.from_binary(runtime, :rand.bytes(4096)) |> assert_error(:qnn_error, [])
      assert is_integer(error.qnn_code)
    end

    test "adversarial metadata is rejected, not trusted", %{runtime: runtime} do
      in_t = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})

      for kind <- ["zero_dim", "overflow_dims", "null_tensor_name", "scale_nan", "unknown_dtype"] do
        path = Models.build!(Models.identity(in_t, in_t, adversarial: [kind]))
        Context.from_file(runtime, path) |> assert_error(:invalid_model, [])
      end
    end

    test "a graph name that does not exist", %{context: ctx} do
      Graph.retrieve(ctx, "nope") |> assert_error(:graph_not_found, ["nope", "add"])
    end

    test "load_model with an unknown or ambiguous graph", %{runtime: runtime} do
      t = Models.t(:float_32, [2])
      path = Models.build!(Models.two_graphs(t))

      HexagonTpu.load_model(path, runtime: runtime)
      |> assert_error(:ambiguous_graph, ["`first`", "`second`", "graph:"])

      HexagonTpu.load_model(path, runtime: runtime, graph: "third")
      |> assert_error(:graph_not_found, ["third", "first"])

      assert {:ok, %Graph{name: "second"}} =
               HexagonTpu.load_model(path, runtime: runtime, graph: "second")
    end
  end

  describe "injected QNN failures" do
    test "an execute failure carries QNN's code" do
      t = Models.t(:float_32, [2])
      graph = Support.load!(Models.identity(t, t, fail_execute: {1003, :once}))

      error = Graph.execute(graph, [f32([1, 2])]) |> assert_error(:qnn_error, [])
      assert error.qnn_code == 1003
      # once: the next call works
      assert {:ok, [_]} = Graph.execute(graph, [f32([1, 2])])
    end

    test "a context creation failure carries QNN's code", %{runtime: runtime} do
      t = Models.t(:float_32, [2])
      path = Models.build!(Models.identity(t, t, fail_context_create: {5002, :always}))

      error = Context.from_file(runtime, path) |> assert_error(:qnn_error, [])
      assert error.qnn_code == 5002
    end
  end

  test "bang variants raise HexagonTpu.Error", %{graph: graph} do
    assert_raise Error, ~r/invalid_input/, fn -> Graph.execute!(graph, []) end

    assert_raise Error, ~r/\(io\)/, fn ->
      HexagonTpu.load_model!("/nonexistent.bin", Support.runtime_opts())
    end

    assert_raise Error, fn -> Runtime.create!(lib_path: "/nonexistent.so") end
  end
end
