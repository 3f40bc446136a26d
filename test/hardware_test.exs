defmodule HexagonTpu.HardwareTest do
  # On the Radxa Dragon Q6A itself (QCS6490 HTP), with the QNN runtime in /usr/lib:
  #   HEXAGON_TPU_TEST_MODEL=/data/model.bin mix test --include hardware
  use ExUnit.Case, async: false

  @moduletag :hardware

  alias HexagonTpu.{Graph, Runtime, Stats}
  alias HexagonTpu.Test.Support

  test "the HTP backend opens" do
    assert {:ok, runtime} = Runtime.htp()
    assert {:ok, %{core_api: "2." <> _}} = Runtime.info(runtime)
    assert :ok = Runtime.close(runtime)
    assert HexagonTpu.available?(lib_path: "/usr/lib/libQnnHtp.so")
  end

  test "the doctor finds no error on the board (DSP_LIBRARY_PATH set)" do
    checks = HexagonTpu.diagnose(lib_path: "/usr/lib/libQnnHtp.so")
    assert Enum.all?(checks, &(&1.status != :error)), HexagonTpu.Diagnosis.format(checks)
    # The DSP checks apply on the board: the stub, skel and FastRPC device were found.
    assert Enum.find(checks, &(&1.name == :fastrpc_device)).detail =~ " opens"
  end

  test "a model loads, predicts and is freed" do
    path = System.get_env("HEXAGON_TPU_TEST_MODEL") || flunk("set HEXAGON_TPU_TEST_MODEL")

    {_, before, after_} =
      Stats.with_leak_check(fn ->
        {:ok, runtime} = Runtime.htp()
        {:ok, model} = HexagonTpu.load_model(path, runtime: runtime)

        inputs =
          for info <- Graph.inputs(model) do
            if info.f32_conversion,
              do: :binary.copy(<<0.0::float-32-little>>, HexagonTpu.TensorInfo.size(info)),
              else: :binary.copy(<<0>>, info.byte_size)
          end

        for _ <- 1..10 do
          assert {:ok, outputs} = HexagonTpu.predict(model, inputs, output: :binary)
          assert length(outputs) == length(Graph.outputs(model))
        end

        assert Stats.native().execute_ns_last > 0
        :ok = HexagonTpu.Context.close(model.context)
        :ok = Runtime.close(runtime)
      end)

    Support.assert_no_leaks(before, after_)
  end
end
