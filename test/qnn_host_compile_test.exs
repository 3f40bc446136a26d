defmodule HexagonTpu.QnnHostCompileTest do
  # `mix hexagon_tpu.compile` on float models as exporters write them (test/support/onnx_models.py:
  # weights as Constant nodes, opset 11, a dynamic input, metadata_props), each compiled with
  # the task and run on Qualcomm's HTP emulator, its outputs equal bit for bit to ONNX Runtime's
  # QNN EP running the same binary (through the EP-context model the task writes), and found
  # by the model's own names; and the error for nodes the HTP refuses, naming every one.
  use ExUnit.Case, async: false

  @moduletag :qnn_host
  @moduletag timeout: 600_000

  import ExUnit.CaptureIO

  alias HexagonTpu.{Compiler, Context, Graph, TensorInfo}
  alias HexagonTpu.Test.QnnHost

  # model => {task arguments, the model's outputs in its own order, with their shapes}
  @models %{
    "constant_weights" => {[], [{"sigmoid_0.tmp_0", {1, 8, 16, 16}}, {"feat.1", {1, 8, 1, 1}}]},
    "opset11" => {["--calibration-method", "entropy"], [{"y", {1, 4, 8, 8}}]},
    "dynamic_input" => {["--input-shape", "x=1x3x12x20"], [{"out", {1, 4, 12, 20}}]},
    "with_metadata" => {[], [{"probs", {1, 4, 8, 8}}]},
    # issue 33's shapes of real exports, each refused by the task before
    "shared_symbolic" => {["--input-shape", "x=1x3x12x20"], [{"probs", {1, 4}}]},
    "old_export" => {["--input-shape", "input.1=1x3x12x20"], [{"10", {1, 4, 12, 20}}]},
    "computed_clip" => {[], [{"y", {1, 4, 16, 20}}]},
    "constant_if" => {["--input-shape", "x=1x3x16x16"], [{"y", {1, 4, 16, 16}}]},
    "relu_input" => {[], [{"y", {1, 4}}]}
  }

  # Runs the task; returns {stdout, stderr}, or the one-line error for a failing one.
  defp task(args) do
    Mix.shell(Mix.Shell.Process)

    stderr =
      capture_io(:stderr, fn ->
        try do
          capture_io(fn -> Mix.Task.rerun("hexagon_tpu.compile", args) end)
          send(self(), :ok)
        catch
          :exit, {:shutdown, 1} -> send(self(), :failed)
        end
      end)

    shell = messages()
    infos = for {:mix_shell, :info, [line]} <- shell, do: line
    errors = for {:mix_shell, :error, [line]} <- shell, do: line
    status = if_received()
    Mix.shell(Mix.Shell.IO)
    %{status: status, stdout: Enum.join(infos, "\n"), stderr: stderr, errors: errors}
  end

  defp messages do
    receive do
      {:mix_shell, _, _} = message -> [message | messages()]
    after
      0 -> []
    end
  end

  defp if_received do
    receive do
      :ok -> :ok
      :failed -> :failed
    after
      0 -> :unknown
    end
  end

  setup_all do
    compiled =
      Map.new(@models, fn {name, {args, _outputs}} ->
        dir = QnnHost.model!(name)
        bin = Path.join(dir, "#{name}.bin")

        result =
          task(
            [Path.join(dir, "#{name}.onnx"), "-o", bin, "--save-ctx", "--force"] ++
              ["--calibration", Path.join(dir, "calibration")] ++ args
          )

        {name, %{dir: dir, bin: bin, result: result}}
      end)

    %{compiled: compiled}
  end

  for {name, {_args, outputs}} <- @models do
    describe "#{name}:" do
      setup %{compiled: compiled}, do: compiled[unquote(name)]

      test "the task compiles it; its outputs keep the model's names and shapes", ctx do
        assert ctx.result.status == :ok, Enum.join(ctx.result.errors, "\n")
        refute ctx.result.stderr =~ "\e["

        graph = QnnHost.graph!(ctx.bin)
        by_name = Map.new(Graph.outputs(graph), &{&1.name, &1})

        for {output, shape} <- unquote(Macro.escape(outputs)) do
          assert %TensorInfo{shape: ^shape, qnn_name: qnn} = by_name[output],
                 "#{output} in #{inspect(Map.keys(by_name))}"

          # the binary's own name (ORT's) is kept beside it, and the task prints both; ORT
          # keeps a Softmax's and a MatMul's output name (shared_symbolic's, relu_input's)
          assert ctx.result.stdout =~ "output #{output} "

          if unquote(name) in ["shared_symbolic", "relu_input"] do
            assert qnn == nil
          else
            assert qnn =~ ~r/^QuantizeLinear_token_\d+_out0$/
            assert ctx.result.stdout =~ "in the binary #{qnn}"
          end
        end

        assert map_size(by_name) == length(unquote(Macro.escape(outputs)))

        # Constant weights become initializers before ORT's pre-processing (which would fold
        # them too, but is skipped with a warning when it fails)
        if unquote(name) == "constant_weights",
          do: assert(ctx.result.stderr =~ "4 Constant node(s) moved into initializers")
      end

      test "equals ORT's QNN EP on the same binary bit for bit, output by output name", ctx do
        ctx_model = Path.join(Path.dirname(ctx.bin), "#{unquote(name)}_ctx.onnx")
        ort = QnnHost.reference!(ctx_model, Path.join(ctx.dir, "inputs"), :qnn)
        graph = QnnHost.graph!(ctx.bin)
        names = Enum.map(Graph.outputs(graph), & &1.name)
        [input] = Graph.inputs(graph)

        for {[sample], expected} <- Enum.zip(ort.inputs, ort.outputs) do
          # inputs by the model's name; ORT's outputs are in the model's order
          {:ok, ours} = Graph.execute(graph, %{input.name => sample.data}, output: :binary)

          for {{output, _shape}, want} <- Enum.zip(unquote(Macro.escape(outputs)), expected) do
            info = Enum.find(Graph.outputs(graph), &(&1.name == output))
            got = Enum.at(ours, Enum.find_index(names, &(&1 == output)))
            assert got == dequantized(want, info), "output #{output}"
          end
        end
      end
    end
  end

  # ORT's quantized output as the f32 binary execute returns ((q - zero_point) * scale).
  defp dequantized(%{type: {:f, 32}, data: data}, _info), do: data

  defp dequantized(%{type: {:u, bits}, data: data}, %TensorInfo{quantization: q}) do
    for v <- QnnHost.uints(data, bits),
        into: <<>>,
        do: <<(v - q.zero_point) * q.scale::float-32-little>>
  end

  describe "models as exporters write them" do
    test "each rewrite is said: shapes by position, an overridden dimension, initializers, names, Clip",
         %{compiled: compiled} do
      said = fn name -> compiled[name].result.stderr end

      assert said.("shared_symbolic") =~
               "input 'x' [-1, 3, '?', '?'] fixed to [1, 3, 12, 20] by position"

      assert said.("old_export") =~
               "input 'input.1' [10, 3, 8, 8] fixed to [1, 3, 12, 20] by position (overriding " <>
                 "dimension 0 declared 10, dimension 2 declared 8, dimension 3 declared 8: the " <>
                 "model must accept the size given there)"

      assert said.("old_export") =~ "7 initializer(s) removed from the graph's inputs"
      assert said.("old_export") =~ "4 unnamed node(s) named <OpType>_<first output>"
      assert said.("old_export") =~ "converted from opset 9 to 13"

      assert said.("computed_clip") =~
               "1 Clip(s) with a computed bound rewritten as Max/Min (the HTP's Clip takes " <>
                 "constant bounds only): top_db"

      refute said.("constant_if") =~ "Clip"
    end

    # What the rewrites keep: the function. The model as shipped against the task's rewrite of it
    # (test/support/onnx_models.py prepared-diff: both on ORT's CPU EP, 4 random samples).
    # Dropping the Clip moves computed_clip's output by 2.1 (of 5.8); a wrong If branch, Tanh
    # for Sigmoid, constant_if's by about half its range.
    for {name, shape, low} <- [
          {"shared_symbolic", "x=1x3x12x20", 0.0},
          {"old_export", "input.1=10x3x8x8", 0.0},
          {"computed_clip", "x=1x1x16x20", 0.0},
          {"constant_if", "x=1x3x16x16", -1.0}
        ] do
      test "#{name}: the rewritten float model computes what the model as shipped does" do
        dir = QnnHost.model!(unquote(name))
        model = Path.join(dir, "#{unquote(name)}.onnx")

        said =
          QnnHost.python!(
            ["prepared-diff", model, "--input-shape", unquote(shape)] ++
              ["--low", "#{unquote(low)}"]
          )

        [_, diff] = Regex.run(~r/^max_abs_diff (\S+)$/m, said)
        [_, largest] = Regex.run(~r/^max_abs (\S+)$/m, said)
        {diff, ""} = Float.parse(diff)
        {largest, ""} = Float.parse(largest)
        assert largest > 0.1
        assert diff <= 1.0e-6 * largest, said
      end
    end
  end

  describe "nodes the HTP refuses" do
    test "every one is named in a file, the error summarises them by op type and code" do
      dir = QnnHost.model!("many_unsupported")
      bin = Path.join(dir, "m.bin")

      assert {:error, message} =
               Compiler.compile(Path.join(dir, "many_unsupported.onnx"), bin,
                 calibration: Path.join(dir, "calibration")
               )

      refused = bin <> ".refused.txt"
      # (its Relu on the graph input is quantized: relu_input)
      assert message =~ "the HTP (v68) cannot run 12 node(s): "
      assert message =~ "12 Mod (no HTP op for it in ONNX Runtime's QNN EP)"
      assert message =~ "every node is listed in #{refused}"
      refute message =~ "\e["
      refute File.exists?(bin)

      lines = refused |> File.read!() |> String.split("\n", trim: true)
      listed = Enum.reject(lines, &String.starts_with?(&1, "#"))

      for i <- 0..11,
          do:
            assert(
              Enum.any?(
                listed,
                &(&1 =~
                    ~r/^Mod 'mod_#{i}' \(makes '[^']+'\): no HTP op for it in ONNX Runtime's QNN EP$/)
              )
            )

      assert length(listed) == 12
    end

    test "a few are all named in the one line; --verbose shows ORT's and QNN's output on failure" do
      dir = QnnHost.model!("unsupported")
      model = Path.join(dir, "unsupported.onnx")
      bin = Path.join(dir, "v.bin")

      args = [model, "-o", bin, "--calibration", Path.join(dir, "calibration")]
      quiet = task(args)
      assert quiet.status == :failed
      assert [error] = quiet.errors

      assert error =~
               "cannot run 1 node(s): Mod 'the_mod_node' (makes 'y'): no HTP op for it in ONNX Runtime's QNN EP"

      refute quiet.stderr =~ "refused: Mod"

      loud = task(args ++ ["--verbose"])
      assert loud.status == :failed
      assert loud.stderr =~ "refused: Mod 'the_mod_node'"
      refute loud.stderr =~ "\e["
    end

    # A QDQ model is compiled as it is: a float op in it (here a Relu on the graph input, left
    # float by whoever quantized it) is QNN's 3110 on v68, named; --verbose shows QNN's words.
    test "a float op in a QDQ model: QNN's 3110, named, and QNN's own words with --verbose" do
      dir = QnnHost.model!("float_op_qdq")
      model = Path.join(dir, "float_op_qdq.onnx")
      args = [model, "-o", Path.join(dir, "f.bin")]
      quiet = task(args)
      assert quiet.status == :failed

      assert quiet.errors == [
               "mix hexagon_tpu.compile: the HTP (v68) cannot run 1 node(s): Relu 'relu' (makes 'r'): " <>
                 "QNN error 3110: float op on v68: not quantized; quantize the float ones, or rewrite " <>
                 "the others with supported ops (e.g. Sum -> Add) or remove them"
             ]

      refute quiet.stderr =~ "backendValidateOpConfig"
      loud = task(args ++ ["--verbose"])
      assert loud.stderr =~ "QNN.backendValidateOpConfig() failed for node `relu"
    end
  end

  describe "refusals that say why" do
    test "an LSTM the HTP cannot build: the node, QNN's own words, and what works instead" do
      dir = QnnHost.model!("lstm")
      bin = Path.join(dir, "lstm.bin")

      assert {:error, message} =
               Compiler.compile(Path.join(dir, "lstm.onnx"), bin,
                 calibration: Path.join(dir, "calibration")
               )

      assert message =~
               "the HTP (v68) cannot run 1 node(s): LSTM 'bilstm' (makes 'h'): QNN error 1002: the HTP " <>
                 "has no implementation of it for these types and sizes, found when the graph was " <>
                 "finalized (QNN: \"bilstm_cell0_forward\" could not create op: no kernel q::QNN_LSTM_FAIL); " <>
                 "export it unrolled (per time step: MatMul, Add, Sigmoid, Tanh, Mul"

      assert message =~
               "(ONNX Runtime: [ONNXRuntimeError] : 11 : EP_FAIL : Failed to finalize QNN graph."

      refute File.exists?(bin)
    end

    test "data-dependent control flow: the If named, why, and what works instead" do
      dir = QnnHost.model!("data_if")
      bin = Path.join(dir, "data_if.bin")

      assert {:error, message} =
               Compiler.compile(Path.join(dir, "data_if.onnx"), bin,
                 calibration: Path.join(dir, "calibration")
               )

      assert message ==
               "the HTP (v68) cannot run 1 node(s): If 'verify_if_sure' (makes 'y'): data-dependent " <>
                 "control flow (an If on a value computed from the input; a constant one is folded away): " <>
                 "the HTP runs none; compute both branches and choose with Where, or run this part on " <>
                 "the host; ONNX Runtime's QNN EP took no node of the model"

      refute File.exists?(bin)
    end

    test "a custom op a converter left in is named before anything runs" do
      dir = QnnHost.model!("custom_op")
      bin = Path.join(dir, "custom_op.bin")

      assert {:error, message} =
               Compiler.compile(Path.join(dir, "custom_op.onnx"), bin,
                 calibration: Path.join(dir, "calibration")
               )

      assert message ==
               "the model has 1 custom op node(s) that neither ONNX Runtime nor the HTP implements: " <>
                 "TFL_HARD_SWISH 'hard_swish' (domain 'ai.onnx.converters.tensorflow', makes 'h'); convert " <>
                 "or export the model so that these are standard ONNX ops (a converter that left them in " <>
                 "could not map them), or remove them from the graph and do their work on the host"

      refute File.exists?(bin)
    end
  end

  describe "--input-shape" do
    test "is required for a dynamic input, and checked against the model" do
      dir = QnnHost.model!("dynamic_input")
      model = Path.join(dir, "dynamic_input.onnx")
      bin = Path.join(dir, "s.bin")
      compile = &Compiler.compile(model, bin, [calibration: Path.join(dir, "calibration")] ++ &1)

      assert {:error, message} = compile.([])

      assert message ==
               "input 'x' has a dynamic shape ['batch', 3, 'height', 'width']; the HTP needs " <>
                 "static shapes: give one with --input-shape x=Nx3xNxN"

      assert {:error, message} = compile.(input_shape: %{"y" => {1, 3, 4, 4}})
      assert message =~ "--input-shape names no input of the model: y (its inputs: x)"

      assert {:error, message} = compile.(input_shape: [{"x", {1, 3, 4}}])
      assert message =~ "input 'x' has rank 4"

      # a fixed dimension given another size is overridden (said, in the shared-symbolic and
      # old-export tests above); the model must take it, and this one's Conv takes 3 channels
      assert {:error, message} =
               Compiler.compile(model, bin,
                 random_calibration: 2,
                 input_shape: %{"x" => {1, 4, 8, 8}}
               )

      assert message =~
               "Name:'conv' Status Message: Input channels C is not equal to kernel channels"

      assert {:error, message} = compile.(input_shape: %{"x" => {1, 0, 8, 8}})
      assert message =~ "invalid input_shape"
      refute File.exists?(bin)
    end
  end

  test "Compiler.compile/3 gives the same names; inputs by name or in order agree" do
    %{bin: bin} = QnnHost.compiled!("names_constant_weights", ["constant_weights"], [])

    {:ok, context} = Context.from_file(QnnHost.runtime!(), bin)
    [graph_info] = context.graphs
    assert Enum.map(graph_info.outputs, & &1.name) |> Enum.sort() == ["feat.1", "sigmoid_0.tmp_0"]
    graph = Graph.retrieve!(context, "constant_weights")
    [input] = Graph.inputs(graph)
    data = :binary.copy(<<0.5::float-32-little>>, 3 * 16 * 16)
    by_model = Graph.execute!(graph, %{"image" => data}, output: :binary)
    assert Graph.execute!(graph, [data], output: :binary) == by_model
    assert input.name == "image"
  end
end
