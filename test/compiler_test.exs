defmodule HexagonTpu.CompilerTest do
  # HexagonTpu.Compiler and `mix hexagon_tpu.compile` without Python packages or a network:
  # the cache folder, the venv's name, and the errors that come before ONNX Runtime runs
  # (fake Python interpreters stand in for a broken one). The compile itself runs in the
  # :qnn_host suite.
  use ExUnit.Case, async: false

  import ExUnit.CaptureIO

  alias HexagonTpu.Compiler

  @moduletag :tmp_dir

  setup %{tmp_dir: tmp} do
    saved =
      Map.new(
        ~w(HEXAGON_TPU_CACHE XDG_CACHE_HOME HEXAGON_TPU_PYTHON HEXAGON_TPU_COMPILE_REQUIREMENTS),
        &{&1, System.get_env(&1)}
      )

    on_exit(fn ->
      for {name, value} <- saved,
          do: if(value, do: System.put_env(name, value), else: System.delete_env(name))
    end)

    cache = Path.join(tmp, "cache")
    System.put_env("HEXAGON_TPU_CACHE", cache)
    %{cache: cache}
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

    assert {:error, "invalid activations :u4: expected one of u8, u16"} =
             Compiler.compile(model, out, activations: :u4)

    assert {:error, "invalid io \"fp16\": expected one of quantized, float"} =
             Compiler.compile(model, out, io: "fp16")

    assert {:error, "the calibration directory /nonexistent does not exist"} =
             Compiler.compile(model, out, calibration: "/nonexistent")

    assert {:error, "give a calibration directory or a random calibration count, not both"} =
             Compiler.compile(model, out, calibration: tmp, random_calibration: 2)
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
