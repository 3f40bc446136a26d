defmodule HexagonTpu.QnnHostSharedBuffersTest do
  # Shared buffers against Qualcomm's x86-64 HTP emulator: rpcmem opens (the fake one, the
  # emulator has no FastRPC), but the emulator answers QnnMem_register with 1000
  # (QNN_COMMON_ERROR_NOT_SUPPORTED), so a context loaded with `shared_buffers: :auto` falls
  # back to client buffers, says why and counts it, and predicts as a `shared_buffers: false`
  # one does, bit for bit; `shared_buffers: true` is refused. The counters are VM-wide: runs
  # alone.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  alias HexagonTpu.{Context, Error, Graph, Runtime, Stats, TensorInfo}
  alias HexagonTpu.Test.{QnnHost, Support}

  @moduletag :qnn_host
  @moduletag timeout: 600_000

  setup_all do
    %{u8: QnnHost.compiled!("u8_io", ["u8_io"])}
  end

  # The emulator's runtime, rpcmem the fake one (so only QnnMem can refuse).
  defp runtime!,
    do: Runtime.create!(QnnHost.runtime_opts() ++ [rpcmem_lib_path: Support.fake_rpcmem_lib()])

  defp graph!(context), do: Graph.retrieve!(context, hd(Context.graphs(context)))

  # Inputs for `graph`: f32 values (quantized on the host) and bytes in the model's type.
  defp f32_inputs(graph, seed) do
    for info <- Graph.inputs(graph) do
      for k <- 1..TensorInfo.size(info),
          into: <<>>,
          do: <<rem(k * 37 + seed, 200) / 100 - 1.0::float-32-little>>
    end
  end

  defp raw_inputs(graph, seed) do
    for info <- Graph.inputs(graph) do
      for k <- 1..info.byte_size, into: <<>>, do: <<rem(k * 31 + seed, 256)>>
    end
  end

  test "QnnMem_register answers 1000: :auto falls back to client buffers with the same " <>
         "outputs, true is refused",
       %{u8: u8} do
    runtime = runtime!()
    Stats.sweep()
    before = Stats.native()

    {auto, _log} =
      with_log(fn ->
        context = Context.from_file!(runtime, u8.bin)
        :ok = HexagonTpu.QnnLog.flush()
        context
      end)

    assert {:client, why} = auto.buffers
    IO.puts("\nQualcomm's HTP emulator, shared_buffers: :auto -> client buffers: #{why}")
    assert why =~ "memRegister"
    assert why =~ "1000"
    assert why =~ "NOT_SUPPORTED"

    after_ = Stats.native()
    assert after_.shared_buffer_fallbacks - before.shared_buffer_fallbacks == 1
    assert after_.shared_buffer_contexts == before.shared_buffer_contexts
    # the buffers allocated for the attempt were freed
    assert alive_becomes?(before.shared_buffers_alive)

    client = Context.from_file!(runtime, u8.bin, shared_buffers: false)
    assert client.buffers == :client
    {auto_graph, client_graph} = {graph!(auto), graph!(client)}

    for seed <- 0..3 do
      f32_in = f32_inputs(auto_graph, seed)

      assert Graph.execute!(auto_graph, f32_in, output: :binary) ==
               Graph.execute!(client_graph, f32_in, output: :binary)

      raw_in = raw_inputs(auto_graph, seed)
      raw = [quantize: :none, dequantize: :none, output: :binary]
      before = Stats.native()
      assert outputs = Graph.execute!(auto_graph, raw_in, raw)
      assert outputs == Graph.execute!(client_graph, raw_in, raw)
      # both in client buffers
      bytes =
        Enum.sum(
          for info <- Graph.inputs(auto_graph) ++ Graph.outputs(auto_graph),
              do: info.byte_size
        )

      assert Stats.native().client_buffer_bytes_total - before.client_buffer_bytes_total ==
               2 * bytes
    end

    {result, _log} =
      with_log(fn ->
        result = Context.from_file(runtime, u8.bin, shared_buffers: true)
        :ok = HexagonTpu.QnnLog.flush()
        result
      end)

    assert {:error, %Error{reason: :shared_buffers_unavailable} = error} = result
    IO.puts("Qualcomm's HTP emulator, shared_buffers: true -> #{error.message}")
    assert error.message =~ "memRegister"
    assert error.message =~ "1000"
    assert Stats.native().shared_buffer_fallbacks == after_.shared_buffer_fallbacks
    assert alive_becomes?(before.shared_buffers_alive)

    :ok = Context.close(auto)
    :ok = Context.close(client)
    :ok = Runtime.close(runtime)
  end

  defp alive_becomes?(n),
    do: Support.wait_until(fn -> Stats.native().shared_buffers_alive == n end, sweep: true)
end
