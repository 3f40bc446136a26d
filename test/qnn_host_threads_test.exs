defmodule HexagonTpu.QnnHostThreadsTest do
  # QNN's handles and QNN's log against Qualcomm's own HTP emulator: the backend notices when
  # a device handle is freed on another thread than it was made on, and prints to stdout
  # unless it is given a log callback. Runs in a child VM of its own (see its first lines).
  use ExUnit.Case, async: false

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
    # A corrupt binary's explanation, in QNN's own words, at :error, tagged with the library
    # (in the child: the emulator printed it to stdout once in this VM, after other tests).
    assert [_, code] = Regex.run(~r/CHILD corrupt_binary_code=(\d+)/, output)
    assert code in ["5005", "5007"]
    assert output =~ ~r/\[error\] QNN: .*(create context|deserializ|Failed)/i
    # QNN's own lines went to Logger (the emulator's start-up chatter, demoted to :debug)...
    [_, lines] = Regex.run(~r/CHILD log_lines=(\d+)/, output)
    assert String.to_integer(lines) > 0
    assert output =~ "[debug] QNN: Initializing HtpProvider"
    # ...and none of them is about a handle on the wrong thread.
    refute output =~ "device handle", output
    refute output =~ "current thread", output

    # QNN printed nothing itself, but the emulator's load-time LIBNATIVE line (see guides/observability.md).
    raw =
      output
      |> String.split("\n")
      |> Enum.filter(&(&1 =~ ~r/^\s*<[EWIVD]>/ or &1 =~ ~r/^\s*#\s*LIBNATIVE/))
      |> Enum.reject(&(&1 =~ "LIBNATIVE: No alternate configuration present"))

    assert raw == []
  end
end
