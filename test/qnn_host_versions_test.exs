defmodule HexagonTpu.QnnHostVersionsTest do
  # Which QAIRT makes a binary and which runtime loads it, on Qualcomm's own libraries: the
  # pinned compile venv's (onnxruntime-qnn 2.7.0, QAIRT 2.51) and the 2.3.0 x86-64 wheel's
  # (QAIRT 2.47, unpacked beside the venv by test support), which stands in for an older QAIRT
  # SDK (`--qnn-sdk`) and an older device runtime. Build ids are read from the files' bytes
  # here; loads on 2.47 run in a VM of their own (one QAIRT's libraries per process).
  use ExUnit.Case, async: false

  @moduletag :qnn_host
  @moduletag timeout: 600_000

  import ExUnit.CaptureIO

  alias HexagonTpu.{Compiler, Context, Elf, Graph}
  alias HexagonTpu.Test.{QnnHost, Support}

  @child Path.expand("support/qnn_version_child.exs", __DIR__)

  setup_all do
    older = QnnHost.older_lib_dir!()

    # u8_io compiled with the older SDK's libQnnHtp.so, for a 2.47 runtime, under a chosen name
    old =
      QnnHost.compiled!("u8_io_qairt247", ["u8_io"],
        qnn_sdk: older,
        qairt_target: "2.47",
        graph_name: "tiny"
      )

    # and with the pinned compiler (the same compile as the main :qnn_host suite's)
    new = QnnHost.compiled!("u8_io", ["u8_io"])
    %{older: older, old: old, new: new}
  end

  test "the stand-ins: the 2.3.0 wheel's library is QAIRT 2.47, the pinned one 2.51",
       %{older: older} do
    assert QnnHost.build_id!(Path.join(older, "libQnnHtp.so")) =~ ~r/^v2\.47\.0\./
    assert QnnHost.build_id!(Path.join(QnnHost.lib_dir(), "libQnnHtp.so")) =~ ~r/^v2\.51\.0\./
  end

  test "--qnn-sdk: the binary carries the SDK's build id, not the pinned wheel's",
       %{older: older, old: old, new: new} do
    assert QnnHost.build_id!(old.bin) == QnnHost.build_id!(Path.join(older, "libQnnHtp.so"))

    assert QnnHost.build_id!(new.bin) ==
             QnnHost.build_id!(Path.join(QnnHost.lib_dir(), "libQnnHtp.so"))
  end

  test "a 2.47 binary loads on the 2.51 emulator and equals ORT there bit for bit", %{old: old} do
    context = Context.from_file!(QnnHost.runtime!(), old.bin)
    assert Context.graphs(context) == ["tiny"]
    graph = Graph.retrieve!(context, "tiny")

    for {inputs, expected} <- reference(old) do
      assert Graph.execute!(graph, inputs, quantize: :none, dequantize: :none, output: :binary) ==
               expected
    end
  end

  # QNN warns once per process, at the first load of the binary (measured: a second load in
  # the same process logs nothing), and this VM has loaded it already (the compile reads it
  # back): the warning is watched in a VM of its own.
  test "on the 2.51 emulator (a VM of its own) the 2.47 binary loads with QNN's version warning in Logger",
       %{old: old} do
    [{inputs, expected} | _] = reference(old)
    output = child!(QnnHost.lib_dir(), [{old.bin, inputs}])
    assert output =~ ~r/CHILD runtime v2\.51\.0\./, output
    assert output =~ "CHILD #{old.bin} graph tiny outputs #{hex(expected)}", output

    assert output =~
             ~r/\[warning\] QNN: .*Pickle and software version mismatch v2\.47\.0\.\S+ vs v2\.51\.0\./,
           output
  end

  test "on the 2.47 emulator (a VM of its own): the 2.47 binary loads and equals ORT's outputs, the pinned 2.51 binary is refused (pre-flight; QNN: 5000)",
       %{older: older, old: old, new: new} do
    [{inputs, expected} | _] = reference(old)
    output = child!(older, [{old.bin, inputs}, {new.bin, inputs}])
    assert output =~ ~r/CHILD runtime v2\.47\.0\./, output
    assert output =~ "CHILD #{old.bin} graph tiny outputs #{hex(expected)}", output

    # the pre-flight verdict refuses it before QNN is asked; QNN itself answers 5000
    assert output =~ "CHILD #{new.bin} error binary_newer_than_runtime", output
    assert output =~ "CHILD #{new.bin} without preflight error qnn_error 5000", output
    assert output =~ "Using newer context binary on old SDK", output
  end

  @tag :tmp_dir
  test "--qairt-target refuses a compiler or binary newer than the target, naming both, and writes nothing",
       %{older: older, tmp_dir: tmp} do
    model = Path.join(QnnHost.model!("u8_io"), "u8_io.onnx")
    out = Path.join(tmp, "refused.bin")

    assert {:error, message} = Compiler.compile(model, out, qairt_target: "2.47")

    assert message =~
             "is QAIRT #{QnnHost.build_id!(Path.join(QnnHost.lib_dir(), "libQnnHtp.so"))}"

    assert message =~ "newer than the target runtime 2.47"

    assert {:error, message} =
             Compiler.compile(model, out, qnn_sdk: older, qairt_target: "2.46.9")

    assert message =~ "is QAIRT #{QnnHost.build_id!(Path.join(older, "libQnnHtp.so"))}"
    assert message =~ "newer than the target runtime 2.46.9"

    assert File.ls!(tmp) == []

    # the pinned compiler for its own version, and any version given as a minor, is accepted
    assert {:ok, %{build_id: "v2.51.0." <> _}} =
             Compiler.compile(model, out, qairt_target: "2.51")

    assert File.exists?(out)
  end

  test "graphs are named after the model by default, and found by that name or QNN's", %{new: new} do
    assert [line] = names_lines(new.bin)
    assert ["u8_io", "QNNExecutionProvider_" <> _ = qnn] = String.split(line)

    runtime = QnnHost.runtime!()
    context = Context.from_file!(runtime, new.bin)
    assert Context.graphs(context) == ["u8_io"]
    assert Graph.retrieve!(context, qnn).name == "u8_io"

    {:ok, model} = HexagonTpu.load_model(new.bin, QnnHost.runtime_opts() ++ [graph: "u8_io"])
    assert model.name == "u8_io"
  end

  test "two models in one binary: each graph is named after its model" do
    two = QnnHost.compiled!("two_graphs", ["graph_a", "graph_b"])
    assert two.bin |> names_lines() |> Enum.map(&hd(String.split(&1))) == ~w(graph_a graph_b)
    context = Context.from_file!(QnnHost.runtime!(), two.bin)
    assert Enum.sort(Context.graphs(context)) == ~w(graph_a graph_b)
    # QNN names the graph's input after the ONNX model's: graph_a's is "pixels"
    assert hd(Graph.inputs(Graph.retrieve!(context, "graph_a"))).name == "pixels"
  end

  # Runs test/support/qnn_version_child.exs on the libraries in lib_dir: each binary loaded
  # and run once on its raw inputs. Returns the child's output (its Logger lines included).
  defp child!(lib_dir, runs) do
    args = for {bin, inputs} <- runs, do: "#{bin}:#{hex(inputs)}"

    {output, status} =
      System.cmd(
        System.find_executable("elixir"),
        Support.child_code_path() ++ [@child, lib_dir | args],
        stderr_to_stdout: true,
        env: [{"HEXAGON_TPU_OFFLINE", "1"}]
      )

    assert status == 0, output
    output
  end

  defp hex(binaries), do: Enum.map_join(binaries, ",", &Base.encode16/1)

  @tag :tmp_dir
  test "mix hexagon_tpu.runtime: the device runtime of the compiler's own QAIRT, laid out for a rootfs overlay",
       %{tmp_dir: tmp, new: new} do
    into = Path.join(tmp, "rootfs_overlay")

    output =
      capture_io(fn ->
        Mix.Task.rerun("hexagon_tpu.runtime", [
          "--into",
          into,
          "--htp-arch",
          "68",
          "--htp-arch",
          "73"
        ])
      end)

    installed =
      for path <- Path.wildcard(Path.join(into, "**")),
          File.regular?(path),
          do: Path.relative_to(path, into)

    assert Enum.sort(installed) ==
             Enum.sort(~w(usr/lib/libQnnHtp.so usr/lib/libQnnSystem.so
                 usr/lib/libQnnHtpV68Stub.so usr/lib/dsp/libQnnHtpV68Skel.so
                 usr/lib/libQnnHtpV73Stub.so usr/lib/dsp/libQnnHtpV73Skel.so
                 usr/share/doc/qairt/Qualcomm_LICENSE.pdf))

    # the device's libraries (aarch64; the skels are Hexagon DSP code, ELF machine 164)...
    for lib <- ~w(libQnnHtp.so libQnnSystem.so libQnnHtpV68Stub.so) do
      assert Elf.machine(Path.join([into, "usr/lib", lib])) == {:ok, :aarch64}, lib
    end

    assert Elf.machine(Path.join(into, "usr/lib/dsp/libQnnHtpV68Skel.so")) == {:ok, :hexagon}

    # ...of the QAIRT that made the compile task's binary, as the task prints
    build_id = QnnHost.build_id!(new.bin)

    assert output =~
             "QAIRT build id #{build_id} (onnxruntime_qnn-2.7.0-cp311-cp311-manylinux_2_34_aarch64.whl)"

    for lib <-
          ~w(usr/lib/libQnnHtp.so usr/lib/libQnnHtpV68Stub.so usr/lib/dsp/libQnnHtpV68Skel.so),
        do: assert(QnnHost.build_id!(Path.join(into, lib)) == build_id, lib)
  end

  # the graph lines of a .names file (`name qnn_name`), not its tensor lines
  # (`graph input|output index name`)
  defp names_lines(bin) do
    (bin <> ".names")
    |> File.read!()
    |> String.split("\n", trim: true)
    |> Enum.reject(&String.starts_with?(&1, "#"))
    |> Enum.filter(&match?([_, _], String.split(&1)))
  end

  # ORT on the pinned emulator running the binary's EP-context model: [{raw inputs, raw outputs}]
  # per sample (the ctx model is copied under the binary's own name, so its reference is its own).
  defp reference(compiled) do
    [ctx] = compiled.ctx
    own = Path.join(Path.dirname(ctx), Path.basename(compiled.bin, ".bin") <> "_ctx.onnx")
    unless File.exists?(own), do: File.cp!(ctx, own)
    [inputs] = compiled.inputs
    ort = QnnHost.reference!(own, inputs, :qnn, raw: true)

    Enum.zip_with(ort.inputs, ort.outputs, fn ins, outs ->
      {Enum.map(ins, & &1.data), Enum.map(outs, & &1.data)}
    end)
  end
end
