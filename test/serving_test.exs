# HexagonTpu.Serving: an Nx.Serving over a model, inline and as a process, batch sizes from the
# model, partitions. Needs Nx: in the offline build test_helper.exs excludes :nx.
if Code.ensure_loaded?(Nx) do
  defmodule HexagonTpu.ServingTest do
    use ExUnit.Case, async: false

    @moduletag :nx

    alias HexagonTpu.{Error, Stats}
    alias HexagonTpu.Test.{Models, Support}

    @classes 6
    @features 12

    setup_all do
      row = Models.t(:float_32, [1, 4])
      batch3 = Models.t(:float_32, [3, 2])
      # a 6-class classifier over 12 u8 "pixels" (a 2x2 RGB frame), softmax scores out
      w_scales = [0.01, 0.02, 0.015, 0.01, 0.03, 0.02]

      w_values =
        for c <- 0..(@classes - 1), f <- 0..(@features - 1), do: rem(c * 7 + f * 5, 41) - 20

      b_values = [5, -3, 0, 8, -6, 2]

      %{
        row_path: Models.build!(Models.identity(row, row)),
        slow_path: Models.build!(Models.identity(row, row, sleep_ms: 20)),
        batch3_path: Models.build!(Models.identity(batch3, batch3)),
        classifier_path: Models.build!(Models.classifier(w_scales, w_values, b_values)),
        runtime: Support.runtime!()
      }
    end

    defp executes, do: Stats.native().executes

    test "inline: a caller's batch runs through predict/3 and comes back as its outputs", ctx do
      {:ok, serving} = HexagonTpu.Serving.new(ctx.row_path, runtime: ctx.runtime)
      one = Nx.iota({1, 4}, type: {:f, 32})
      assert [^one] = Nx.Serving.run(serving, one)

      three = Nx.iota({3, 4}, type: {:f, 32}) |> Nx.add(0.5)
      assert [out] = Nx.Serving.run(serving, three)
      assert out == three
    end

    test "the batch size is the model's batch dimension: three callers, one execute", ctx do
      {:ok, serving} = HexagonTpu.Serving.new(ctx.batch3_path, runtime: ctx.runtime)
      name = :"batch3_#{System.unique_integer([:positive])}"
      start_supervised!({Nx.Serving, serving: serving, name: name, batch_timeout: 5_000})

      before = executes()

      results =
        1..3
        |> Enum.map(fn i ->
          input = Nx.tensor([[i * 1.0, i * 2.0]])
          {input, Task.async(fn -> Nx.Serving.batched_run(name, input) end)}
        end)
        |> Enum.map(fn {input, task} -> {input, Task.await(task, 10_000)} end)

      for {input, [out]} <- results, do: assert(out == input)
      # the three single-row callers filled the model's batch of 3: one execute for all
      assert executes() - before == 1
    end

    test "partitions: one context each, and batches spread over them", ctx do
      # an earlier test's servings may still be freeing their contexts
      Support.quiesce()
      alive = Stats.native().contexts_alive

      {:ok, serving} = HexagonTpu.Serving.new(ctx.slow_path, runtime: ctx.runtime, partitions: 2)

      serving =
        Nx.Serving.client_postprocessing(serving, fn {outputs, metadata}, _info ->
          {Tuple.to_list(outputs), metadata.partition}
        end)

      name = :"partitions_#{System.unique_integer([:positive])}"
      start_supervised!({Nx.Serving, serving: serving, name: name, partitions: true})
      # the probe load of new/2 (partition 0) and one more for partition 1
      assert Stats.native().contexts_alive == alive + 2

      results =
        1..12
        |> Enum.map(fn i ->
          input = Nx.tensor([[i * 1.0, 0.0, 0.0, -i * 1.0]])
          {input, Task.async(fn -> Nx.Serving.batched_run(name, input) end)}
        end)
        |> Enum.map(fn {input, task} -> {input, Task.await(task, 10_000)} end)

      for {input, {[out], _partition}} <- results, do: assert(out == input)
      # twelve 20 ms executes queued at once: the second partition took some of them
      assert results
             |> Enum.map(fn {_, {_, partition}} -> partition end)
             |> Enum.uniq()
             |> Enum.sort() ==
               [0, 1]
    end

    test "errors: an execute's error raises in the caller, options are checked", ctx do
      {:ok, serving} = HexagonTpu.Serving.new(ctx.row_path, runtime: ctx.runtime)

      error =
        assert_raise Error, fn -> Nx.Serving.run(serving, Nx.iota({1, 4}, type: {:s, 32})) end

      assert error.reason == :invalid_input

      assert_raise ArgumentError, ~r/:partitions/, fn ->
        HexagonTpu.Serving.new(ctx.row_path, partitions: 0)
      end

      {:ok, graph} = HexagonTpu.load_model(ctx.row_path, runtime: ctx.runtime)

      assert {:ok, _serving} = HexagonTpu.Serving.new(graph, partitions: 2)

      from_memory =
        ctx.runtime
        |> HexagonTpu.Context.from_binary!(File.read!(ctx.row_path))
        |> HexagonTpu.Graph.retrieve!("identity")

      assert {:error, %Error{reason: :invalid_argument, message: message}} =
               HexagonTpu.Serving.new(from_memory, partitions: 2)

      assert message =~ "give the binary's path"

      assert {:error, %Error{reason: :io}} =
               HexagonTpu.Serving.new("/nonexistent/model.bin", runtime: ctx.runtime)
    end

    test "distributed: a caller on another node is served by Nx.Serving's distribution", ctx do
      {_, 0} = System.cmd("epmd", ["-daemon"])
      # `epmd -daemon` returns before epmd listens: on a loaded machine Node.start/2 could find no
      # epmd (:nodistribution) — wait until it answers
      epmd_up? = fn -> match?({_, 0}, System.cmd("epmd", ["-names"], stderr_to_stdout: true)) end
      assert Enum.find_value(1..100, fn _ -> epmd_up?.() || (Process.sleep(50) && nil) end)
      # a name of this OS process's own: epmd is the machine's, shared with any other test run
      unless Node.alive?(),
        do: {:ok, _} = Node.start(:"hexagon_tpu_test_#{System.pid()}@127.0.0.1", :longnames)

      # the serving runs on a peer node; this node runs none of its own
      args = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

      {:ok, peer, node} =
        :peer.start(%{
          name: :"serving_peer_#{System.unique_integer([:positive])}",
          host: ~c"127.0.0.1",
          longnames: true,
          args: args
        })

      on_exit(fn -> :peer.stop(peer) end)
      name = :"distributed_#{System.unique_integer([:positive])}"
      path = ctx.row_path
      :ok = :erpc.call(node, HexagonTpu.Test.ServingPeer, :start, [path, Support.sim_lib(), name])

      input = Nx.tensor([[1.5, -2.0, 0.25, 8.0]])
      assert [out] = Nx.Serving.batched_run({:distributed, name}, input)
      assert out == input
      # no serving of that name here: the answer came from the peer
      assert Process.whereis(name) == nil
    end

    # The image classifier of guides/inference.md, on a 2x2 RGB "image": a raw frame in, the top classes out.
    test "the guide's classifier: raw RGB frames to the top-5 classes", ctx do
      labels = ~w(cat dog bird fish frog horse)

      {:ok, serving} = HexagonTpu.Serving.new(ctx.classifier_path, runtime: ctx.runtime)

      serving =
        serving
        |> Nx.Serving.client_preprocessing(fn frame ->
          # the model takes the frame's u8 bytes as they are: its input is u8
          image = frame |> Nx.from_binary({:u, 8}) |> Nx.reshape({1, @features})
          {Nx.Batch.concatenate([image]), :ok}
        end)
        |> Nx.Serving.client_postprocessing(fn {{scores}, _metadata}, :ok ->
          {top, classes} = Nx.top_k(scores[0], k: 5)
          Enum.zip(Enum.map(Nx.to_list(classes), &Enum.at(labels, &1)), Nx.to_list(top))
        end)

      frames =
        for seed <- 1..3, do: for(i <- 1..@features, into: <<>>, do: <<rem(i * seed * 37, 256)>>)

      {:ok, model} = HexagonTpu.load_model(ctx.classifier_path, runtime: ctx.runtime)

      for frame <- frames do
        top5 = Nx.Serving.run(serving, frame)
        # independently: the whole score vector from predict/3, sorted
        [scores] =
          HexagonTpu.predict!(model, [
            Nx.from_binary(frame, {:u, 8}) |> Nx.reshape({1, @features})
          ])

        expected =
          scores[0] |> Nx.to_list() |> Enum.zip(labels) |> Enum.sort(:desc) |> Enum.take(5)

        assert Enum.map(top5, &elem(&1, 1)) == Enum.map(expected, &elem(&1, 0))
        assert length(Enum.uniq(Enum.map(top5, &elem(&1, 0)))) == 5
      end
    end
  end
end
