defmodule HexagonTpu.QnnHostTest do
  # This package against Qualcomm's own QNN libraries: the x86-64 HTP emulator (libQnnHtp.so)
  # and libQnnSystem.so of PyPI's onnxruntime-qnn 2.7.0 (QAIRT 2.51), in the venv that
  # `mix hexagon_tpu.compile --setup` creates. test_helper.exs includes this suite whenever
  # that venv exists. Models are generated (test/support/onnx_models.py) and compiled with
  # HexagonTpu.Compiler at test time; nothing of Qualcomm's is committed.
  #
  # Expected outputs come from ONNX Runtime running the same binary on the same emulator
  # (bit for bit), and from ONNX Runtime's CPU run of the QDQ model as written, unfused
  # (within the number of quantization steps stated per model: HTP and CPU kernels round
  # differently; the CPU's fused int8 kernels differ by machine, so they are not the reference).
  use ExUnit.Case, async: false

  @moduletag :qnn_host
  @moduletag timeout: 300_000

  import ExUnit.CaptureIO

  alias HexagonTpu.{Compiler, Context, Graph, Runtime, Stats, TensorInfo}
  alias HexagonTpu.Test.{Models, QnnHost, Support}

  # model => {compile options, I/O data types QNN reports, max steps against ORT CPU}
  # (measured: float_io 2, u8_io 2, per_channel_conv 1, squeezenet logits <= 2, a16w8 23)
  @models %{
    "float_io" => {[io: :float], {:float_32, :float_32}, 2},
    "u8_io" => {[], {:ufixed_point_8, :ufixed_point_8}, 2},
    # 16-bit activations: the HTP's and the CPU's arithmetic differ by up to 23 u16 steps
    # here (ORT on the same QNN backend differs from ORT CPU exactly as much)
    "a16w8" => {[activations: :u16, weights: :u8], {:ufixed_point_16, :ufixed_point_16}, 32},
    "per_channel_conv" => {[], {:ufixed_point_8, :ufixed_point_8}, 2},
    "squeezenet" => {[], {:ufixed_point_8, :ufixed_point_8}, 2}
  }

  setup_all do
    runtime = QnnHost.runtime!()

    models =
      Map.new(@models, fn {name, {opts, _, _}} ->
        {name, QnnHost.compiled!(name, [name], opts)}
      end)

    %{runtime: runtime, models: models}
  end

  test "the emulator reports QAIRT 2.51's APIs", %{runtime: runtime} do
    {:ok, info} = Runtime.info(runtime)
    assert info.provider_name == "HTP_QTI_AISW"
    assert info.build_id =~ ~r/^v2\.51\./
    assert info.core_api =~ ~r/^2\.(\d+)\./
    assert info.system_api =~ ~r/^1\.(\d+)\./
  end

  for {name, {_opts, {in_type, out_type}, steps}} <- @models do
    describe "#{name}:" do
      @describetag model: name

      test "reads back with the I/O types the compile asked for", %{models: models} = ctx do
        graph = QnnHost.graph!(models[unquote(name)].bin, ctx.runtime)
        assert [%TensorInfo{data_type: unquote(in_type)} | _] = Graph.inputs(graph)
        assert [%TensorInfo{data_type: unquote(out_type)} | _] = Graph.outputs(graph)

        for t <- Graph.inputs(graph) ++ Graph.outputs(graph) do
          # per-channel weights stay on static tensors: graph I/O is per tensor or float
          refute match?(%{kind: :per_axis}, t.quantization)
          assert t.quantization == :none == (t.data_type == :float_32)
        end
      end

      test "equals ORT on the same emulator bit for bit, automatic (de)quantization",
           ctx do
        {graph, ort} = graph_and_reference!(ctx, unquote(name), :ctx, :qnn)

        for {inputs, expected} <- Enum.zip(ort.inputs, ort.outputs) do
          ours = Graph.execute!(graph, Enum.map(inputs, &typed/1), output: :binary)

          for {out, want, info} <- Enum.zip([ours, expected, Graph.outputs(graph)]) do
            assert out == as_f32(want, info)
          end
        end
      end

      test "equals ORT on the same emulator bit for bit, quantize: :none, dequantize: :none",
           ctx do
        {graph, ort} = graph_and_reference!(ctx, unquote(name), :ctx, :qnn, raw: true)

        for {inputs, expected} <- Enum.zip(ort.inputs, ort.outputs) do
          raw = Enum.map(inputs, &{&1.type, &1.data})

          assert Graph.execute!(graph, raw, quantize: :none, dequantize: :none, output: :binary) ==
                   Enum.map(expected, & &1.data)
        end
      end

      test "is within #{steps} quantization steps of ORT CPU on the QDQ model",
           ctx do
        {graph, cpu} = graph_and_reference!(ctx, unquote(name), :qdq, :cpu)
        [scale | _] = cpu.scales

        worst =
          for {inputs, expected} <- Enum.zip(cpu.inputs, cpu.outputs),
              {out, want, info} <-
                Enum.zip([
                  Graph.execute!(graph, Enum.map(inputs, &typed/1), output: :binary),
                  expected,
                  Graph.outputs(graph)
                ]) do
            QnnHost.max_steps(QnnHost.f32s(out), QnnHost.f32s(as_f32(want, info)), scale)
          end
          |> Enum.max()

        # 1e-3: the difference of two dequantized f32 values is a whole number of steps
        # only up to f32 rounding
        assert worst <= unquote(steps) + 1.0e-3, "#{worst} steps of #{scale}"
      end
    end
  end

  # The graph of model `name` on the suite's runtime, and ONNX Runtime's reference run of its
  # `onnx` model (:ctx, the compiled context; :qdq, the QDQ source) on `backend`.
  defp graph_and_reference!(ctx, name, onnx, backend, opts \\ []) do
    model = ctx.models[name]
    graph = QnnHost.graph!(model.bin, ctx.runtime)
    {graph, QnnHost.reference!(hd(Map.fetch!(model, onnx)), hd(model.inputs), backend, opts)}
  end

  # A reference sample as an input: floats as f32 binaries (quantized by execute), integers
  # as typed binaries of the model's own type.
  defp typed(%{type: {:f, 32}, data: data}), do: data
  defp typed(%{type: type, data: data}), do: {type, data}

  # ORT's output as the f32 binary execute returns: floats as they are, quantized values
  # dequantized with the tensor's parameters ((q - zero_point) * scale, rounded to f32).
  defp as_f32(%{type: {:f, 32}, data: data}, _info), do: data

  defp as_f32(%{type: {:u, bits}, data: data}, %TensorInfo{quantization: q}) do
    for v <- QnnHost.uints(data, bits),
        into: <<>>,
        do: <<(v - q.zero_point) * q.scale::float-32-little>>
  end

  test "async_queue_depth: without asynchronous execution in the emulator, the graphs' threads run the executes, with the same results",
       %{runtime: runtime, models: models} do
    bin = models["u8_io"].bin
    plain = QnnHost.graph!(bin, runtime)
    context = Context.from_file!(runtime, bin, async_queue_depth: 4)
    # QAIRT 2.51's emulator answers propertyHasCapability(ASYNC_EXECUTION) 1000
    assert context.execute_queue == :worker
    graph = Graph.retrieve!(context, hd(Context.graphs(context)))
    [%{byte_size: size}] = Graph.inputs(graph)
    input = for i <- 1..size, into: <<>>, do: <<rem(i * 7, 256)>>
    opts = [quantize: :none, dequantize: :none, output: :binary]
    {:ok, pending} = Graph.execute_async(graph, [input], opts)
    assert Graph.await(pending) == Graph.execute(plain, [input], opts)
  end

  test "the a16w8 model differs from the u8 models' precision: its graph I/O is 16-bit",
       %{models: models} = ctx do
    graph = QnnHost.graph!(models["a16w8"].bin, ctx.runtime)

    assert [%TensorInfo{type: {:u, 16}, quantization: %{kind: :per_tensor, bitwidth: bits}}] =
             Graph.inputs(graph)

    assert bits in [nil, 16]
  end

  test "the per-channel model's conv weights have one scale per output channel",
       %{models: models} do
    # the weights of output channel 0 are 1000x smaller than those of channel 5: per-tensor
    # scales would round channel 0 to zero
    output = QnnHost.python!(["weight-scales", hd(models["per_channel_conv"].qdq)])

    assert [_, "6", ratio] =
             output |> String.trim() |> String.split("\n") |> List.last() |> String.split(" ")

    assert String.to_float(ratio) > 100
  end

  describe "a binary with two graphs (ep.share_ep_contexts)" do
    setup do
      %{two: QnnHost.compiled!("two_graphs", ["graph_a", "graph_b"])}
    end

    test "both graphs are in it, each with its own I/O", %{two: two} = ctx do
      context = Context.from_file!(ctx.runtime, two.bin)
      assert length(Context.graphs(context)) == 2
      inputs = for g <- context.graphs, do: hd(g.inputs).name
      assert Enum.sort(inputs) == ["features", "pixels"]
    end

    test "both graphs equal ORT bit for bit, from one context", %{two: two} = ctx do
      context = Context.from_file!(ctx.runtime, two.bin)

      for {ctx_onnx, inputs} <- Enum.zip(two.ctx, two.inputs) do
        ort = QnnHost.reference!(ctx_onnx, inputs, :qnn)
        graph = graph_by_input(context, ctx_onnx)

        for {ins, want} <- Enum.zip(ort.inputs, ort.outputs) do
          ours = Graph.execute!(graph, Enum.map(ins, &typed/1), output: :binary)
          assert ours == Enum.zip_with(want, Graph.outputs(graph), &as_f32/2)
        end
      end
    end

    test "two graphs x 4 processes each run concurrently and correctly", %{two: two} = ctx do
      context = Context.from_file!(ctx.runtime, two.bin)

      jobs =
        for {ctx_onnx, inputs} <- Enum.zip(two.ctx, two.inputs) do
          ort = QnnHost.reference!(ctx_onnx, inputs, :qnn)
          graph = graph_by_input(context, ctx_onnx)

          {graph, Enum.map(hd(ort.inputs), &typed/1),
           Enum.zip_with(hd(ort.outputs), Graph.outputs(graph), &as_f32/2)}
        end

      tasks =
        for {graph, inputs, want} <- jobs, _ <- 1..4 do
          Task.async(fn ->
            for _ <- 1..5, do: assert(Graph.execute!(graph, inputs, output: :binary) == want)
            :ok
          end)
        end

      assert Enum.all?(Task.await_many(tasks, 60_000), &(&1 == :ok))
    end
  end

  # The QNN graph of graph_a (input "pixels") or graph_b (input "features"): QNN names the
  # graph I/O after the ONNX model's.
  defp graph_by_input(context, ctx_onnx) do
    input = if ctx_onnx =~ "graph_a", do: "pixels", else: "features"
    %{name: name} = Enum.find(context.graphs, &(hd(&1.inputs).name == input))
    Graph.retrieve!(context, name)
  end

  test "one graph from 8 processes gives every caller the right answer",
       ctx do
    {graph, ort} = graph_and_reference!(ctx, "per_channel_conv", :ctx, :qnn)

    cases =
      for {ins, want} <- Enum.zip(ort.inputs, ort.outputs),
          do: {Enum.map(ins, &typed/1), Enum.zip_with(want, Graph.outputs(graph), &as_f32/2)}

    tasks =
      for i <- 1..8 do
        {inputs, want} = Enum.at(cases, rem(i, length(cases)))

        Task.async(fn ->
          for _ <- 1..4, do: assert(Graph.execute!(graph, inputs, output: :binary) == want)
          :ok
        end)
      end

    assert Task.await_many(tasks, 60_000) == List.duplicate(:ok, 8)
  end

  describe "bad binaries against the real QnnSystem" do
    setup %{models: models} do
      %{good: File.read!(models["u8_io"].bin), u8_io: models["u8_io"]}
    end

    test "an empty binary is rejected before QNN is called", ctx do
      assert_bad(ctx, <<>>, fn error ->
        assert error.reason == :invalid_model
        assert error.message =~ "empty"
      end)
    end

    test "a truncated binary: 30010 (QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY)", ctx do
      half = binary_part(ctx.good, 0, div(byte_size(ctx.good), 2))
      assert_bad(ctx, half, &assert(&1.qnn_code == 30010))
    end

    test "random bytes: 30010", ctx do
      :rand.seed(:exsss, {7, 7, 7})
      random = for _ <- 1..4096, into: <<>>, do: <<:rand.uniform(256) - 1>>
      assert_bad(ctx, random, &assert(&1.qnn_code == 30010))
    end

    test "a qnn_sim context binary: 30010", ctx do
      t = Models.t(:float_32, [1, 4])
      sim = File.read!(Models.build!(Models.identity(t, t)))
      assert_bad(ctx, sim, &assert(&1.qnn_code == 30010))
    end

    test "a corrupted payload fails in contextCreateFromBinary: 5005 or 5007", ctx do
      # QNN has no checksum: some corruptions (near the end, for example) are accepted, but
      # 64 bytes overwritten in the middle of the graph blob are not
      for fraction <- [0.5, 0.7] do
        offset = trunc(byte_size(ctx.good) * fraction)
        <<pre::binary-size(offset), _::binary-size(64), post::binary>> = ctx.good
        bad = pre <> :binary.copy(<<0xA5>>, 64) <> post

        assert_bad(ctx, bad, fn error ->
          assert error.reason == :qnn_error
          assert error.qnn_code in [5005, 5007], inspect(error)
          assert error.message =~ "contextCreateFromBinary"
        end)
      end
    end
  end

  # Loads `binary` (expecting the error `check` accepts), with the counters at baseline
  # afterwards and the runtime still executing a good model.
  defp assert_bad(ctx, binary, check) do
    Support.quiesce()

    {_, before, after_} =
      Stats.with_leak_check(fn ->
        runtime = QnnHost.runtime!()
        assert {:error, error} = Context.from_binary(runtime, binary)
        check.(error)
        graph = QnnHost.graph!(ctx.u8_io.bin, runtime)
        assert {:ok, [_]} = Graph.execute(graph, [{{:u, 8}, :binary.copy(<<128>>, 16)}])
        Graph.close(graph)
        Context.close(graph.context)
        Runtime.close(runtime)
      end)

    Support.assert_no_leaks(before, after_)
  end

  describe "lifetimes" do
    @cycles 50

    test "create/load/execute/close cycles end at baseline with RSS flat", %{models: models} do
      bin = models["u8_io"].bin
      input = {{:u, 8}, :binary.copy(<<200>>, 16)}

      cycle = fn ->
        runtime = QnnHost.runtime!()
        graph = QnnHost.graph!(bin, runtime)
        {:ok, [_]} = Graph.execute(graph, [input])
        :ok = Graph.close(graph)
        :ok = Context.close(graph.context)
        :ok = Runtime.close(runtime)
      end

      assert_flat(cycle)
    end

    test "GC-only cycles (nothing closed) end at baseline with RSS flat", %{models: models} do
      bin = models["u8_io"].bin
      input = {{:u, 8}, :binary.copy(<<200>>, 16)}

      cycle = fn ->
        # a process of its own: when it exits, its references go and the GC frees them
        task =
          Task.async(fn ->
            graph = QnnHost.graph!(bin, QnnHost.runtime!())
            {:ok, [_]} = Graph.execute(graph, [input])
            :ok
          end)

        :ok = Task.await(task, 30_000)
      end

      assert_flat(cycle)
    end
  end

  defp assert_flat(cycle) do
    # warm up: the first runtime initialises QNN's globals, allocators grow to their level
    for _ <- 1..10, do: cycle.()
    Support.quiesce()
    :erlang.garbage_collect()
    rss_before = QnnHost.rss_kb()

    {_, before, after_} =
      Stats.with_leak_check(fn ->
        for _ <- 1..@cycles, do: cycle.()
        :done
      end)

    Support.quiesce()
    growth = QnnHost.rss_kb() - rss_before

    Support.assert_no_leaks(before, after_)

    # The emulator's RSS moves by +-10 MB between readings even when nothing leaks (measured
    # over 200 cycles: 143, 141, 139, 134, 132, 138, 136, 136 MB); a leaked QNN context per
    # cycle (the emulator maps MBs for each) would grow it past this bound.
    assert growth < 16_384, "RSS grew by #{growth} kB over #{@cycles} cycles"
  end

  describe "the compile task on the real stack" do
    test "`mix hexagon_tpu.compile` makes a binary of a QDQ MLP that agrees with ORT's own compile" do
      dir = QnnHost.model!("mlp")
      qdq = Path.join(dir, "mlp_qdq.onnx")

      calibration = Path.join(dir, "calibration")
      QnnHost.python!(["quantize", Path.join(dir, "mlp.onnx"), calibration, qdq])

      bin = Path.join(dir, "mlp.bin")

      {output, _progress} =
        with_io(:stderr, fn ->
          capture_io(fn -> Mix.Task.rerun("hexagon_tpu.compile", [qdq, "-o", bin]) end)
        end)

      # ORT's own compile of the same QDQ model, and ORT running it on the emulator
      ort_dir = Path.join(dir, "ort")
      QnnHost.python!(["ort-compile", qdq, ort_dir])

      ort =
        QnnHost.reference!(Path.join(ort_dir, "mlp_qdq_ctx.onnx"), Path.join(dir, "inputs"), :qnn)

      runtime = QnnHost.runtime!()
      context = Context.from_file!(runtime, bin)
      [name] = Context.graphs(context)
      assert output =~ "wrote #{bin}"
      assert output =~ "graph #{name}"
      assert output =~ "input v u8[1][20]"
      assert output =~ "output p u8[1][5]"

      graph = Graph.retrieve!(context, name)

      for {ins, want} <- Enum.zip(ort.inputs, ort.outputs) do
        assert Graph.execute!(graph, Enum.map(ins, &typed/1), output: :binary) ==
                 Enum.zip_with(want, Graph.outputs(graph), &as_f32/2)
      end
    end

    test "a float model with random calibration compiles, with a warning" do
      dir = QnnHost.model!("float_io")
      bin = Path.join(dir, "random.bin")

      assert {:ok, result} =
               Compiler.compile(Path.join(dir, "float_io.onnx"), bin, random_calibration: 3)

      assert [warning] = result.warnings
      assert warning =~ "3 random calibration samples"
      assert [%{inputs: [%TensorInfo{name: "image", shape: {1, 3, 8, 8}}]}] = result.graphs
    end

    test "ops the HTP cannot run are named, with their node names" do
      dir = QnnHost.model!("unsupported")
      model = Path.join(dir, "unsupported.onnx")

      assert {:error, message} =
               Compiler.compile(model, Path.join(dir, "u.bin"),
                 calibration: Path.join(dir, "calibration")
               )

      assert message =~ "cannot run"
      assert message =~ "Mod 'the_mod_node'"
      refute File.exists?(Path.join(dir, "u.bin"))
    end

    test "fp16 on v68 is refused, naming the tensors" do
      dir = QnnHost.model!("fp16")

      assert {:error, message} =
               Compiler.compile(Path.join(dir, "fp16.onnx"), Path.join(dir, "f.bin"),
                 random_calibration: 1
               )

      assert message =~ "fp16 tensors (x, y) cannot run on HTP v68"
    end

    test "missing calibration data names the input and its shape", %{} do
      dir = QnnHost.model!("float_io")
      empty = Path.join(dir, "no_calibration")
      File.mkdir_p!(empty)

      assert {:error, message} =
               Compiler.compile(Path.join(dir, "float_io.onnx"), Path.join(dir, "m.bin"),
                 calibration: empty
               )

      assert message =~ "calibration data for input 'image' is missing"
      assert message =~ "image_<n>.npy files of shape [1, 3, 8, 8]"
    end

    test "mis-shaped calibration data names the file, the input and both shapes" do
      dir = QnnHost.model!("float_io")
      other = QnnHost.model!("per_channel_conv")
      wrong = Path.join(dir, "wrong_calibration")
      File.mkdir_p!(wrong)
      File.cp!(Path.join([other, "calibration", "img_0.npy"]), Path.join(wrong, "image_0.npy"))

      assert {:error, message} =
               Compiler.compile(Path.join(dir, "float_io.onnx"), Path.join(dir, "m.bin"),
                 calibration: wrong
               )

      assert message =~
               "image_0.npy for input 'image' has shape [1, 3, 16, 16], expected [1, 3, 8, 8]"
    end
  end
end
