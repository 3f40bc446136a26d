defmodule HexagonTpu.CompilerTest do
  # HexagonTpu.Compiler and `mix hexagon_tpu.compile` without Python packages or a network:
  # the cache folder, the venv's name, and the errors that come before ONNX Runtime runs
  # (fake Python interpreters stand in for a broken one). The compile itself runs in the
  # :qnn_host suite.
  use ExUnit.Case, async: false

  import ExUnit.CaptureIO

  alias HexagonTpu.{Compiler, DeviceRuntime}

  @moduletag :tmp_dir

  setup %{tmp_dir: tmp} do
    saved =
      Map.new(
        ~w(HEXAGON_TPU_CACHE XDG_CACHE_HOME HEXAGON_TPU_PYTHON HEXAGON_TPU_COMPILE_REQUIREMENTS
           PIP_INDEX_URL PIP_NO_INDEX PIP_FIND_LINKS PIP_RETRIES PIP_TIMEOUT),
        &{&1, System.get_env(&1)}
      )

    # the compile venv's python (it has pip), for the tests of the device runtime's download
    venv_python =
      case Compiler.python() do
        {:ok, python} -> python
        {:error, _} -> nil
      end

    on_exit(fn ->
      for {name, value} <- saved,
          do: if(value, do: System.put_env(name, value), else: System.delete_env(name))
    end)

    cache = Path.join(tmp, "cache")
    System.put_env("HEXAGON_TPU_CACHE", cache)
    %{cache: cache, venv_python: venv_python}
  end

  test "the cache folder: HEXAGON_TPU_CACHE, then XDG_CACHE_HOME, then ~/.cache", %{cache: cache} do
    assert Compiler.cache_dir() == cache
    System.delete_env("HEXAGON_TPU_CACHE")
    System.put_env("XDG_CACHE_HOME", "/somewhere")
    assert Compiler.cache_dir() == "/somewhere/hexagon_tpu"
    System.delete_env("XDG_CACHE_HOME")
    assert Compiler.cache_dir() == Path.join(System.user_home!(), ".cache/hexagon_tpu")
  end

  test "the venv is named after the pin set", %{cache: cache} do
    pins = File.read!(Path.join(Compiler.priv_dir(), "requirements.txt"))
    assert pins =~ ~r/^onnxruntime-qnn==2\.7\.0$/m
    # every requirement pinned exactly
    for line <- String.split(pins, "\n", trim: true),
        not String.starts_with?(line, "#"),
        do: assert(line =~ ~r/^[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*$/, line)

    assert Compiler.venv_dir() =~ ~r|^#{cache}/venv-ort-qnn-2\.7\.0-[0-9a-f]{8}$|
  end

  test "a pin set of one's own gets its own venv", %{tmp_dir: tmp, cache: cache} do
    default = Compiler.venv_dir()
    own = Path.join(tmp, "requirements.txt")
    File.write!(own, "onnxruntime-qnn==2.6.0\n")
    System.put_env("HEXAGON_TPU_COMPILE_REQUIREMENTS", own)
    assert Compiler.requirements() == own
    assert Compiler.venv_dir() =~ ~r|^#{cache}/venv-ort-qnn-2\.6\.0-[0-9a-f]{8}$|
    refute Compiler.venv_dir() == default
  end

  test "qnn_lib_dir/0 says how to create a missing venv, and creates nothing", %{cache: cache} do
    assert {:error, message} = Compiler.qnn_lib_dir()
    assert message =~ "does not exist; create it with `mix hexagon_tpu.compile --setup`"
    assert {:error, _} = Compiler.python()
    refute File.exists?(cache)
  end

  test "a missing Python interpreter is named" do
    System.put_env("HEXAGON_TPU_PYTHON", "/nonexistent/python3")

    assert {:error, "HEXAGON_TPU_PYTHON=/nonexistent/python3: no such executable"} =
             Compiler.setup()
  end

  test "a Python without the venv module: says to install python3-venv, leaves nothing",
       %{tmp_dir: tmp, cache: cache} do
    message =
      failed_setup!(tmp, cache, """
      echo "The virtual environment was not created successfully because ensurepip is not"
      echo "available.  On Debian/Ubuntu systems, you need to install the python3-venv package"
      exit 1
      """)

    assert message =~ "has no working venv module"
    assert message =~ "apt-get install python3-venv"
  end

  test "pip failing offline: says so, and leaves no half-made venv", %{tmp_dir: tmp, cache: cache} do
    # `-m venv DIR` makes DIR/bin/python (this script again); `-m pip` fails like pip offline
    message =
      failed_setup!(tmp, cache, """
      if [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0; fi
      echo "WARNING: Retrying after connection broken by 'NewConnectionError(...)'"
      echo "ERROR: Could not find a version that satisfies the requirement onnxruntime-qnn==2.7.0"
      echo "ERROR: No matching distribution found for onnxruntime-qnn==2.7.0"
      exit 1
      """)

    assert message =~ "pip could not download the pinned packages"
    assert message =~ "offline"
    assert message =~ "No matching distribution found for onnxruntime-qnn==2.7.0"
  end

  test "an existing output is refused before anything runs", %{tmp_dir: tmp} do
    model = Path.join(tmp, "m.onnx")
    out = Path.join(tmp, "m.bin")
    File.write!(model, "not looked at")
    File.write!(out, "keep me")
    System.put_env("HEXAGON_TPU_PYTHON", "/nonexistent/python3")

    assert {:error, message} = Compiler.compile(model, out)
    assert message == "#{out} already exists (use --force to overwrite it)"
    assert File.read!(out) == "keep me"

    # with force, it gets as far as looking for Python
    assert {:error, "HEXAGON_TPU_PYTHON" <> _} = Compiler.compile(model, out, force: true)
  end

  test "bad arguments are named", %{tmp_dir: tmp} do
    model = Path.join(tmp, "m.onnx")
    File.write!(model, "")
    out = Path.join(tmp, "m.bin")

    assert {:error, "model /nonexistent.onnx does not exist"} =
             Compiler.compile("/nonexistent.onnx", out)

    assert {:error, "invalid activations :u4: expected one of u8, u16, auto"} =
             Compiler.compile(model, out, activations: :u4)

    assert {:error, "invalid io \"fp16\": expected one of quantized, float"} =
             Compiler.compile(model, out, io: "fp16")

    assert {:error, "the calibration directory /nonexistent does not exist"} =
             Compiler.compile(model, out, calibration: "/nonexistent")

    assert {:error, "give a calibration directory or a random calibration count, not both"} =
             Compiler.compile(model, out, calibration: tmp, random_calibration: 2)

    assert {:error, "invalid calibration_method :kl: expected one of " <> methods} =
             Compiler.compile(model, out, calibration_method: :kl)

    assert methods == "minmax, entropy, percentile, distribution"

    for shape <- [%{"x" => {1, 0}}, [{"x", []}], ["x=1x"], [{:x, {1}}], "x=1", [{"", {1}}]] do
      assert {:error, "invalid input_shape " <> _} =
               Compiler.compile(model, out, input_shape: shape)
    end
  end

  test "the Mix task prints one line and exits 1 on an error", %{tmp_dir: tmp} do
    out = Path.join(tmp, "m.bin")
    File.write!(out, "")
    File.write!(Path.join(tmp, "m.onnx"), "")

    stderr =
      capture_io(:stderr, fn ->
        assert catch_exit(
                 Mix.Task.rerun("hexagon_tpu.compile", [Path.join(tmp, "m.onnx"), "-o", out])
               ) ==
                 {:shutdown, 1}
      end)

    assert stderr =~
             "mix hexagon_tpu.compile: #{out} already exists (use --force to overwrite it)"

    stderr =
      capture_io(:stderr, fn ->
        assert catch_exit(Mix.Task.rerun("hexagon_tpu.compile", ["--htp-arch", "v68"])) ==
                 {:shutdown, 1}
      end)

    assert stderr =~ "invalid value \"v68\" for --htp-arch"
  end

  test "the device runtime's pin: the aarch64 wheel of the compiler's version, outside the venv's name",
       %{tmp_dir: tmp} do
    pins = File.read!(Compiler.requirements())
    default = Compiler.venv_dir()

    assert [[_, wheel]] =
             Regex.scan(
               ~r/^# device-runtime: (onnxruntime_qnn-\S+\.whl) sha256=[0-9a-f]{64}$/m,
               pins
             )

    assert wheel == "onnxruntime_qnn-2.7.0-cp311-cp311-manylinux_2_34_aarch64.whl"

    # the venv is the same with or without the device runtime's lines
    own = Path.join(tmp, "requirements.txt")
    File.write!(own, String.replace(pins, ~r/^# device-runtime:.*\n/m, ""))
    refute File.read!(own) =~ "device-runtime"
    System.put_env("HEXAGON_TPU_COMPILE_REQUIREMENTS", own)
    assert Compiler.venv_dir() == default
  end

  test "--qnn-sdk, --qairt-target and --graph-name are checked before anything runs",
       %{tmp_dir: tmp} do
    model = Path.join(tmp, "m.onnx")
    File.write!(model, "")
    out = Path.join(tmp, "m.bin")
    System.put_env("HEXAGON_TPU_PYTHON", "/nonexistent/python3")
    python_error = {:error, "HEXAGON_TPU_PYTHON=/nonexistent/python3: no such executable"}

    nosdk = Path.join(tmp, "nosdk")

    assert {:error, message} = Compiler.compile(model, out, qnn_sdk: nosdk)

    assert message ==
             "--qnn-sdk #{nosdk}: no libQnnHtp.so in #{nosdk}/lib/x86_64-linux-clang or #{nosdk} " <>
               "(give a QAIRT SDK's root or its x86-64 library directory)"

    # an aarch64 library (the SDK's device side) is refused; an x86-64 one, laid out as the SDK
    # lays it out or given as its directory, is accepted (the compile gets as far as Python)
    arm = fake_elf(Path.join(tmp, "arm"), 183)
    assert {:error, message} = Compiler.compile(model, out, qnn_sdk: Path.dirname(arm))
    assert message =~ "--qnn-sdk: #{arm} is not an x86-64 library (aarch64)"

    sdk = Path.join(tmp, "sdk")
    x86 = fake_elf(Path.join(sdk, "lib/x86_64-linux-clang"), 62)
    assert Compiler.compile(model, out, qnn_sdk: sdk) == python_error
    assert Compiler.compile(model, out, qnn_sdk: Path.dirname(x86)) == python_error
    assert Compiler.compile(model, out, qnn_sdk: x86) == python_error

    assert {:error,
            "invalid qairt_target \"2.x\": expected a QAIRT version such as 2.42 or 2.42.0"} =
             Compiler.compile(model, out, qairt_target: "2.x")

    for ok <- ["2.42", "2.42.0", "v2.42.0.251225"],
        do: assert(Compiler.compile(model, out, qairt_target: ok) == python_error)

    assert {:error, "invalid graph name \"my model\"" <> _} =
             Compiler.compile(model, out, graph_name: "my model")

    assert {:error, "give one graph name per model: 2 for 1 model(s)"} =
             Compiler.compile(model, out, graph_name: ["a", "b"])

    assert Compiler.compile(model, out, graph_name: "detector_v2.1") == python_error
  end

  test "mix hexagon_tpu.compile takes --graph-name once per model", %{tmp_dir: tmp} do
    File.write!(Path.join(tmp, "m.onnx"), "")

    stderr =
      capture_io(:stderr, fn ->
        argv = [Path.join(tmp, "m.onnx"), "-o", Path.join(tmp, "m.bin")]

        assert catch_exit(
                 Mix.Task.rerun(
                   "hexagon_tpu.compile",
                   argv ++ ~w(--graph-name a --graph-name b)
                 )
               ) == {:shutdown, 1}
      end)

    assert stderr =~ "mix hexagon_tpu.compile: give one graph name per model: 2 for 1 model(s)"
  end

  test "mix hexagon_tpu.runtime: its argument errors are one line", %{tmp_dir: tmp} do
    file = Path.join(tmp, "file")
    File.write!(file, "")

    for {argv, expected} <- [
          {[], "no directory given: mix hexagon_tpu.runtime --into DIR"},
          {["--into", file], "#{file} is not a directory"},
          {["--into", tmp, "--htp-arch", "v68"],
           "invalid value \"v68\" for --htp-arch: expected a positive integer"},
          {["--into", tmp, "extra"], "unexpected argument extra"},
          {["--into", tmp, "--arch", "68"], "unknown option --arch"}
        ] do
      stderr =
        capture_io(:stderr, fn ->
          assert catch_exit(Mix.Task.rerun("hexagon_tpu.runtime", argv)) == {:shutdown, 1}
        end)

      assert stderr =~ "mix hexagon_tpu.runtime: " <> expected
    end

    assert DeviceRuntime.install(tmp, htp_arch: [68, 0]) ==
             {:error, "invalid htp_arch 0: expected a positive integer"}
  end

  # The download itself, with pip pointed away from PyPI: these need a Python with pip (the
  # compile venv's), so they run where the :qnn_host suite does.
  describe "the device runtime's download" do
    @describetag :qnn_host

    test "no network: one line saying so; nothing cached, no library written",
         %{tmp_dir: tmp, cache: cache, venv_python: python} do
      System.put_env("HEXAGON_TPU_PYTHON", python)
      # nothing listens on port 9 (discard): pip cannot reach its index
      System.put_env("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
      System.put_env("PIP_RETRIES", "0")
      System.put_env("PIP_TIMEOUT", "2")
      into = Path.join(tmp, "overlay")

      assert {:error, message} = DeviceRuntime.install(into)

      assert message =~
               ~r/^cannot download onnxruntime_qnn-2\.7\.0-cp311-cp311-manylinux_2_34_aarch64\.whl \(offline, or PyPI unreachable\): ERROR: /

      assert File.ls!(Path.join(cache, "wheels")) == []
      assert files(into) == []
    end

    test "a wheel that is not the pinned one is refused, and not kept",
         %{tmp_dir: tmp, cache: cache, venv_python: python} do
      System.put_env("HEXAGON_TPU_PYTHON", python)
      # a local "index" holding a well-formed wheel of the right name with other bytes
      house = Path.join(tmp, "wheelhouse")
      fake_wheel!(house, "onnxruntime_qnn-2.7.0-cp311-cp311-manylinux_2_34_aarch64.whl")
      System.put_env("PIP_NO_INDEX", "1")
      System.put_env("PIP_FIND_LINKS", house)
      into = Path.join(tmp, "overlay")

      assert {:error, message} = DeviceRuntime.install(into)

      digest =
        :crypto.hash(
          :sha256,
          File.read!(
            Path.join(house, "onnxruntime_qnn-2.7.0-cp311-cp311-manylinux_2_34_aarch64.whl")
          )
        )

      digest = Base.encode16(digest, case: :lower)

      assert message ==
               "onnxruntime_qnn-2.7.0-cp311-cp311-manylinux_2_34_aarch64.whl as downloaded has " <>
                 "sha256 #{digest}, not the pinned " <>
                 "ad08bbfebd7c07ffe83995418303215f46cb25a89e12676f47ee20c32002eaad: refused"

      assert File.ls!(Path.join(cache, "wheels")) == []
      assert files(into) == []
    end

    test "a directory that cannot be written is named before anything is downloaded",
         %{tmp_dir: tmp, cache: cache, venv_python: python} do
      System.put_env("HEXAGON_TPU_PYTHON", python)
      file = Path.join(tmp, "file")
      File.write!(file, "")
      # a path under a regular file cannot be created, by root either
      assert {:error, message} = DeviceRuntime.install(Path.join(file, "overlay"))
      assert message == "cannot create the overlay directory #{file}/overlay: Not a directory"
      refute File.exists?(Path.join(cache, "wheels"))
    end
  end

  defp files(dir) do
    if File.dir?(dir),
      do:
        for(
          path <- Path.wildcard(Path.join(dir, "**"), match_dot: true),
          File.regular?(path),
          do: path
        ),
      else: []
  end

  defp fake_wheel!(dir, name) do
    File.mkdir_p!(dir)
    info = "onnxruntime_qnn-2.7.0.dist-info"

    entries = [
      {~c"#{info}/METADATA", "Metadata-Version: 2.1\nName: onnxruntime-qnn\nVersion: 2.7.0\n"},
      {~c"#{info}/WHEEL",
       "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_34_aarch64\n"},
      {~c"#{info}/RECORD", ""}
    ]

    {:ok, _} = :zip.create(String.to_charlist(Path.join(dir, name)), entries)
  end

  # A file named libQnnHtp.so in dir whose ELF header says machine `machine` (62 x86-64, 183 aarch64).
  defp fake_elf(dir, machine) do
    File.mkdir_p!(dir)
    path = Path.join(dir, "libQnnHtp.so")
    File.write!(path, <<0x7F, "ELF", 2, 1, 1, 0::8*9, 3::little-16, machine::little-16, 0::8*44>>)
    path
  end

  # Compiler.setup/0 with HEXAGON_TPU_PYTHON set to a fake python3 running `body`: asserts it
  # fails and leaves nothing in `cache`, and returns its message.
  defp failed_setup!(dir, cache, body) do
    System.put_env("HEXAGON_TPU_PYTHON", fake_python(dir, body))
    assert {:error, message} = Compiler.setup()
    assert File.ls!(cache) == []
    message
  end

  defp fake_python(dir, body) do
    path = Path.join(dir, "python3")
    File.write!(path, "#!/bin/sh\n" <> body)
    File.chmod!(path, 0o755)
    path
  end
end
