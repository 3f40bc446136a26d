defmodule HexagonTpu.PreflightTest do
  # The pre-flight verdict through the Elixir API, on a private qnn_sim whose backend reports a
  # QAIRT-like build id (knob build_id) and binaries stamped with their own (spec "stamp").
  use ExUnit.Case, async: true

  import ExUnit.CaptureLog

  alias HexagonTpu.{Context, Error, ModelInfo}
  alias HexagonTpu.Test.{Models, Support}

  @runtime_build "v2.47.0.260601114230"

  @moduletag :tmp_dir

  setup %{tmp_dir: dir} do
    lib = Support.private_sim_lib!(dir)
    :ok = HexagonTpu.Native.qnn_sim_configure(lib, "build_id", @runtime_build)
    runtime = Support.runtime!(lib)
    %{lib: lib, runtime: runtime}
  end

  defp model(stamp) do
    a = Models.t(:float_32, [1, 4])
    b = Models.t(:float_32, [1, 4])
    Models.add(a, b, Models.t(:float_32, [1, 4])) |> Map.put(:stamp, stamp) |> Models.build!()
  end

  test "a binary from a newer QAIRT is refused before QNN is asked", %{lib: lib} = ctx do
    path = model(%{build_id: "v2.51.0.260929181845"})
    before = Support.qnn_sim_counters(lib).live_handles

    assert {:error, %Error{reason: :binary_newer_than_runtime, qnn_code: nil} = error} =
             HexagonTpu.load_model(path, runtime: ctx.runtime)

    assert error.message =~ "QAIRT 2.51.0"
    assert error.message =~ "v2.51.0.260929181845"
    assert error.message =~ @runtime_build
    assert error.message =~ "Compile the model with QAIRT 2.47.0 or older"
    # No QNN context was created for it.
    assert Support.qnn_sim_counters(lib).live_handles == before

    assert {:error, %Error{reason: :binary_newer_than_runtime}} =
             Context.from_binary(ctx.runtime, File.read!(path))

    # preflight: false hands the binary to QNN (qnn_sim does not enforce versions).
    assert {:ok, _model} = HexagonTpu.load_model(path, runtime: ctx.runtime, preflight: false)
  end

  test "an older or same-release binary loads without a finding", ctx do
    for build <- ["v2.42.0.251225135753_193295", "v2.47.0.1", @runtime_build] do
      log =
        capture_log(fn ->
          assert {:ok, context} = Context.from_file(ctx.runtime, model(%{build_id: build}))
          assert context.warnings == []
        end)

      refute log =~ "pre-flight"
    end
  end

  test "an unparseable build id is a warning, not a refusal", ctx do
    log =
      capture_log(fn ->
        assert {:ok, context} = Context.from_file(ctx.runtime, model(%{build_id: "custom"}))

        assert [%{reason: :binary_newer_than_runtime, evidence: :read}] = context.warnings
      end)

    assert log =~ "hexagon_tpu pre-flight (binary_newer_than_runtime): cannot compare"
  end

  test "another backend's binary: a warning, a refusal in :strict mode", ctx do
    path = model(%{build_id: @runtime_build, backend_id: 4})

    log =
      capture_log(fn ->
        assert {:ok, context} = Context.from_file(ctx.runtime, path)
        assert [%{reason: :wrong_backend, evidence: :read, message: message}] = context.warnings
        assert message =~ "backend 4"
        assert message =~ "HTP (6)"
      end)

    assert log =~ "(wrong_backend)"

    assert {:error, %Error{reason: :wrong_backend}} =
             HexagonTpu.load_model(path, runtime: ctx.runtime, preflight: :strict)
  end

  test "the device's platform info: in Runtime.info, judged only where it is hardware",
       %{tmp_dir: dir} do
    lib = Support.private_sim_lib!(dir)
    :ok = HexagonTpu.Native.qnn_sim_configure(lib, "build_id", @runtime_build)

    :ok =
      HexagonTpu.Native.qnn_sim_configure(
        lib,
        "device_platform",
        "soc_model=35,htp_arch=68,vtcm_mb=4"
      )

    runtime = Support.runtime!(lib)

    assert {:ok, %{device: %{soc_model: 35, htp_arch: 68, vtcm_size: 4_194_304}}} =
             HexagonTpu.Runtime.info(runtime)

    path = model(%{build_id: @runtime_build, soc_model: 43, dsp_arch: 73})

    log =
      capture_log(fn ->
        assert {:ok, context} = Context.from_file(runtime, path, preflight: :strict)

        # This suite runs on x86_64, where Qualcomm's HTP library is an emulator whose device
        # says nothing of the board (qnn_tests/tests/platform.rs judges it under qemu, aarch64).
        assert context.warnings == []
      end)

    refute log =~ "pre-flight"
  end

  test "a backend that reports no platform info: device nil", ctx do
    assert {:ok, %{device: nil}} = HexagonTpu.Runtime.info(ctx.runtime)
  end

  test "a tensor this package cannot size or does not know is refused, whatever :preflight",
       %{lib: lib} = ctx do
    t = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    before = Support.qnn_sim_counters(lib).live_handles

    for {kind, reason, fragments} <- [
          {"sparse_data_format", :unsupported_tensor_format, ["(sparse)", ~s("x")]},
          {"unknown_encoding", :unsupported_encoding, ["encoding 99", ~s("x")]}
        ],
        preflight <- [true, :strict, false] do
      path =
        Models.build!(
          Models.identity(t, t, adversarial: [kind])
          |> Map.put(:stamp, %{build_id: @runtime_build})
        )

      assert {:error, %Error{reason: ^reason, message: message}} =
               HexagonTpu.load_model(path, runtime: ctx.runtime, preflight: preflight)

      for fragment <- fragments, do: assert(message =~ fragment, message)
    end

    # refused before any QNN context was made
    assert Support.qnn_sim_counters(lib).live_handles == before
  end

  test "context priority: the level reaches contextCreateFromBinary", %{lib: lib} = ctx do
    path = model(%{build_id: @runtime_build})

    for {priority, raw} <- [low: 0, normal: 100, normal_high: 150, high: 200, default: nil] do
      assert {:ok, context} = Context.from_file(ctx.runtime, path, priority: priority)
      assert Support.qnn_sim_counters(lib).last_context_priority == raw, inspect(priority)
      Context.close(context)

      assert {:ok, model} = HexagonTpu.load_model(path, runtime: ctx.runtime, priority: priority)
      assert Support.qnn_sim_counters(lib).last_context_priority == raw
      Context.close(model.context)
    end

    assert {:ok, _} = Context.from_binary(ctx.runtime, File.read!(path), priority: :high)
    assert Support.qnn_sim_counters(lib).last_context_priority == 200

    assert_raise ArgumentError, ~r/:priority.*:normal_high/, fn ->
      Context.from_file(ctx.runtime, path, priority: :urgent)
    end

    assert_raise ArgumentError, ~r/:priority/, fn ->
      HexagonTpu.load_model(path, runtime: ctx.runtime, priority: 200)
    end
  end

  test "the :preflight option is checked", ctx do
    assert_raise ArgumentError, ~r/:preflight option/, fn ->
      HexagonTpu.load_model(model(%{}), runtime: ctx.runtime, preflight: :maybe)
    end

    assert_raise ArgumentError, ~r/:preflight option/, fn ->
      Context.from_file(ctx.runtime, model(%{}), preflight: "yes")
    end
  end

  test "inspect_model/2 reads a binary with the System library alone", %{lib: lib} do
    path = model(%{build_id: "v2.51.0.260929181845", soc_model: 35, dsp_arch: 68})

    assert {:ok, %ModelInfo{} = info} = HexagonTpu.inspect_model(path, system_lib_path: lib)
    assert info.build_id == "v2.51.0.260929181845"
    assert info.qairt_version == "2.51.0"
    assert info.backend_id == 6
    assert info.soc_model == 35
    assert info.dsp_arch == 68
    assert info.vtcm_size == nil
    assert [%{name: "add", inputs: [_, _], outputs: [_]}] = info.graphs
    assert info.loads_on == ["QAIRT >= 2.51.0", "HTP (6) backend", "SoC model 35", "HTP v68"]

    assert {:error, %Error{reason: :io}} =
             HexagonTpu.inspect_model(path <> ".missing", system_lib_path: lib)
  end

  test "mix hexagon_tpu.inspect prints it", %{lib: lib} do
    path = model(%{build_id: "v2.51.0.260929181845", soc_model: 35, dsp_arch: 68})
    Mix.shell(Mix.Shell.Process)
    on_exit(fn -> Mix.shell(Mix.Shell.IO) end)
    Mix.Tasks.HexagonTpu.Inspect.run([path, "--system-lib", lib])
    assert_received {:mix_shell, :info, [out]}
    assert out =~ "build id:        v2.51.0.260929181845 (QAIRT 2.51.0)"
    assert out =~ "HTP arch:        v68"
    assert out =~ "loads on:        QAIRT >= 2.51.0, HTP (6) backend, SoC model 35, HTP v68"
    assert out =~ ~s(graph "add")
  end
end
