defmodule HexagonTpu.QnnHostLayersTest do
  # The layer that hurts (priv/compile/hexagon_tpu_layers.py): `debug_layers: true` ranks the
  # QDQ model's tensors, and `activations: :auto` raises only the worst to 16 bits. The model is
  # test/support/onnx_models.py's outlier_channel (Conv `conv1` -> `h` -> Conv `conv2` -> `y`),
  # whose `h` has one channel 300x the others: at 8 bits its SQNR stays 36 dB (the outlier
  # channel carries the energy) while `y`, which reads only the swamped channels, falls to 0 dB;
  # `h` quantized alone takes the output to 0 dB. a16w8 is the easy model u8 keeps.
  use ExUnit.Case, async: false

  alias HexagonTpu.JSON
  alias HexagonTpu.Test.QnnHost

  @moduletag :qnn_host
  @moduletag timeout: 300_000

  setup do
    %{outlier: QnnHost.model!("outlier_channel"), easy: QnnHost.model!("a16w8")}
  end

  test "--debug-layers ranks h first, and its figures are ORT's as computed here", %{outlier: dir} do
    {result, progress} =
      compile!(dir, "outlier_channel", "layers.bin",
        activations: :u8,
        debug_layers: true,
        save_qdq: true
      )

    path = result.output <> ".layers.json"
    assert Enum.any?(progress, &(&1 =~ "layer figures: #{path}"))
    assert Enum.any?(progress, &(&1 =~ ~r/^\s+1\s+-?\d+\.\d dB .* 8  h \(conv1, Conv\)$/))

    doc = JSON.decode!(File.read!(path))
    assert doc["samples"] == 1
    assert [h, y, x] = doc["tensors"]

    assert %{"name" => "h", "node" => "conv1", "op_type" => "Conv", "rank" => 1, "bits" => 8} = h
    assert h["shape"] == [1, 8, 8, 8]
    # h quantized alone ruins the output; its own SQNR looks fine (the outlier's energy)
    assert h["alone_sqnr_db"] < 5.0
    assert h["sqnr_db"] > 30.0
    assert %{"name" => "y", "rank" => 2, "op_type" => "Conv"} = y
    assert y["sqnr_db"] < 5.0 and y["alone_sqnr_db"] > 30.0
    assert y["own_drop_db"] == h["sqnr_db"] - y["sqnr_db"]
    assert %{"name" => "x", "rank" => 3, "op_type" => "(graph input)", "own_drop_db" => nil} = x

    # h against an independent run (onnx_models.py tensor-figures) of the QDQ model the task
    # compiled, on the sample it held out (the 5th of 8)
    qdq = Path.join(Path.dirname(result.output), "outlier_channel_qdq.onnx")

    said =
      QnnHost.python!([
        "tensor-figures",
        Path.join(dir, "outlier_channel.onnx"),
        qdq,
        Path.join(dir, "calibration"),
        "h",
        "h_DequantizeLinear_Output",
        "--samples",
        "4"
      ])

    [_, sqnr] = Regex.run(~r/sqnr_db (\S+)/, said)
    [_, cosine] = Regex.run(~r/cosine_min (\S+)/, said)
    assert_in_delta h["sqnr_db"], String.to_float(sqnr), 1.0e-6
    assert_in_delta h["cosine"], String.to_float(cosine), 1.0e-9

    # the output's row is the quality record's figure for it (ORT's CPU running the QDQ model)
    assert %{"graphs" => [%{"outputs" => [out]}]} = result.quality
    assert_in_delta y["sqnr_db"], out["qdq_cpu"]["sqnr_db"], 1.0e-9
  end

  test "--activations auto: mixed precision, only h at 16 bits, the I/O still u8; a16w8 stays u8",
       %{outlier: outlier, easy: easy} do
    {result, progress} = compile!(outlier, "outlier_channel", "mixed.bin", activations: :auto)
    assert %{"graphs" => [graph]} = result.quality
    assert graph["activations"] == "mixed"

    assert [
             %{"activations" => "u8", "meets_bar" => false},
             %{
               "activations" => "mixed",
               "u16_tensors" => ["h"],
               "meets_bar" => true,
               "min_sqnr_db" => db
             }
           ] = graph["tried"]

    assert db > 30.0
    assert %{"u16_tensors" => ["h"], "tried" => [["h"]]} = mixed = graph["mixed_precision"]
    assert [%{"name" => "h", "rank" => 1} | _] = mixed["ranking"]
    # its cost: each alternative compiled; the mixed binary carries the conversions
    assert %{"mixed" => m, "u8" => u8, "u16" => u16} = mixed["binary_bytes"]
    assert m > 0 and u8 > 0 and u16 > 0 and m != u8

    assert Enum.any?(
             progress,
             &(&1 =~ "--activations auto: chose mixed precision, u8 activations with h at 16 bits")
           )

    assert Enum.any?(progress, &(&1 =~ "mixed precision costs: binary size mixed "))
    # the binary's I/O keep the 8-bit type: only h (inside) is 16-bit
    assert [%{inputs: [%{data_type: :ufixed_point_8}], outputs: [%{data_type: :ufixed_point_8}]}] =
             result.graphs

    # chosen on ORT's CPU; the HTP emulator rounds h's 16 bits otherwise (as it does all-u16's)
    assert [warning] = result.warnings
    assert warning =~ "quantized with mixed activations"
    assert warning =~ "on ORT's CPU the QDQ model meets it"
    assert warning =~ "try --activations u16"

    {result, _} = compile!(easy, "a16w8", "mixed.bin", activations: :auto)

    assert %{"graphs" => [%{"activations" => "u8", "tried" => [%{"meets_bar" => true}]} = g]} =
             result.quality

    refute Map.has_key?(g, "mixed_precision")
  end

  # Compiles dir/name.onnx into its own folder, dir/<bin without .bin>_layers/bin (where --save-qdq
  # writes the QDQ model too); returns the result and the progress messages.
  defp compile!(dir, name, bin, opts),
    do: QnnHost.compile_into!(dir, Path.basename(bin, ".bin") <> "_layers", name, bin, opts)
end
