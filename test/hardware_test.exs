defmodule HexagonTpu.HardwareTest do
  # On the Radxa Dragon Q6A itself (QCS6490 HTP), with the QNN runtime in /usr/lib:
  #   HEXAGON_TPU_TEST_MODEL=/data/model.bin mix test --include hardware
  # The device-reset test restarts the CDSP (as root, with debugfs mounted), so it runs only
  # with HEXAGON_TPU_TEST_SSR=1 too.
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

  test "a DSP restart under a model: the next predict recovers, with the same outputs" do
    if System.get_env("HEXAGON_TPU_TEST_SSR") != "1",
      do: flunk("set HEXAGON_TPU_TEST_SSR=1: this test restarts the CDSP")

    path = System.get_env("HEXAGON_TPU_TEST_MODEL") || flunk("set HEXAGON_TPU_TEST_MODEL")
    cdsp = cdsp_remoteproc!()
    {:ok, runtime} = Runtime.htp()
    {:ok, model} = HexagonTpu.load_model(path, runtime: runtime)
    inputs = zero_inputs(model)
    {:ok, expected} = HexagonTpu.predict(model, inputs, output: :binary)
    before = Stats.native()

    # The kernel's remoteproc crash trigger; with recovery enabled it boots the CDSP again.
    File.write!(Path.join(cdsp.debugfs, "recovery"), "enabled")
    File.write!(Path.join(cdsp.debugfs, "crash"), "fatal-error")

    Support.wait_until(fn -> File.read!(Path.join(cdsp.sysfs, "state")) == "running\n" end,
      timeout: 30_000
    )

    assert {:ok, ^expected} = HexagonTpu.predict(model, inputs, output: :binary)
    after_ = Stats.native()
    assert after_.context_recoveries - before.context_recoveries == 1
    assert after_.device_resets == before.device_resets
    :ok = HexagonTpu.Context.close(model.context)
    :ok = Runtime.close(runtime)
  end

  test "shared buffers (libcdsprpc.so): the outputs of client buffers, without their copies" do
    path = System.get_env("HEXAGON_TPU_TEST_MODEL") || flunk("set HEXAGON_TPU_TEST_MODEL")
    runs = String.to_integer(System.get_env("HEXAGON_TPU_TEST_RUNS") || "100")

    {_, before, after_} =
      Stats.with_leak_check(fn ->
        {:ok, runtime} = Runtime.htp()
        alive = Stats.native().shared_buffers_alive
        # :auto has them on the board: the real rpcmem and the HTP's QnnMem
        {:ok, auto} = HexagonTpu.load_model(path, runtime: runtime)
        assert auto.context.buffers == :shared
        :ok = HexagonTpu.Context.close(auto.context)
        {:ok, shared} = HexagonTpu.load_model(path, runtime: runtime, shared_buffers: true)
        {:ok, client} = HexagonTpu.load_model(path, runtime: runtime, shared_buffers: false)
        assert shared.context.buffers == :shared
        assert client.context.buffers == :client

        io_bytes =
          Enum.sum(for t <- Graph.inputs(shared) ++ Graph.outputs(shared), do: t.byte_size)

        # f32 in and out (quantized on the host), and the model's own types (no conversion)
        for {label, inputs, opts} <- [
              {"f32", pattern_inputs(shared, :f32), []},
              {"model types", pattern_inputs(shared, :model),
               [quantize: :none, dequantize: :none]}
            ] do
          opts = [output: :binary] ++ opts
          {:ok, expected} = HexagonTpu.predict(client, inputs, opts)
          assert {:ok, ^expected} = HexagonTpu.predict(shared, inputs, opts)

          measured =
            for {kind, model} <- [shared: shared, client: client] do
              start = Stats.native()
              t0 = System.monotonic_time(:microsecond)

              for _ <- 1..runs,
                  do: assert({:ok, [_ | _]} = HexagonTpu.predict(model, inputs, opts))

              us = (System.monotonic_time(:microsecond) - t0) / runs
              done = Stats.native()

              client_bytes =
                div(done.client_buffer_bytes_total - start.client_buffer_bytes_total, runs)

              copied = div(done.host_copy_bytes_total - start.host_copy_bytes_total, runs)

              IO.puts(
                "#{label}, #{kind} buffers: #{Float.round(us, 1)} us per predict over #{runs}, " <>
                  "client-buffer bytes #{client_bytes}, host copies #{copied} bytes per predict"
              )

              {kind, client_bytes}
            end

          assert measured[:shared] == 0
          assert measured[:client] == io_bytes
        end

        :ok = HexagonTpu.Context.close(shared.context)
        :ok = HexagonTpu.Context.close(client.context)
        :ok = Runtime.close(runtime)

        assert Support.wait_until(fn -> Stats.native().shared_buffers_alive == alive end,
                 sweep: true
               )
      end)

    Support.assert_no_leaks(before, after_)
  end

  # An input for each of the model's: f32 values in [-1, 1) where it converts from f32 and
  # `kind` is :f32, varied bytes in its own type otherwise.
  defp pattern_inputs(model, kind) do
    for info <- Graph.inputs(model) do
      if kind == :f32 and info.f32_conversion,
        do: pattern_f32(HexagonTpu.TensorInfo.size(info)),
        else: for(k <- 1..info.byte_size, into: <<>>, do: <<rem(k * 31, 256)>>)
    end
  end

  defp pattern_f32(n),
    do: for(k <- 1..n, into: <<>>, do: <<rem(k * 37, 200) / 100 - 1.0::float-32-little>>)

  defp zero_inputs(model) do
    for info <- Graph.inputs(model) do
      if info.f32_conversion,
        do: :binary.copy(<<0.0::float-32-little>>, HexagonTpu.TensorInfo.size(info)),
        else: :binary.copy(<<0>>, info.byte_size)
    end
  end

  # The CDSP's remoteproc: its sysfs folder (name, state) and its debugfs one (crash, recovery).
  defp cdsp_remoteproc! do
    found =
      for dir <- Path.wildcard("/sys/class/remoteproc/remoteproc*"),
          File.read!(Path.join(dir, "name")) =~ "cdsp",
          do: dir

    case found do
      [sysfs | _] ->
        %{sysfs: sysfs, debugfs: Path.join("/sys/kernel/debug/remoteproc", Path.basename(sysfs))}

      [] ->
        flunk("no remoteproc named cdsp under /sys/class/remoteproc")
    end
  end
end
