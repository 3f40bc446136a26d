defmodule HexagonTpu.GraphNamesTest do
  # Graph names a person can type: ORT names every graph it compiles
  # `QNNExecutionProvider_QNNExecutionProvider_<hash>_1_0`, so `mix hexagon_tpu.compile` writes
  # the chosen names beside the binary (MODEL.bin.names) and Context/Graph/load_model honour
  # them. On qnn_sim, whose graphs are named "first" and "second" here in the binary.
  use ExUnit.Case, async: false

  alias HexagonTpu.{Context, Error, Graph, Stats, TensorInfo}
  alias HexagonTpu.Test.{Models, Numerics, Support}

  @moduletag :tmp_dir

  setup %{tmp_dir: tmp} do
    bin = Path.join(tmp, "two.bin")
    File.cp!(Models.build!(Models.two_graphs(Models.t(:float_32, [2]))), bin)
    %{bin: bin, runtime: Support.runtime!()}
  end

  test "a .names file beside the binary names its graphs; either name finds a graph",
       %{bin: bin, runtime: runtime} do
    File.write!(bin <> ".names", "# comment\n\ndetector   first\n")
    context = Context.from_file!(runtime, bin)

    assert Context.graphs(context) == ["detector", "second"]
    assert [%{name: "detector", qnn_name: "first"}, second] = context.graphs
    refute Map.has_key?(second, :qnn_name)

    for name <- ["detector", "first"] do
      graph = Graph.retrieve!(context, name)
      assert graph.name == "detector"
      assert {:ok, [out]} = Graph.execute(graph, [Numerics.f32([1.5, -2.0])], output: :binary)
      assert out == Numerics.f32([1.5, -2.0])
    end

    assert Graph.retrieve!(context, "second").name == "second"

    assert {:error, %Error{reason: :graph_not_found, message: message}} =
             Graph.retrieve(context, "nope")

    assert message ==
             ~s{graph "nope" does not exist; the context has "detector" (QNN graph "first"), "second"}

    # load_model/2 goes through Context.from_file/3: the name works there too
    {:ok, model} = HexagonTpu.load_model(bin, Support.runtime_opts() ++ [graph: "detector"])
    assert model.name == "detector"
  end

  test "tensor lines give the model's names to inputs and outputs; the binary's still work",
       %{bin: bin, runtime: runtime} do
    # what mix hexagon_tpu.compile writes: an output named QuantizeLinear_token_17_out0 in the
    # binary is the model's `y`; `%20` is an encoded space
    File.write!(bin <> ".names", """
    detector first
    # the model's names of their tensors
    detector input 0 the%20image
    first output 0 y.0
    second output 0 y
    """)

    context = Context.from_file!(runtime, bin)
    graph = Graph.retrieve!(context, "detector")
    assert [%TensorInfo{name: "the image", qnn_name: "x"}] = Graph.inputs(graph)
    assert [%TensorInfo{name: "y.0", qnn_name: "y"}] = Graph.outputs(graph)
    # a tensor line naming a tensor as the binary does changes nothing
    second = Graph.retrieve!(context, "second")
    assert [%TensorInfo{name: "x", qnn_name: nil}] = Graph.inputs(second)
    assert [%TensorInfo{name: "y", qnn_name: nil}] = Graph.outputs(second)

    data = Numerics.f32([1.5, -2.0])

    for inputs <- [%{"the image" => data}, %{"x" => data}, [data]] do
      assert {:ok, [^data]} = Graph.execute(graph, inputs, output: :binary)
    end

    assert {:error, %Error{reason: :invalid_input, message: message}} =
             Graph.execute(graph, %{"the image" => data, "x" => data})

    assert message =~ "input `the image` is given twice"

    assert {:error, %Error{message: message}} = Graph.execute(graph, %{"z" => data})
    assert message =~ "its inputs are `the image`"
  end

  test "graph_names: false ignores the file; a map gives names without one",
       %{bin: bin, runtime: runtime} do
    File.write!(bin <> ".names", "detector first\n")

    assert Context.graphs(Context.from_file!(runtime, bin, graph_names: false)) ==
             ~w(first second)

    context = Context.from_binary!(runtime, File.read!(bin), graph_names: %{"second" => "b"})
    assert Context.graphs(context) == ~w(first b)

    assert_raise ArgumentError, ~r/the :graph_names option/, fn ->
      Context.from_file(runtime, bin, graph_names: %{first: "x"})
    end
  end

  test "a names file that is wrong fails the load with :invalid_model and frees the context",
       %{bin: bin, runtime: runtime} do
    before = Stats.native().contexts_alive

    cases = [
      {"detector first extra\n", "line 1 is neither `name qnn_graph_name` nor"},
      {"a first\nb first\n", ~s(line 2 names graph "first" again)},
      {"a first\na second\n", ~s(line 2 gives the name "a" again)},
      {"a QNNExecutionProvider_x_1_0\n", ~s(names graph "QNNExecutionProvider_x_1_0", which)},
      {"second first\n", ~s(gives the name "second", which is another graph's name)},
      {"a first\na input 1 x\n", ~s(line 2 names input 1 of graph "a", which has 1)},
      {"a first\nb output 0 x\n", ~s(line 2 names tensors of graph "b", which the binary)},
      {"a first\na input 0 x\nfirst input 0 z\n",
       ~s(line 3 names input 0 of graph "first" again)},
      {"a input x y\n", "line 1 is not `graph input index name`"},
      {"a first\na input 0 bad%zz\n", "line 2 is not `graph input index name`"},
      {"a b c\n", "line 1 is neither `name qnn_graph_name` nor `graph input|output index name`"}
    ]

    for {text, why} <- cases do
      File.write!(bin <> ".names", text)

      assert {:error, %Error{reason: :invalid_model, message: message}} =
               Context.from_file(runtime, bin)

      assert message =~ bin <> ".names"
      assert message =~ why
    end

    Support.wait_until(fn -> Stats.native().contexts_alive == before end, sweep: true)
  end
end
