defmodule HexagonTpu.QnnLogTest do
  # QNN's log reaches Logger through HexagonTpu.QnnLog; qnn_sim writes its lines
  # through the log callback with a C va_list, as QNN does.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  alias HexagonTpu.{Context, Stats}
  alias HexagonTpu.Test.{Models, Support}

  setup do
    dir = Path.join(System.tmp_dir!(), "hexagon_tpu_log_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{lib: Support.private_sim_lib!(dir)}
  end

  # Runs `fun`, then waits until QnnLog has logged `count` more lines of QNN's.
  defp logged(count, fun) do
    capture_log(fn ->
      before = Stats.native().log_lines
      fun.()
      assert Support.wait_until(fn -> Stats.native().log_lines >= before + count end)
      # Every line sent before this call is handled before it returns.
      :sys.get_state(HexagonTpu.QnnLog)
    end)
  end

  test "a failure's explanation from QNN arrives in Logger at :error", %{lib: lib} do
    t = Models.t(:float_32, [4])
    path = Models.build!(Models.identity(t, t, fail_context_create: {1002, :always}))
    runtime = Support.runtime!(lib)

    log =
      logged(1, fn ->
        assert {:error, %HexagonTpu.Error{qnn_code: 1002}} = Context.from_file(runtime, path)
      end)

    assert log =~ "[error]"
    assert log =~ "QNN: qnn_sim: contextCreateFromBinary failed with 1002: injected fault"
  end

  test "flush/1: once it returns :ok, a failed call's explanation is in Logger", %{lib: lib} do
    t = Models.t(:float_32, [4])
    path = Models.build!(Models.identity(t, t, fail_context_create: {1002, :always}))
    runtime = Support.runtime!(lib)
    assert :ok = HexagonTpu.QnnLog.flush()
    before = Stats.native().log_lines

    log =
      capture_log(fn ->
        assert {:error, %HexagonTpu.Error{qnn_code: 1002}} = Context.from_file(runtime, path)
        assert :ok = HexagonTpu.QnnLog.flush(10_000)
        # Counted when handed on: nothing is left to wait for.
        assert Stats.native().log_lines == before + 1
      end)

    assert log =~ "QNN: qnn_sim: contextCreateFromBinary failed with 1002: injected fault"
    # Nothing queued: at once, whatever the timeout.
    assert :ok = HexagonTpu.QnnLog.flush(0)
  end

  test "log_level: :none gives QNN no log: nothing is logged", %{lib: lib} do
    t = Models.t(:float_32, [4])
    path = Models.build!(Models.identity(t, t, fail_context_create: {1002, :always}))
    {:ok, silent} = HexagonTpu.Runtime.create(Support.runtime_opts(lib) ++ [log_level: :none])
    {:ok, control} = HexagonTpu.Runtime.create(Support.runtime_opts(lib))
    before = Stats.native().log_lines

    log =
      capture_log(fn ->
        assert {:error, _} = Context.from_file(silent, path)
        # The same failure on a runtime that logs: its line is queued after any line of the
        # silent runtime's, so once it has arrived, a line from the silent one would have too.
        assert {:error, _} = Context.from_file(control, path)
        assert Support.wait_until(fn -> Stats.native().log_lines > before end)
        :sys.get_state(HexagonTpu.QnnLog)
      end)

    assert Stats.native().log_lines == before + 1
    assert [_one] = Regex.scan(~r/QNN: qnn_sim: contextCreateFromBinary failed/, log)
  end

  @chatter [
    "Initializing HtpProvider",
    "No op packages found for architecture 68; falling back to no-arch bucket",
    "m_CFBCallbackInfoObj is not initialized, return emptyList",
    "Sanitizing the value for hvx_threads and setting to default"
  ]

  test "a backend's known start-up chatter is logged at :debug; any other warning at :warning",
       %{lib: lib} do
    # qnn_sim logs these lines at WARN on every load, word for word as Qualcomm's emulator does,
    # and one that is not chatter.
    lines = @chatter ++ ["Sanitizing the value for hmx_threads and setting to default"]
    :ok = HexagonTpu.Native.qnn_sim_configure(lib, "log_on_load", Enum.join(lines, "\n"))
    t = Models.t(:float_32, [4])
    path = Models.build!(Models.identity(t, t))
    runtime = Support.runtime!(lib)

    # At the test's Logger level (:warning) only the line that is not chatter shows.
    log = logged(5, fn -> Context.close(Context.from_file!(runtime, path)) end)
    assert log =~ "[warning] QNN: Sanitizing the value for hmx_threads and setting to default"
    assert [_one] = Regex.scan(~r/\[warning\]/, log)
    for line <- @chatter, do: refute(log =~ line)

    # At :debug the chatter is there, at :debug.
    level = Logger.level()
    Logger.configure(level: :debug)

    log =
      try do
        logged(5, fn -> Context.close(Context.from_file!(runtime, path)) end)
      after
        Logger.configure(level: level)
      end

    for line <- @chatter, do: assert(log =~ "[debug] QNN: " <> line)
    assert [_one] = Regex.scan(~r/\[warning\]/, log)
  end
end
