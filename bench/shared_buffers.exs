# Shared buffers against client buffers, on qnn_sim over the fake rpcmem (memfd): per predict,
# the bytes handed to QNN in client buffers (what FastRPC copies to the DSP and back on the
# device: Stats' client_buffer_bytes_total), the bytes copied on the host
# (host_copy_bytes_total), and the time of a predict of a 640x640x3 u8 graph (scale 1/255),
# f32 in and f32 out (quantized and dequantized on the host), and in the model's own type.
# Beside them: graphExecute's own time (execute_ns_total) and memcpy of the f32 frame (the
# physical limit of touching its bytes once), in the same run. On qnn_sim the executes run on
# the host, so the times show the host path only; the copies FastRPC saves are the device's
# (a :hardware test measures them on the board). Prints figures; asserts nothing.
#
#   bash bench/run.sh shared-buffers
#   mix run bench/shared_buffers.exs BUILDER LIBQNN_SIM FAKE_RPCMEM [RUNS]
#     (HEXAGON_TPU_OFFLINE=1 without Hex)

Code.require_file("support.exs", __DIR__)

[builder, lib, rpcmem | rest] = System.argv()
runs = String.to_integer(List.first(rest) || "200")

alias HexagonTpu.{Runtime, Stats}

dir = Path.join(System.tmp_dir!(), "hexagon_tpu_shared_buffers_#{System.os_time()}")
File.mkdir_p!(dir)
shape = [1, 640, 640, 3]
quant = ~s({"scale": 0.00392156862745098, "offset": 0})

spec = ~s({"graphs": [{"name": "frame",
  "inputs": [{"name": "image", "dtype": "ufixed_point_8", "shape": #{inspect(shape)},
              "quant": #{quant}}],
  "nodes": [{"op": "identity", "inputs": ["image"],
             "output": {"name": "y", "dtype": "ufixed_point_8", "shape": #{inspect(shape)},
                        "quant": #{quant}}}],
  "outputs": ["y"]}]})
bin = HexagonTpu.BenchSupport.sim_model!(builder, dir, "frame", spec)

runtime = Runtime.create!(lib_path: lib, system_lib_path: lib, rpcmem_lib_path: rpcmem)
{:ok, shared} = HexagonTpu.load_model(bin, runtime: runtime, shared_buffers: true)
{:ok, client} = HexagonTpu.load_model(bin, runtime: runtime, shared_buffers: false)
:shared = shared.context.buffers
:client = client.context.buffers

elements = Enum.product(shape)
f32_frame = for i <- 0..(elements - 1), into: <<>>, do: <<rem(i, 256) / 255::float-32-little>>
u8_frame = for i <- 0..(elements - 1), into: <<>>, do: <<rem(i, 256)>>

inputs = [
  {"f32 in, f32 out", f32_frame, []},
  {"u8 in, u8 out (model's type)", u8_frame,
   [output: :binary, quantize: :none, dequantize: :none]}
]

# Each predict's outputs are dropped at once, so a shared output's buffer goes back to the pool
# at the next collection of this process.
measure = fn graph, input, opts ->
  before = Stats.native()
  started = System.monotonic_time()

  for _ <- 1..runs do
    {:ok, _} = HexagonTpu.predict(graph, [input], opts)
    :erlang.garbage_collect()
  end

  wall = System.convert_time_unit(System.monotonic_time() - started, :native, :nanosecond)
  after_ = Stats.native()
  delta = &((Map.fetch!(after_, &1) - Map.fetch!(before, &1)) / runs)

  {wall / runs / 1.0e6, delta.(:execute_ns_total) / 1.0e6, delta.(:client_buffer_bytes_total),
   delta.(:host_copy_bytes_total)}
end

# memcpy of the f32 frame: :binary.copy/1 of its bytes, the best of a few rounds.
memcpy_ms =
  Enum.min(
    for _ <- 1..20 do
      {us, _} = :timer.tc(fn -> :binary.copy(f32_frame) end)
      us / 1000
    end
  )

ms = &(:erlang.float_to_binary(&1 / 1, decimals: 3) |> String.pad_leading(8))
bytes = &(&1 |> round() |> Integer.to_string() |> String.pad_leading(10))

IO.puts("""
#{runs} predicts each of a 640x640x3 u8 graph on qnn_sim (identity), rpcmem: #{rpcmem}
memcpy of the f32 frame (#{byte_size(f32_frame)} bytes): #{ms.(memcpy_ms)} ms

                                            ms/predict  graphExecute  client bytes  host copies
""")

for {label, input, opts} <- inputs do
  # warm both, so that neither pays the first execute
  measure_warm = fn graph -> HexagonTpu.predict(graph, [input], opts) end
  measure_warm.(shared)
  measure_warm.(client)

  for {path, graph} <- [{"shared", shared}, {"client", client}] do
    {wall, execute, client_bytes, copied} = measure.(graph, input, opts)

    IO.puts(
      String.pad_trailing("#{path} buffers, #{label}", 44) <>
        "#{ms.(wall)}      #{ms.(execute)}  #{bytes.(client_bytes)}   #{bytes.(copied)}"
    )
  end
end

File.rm_rf!(dir)
