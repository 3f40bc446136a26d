defmodule HexagonTpu.QnnHostThreadsTest do
  # QNN's handles and QNN's log against Qualcomm's own HTP emulator: the backend notices when
  # a device handle is freed on another thread than it was made on, and prints to stdout
  # unless it is given a log callback.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  alias HexagonTpu.{Context, Stats}
  alias HexagonTpu.Test.{QnnHost, Support}

  @moduletag :qnn_host
  @child Path.expand("support/qnn_host_child.exs", __DIR__)

  setup_all do
    %{u8: QnnHost.compiled!("u8_io", ["u8_io"])}
  end

  test "no handle is freed off its thread, and nothing of QNN's reaches stdout, across GC frees, closes under dirty-IO load and an orderly VM stop",
       %{u8: u8} do
    {output, status} =
      System.cmd(
        System.find_executable("elixir"),
        Support.child_code_path() ++ [@child, QnnHost.lib_dir(), u8.bin],
        stderr_to_stdout: true,
        env: [{"HEXAGON_TPU_OFFLINE", "1"}]
      )

    assert status == 0, output
    assert output =~ "CHILD stopping"
    # QNN's own lines went to Logger (the emulator's start-up chatter, demoted to :debug)...
    [_, lines] = Regex.run(~r/CHILD log_lines=(\d+)/, output)
    assert String.to_integer(lines) > 0
    assert output =~ "[debug] QNN: Initializing HtpProvider"
    # ...and none of them is about a handle on the wrong thread.
    refute output =~ "device handle", output
    refute output =~ "current thread", output

    # QNN printed nothing itself, but the emulator's load-time LIBNATIVE line (see the README).
    raw =
      output
      |> String.split("\n")
      |> Enum.filter(&(&1 =~ ~r/^\s*<[EWIVD]>/ or &1 =~ ~r/^\s*#\s*LIBNATIVE/))
      |> Enum.reject(&(&1 =~ "LIBNATIVE: No alternate configuration present"))

    assert raw == []
  end

  test "a corrupt binary's explanation from QNN arrives in Logger", %{u8: u8} do
    good = File.read!(u8.bin)
    offset = div(byte_size(good), 2)
    <<pre::binary-size(offset), _::binary-size(64), post::binary>> = good
    bad = pre <> :binary.copy(<<0xA5>>, 64) <> post

    {:ok, runtime} =
      HexagonTpu.Runtime.create(Keyword.put(QnnHost.runtime_opts(), :log_level, :warn))

    log =
      capture_log(fn ->
        before = Stats.native().log_lines
        assert {:error, %HexagonTpu.Error{qnn_code: code}} = Context.from_binary(runtime, bad)
        assert code in [5005, 5007]
        assert Support.wait_until(fn -> Stats.native().log_lines > before end)
        Process.sleep(50)
        :sys.get_state(HexagonTpu.QnnLog)
      end)

    # QNN's own words for the failure, at :error, tagged with the library.
    assert log =~ ~r/\[error\] QNN: .*(create context|deserializ|Failed)/i
  end
end
