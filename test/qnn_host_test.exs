defmodule HexagonTpu.QnnHostTest do
  # The same lifecycle against Qualcomm's own host libraries from a QAIRT SDK:
  #   QNN_HOST_LIB_DIR=/opt/qairt/lib/x86_64-linux-clang mix test --include qnn_host
  # QNN_HOST_MODEL may name a context binary the CPU backend can load.
  use ExUnit.Case, async: false

  @moduletag :qnn_host

  alias HexagonTpu.{Context, Graph, Runtime, Stats}

  setup do
    dir =
      System.get_env("QNN_HOST_LIB_DIR") || flunk("set QNN_HOST_LIB_DIR to run :qnn_host tests")

    %{
      opts: [
        lib_path: Path.join(dir, "libQnnCpu.so"),
        system_lib_path: Path.join(dir, "libQnnSystem.so")
      ]
    }
  end

  test "runtime lifecycle and the leak guard", %{opts: opts} do
    {_, before, after_} =
      Stats.with_leak_check(fn ->
        for _ <- 1..5 do
          {:ok, runtime} = Runtime.create(opts)
          {:ok, info} = Runtime.info(runtime)
          assert info.core_api =~ ~r/^2\./
          :ok = Runtime.close(runtime)
        end

        for _ <- 1..5, do: {:ok, _} = Runtime.create(opts)
        :done
      end)

    assert Stats.alive_diff(before, after_) == %{
             runtimes_alive: 0,
             contexts_alive: 0,
             graphs_alive: 0
           }
  end

  test "a context binary, when one is given", %{opts: opts} do
    case System.get_env("QNN_HOST_MODEL") do
      nil ->
        :ok

      path ->
        {:ok, runtime} = Runtime.create(opts)
        {:ok, context} = Context.from_file(runtime, path)
        [name | _] = Context.graphs(context)
        {:ok, graph} = Graph.retrieve(context, name)
        inputs = Enum.map(Graph.inputs(graph), &:binary.copy(<<0>>, &1.byte_size))

        assert {:ok, outputs} =
                 Graph.execute(graph, inputs, quantize: :none, dequantize: :none, output: :binary)

        assert length(outputs) == length(Graph.outputs(graph))
        :ok = Context.close(context)
    end
  end
end
