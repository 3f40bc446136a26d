defmodule HexagonTpu.QnnHostPreflightTest do
  # The pre-flight verdict and inspect_model on Qualcomm's libraries: the pinned QAIRT 2.51
  # emulator, and QAIRT 2.47's (the onnxruntime-qnn 2.3.0 wheel, QnnHost.older_lib_dir!/0).
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  alias HexagonTpu.{Context, Error, ModelInfo, Runtime}
  alias HexagonTpu.Test.QnnHost

  @moduletag :qnn_host
  @moduletag timeout: 600_000

  setup_all do
    %{bin: QnnHost.compiled!("u8_io", ["u8_io"]).bin}
  end

  test "a 2.51 binary loads on the 2.51 emulator with no finding", %{bin: bin} do
    runtime = QnnHost.runtime!()

    # The emulator reports a default device, SoC model 30 (the binary's is 35), v68, 4 MB of
    # VTCM, and loads the binary anyway: on x86_64 the device is shown, never judged.
    assert {:ok, %{device: %{soc_model: 30, htp_arch: 68, vtcm_size: 4_194_304}}} =
             Runtime.info(runtime)

    log =
      capture_log(fn ->
        assert {:ok, %Context{warnings: []} = context} = Context.from_file(runtime, bin)
        Context.close(context)
      end)

    refute log =~ "pre-flight"
  end

  test "context priority: the emulator takes every level", %{bin: bin} do
    runtime = QnnHost.runtime!()

    for priority <- [:low, :normal, :normal_high, :high, :default] do
      assert {:ok, context} = Context.from_file(runtime, bin, priority: priority)
      Context.close(context)
    end
  end

  test "inspect_model reads what the binary says with QnnSystem alone", %{bin: bin} do
    system = Path.join(QnnHost.lib_dir(), "libQnnSystem.so")
    assert {:ok, %ModelInfo{} = info} = HexagonTpu.inspect_model(bin, system_lib_path: system)
    assert info.build_id =~ ~r/^v2\.51\.0\./
    assert info.qairt_version == "2.51.0"
    assert info.binary_info_version == 3
    assert info.backend_id == 6
    assert info.core_api == "2.40.0"
    assert info.backend_api == "5.51.0"
    assert info.context_blob_version == "4.0.6"
    assert info.soc_model == 35
    assert info.dsp_arch == 68
    assert info.vtcm_size == 4_194_304

    assert info.loads_on == [
             "QAIRT >= 2.51.0",
             "HTP (6) backend",
             "SoC model 35",
             "HTP v68",
             "VTCM >= 4194304 bytes"
           ]

    Mix.shell(Mix.Shell.Process)
    on_exit(fn -> Mix.shell(Mix.Shell.IO) end)
    Mix.Tasks.HexagonTpu.Inspect.run([bin, "--system-lib", system])
    assert_received {:mix_shell, :info, [out]}
    assert out =~ "(QAIRT 2.51.0)"
    assert out =~ "VTCM:            4194304 bytes"
  end

  test "a 2.51 binary on the 2.47 emulator: binary_newer_than_runtime before QNN is asked",
       %{bin: bin} do
    dir = QnnHost.older_lib_dir!()

    runtime =
      Runtime.create!(
        lib_path: Path.join(dir, "libQnnHtp.so"),
        system_lib_path: Path.join(dir, "libQnnSystem.so"),
        log_level: :error
      )

    {:ok, %{build_id: old}} = Runtime.info(runtime)
    assert old =~ ~r/^v2\.47\.0\./

    assert {:error, %Error{reason: :binary_newer_than_runtime, qnn_code: nil, message: message}} =
             HexagonTpu.load_model(bin, runtime: runtime)

    assert message =~ "QAIRT 2.51.0"
    assert message =~ old

    # Without the verdict, QNN itself refuses it (measured: 5000).
    assert {:error, %Error{reason: :qnn_error, qnn_code: 5000}} =
             HexagonTpu.load_model(bin, runtime: runtime, preflight: false)
  end
end
