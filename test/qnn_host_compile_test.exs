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
    "with_metadata" => {[], [{"probs", {1, 4, 8, 8}}]}
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

          # the binary's own name (ORT's) is kept beside it, and the task prints both
          assert qnn =~ ~r/^QuantizeLinear_token_\d+_out0$/
          assert ctx.result.stdout =~ "output #{output} "
          assert ctx.result.stdout =~ "in the binary #{qnn}"
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

  describe "nodes the HTP refuses" do
    test "every one is named in a file, the error summarises them by op type and code" do
      dir = QnnHost.model!("many_unsupported")
      bin = Path.join(dir, "m.bin")

      assert {:error, message} =
               Compiler.compile(Path.join(dir, "many_unsupported.onnx"), bin,
                 calibration: Path.join(dir, "calibration")
               )

      refused = bin <> ".refused.txt"
      assert message =~ "the HTP (v68) cannot run 13 node(s): "
      assert message =~ "1 Relu (QNN error 3110: float op on v68: not quantized)"
      assert message =~ "12 Mod (no HTP op for it in ONNX Runtime's QNN EP)"
      assert message =~ "every node is listed in #{refused}"
      refute message =~ "\e["
      refute File.exists?(bin)

      lines = refused |> File.read!() |> String.split("\n", trim: true)
      listed = Enum.reject(lines, &String.starts_with?(&1, "#"))

      assert "Relu 'relu0': QNN error 3110: float op on v68: not quantized" in listed

      for i <- 0..11,
          do: assert("Mod 'mod_#{i}': no HTP op for it in ONNX Runtime's QNN EP" in listed)

      assert length(listed) == 13
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
               "cannot run 2 node(s): Relu 'relu': QNN error 3110: float op on v68: not quantized; " <>
                 "Mod 'the_mod_node': no HTP op for it in ONNX Runtime's QNN EP"

      refute quiet.stderr =~ "backendValidateOpConfig"

      loud = task(args ++ ["--verbose"])
      assert loud.status == :failed
      assert loud.stderr =~ "QNN.backendValidateOpConfig() failed for node `relu"
      assert loud.stderr =~ "refused: Mod 'the_mod_node'"
      refute loud.stderr =~ "\e["
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

      assert {:error, message} = compile.(input_shape: %{"x" => {1, 4, 8, 8}})
      assert message =~ "dimension 1 of input 'x' is 3, not 4"

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
