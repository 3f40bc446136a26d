defmodule HexagonTpu.QnnHostLogTest do
  # QNN's log at the default level on Qualcomm's HTP emulator: the start-up chatter it logs at
  # WARN on every runtime and load arrives at :debug, and a failure's explanation still at
  # :error.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  alias HexagonTpu.{Context, Runtime, Stats}
  alias HexagonTpu.Test.{QnnHost, Support}

  @moduletag :qnn_host
  @moduletag timeout: 600_000

  setup_all do
    %{u8: QnnHost.compiled!("u8_io", ["u8_io"])}
  end

  # Runtime.create/1 without :log_level (QnnHost.runtime_opts/0 sets :error).
  defp default_runtime!, do: Runtime.create!(Keyword.delete(QnnHost.runtime_opts(), :log_level))

  # Runs `fun` with Logger at :debug; waits until `count` more of QNN's lines were logged.
  defp logged(count, fun) do
    level = Logger.level()
    Logger.configure(level: :debug)

    try do
      capture_log(fn ->
        before = Stats.native().log_lines
        fun.()
        assert Support.wait_until(fn -> Stats.native().log_lines >= before + count end)
        :sys.get_state(HexagonTpu.QnnLog)
      end)
    after
      Logger.configure(level: level)
    end
  end

  test "creating a runtime and loading a binary at the default level logs no warning", %{u8: u8} do
    # A fresh runtime's first load: the emulator logs three lines at WARN (and its first
    # backend in this VM "Initializing HtpProvider").
    log =
      logged(3, fn ->
        runtime = default_runtime!()
        {:ok, context} = Context.from_file(runtime, u8.bin)
        Context.close(context)
      end)

    assert log =~ "[debug] QNN: m_CFBCallbackInfoObj is not initialized, return emptyList"
    assert log =~ "[debug] QNN: Sanitizing the value for hvx_threads and setting to default"
    refute log =~ "[warning]"
    refute log =~ "[error]"
  end

  test "a failure's explanation still reaches Logger at :error", %{u8: u8} do
    good = File.read!(u8.bin)
    offset = div(byte_size(good), 2)
    <<pre::binary-size(offset), _::binary-size(64), post::binary>> = good
    bad = pre <> :binary.copy(<<0xA5>>, 64) <> post
    runtime = default_runtime!()

    log =
      logged(1, fn ->
        assert {:error, %HexagonTpu.Error{qnn_code: code}} = Context.from_binary(runtime, bad)
        assert code in [5005, 5007]
      end)

    assert log =~ ~r/\[error\] QNN: .*(create context|deserializ|Failed)/i
  end
end
