# Run by test/qnn_host_exit_test.exs and test/qnn_exit_test.exs in a VM of its own: it brings
# the QNN objects into one state, says so on stdout, and ends the VM one way, so the test can
# check the exit status and that nothing of QNN's reached stdout or stderr.
#
#   elixir -pa EBIN test/support/qnn_exit_child.exs LIB SYSTEM_LIB MODEL.bin STATE METHOD STATUS
#
# STATE:
#   idle     two runtimes, three contexts and their graphs open, after one execute
#   running  as idle, and an execute running (started by another process) at the exit
#   queued   as running, and three more executes queued behind it on the same graph
#   frees    as idle, then closes issued (not awaited) and models dropped to the garbage
#            collector (their processes killed), right before the exit
# METHOD: halt (System.halt(STATUS)), stop (:init.stop(STATUS)), sigterm (the test sends the OS
# process SIGTERM once it reads `CHILD ready`; the VM stops with status 0), end (the script
# simply ends, as a `mix run` script does: status 0), or, for diagnosis,
# halt_noflush (:erlang.halt(STATUS, flush: false)) and kill_all (every process holding QNN
# objects killed and the garbage collected, then System.halt(STATUS)).
#
# On qnn_sim (LIB ends in libqnn_sim.so) the model sleeps in execute; the child waits until
# qnn_sim has entered the execute. On Qualcomm's emulator a ResNet-50 execute takes seconds, so
# a short wait after its caller starts puts the exit inside it.
[lib, system_lib, model, state, method, status] = System.argv()
status = String.to_integer(status)
{:ok, _} = Application.ensure_all_started(:hexagon_tpu)

alias HexagonTpu.{Context, Graph, Runtime}

sim? = String.ends_with?(lib, "libqnn_sim.so")
opts = [lib_path: lib, system_lib_path: system_lib, log_level: :error]
say = fn line -> IO.puts("CHILD #{line}") end

entered = fn ->
  if sim?, do: elem(HexagonTpu.Native.qnn_sim_counters(lib), 1).execute_count, else: 0
end

# Waits until `count` executes have entered the backend (qnn_sim), or a while (the emulator).
await_entered = fn count ->
  if sim? do
    deadline = System.monotonic_time(:millisecond) + 30_000

    Stream.repeatedly(fn -> Process.sleep(1) end)
    |> Enum.find(fn _ ->
      entered.() >= count or System.monotonic_time(:millisecond) > deadline
    end)

    entered.() >= count
  else
    Process.sleep(500)
    true
  end
end

load = fn runtime ->
  context = Context.from_file!(runtime, model)
  {context, Graph.retrieve!(context, hd(Context.graphs(context)))}
end

inputs = fn graph -> for info <- Graph.inputs(graph), do: :binary.copy(<<0>>, info.byte_size) end
execute_opts = [quantize: :none, dequantize: :none, output: :binary]

execute = fn graph ->
  {:ok, _} = Graph.execute(graph, inputs.(graph), execute_opts)
end

# Everything lives in one process, `holder`, and the ones it starts; the exit comes from the
# script's own process, which holds nothing of QNN's.
main = self()

holder =
  spawn(fn ->
    me = self()
    # Two runtimes, three contexts and their graphs; one execute.
    runtime_a = Runtime.create!(opts)
    runtime_b = Runtime.create!(opts)
    {context_1, graph_1} = load.(runtime_a)
    {context_2, graph_2} = load.(runtime_a)
    {context_3, graph_3} = load.(runtime_b)
    execute.(graph_1)
    kept = [runtime_a, runtime_b, context_1, context_2, context_3, graph_1, graph_2, graph_3]

    in_flight = fn graph, count ->
      before = entered.()
      parent = self()

      callers =
        for n <- 1..count do
          spawn(fn ->
            send(parent, {:calling, n})
            execute.(graph)
            IO.puts("CHILD an execute returned")
          end)
        end

      for n <- 1..count, do: receive(do: ({:calling, ^n} -> :ok))
      await_entered.(before + 1) || raise "no execute entered the backend"
      callers
    end

    holders =
      case state do
        "idle" ->
          []

        "running" ->
          in_flight.(graph_2, 1)

        "queued" ->
          # The first runs; the rest wait their turn behind it (queued on the graph's worker).
          first = in_flight.(graph_2, 1)
          queued = for _ <- 1..3, do: spawn(fn -> execute.(graph_2) end)
          Process.sleep(50)
          first ++ queued

        "frees" ->
          # Models held only by processes about to be killed, and closes issued but not awaited.
          dropped =
            for runtime <- [runtime_a, runtime_b, Runtime.create!(opts)] do
              spawn(fn ->
                {_context, _graph} = load.(runtime)
                send(me, {:loaded, self()})
                Process.sleep(:infinity)
              end)
            end

          for pid <- dropped, do: receive(do: ({:loaded, ^pid} -> :ok))

          closers =
            for object <- [graph_3, context_2, context_3, runtime_b],
                do: spawn(fn -> object.__struct__.close(object) end)

          Enum.each(dropped, &Process.exit(&1, :kill))
          # No wait for the kills to land: the exit races the garbage collector's frees.
          :erlang.garbage_collect()
          closers

        other ->
          raise "unknown state #{other}"
      end

    send(main, {:ready, self(), holders})
    _ = kept
    Process.sleep(:infinity)
  end)

ref = Process.monitor(holder)

holders =
  receive do
    {:ready, ^holder, holders} -> holders
    {:DOWN, ^ref, _, _, reason} -> raise "the holder failed: #{inspect(reason)}"
  end

say.("ready state=#{state} method=#{method} os_pid=#{System.pid()}")

case method do
  "halt" ->
    System.halt(status)

  "stop" ->
    # Asynchronous: the script must not end (and halt with 0) while init stops the VM.
    :init.stop(status)
    Process.sleep(:infinity)

  "sigterm" ->
    # The test sends SIGTERM; the VM turns it into init:stop() (status 0).
    Process.sleep(:infinity)

  "end" ->
    # The script's normal end, models open: `elixir` then stops the VM with status 0.
    :ok

  "halt_noflush" ->
    :erlang.halt(status, flush: false)

  "kill_all" ->
    # Nothing of ours holds QNN objects any more: every holder killed, the garbage collected.
    Enum.each([holder | holders], &Process.exit(&1, :kill))
    Process.sleep(100)
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    System.halt(status)
end
