defmodule HexagonTpu.QnnHostQualityTest do
  # The quantization quality `mix hexagon_tpu.compile` measures (priv/compile/hexagon_tpu_quality.py):
  # the float model against its QDQ model on ORT's CPU EP, the bar and its warning, --eval,
  # --min-sqnr, <bin>.quality.json and `mix hexagon_tpu.inspect`. The models are
  # test/support/onnx_models.py's: outlier_channel, whose middle activation has one channel 300x
  # the others (8-bit activation steps swamp the rest: measured -0.1 dB at u8, 36.6 dB at u16 on
  # the CPU, 7.8 dB at u16 on the HTP emulator); outlier_positive, the same never negative, which
  # 16 bits mend on the HTP too; and a16w8 (Conv, Tanh, Conv, residual Add), which u8 keeps.
  use ExUnit.Case, async: false

  import ExUnit.CaptureIO

  alias HexagonTpu.{Compiler, Quality}
  alias HexagonTpu.Test.QnnHost

  @moduletag timeout: 300_000

  describe "the sidecar's reader (no QNN needed)" do
    @describetag :tmp_dir

    test "reads a file as the compile task writes it, and formats it", %{tmp_dir: tmp} do
      bin = Path.join(tmp, "m.bin")

      File.write!(Quality.path(bin), ~S"""
      {"version": 1, "binary": "m.bin", "bar": {"sqnr_db": 20.0, "within_one_step": 0.5},
       "measured_with": "ONNX Runtime CPU EP: the float model against the QDQ model",
       "graphs": [{"name": "m", "model": "m.onnx", "activations": "u16", "weights": "s8",
         "evaluation": {"source": "--eval /e", "samples": 2},
         "outputs": [{"name": "y\u00e9", "sqnr_db": 36.61, "within_one_step": 0.0117, "step": 9.68e-05,
                      "bits": 16, "values": 256, "meets_bar": true},
                     {"name": "z", "sqnr_db": null, "within_one_step": 1.0, "step": 1E-2,
                      "bits": 8, "values": 4, "meets_bar": true}],
         "tried": [{"activations": "u8", "weights": "s8", "min_sqnr_db": -0.07},
                   {"activations": "u16", "weights": "s8", "min_sqnr_db": 36.61}],
         "min_sqnr_db": 25, "warnings": []}], "unmeasured": ["q"]}
      """)

      assert {:ok, %{"graphs" => [graph]} = figures} = Quality.read(bin)

      assert [%{"name" => "yé", "step" => 9.68e-05}, %{"sqnr_db" => nil, "step" => 0.01}] =
               graph["outputs"]

      text = Quality.format(figures)
      assert text =~ "bar: SQNR >= 20.0 dB, 50.0% of 8-bit values within one step"

      assert text =~
               ~s(graph "m": u16 activations, s8 weights, chosen for --min-sqnr 25 dB from u8 -0.1 dB, u16 36.6 dB)

      assert text =~ ~s[output "yé": SQNR 36.6 dB, 1.2% within one step (9.68e-5)]
      assert text =~ ~s(output "z": SQNR exact, 100.0% within one step)
      assert text =~ ~s(graph "q": compiled from a QDQ model, no float reference to measure)
      refute text =~ "BELOW"
    end

    test "reads a version 2 file: each output's answer, its kind and verdict", %{tmp_dir: tmp} do
      bin = Path.join(tmp, "d.bin")

      File.write!(Quality.path(bin), ~S"""
      {"version": 2, "binary": "d.bin",
       "bar": {"scores": "top-1 agreement >= 90%", "values": "cosine similarity >= 0.98"},
       "measured_with": "ONNX Runtime CPU EP: the float model against the QDQ model",
       "graphs": [{"name": "d", "model": "d.onnx", "activations": "u8", "weights": "s8", "task": "detect",
         "evaluation": {"source": "--eval /e", "samples": 4},
         "outputs": [{"name": "output0_scores", "sqnr_db": 9.5, "within_one_step": 0.999, "step": 0.0032,
                      "bits": 8, "values": 151200, "meets_bar": true,
                      "answer": {"kind": "detections", "verdict": "finds 2 of the float model's 2 detection(s)",
                                 "recall": 1.0, "precision": 1.0, "meets_bar": true}}],
         "tried": [{"activations": "u8", "weights": "s8", "min_sqnr_db": 9.5, "meets_bar": true}],
         "min_sqnr_db": null, "warnings": []}], "unmeasured": []}
      """)

      assert {:ok, figures} = Quality.read(bin)
      text = Quality.format(figures)
      assert text =~ "bars: scores top-1 agreement >= 90%; values cosine similarity >= 0.98):"

      assert text =~
               ~s(graph "d": u8 activations, s8 weights, --task detect, chosen for the answers' bar from u8 9.5 dB, meets the bar;)

      assert text =~
               ~s[output "output0_scores" (detections): finds 2 of the float model's 2 detection(s); SQNR 9.5 dB, 99.9% within one step]

      refute text =~ "BELOW"
    end

    test "bad options are named before anything runs", %{tmp_dir: tmp} do
      model = Path.join(tmp, "m.onnx")
      File.write!(model, "not looked at")
      bin = Path.join(tmp, "bad.bin")
      cal = [calibration: tmp]

      assert {:error, "give activations or min_sqnr (which chooses the activations), not both"} =
               Compiler.compile(model, bin, cal ++ [activations: :u8, min_sqnr: 20])

      assert {:error, "the evaluation directory /nonexistent does not exist"} =
               Compiler.compile(model, bin, cal ++ [eval: "/nonexistent"])

      assert {:error, "invalid min_sqnr \"20\": expected a number of dB"} =
               Compiler.compile(model, bin, cal ++ [min_sqnr: "20"])

      assert {:error, message} = Compiler.compile(model, bin, cal ++ [task: :count])
      assert message =~ "invalid task :count"

      assert {:error, "invalid split_head :yes: expected true or false"} =
               Compiler.compile(model, bin, cal ++ [split_head: :yes])

      refute File.exists?(bin)
    end

    test "no file is :none; a broken one is named", %{tmp_dir: tmp} do
      bin = Path.join(tmp, "m.bin")
      assert Quality.read(bin) == :none
      File.write!(Quality.path(bin), ~S({"version": 1, "graphs": [1,]}))
      assert {:error, message} = Quality.read(bin)
      assert message == "#{Quality.path(bin)}: invalid JSON at byte 28: a value expected"
      File.write!(Quality.path(bin), ~S({"version": 3, "graphs": []}))

      assert {:error, "#{Quality.path(bin)}: not a quality file of version 1 or 2"} ==
               Quality.read(bin)
    end
  end

  describe "measured when compiling" do
    @describetag :qnn_host

    setup do
      %{
        outlier: QnnHost.model!("outlier_channel"),
        positive: QnnHost.model!("outlier_positive"),
        easy: QnnHost.model!("a16w8")
      }
    end

    test "w8a8 ruins the outlier model: figures below the bar, the warning says what to try",
         %{outlier: dir} do
      {result, progress} = compile!(dir, "outlier_channel", "u8.bin", activations: :u8)

      # every 5th of the 8 calibration samples held out: 7 calibrate, 1 measures
      assert Enum.any?(
               progress,
               &(&1 =~
                   "quantizing (u8 activations, s8 per-channel weights, 7 calibration samples, minmax calibration)")
             )

      assert %{"graphs" => [graph]} = result.quality

      assert graph["evaluation"] == %{
               "source" => "1 of 8 calibration samples held out (every 5th)",
               "samples" => 1
             }

      assert [%{"name" => "y", "bits" => 8, "meets_bar" => false} = y] = graph["outputs"]
      assert y["sqnr_db"] < 5.0
      assert y["within_one_step"] < 0.1
      assert [warning] = result.warnings
      # the output is a feature map: its answer is its values, measured by cosine similarity
      assert %{"kind" => "values", "cosine_min" => cosine} = y["answer"]
      assert cosine < 0.5

      assert warning =~
               "1 output(s) below the quality bar: output 'y' (values): cosine similarity"

      assert warning =~ "; SQNR "
      assert warning =~ "(bar: cosine similarity >= 0.98)"
      assert warning =~ "try --activations u16"
      assert warning =~ "init_overrides={'TENSOR': [{'quant_type': QuantType.QUInt16}]}"
      assert Quality.read(result.output) == {:ok, result.quality}
    end

    # The figures are the binary's on the HTP emulator; ORT's CPU running the QDQ model (kept as
    # qdq_cpu) rounds otherwise. Measured on this model: u16 36.6 dB on the CPU, 7.8 dB (cosine
    # 0.93) on the HTP: the HTP's 16-bit offset (test/qnn_host_layers_test.exs).
    test "a16w8 keeps it on ORT's CPU, not on the HTP: both figures, and the warning says so",
         %{outlier: dir} do
      {result, _} = compile!(dir, "outlier_channel", "u16.bin", activations: :u16)
      assert %{"graphs" => [%{"activations" => "u16", "outputs" => [y]} = graph]} = result.quality
      assert graph["measured_on"] =~ "the binary on the HTP emulator"
      assert y["bits"] == 16
      assert y["qdq_cpu"]["sqnr_db"] > 30.0
      assert y["qdq_cpu"]["meets_bar"]
      refute y["meets_bar"]
      assert y["answer"]["cosine_min"] < 0.98
      assert [warning] = result.warnings

      assert warning =~
               "(on ORT's CPU the QDQ model meets it: cosine similarity with the float model 0.99"

      assert warning =~ "the HTP's 16-bit tensors carry a constant offset per channel"
      assert warning =~ "and the binary is what runs)"
    end

    test "--min-sqnr chooses u16 for the outlier model and u8 for an easy one, judged on the HTP",
         %{positive: positive, outlier: outlier, easy: easy} do
      {result, progress} = compile!(positive, "outlier_positive", "auto.bin", min_sqnr: 25)
      assert %{"graphs" => [graph]} = result.quality
      assert graph["activations"] == "u16"
      assert graph["min_sqnr_db"] == 25

      assert [
               %{"activations" => "u8", "min_sqnr_db" => low} = u8,
               %{"activations" => "u16", "min_sqnr_db" => high, "htp" => %{"min_sqnr_db" => htp}}
             ] = graph["tried"]

      # u8 below the bar on the CPU is not compiled to be judged
      refute Map.has_key?(u8, "htp")
      assert low < 25 and high >= 25 and htp >= 25
      assert Enum.any?(progress, &(&1 =~ "--min-sqnr 25 dB: chose u16 activations, s8 weights"))
      assert result.warnings == []
      assert [%{"sqnr_db" => ^htp}] = graph["outputs"]

      assert Quality.format(result.quality) =~
               ~r/from u8 -?\d+\.\d dB, below the bar, u16 \d+\.\d dB, meets the bar \(HTP emulator: \d+\.\d dB, meets it\)/

      assert [%{outputs: [%{data_type: :ufixed_point_16}]}] = result.graphs

      # outlier_channel's u16 meets 25 dB on the CPU, not on the HTP: no precision is kept
      message = no_precision!(outlier, 25)

      assert message =~
               ~r/no precision meets --min-sqnr 25 dB on every output \(lowest SQNR: u8 activations -?\d/

      assert message =~ ~r/u16 activations 3\d\.\d dB \(HTP emulator: \d\.\d dB\)\)/

      {result, _} = compile!(easy, "a16w8", "auto.bin", min_sqnr: 25)

      assert %{"graphs" => [%{"activations" => "u8", "tried" => [%{"activations" => "u8"}]}]} =
               result.quality

      assert [%{outputs: [%{data_type: :ufixed_point_8}]}] = result.graphs
    end

    test "--activations auto: mixed for the outlier model, u8 for an easy one, by the answers' bar",
         %{positive: positive, easy: easy} do
      {result, progress} =
        compile!(positive, "outlier_positive", "by_answer.bin", activations: :auto)

      assert %{"graphs" => [graph]} = result.quality
      # u8 with only h at 16 bits (test/qnn_host_layers_test.exs: the layer that hurts)
      assert graph["activations"] == "mixed"

      assert [
               %{"activations" => "u8", "meets_bar" => false},
               %{
                 "activations" => "mixed",
                 "u16_tensors" => ["h"],
                 "meets_bar" => true,
                 "htp" => %{"meets_bar" => true}
               }
             ] = graph["tried"]

      assert Enum.any?(progress, &(&1 =~ "--activations auto: chose mixed precision"))
      assert result.warnings == []

      {result, _} = compile!(easy, "a16w8", "by_answer.bin", activations: :auto)

      assert %{"graphs" => [%{"activations" => "u8", "tried" => [%{"meets_bar" => true}]}]} =
               result.quality
    end

    test "class scores are answered by top-1 agreement, as the float and QDQ models' own outputs say" do
      dir = QnnHost.model!("mlp")
      inputs = Path.join(dir, "inputs")

      {result, _} =
        compile!(dir, "mlp", "top1.bin", activations: :u8, eval: inputs, save_qdq: true)

      assert %{"graphs" => [%{"outputs" => [p]}]} = result.quality
      assert %{"kind" => "scores", "rows" => 2, "k" => 5} = p["answer"]

      # the same two samples through ORT's CPU EP: the float model and the QDQ model the task kept
      qdq = Path.join(Path.dirname(result.output), "mlp_qdq.onnx")
      float = QnnHost.reference!(Path.join(dir, "mlp.onnx"), inputs, :cpu)
      quantized = QnnHost.reference!(qdq, inputs, :cpu)

      agree =
        for {[f], [q]} <- Enum.zip(float.outputs, quantized.outputs) do
          argmax(f.data) == argmax(q.data)
        end

      assert p["answer"]["top1_agreement"] == Enum.count(agree, & &1) / length(agree)
      assert p["meets_bar"] == p["answer"]["top1_agreement"] >= 0.9

      # --task embed measures the same output as values instead
      {result, _} =
        compile!(dir, "mlp", "embed.bin", activations: :u8, eval: inputs, task: :embed)

      assert %{"graphs" => [%{"task" => "embed", "outputs" => [p]}]} = result.quality
      assert %{"kind" => "values", "cosine_min" => cosine} = p["answer"]
      assert cosine > 0.9
    end

    test "--min-sqnr that no precision meets is an error naming the figures; nothing is written",
         %{outlier: dir} do
      message = no_precision!(dir, 60)

      assert message =~
               "no precision meets --min-sqnr 60 dB on every output (lowest SQNR: u8 activations "

      assert message =~ ", u16 activations 3"
    end

    test "--eval DIR measures on those samples, calibrating on all the others; the figures are ORT's",
         %{outlier: dir} do
      {result, progress} =
        compile!(dir, "outlier_channel", "eval.bin",
          activations: :u8,
          eval: Path.join(dir, "inputs"),
          save_qdq: true,
          save_ctx: true
        )

      assert Enum.any?(progress, &(&1 =~ "8 calibration samples"))
      assert %{"graphs" => [graph]} = result.quality

      assert graph["evaluation"] == %{
               "source" => "--eval #{Path.join(dir, "inputs")}",
               "samples" => 2
             }

      [y] = graph["outputs"]

      # the same figures from ONNX Runtime's CPU runs of the two models on the 2 inputs
      float =
        QnnHost.reference!(Path.join(dir, "outlier_channel.onnx"), Path.join(dir, "inputs"), :cpu)

      # the binary on the emulator (ORT's QNN EP on the EP-context model): the output's figures;
      # the QDQ model on ORT's CPU: its qdq_cpu ones
      out = Path.dirname(result.output)

      qdq =
        QnnHost.reference!(
          Path.join(out, "outlier_channel_qdq.onnx"),
          Path.join(dir, "inputs"),
          :cpu
        )

      htp =
        QnnHost.reference!(
          Path.join(out, "outlier_channel_ctx.onnx"),
          Path.join(dir, "inputs"),
          :qnn
        )

      assert [scale] = qdq.scales
      ref = Enum.flat_map(float.outputs, fn [o] -> floats(o) end)
      assert length(ref) == 2 * 4 * 8 * 8 and y["values"] == length(ref)

      figures = fn run ->
        errors =
          Enum.zip_with(ref, Enum.flat_map(run.outputs, fn [o] -> floats(o) end), &(&1 - &2))

        {10 * :math.log10(sum_sq(ref) / sum_sq(errors)),
         Enum.count(errors, &(abs(&1) <= scale)) / length(errors)}
      end

      {sqnr, within} = figures.(htp)
      assert_in_delta y["sqnr_db"], sqnr, 0.01
      assert_in_delta y["within_one_step"], within, 1.0e-9
      assert_in_delta y["step"], scale, scale * 1.0e-6
      {cpu_sqnr, _} = figures.(qdq)
      assert_in_delta y["qdq_cpu"]["sqnr_db"], cpu_sqnr, 0.01
    end

    test "inputs unlike the calibration's: u16 below the bar too, and the warning says so",
         %{outlier: dir} do
      # the held-out inputs 20x the calibration range: the input's own steps clip them
      far = Path.join(dir, "far_eval")
      File.mkdir_p!(far)
      scaled_npy!(Path.join([dir, "inputs", "x_0.npy"]), Path.join(far, "x_0.npy"), 20.0)

      {result, _} = compile!(dir, "outlier_channel", "far.bin", activations: :u16, eval: far)

      assert %{"graphs" => [%{"outputs" => [%{"meets_bar" => false, "sqnr_db" => sqnr}]}]} =
               result.quality

      assert sqnr < 20.0
      assert [warning] = result.warnings
      assert warning =~ "quantized with u16 activations, 1 output(s) below the quality bar"

      assert warning =~
               "16-bit activations are not enough: check that the calibration data look like the model's real inputs"

      refute warning =~ "try --activations u16"
    end

    test "few calibration samples: said, and still measured", %{outlier: dir} do
      few = Path.join(dir, "few")
      File.mkdir_p!(few)
      File.cp!(Path.join([dir, "calibration", "x_0.npy"]), Path.join(few, "x_0.npy"))
      {one, _} = compile!(dir, "outlier_channel", "one.bin", calibration: few, activations: :u16)

      assert Enum.any?(
               one.warnings,
               &(&1 =~
                   "only 1 calibration sample: the quality figures are measured on that same sample")
             )

      assert %{
               "graphs" => [
                 %{
                   "evaluation" => %{
                     "samples" => 1,
                     "source" => "the 1 calibration sample (not held out)"
                   }
                 }
               ]
             } = one.quality

      for n <- 1..2,
          do:
            File.cp!(Path.join([dir, "calibration", "x_#{n}.npy"]), Path.join(few, "x_#{n}.npy"))

      {three, progress} =
        compile!(dir, "outlier_channel", "three.bin", calibration: few, activations: :u16)

      assert Enum.any?(
               three.warnings,
               &(&1 =~
                   "only 3 calibration samples: 1 is held out to measure the quality, 2 calibrate")
             )

      assert Enum.any?(progress, &(&1 =~ "2 calibration samples"))

      assert %{
               "graphs" => [
                 %{
                   "evaluation" => %{
                     "samples" => 1,
                     "source" => "the last of 3 calibration samples held out"
                   }
                 }
               ]
             } = three.quality
    end

    test "random calibration keeps its N samples and is measured on more of the same stream",
         %{easy: dir} do
      {result, progress} =
        compile!(dir, "a16w8", "random.bin", calibration: nil, random_calibration: 4)

      assert Enum.any?(progress, &(&1 =~ "4 calibration samples"))

      assert %{"graphs" => [%{"evaluation" => evaluation, "outputs" => [_]}]} = result.quality

      assert evaluation == %{
               "source" => "1 more random sample(s) (uniform in [-1, 1])",
               "samples" => 1
             }
    end

    test "an evaluation directory without the model's input is named", %{outlier: dir} do
      model = Path.join(dir, "outlier_channel.onnx")
      bin = Path.join(dir, "bad.bin")
      cal = [calibration: Path.join(dir, "calibration")]

      # an evaluation directory without the model's input: the same checks as calibration data
      empty = Path.join(dir, "empty_eval")
      File.mkdir_p!(empty)
      assert {:error, message} = Compiler.compile(model, bin, cal ++ [eval: empty])

      assert message =~
               "evaluation data for input 'x' is missing: expected #{empty}/x_<n>.npy files of shape [1, 4, 8, 8]"

      refute File.exists?(bin)
    end

    test "the sidecar is written, and `mix hexagon_tpu.inspect` shows it", %{outlier: dir} do
      {result, _} = compile!(dir, "outlier_channel", "shown.bin", activations: :u8)
      assert File.exists?(result.output <> ".quality.json")

      out = inspect_output(result.output)

      assert out =~
               "quantization quality (the float model on ONNX Runtime's CPU EP against the binary on the " <>
                 "HTP emulator (each graph's measured_on); bars: detections recall and precision of the " <>
                 "float model's detections >= 90%; "

      assert out =~ "; values cosine similarity >= 0.98):"

      assert out =~
               ~s[graph "outlier_channel": u8 activations, s8 weights; 1 sample(s): 1 of 8 calibration samples held out]

      assert out =~
               ~r/output "y" \(values\): cosine similarity with the float model -?\d\.\d{4} at worst .*; SQNR -?\d+\.\d dB, \d+\.\d% within one step \([0-9.e-]+\)  BELOW THE BAR/
    end

    test "a QDQ model has no float reference: said, no sidecar, a stale one removed",
         %{outlier: dir} do
      {first, _} =
        compile!(dir, "outlier_channel", "qdq_src.bin", activations: :u8, save_qdq: true)

      qdq = Path.join(Path.dirname(first.output), "outlier_channel_qdq.onnx")
      assert File.exists?(qdq)
      bin = first.output
      assert File.exists?(Quality.path(bin))

      {:ok, result} = Compiler.compile(qdq, bin, force: true, eval: Path.join(dir, "inputs"))
      assert result.quality == nil
      refute File.exists?(Quality.path(bin))

      assert Enum.any?(
               result.warnings,
               &(&1 =~ "is already quantized (QDQ): no float reference, so no quality figures")
             )

      assert inspect_output(bin) =~
               "quantization quality: (none recorded: no qdq_src.bin.quality.json)"

      # a float graph and a QDQ graph in one binary: figures for the first, the second named.
      # (graph_b's QDQ: outlier_channel with a16w8 makes a binary that crashes the emulator
      # when it loads, in ONNX Runtime's own run of it too; with its tensors renamed as well.)
      other = QnnHost.model!("graph_b")
      {other_result, _} = compile!(other, "graph_b", "other_qdq.bin", save_qdq: true)
      other_qdq = Path.join(Path.dirname(other_result.output), "graph_b_qdq.onnx")
      both = Path.join(Path.dirname(bin), "both.bin")
      float = Path.join(dir, "outlier_channel.onnx")

      assert {:ok, result} =
               Compiler.compile([float, other_qdq], both,
                 force: true,
                 calibration: Path.join(dir, "calibration")
               )

      assert %{"graphs" => [%{"name" => "outlier_channel"}], "unmeasured" => ["graph_b_qdq"]} =
               result.quality

      assert inspect_output(both) =~
               ~s(graph "graph_b_qdq": compiled from a QDQ model, no float reference to measure)
    end
  end

  # Compiles dir/name.onnx into its own folder, dir/<bin without .bin>/bin (where --save-qdq
  # writes the QDQ model too); returns the result and the progress messages.
  # outlier_channel compiled with --min-sqnr `db`, which no precision meets: the error, and
  # neither the binary nor its quality file written.
  defp no_precision!(dir, db) do
    bin = Path.join(dir, "none_#{db}.bin")

    assert {:error, message} =
             Compiler.compile(Path.join(dir, "outlier_channel.onnx"), bin,
               calibration: Path.join(dir, "calibration"),
               min_sqnr: db
             )

    refute File.exists?(bin)
    refute File.exists?(Quality.path(bin))
    message
  end

  defp compile!(dir, name, bin, opts),
    do: QnnHost.compile_into!(dir, Path.basename(bin, ".bin"), name, bin, opts)

  defp argmax(f32) do
    values = for <<v::float-32-little <- f32>>, do: v
    Enum.find_index(values, &(&1 == Enum.max(values)))
  end

  defp inspect_output(bin) do
    system = Path.join(QnnHost.lib_dir(), "libQnnSystem.so")
    capture_io(fn -> Mix.Tasks.HexagonTpu.Inspect.run([bin, "--system-lib", system]) end)
  end

  defp floats(%{type: {:f, 32}, data: data}), do: for(<<f::float-32-little <- data>>, do: f)

  # an f32 .npy file with every value times factor (the header kept as it is)
  defp scaled_npy!(from, to, factor) do
    bytes = File.read!(from)
    %{type: {:f, 32}, data: data} = QnnHost.read_npy!(from)
    header = binary_part(bytes, 0, byte_size(bytes) - byte_size(data))
    scaled = for <<f::float-32-little <- data>>, into: <<>>, do: <<f * factor::float-32-little>>
    File.write!(to, header <> scaled)
  end

  defp sum_sq(list), do: Enum.reduce(list, 0.0, &(&1 * &1 + &2))
end
