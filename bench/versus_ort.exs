# predict/3 against ONNX Runtime's QNN EP `session.run` on the same context binary, on Qualcomm's
# x86 HTP emulator, interleaved in one run (one of ours, one of ORT's, ...): the SqueezeNet test
# model (112x112, u8 I/O; both sides quantize the f32 input and dequantize the output on the
# host). ORT runs in a Python process beside this VM (test/support/onnx_models.py serve), timed
# inside Python around `session.run`; ours is the whole predict/3 call. The outputs are compared
# bit for bit first. Prints figures; asserts nothing but the equality. The emulator's times move
# a lot from run to run on a shared machine: read the ratio, not the milliseconds.
#
#   bash bench/run.sh versus-ort [RUNS]        (MIX_ENV=test: the test support compiles the model)

alias HexagonTpu.Test.QnnHost

runs = String.to_integer(List.first(System.argv()) || "20")
model = QnnHost.compiled!("squeezenet", ["squeezenet"])
[ctx] = model.ctx
[inputs] = model.inputs
{:ok, python} = HexagonTpu.Compiler.python()
script = Path.expand("../test/support/onnx_models.py", __DIR__)
ort_out = Path.join(System.tmp_dir!(), "hexagon_tpu_versus_ort_#{System.os_time()}.f32")

port =
  Port.open({:spawn_executable, python}, [
    :binary,
    {:line, 256},
    args: [script, "serve", ctx, inputs, ort_out, "--lib-dir", QnnHost.lib_dir()]
  ])

answer = fn ->
  receive do
    {^port, {:data, {:eol, line}}} -> line
  after
    600_000 -> raise "no answer from ONNX Runtime"
  end
end

"ready" = answer.()
ort_run = fn -> Port.command(port, "run\n") && String.to_integer(answer.()) end

runtime = QnnHost.runtime!()
graph = QnnHost.graph!(model.bin, runtime)
%{data: input} = QnnHost.read_npy!(Path.join(inputs, "data_0_0.npy"))
predict = fn -> HexagonTpu.predict(graph, [input], output: :binary) end
{:ok, [ours]} = predict.()

unless ours == File.read!(ort_out),
  do: raise("the outputs differ: ours and ONNX Runtime's are not bit-equal")

time_ns = fn fun ->
  started = System.monotonic_time()
  fun.()
  System.convert_time_unit(System.monotonic_time() - started, :native, :nanosecond)
end

samples =
  for _ <- 1..runs do
    {time_ns.(predict), ort_run.()}
  end

Port.close(port)
File.rm(ort_out)

Code.require_file("support.exs", __DIR__)
median = &(HexagonTpu.BenchSupport.median(&1) / 1.0e6)

{ours_ms, ort_ms} =
  {median.(Enum.map(samples, &elem(&1, 0))), median.(Enum.map(samples, &elem(&1, 1)))}

ratios = Enum.map(samples, fn {o, r} -> o / r end)
ms = &:erlang.float_to_binary(&1, decimals: 1)

IO.puts("""
SqueezeNet 112x112 (u8) on Qualcomm's x86 HTP emulator, #{runs} interleaved runs, outputs bit-equal
  predict/3         median #{ms.(ours_ms)} ms
  ORT session.run   median #{ms.(ort_ms)} ms
  ratio of medians  #{:erlang.float_to_binary(ours_ms / ort_ms, decimals: 3)}; per pair: median #{:erlang.float_to_binary(median.(ratios) * 1.0e6, decimals: 3)}, \
min #{:erlang.float_to_binary(Enum.min(ratios), decimals: 3)}, max #{:erlang.float_to_binary(Enum.max(ratios), decimals: 3)}
""")
