defmodule HexagonTpu.QnnHostLogTest do
  # QNN's log at the default level on Qualcomm's HTP emulator: the start-up chatter it logs at
  # WARN on every runtime and load arrives at :debug, and a failure's explanation still at
  # :error.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  alias HexagonTpu.{Context, Runtime, Stats}
  alias HexagonTpu.Test.QnnHost

  @moduletag :qnn_host
  @moduletag timeout: 600_000

  # A :logger handler that sends this test the QNN lines Logger logs: {:qnn_log, level, text}.
  defmodule Forward do
    @moduledoc false
    def log(%{level: level, msg: msg}, %{config: %{pid: pid}}) do
      text =
        case msg do
          {:string, text} -> IO.chardata_to_string(text)
          {format, args} when is_list(args) -> IO.chardata_to_string(:io_lib.format(format, args))
          other -> inspect(other)
        end

      if String.starts_with?(text, "QNN: "), do: send(pid, {:qnn_log, level, text})
    end
  end

  setup_all do
    %{u8: QnnHost.compiled!("u8_io", ["u8_io"])}
  end

  setup do
    # Frees left by earlier tests log (the emulator warns when freeing a device after a failed
    # load): they happen now, not in this test's window.
    Stats.sweep()
    :ok = HexagonTpu.QnnLog.flush()
    level = Logger.level()
    Logger.configure(level: :debug)
    id = :"qnn_host_log_#{System.unique_integer([:positive])}"
    :ok = :logger.add_handler(id, Forward, %{config: %{pid: self()}})

    on_exit(fn ->
      :logger.remove_handler(id)
      Logger.configure(level: level)
    end)
  end

  # Runtime.create/1 without :log_level (QnnHost.runtime_opts/0 sets :error).
  defp default_runtime!, do: Runtime.create!(Keyword.delete(QnnHost.runtime_opts(), :log_level))

  defp received_lines do
    receive do
      {:qnn_log, level, text} -> [{level, text} | received_lines()]
    after
      0 -> []
    end
  end

  test "creating a runtime and loading a binary at the default level logs no warning", %{u8: u8} do
    capture_log(fn ->
      runtime = default_runtime!()
      # Client buffers asked for: without libcdsprpc.so, :auto's fallback says why once per VM
      # (a warning of ours, whichever test loads first), and QNN's own lines are in question.
      {:ok, context} = Context.from_file(runtime, u8.bin, shared_buffers: false)
      # The last of the lines the emulator logs at WARN on a runtime's first load, in order.
      last = "QNN: Sanitizing the value for hvx_threads and setting to default"
      assert_receive {:qnn_log, :debug, ^last}, 10_000
      Context.close(context)
      Runtime.close(runtime)
    end)

    lines = received_lines()
    assert {:debug, "QNN: m_CFBCallbackInfoObj is not initialized, return emptyList"} in lines
    assert Enum.filter(lines, fn {level, _} -> level != :debug end) == []
  end

  test "a failure's explanation still reaches Logger at :error", %{u8: u8} do
    good = File.read!(u8.bin)
    offset = div(byte_size(good), 2)
    <<pre::binary-size(offset), _::binary-size(64), post::binary>> = good
    bad = pre <> :binary.copy(<<0xA5>>, 64) <> post
    runtime = default_runtime!()

    capture_log(fn ->
      assert {:error, %HexagonTpu.Error{qnn_code: code}} = Context.from_binary(runtime, bad)
      assert code in [5005, 5007]
      # QNN's words for it, at :error (the emulator's first is "Issue reading weight offset").
      assert_receive {:qnn_log, :error, "QNN: " <> _}, 10_000
      assert explained?()
      Runtime.close(runtime)
    end)
  end

  # Whether an :error line saying the load failed arrives (within 10 s).
  defp explained? do
    receive do
      {:qnn_log, :error, text} -> text =~ ~r/create context|deserializ|Failed/i or explained?()
    after
      10_000 -> false
    end
  end
end
