defmodule FirmwareCheck do
  @moduledoc false
  # Compiled into the firmware-shaped release of .ci/firmware.sh (as lib/firmware_check.ex of
  # the user's project, beside examples/nerves/lib/my_app/application.ex) and started by init
  # once the release has booted (vm.args: `-run Elixir.FirmwareCheck run`): it runs as the
  # board's code runs, in embedded mode, with the release's own modules and the public API only.
  #
  # It prints what it finds, one `FIRMWARE <step> ...` line each, and `FIRMWARE done` last; the
  # script judges them (the diagnosis against what a board without a DSP reports, the
  # predictions against the model's arithmetic). An exception prints `FIRMWARE FAIL ...`.

  @patterns [
    horizontal: &__MODULE__.horizontal/2,
    vertical: &__MODULE__.vertical/2,
    diagonal: &__MODULE__.diagonal/2,
    corners: &__MODULE__.corners/2
  ]

  def run do
    # init calls this from its boot sequence: the check goes on in a process of its own.
    spawn(fn -> check() end)
    :ok
  end

  defp check do
    boot()
    diagnose()
    predict()
    serving()
    monitor()
  rescue
    error -> out("FAIL " <> Exception.format(:error, error, __STACKTRACE__))
  catch
    kind, reason -> out("FAIL #{inspect({kind, reason})}")
  after
    out("done")
  end

  defp boot do
    {uptime_ms, _} = :erlang.statistics(:wall_clock)
    {:ok, [[boot_script]]} = :init.get_argument(:boot)

    out(
      "boot #{:code.get_mode()} mode, OTP #{:erlang.system_info(:otp_release)} " <>
        "(erts #{:erlang.system_info(:version)}, #{:erlang.system_info(:emu_flavor)}) on " <>
        "#{:erlang.system_info(:system_architecture)}, Elixir #{System.version()}; " <>
        "boot script #{boot_script}; up #{uptime_ms} ms after the VM started"
    )

    apps = for {app, _, _} <- Application.started_applications(), do: app
    out("apps #{apps |> Enum.reverse() |> Enum.join(" ")}")

    children =
      for {id, pid, _, _} <- Supervisor.which_children(MyApp.Supervisor),
          do:
            "#{inspect(id)} #{if is_pid(pid) and Process.alive?(pid), do: "running", else: inspect(pid)}"

    out("tree MyApp.Supervisor: #{Enum.join(children, ", ")}")

    for name <- ~w(DSP_LIBRARY_PATH ADSP_LIBRARY_PATH),
        do: out("env #{name}=#{System.get_env(name, "(unset)")}")

    native = Path.join(to_string(:code.priv_dir(:hexagon_tpu)), "native")
    out("nif #{native |> Path.join("*.so") |> Path.wildcard() |> Enum.join(" ")}")
    sim = Keyword.fetch!(classifier(), :lib_path)

    out(
      "availability #{inspect(HexagonTpu.availability(lib_path: sim, system_lib_path: sim))} (#{sim})"
    )
  end

  # The doctor as on a board (no options: the device's own paths), its report as
  # `mix hexagon_tpu.doctor` prints it.
  defp diagnose do
    started = System.monotonic_time(:millisecond)
    checks = HexagonTpu.diagnose()
    took = System.monotonic_time(:millisecond) - started

    for line <- checks |> HexagonTpu.Diagnosis.format() |> String.split("\n"),
        do: out("diagnose " <> line)

    out("diagnosed #{length(checks)} checks in #{took} ms")
  end

  # Each pattern through HexagonTpu.predict/3 as the model's own bytes (dequantize: :none, the
  # u8 codes) and as f32; the f32 values must be the codes dequantized, exactly.
  defp predict do
    {model, load} = Keyword.pop!(classifier(), :model)
    {:ok, graph} = HexagonTpu.load_model(model, load)

    for {label, hot} <- @patterns do
      image = for r <- 0..3, c <- 0..3, into: <<>>, do: <<on(hot.(r, c))::float-32-little>>

      {:ok, [logits, probs]} =
        HexagonTpu.predict(graph, [image], output: :binary, dequantize: :none)

      {:ok, [_, probs_f32]} = HexagonTpu.predict(graph, [image], output: :binary)
      codes = :binary.bin_to_list(probs)
      floats = for <<p::float-32-little <- probs_f32>>, do: p

      if floats != Enum.map(codes, &(&1 / 256)),
        do:
          raise("#{label}: f32 probabilities #{inspect(floats)} are not #{inspect(codes)} / 256")

      class = codes |> Enum.with_index() |> Enum.max_by(&elem(&1, 0)) |> elem(1)

      out(
        "predict #{label} logits=#{Enum.join(:binary.bin_to_list(logits), ",")} " <>
          "probabilities=#{Enum.join(codes, ",")} class=#{class} p=#{Enum.at(floats, class)}"
      )
    end

    :ok = HexagonTpu.Graph.close(graph)
  end

  # The four patterns as one {4, 16} batch through the application's Nx.Serving.
  defp serving do
    rows = for {_, hot} <- @patterns, do: for(r <- 0..3, c <- 0..3, do: on(hot.(r, c)))
    images = Nx.tensor(rows, type: :f32)

    [_logits, probs] = Nx.Serving.batched_run(MyApp.Classifier, images)

    for {{label, _}, row} <- Enum.zip(@patterns, probs |> Nx.multiply(256) |> Nx.to_list()),
        do: out("serving #{label} probabilities=#{Enum.map_join(row, ",", &trunc/1)}")
  end

  defp monitor do
    [pid] =
      for {HexagonTpu.Monitor, pid, _, _} <- Supervisor.which_children(MyApp.Supervisor), do: pid

    sample = HexagonTpu.Monitor.sample(pid)
    keys = ~w(runtimes_alive contexts_alive graphs_alive executes execute_errors)a
    out("monitor sample: #{Enum.map_join(keys, " ", &"#{&1}=#{Map.fetch!(sample, &1)}")}")
  end

  defp classifier, do: Application.fetch_env!(:my_app, :classifier)

  def horizontal(r, _c), do: r == 1
  def vertical(_r, c), do: c == 2
  def diagonal(r, c), do: r == c
  def corners(r, c), do: r in [0, 3] and c in [0, 3]

  defp on(true), do: 1.0
  defp on(false), do: 0.0

  defp out(line), do: IO.puts("FIRMWARE " <> line)
end
