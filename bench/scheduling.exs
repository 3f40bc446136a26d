# Does a saturated slow model hold up a fast one? Prints the fast model's predict/3 latency
# (p50/p99) alone and while a slow model (50 ms per execute) is saturated by 8 callers, and the
# round trip of a message to a process on a normal scheduler in both phases; and predict/3's own
# time above QNN's graphExecute, direct and with a deadline (queued on the graph's thread). Runs on the host
# QNN backend; timings are the runtime's and the VM's, not a device's.
#
#   bash bench/run.sh            (builds the release NIF and qnn_sim, then runs this)
#   mix run bench/scheduling.exs BUILDER LIBQNN_SIM    (HEXAGON_TPU_OFFLINE=1 without Hex)

Code.require_file("support.exs", __DIR__)

[builder, lib] =
  case System.argv() do
    [builder, lib] -> [builder, lib]
    _ -> raise "usage: mix run bench/scheduling.exs QNN_SIM_BUILD LIBQNN_SIM.so"
  end

alias HexagonTpu.{Context, Graph, Runtime}

dir = Path.join(System.tmp_dir!(), "hexagon_tpu_bench_#{System.os_time()}")
File.mkdir_p!(dir)

model = fn name, sleep_ms ->
  spec = ~s({"graphs": [{"name": "#{name}",
    "inputs": [{"name": "x", "dtype": "float_32", "shape": [1, 16]}],
    "nodes": [{"op": "identity", "inputs": ["x"],
               "output": {"name": "y", "dtype": "float_32", "shape": [1, 16]}}],
    "outputs": ["y"]}], "behaviour": {"sleep_ms": #{sleep_ms}}})
  HexagonTpu.BenchSupport.sim_model!(builder, dir, name, spec)
end

runtime = Runtime.create!(lib_path: lib, system_lib_path: lib)

load = fn path ->
  context = Context.from_file!(runtime, path)
  Graph.retrieve!(context, hd(Context.graphs(context)))
end

fast = load.(model.("fast", 0))
slow = load.(model.("slow", 50))
input = for i <- 1..16, into: <<>>, do: <<i * 1.0::float-32-little>>

percentiles = fn samples ->
  sorted = Enum.sort(samples)
  n = length(sorted)
  at = fn q -> Enum.at(sorted, min(n - 1, trunc(q * n))) end
  {at.(0.5), at.(0.99)}
end

time_us = fn fun ->
  started = System.monotonic_time()
  fun.()
  System.convert_time_unit(System.monotonic_time() - started, :native, :nanosecond) / 1000
end

pinger =
  spawn(fn ->
    Stream.repeatedly(fn ->
      receive do
        {:ping, from} -> send(from, :pong)
      end
    end)
    |> Stream.run()
  end)

measure = fn label ->
  predict =
    for _ <- 1..2_000,
        do: time_us.(fn -> {:ok, _} = Graph.execute(fast, [input], output: :binary) end)

  ping =
    for _ <- 1..2_000,
        do:
          time_us.(fn ->
            send(pinger, {:ping, self()})

            receive do
              :pong -> :ok
            end
          end)

  {p50, p99} = percentiles.(predict)
  {ping50, ping99} = percentiles.(ping)

  us = &(:erlang.float_to_binary(&1 * 1.0, decimals: 1) |> String.pad_leading(8))

  IO.puts(
    String.pad_trailing(label, 36) <>
      "predict p50 #{us.(p50)} µs  p99 #{us.(p99)} µs   ping p50 #{us.(ping50)} µs  p99 #{us.(ping99)} µs"
  )

  {p50, p99}
end

IO.puts(
  "schedulers: #{System.schedulers_online()} normal, #{:erlang.system_info(:dirty_cpu_schedulers_online)} dirty CPU"
)

_warm = measure.("warm-up")
{_, idle_p99} = measure.("fast model alone")

# predict/3's own time: the whole call less QNN's graphExecute (Stats' execute_ns_last), on the
# direct path (an idle graph runs on the caller's dirty scheduler) and with a deadline (timeout:
# always hands the execute to the graph's thread, and the answer comes by message).
above = fn label, opts ->
  samples =
    for _ <- 1..2_000 do
      total = time_us.(fn -> {:ok, _} = HexagonTpu.predict(fast, [input], opts) end)
      total - HexagonTpu.Stats.native().execute_ns_last / 1000
    end

  {p50, p99} = percentiles.(samples)
  us = &(:erlang.float_to_binary(&1 * 1.0, decimals: 1) |> String.pad_leading(8))

  IO.puts(
    String.pad_trailing(label, 36) <> "above graphExecute p50 #{us.(p50)} µs  p99 #{us.(p99)} µs"
  )
end

above.("predict/3, idle graph", output: :binary)
above.("predict/3 with timeout: (queued)", output: :binary, timeout: 60_000)

callers =
  for _ <- 1..8 do
    spawn_link(fn ->
      Stream.repeatedly(fn -> {:ok, _} = Graph.execute(slow, [input], output: :binary) end)
      |> Stream.run()
    end)
  end

Process.sleep(200)
{_, busy_p99} = measure.("slow model saturated by 8 callers")
Enum.each(callers, &Process.unlink/1)
Enum.each(callers, &Process.exit(&1, :kill))

ratio = :erlang.float_to_binary(busy_p99 / idle_p99, decimals: 2)
IO.puts("fast model's p99 under load / alone: #{ratio}x (goal: within 2x)")

File.rm_rf!(dir)
