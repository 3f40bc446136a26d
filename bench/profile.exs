# What profiling costs an execute: Graph.execute/3's time with profiling off, with
# `profile_every: 100`, with every execute sampled (`profile_every: 1`), and with
# `profile: :detailed` asked on every call, interleaved round by round (each round starting
# with the next mode) so that drift and ordering hit every mode alike. Prints the median and
# mean per mode and the profile handles each mode created (0 when off).
#
#   bash bench/run.sh            (builds the release NIF and qnn_sim, then runs this on qnn_sim)
#   mix run bench/profile.exs BUILDER LIBQNN_SIM [QNN_LIB_DIR CONTEXT_BINARY ROUNDS]
#
# With QNN_LIB_DIR and CONTEXT_BINARY it measures that binary on Qualcomm's backend in
# QNN_LIB_DIR (libQnnHtp.so, libQnnSystem.so: the x86 emulator of the compile venv) too, with
# zero-filled inputs in the model's own types; ROUNDS (default 300) executes per mode.

alias HexagonTpu.{Context, Graph, Profile, Runtime, Stats}

Code.require_file("support.exs", __DIR__)

{builder, lib, qnn} =
  case System.argv() do
    [builder, lib] -> {builder, lib, nil}
    [builder, lib, qnn_dir, bin] -> {builder, lib, {qnn_dir, bin, 300}}
    [builder, lib, qnn_dir, bin, n] -> {builder, lib, {qnn_dir, bin, String.to_integer(n)}}
    _ -> raise "usage: mix run bench/profile.exs BUILDER LIBQNN_SIM [QNN_LIB_DIR BIN [ROUNDS]]"
  end

dir = Path.join(System.tmp_dir!(), "hexagon_tpu_bench_profile_#{System.os_time()}")
File.mkdir_p!(dir)

# Eight ops in a chain: eight node events per detailed profile.
sim_model = fn ->
  nodes =
    for i <- 1..8 do
      input = if i == 1, do: "x", else: "t#{i - 1}"
      name = if i == 8, do: "y", else: "t#{i}"

      ~s({"op": "relu", "inputs": ["#{input}"],
          "output": {"name": "#{name}", "dtype": "float_32", "shape": [1, 64]}})
    end

  spec = ~s({"graphs": [{"name": "chain",
    "inputs": [{"name": "x", "dtype": "float_32", "shape": [1, 64]}],
    "nodes": [#{Enum.join(nodes, ",")}], "outputs": ["y"]}]})

  HexagonTpu.BenchSupport.sim_model!(builder, dir, "chain", spec)
end

zeros = fn graph -> for info <- graph.inputs, do: :binary.copy(<<0>>, info.byte_size) end

bench = fn label, runtime, bin, rounds ->
  context = Context.from_file!(runtime, bin)
  name = hd(Context.graphs(context))
  created = Stats.native().profiles_created

  graphs = %{
    off: Graph.retrieve!(context, name),
    every_100: Graph.retrieve!(context, name, profile_every: 100),
    every_1: Graph.retrieve!(context, name, profile_every: 1),
    asked: Graph.retrieve!(context, name)
  }

  opts = %{asked: [profile: :detailed]}
  input = zeros.(graphs.off)
  modes = [:off, :every_100, :every_1, :asked]

  run = fn mode ->
    started = System.monotonic_time()

    _ =
      Graph.execute(
        graphs[mode],
        input,
        [quantize: :none, output: :binary] ++ Map.get(opts, mode, [])
      )

    System.convert_time_unit(System.monotonic_time() - started, :native, :nanosecond) / 1000
  end

  # warm-up: the first execute of a graph, and the asked handle's creation
  for mode <- modes, _ <- 1..3, do: run.(mode)

  # Each round starts with the next mode, so none always follows the same one.
  samples =
    Enum.reduce(1..rounds, Map.new(modes, &{&1, []}), fn round, acc ->
      {first, last} = Enum.split(modes, rem(round, length(modes)))

      Enum.reduce(last ++ first, acc, fn mode, acc ->
        Map.update!(acc, mode, &[run.(mode) | &1])
      end)
    end)

  IO.puts("#{label}: #{rounds} executes per mode, interleaved")
  IO.puts("  mode                       median µs    mean µs")

  for mode <- modes do
    sorted = Enum.sort(samples[mode])
    median = Enum.at(sorted, div(length(sorted), 2))
    mean = Enum.sum(sorted) / length(sorted)

    text =
      case mode do
        :off -> "off"
        :every_100 -> "profile_every: 100"
        :every_1 -> "profile_every: 1"
        :asked -> "profile: :detailed"
      end

    :io.format("  ~-24s ~10.1f ~10.1f~n", [text, median, mean])
  end

  table = Profile.table(graphs.every_100)
  IO.puts("  samples taken at 1 in 100: #{table.samples}; ops in the table: #{length(table.ops)}")

  IO.puts(
    "  profile handles created: #{Stats.native().profiles_created - created} " <>
      "(one per sampling graph, one for the asked level; none for :off)"
  )
end

sim = Runtime.create!(lib_path: lib, system_lib_path: lib)
bench.("qnn_sim, 8 relu ops", sim, sim_model.(), 3_000)

case qnn do
  nil ->
    :ok

  {qnn_dir, bin, rounds} ->
    runtime =
      Runtime.create!(
        lib_path: Path.join(qnn_dir, "libQnnHtp.so"),
        system_lib_path: Path.join(qnn_dir, "libQnnSystem.so"),
        log_level: :error
      )

    bench.("HTP emulator, #{Path.basename(bin)}", runtime, bin, rounds)
end

File.rm_rf!(dir)
