"""Runs a compiled model through ONNX Runtime's own QNN execution provider: the reference the
real-stack demo compares hexagon_tpu with.

    python examples/ort_reference.py MODEL_ctx.onnx INPUT.f32 OUTPUT.f32

MODEL_ctx.onnx is the EP-context model `mix hexagon_tpu.compile --save-ctx DIR` writes beside
the binary: one EPContext node that names the same .bin file hexagon_tpu loads. ORT loads that
binary with the same libQnnHtp.so (Qualcomm's HTP emulator on x86-64), feeds it INPUT.f32
(raw little-endian f32, the model's only input) and writes its only output to OUTPUT.f32.
For quantized graph I/O, ORT quantizes the float input and dequantizes the output on its CPU
EP, as hexagon_tpu does on the host; the script prints which nodes run outside the QNN EP.
"""

import os
import sys

import numpy as np
import onnxruntime as ort
import onnxruntime_qnn


def main(ctx_path: str, input_path: str, output_path: str) -> None:
    # QNN prints to fd 1 (from the moment its library loads); keep this script's output clean.
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
        devices = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"][:1]
        options = ort.SessionOptions()
        options.log_severity_level = 3
        # The graph's own nodes are one EPContext node for the QNN EP. With quantized graph I/O
        # (the compile task's default) ORT adds QuantizeLinear/DequantizeLinear nodes around
        # it, which run on ORT's CPU EP: the host-side (de)quantization hexagon_tpu does too.
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "0")
        options.add_provider_for_devices(devices, {"backend_type": "htp"})
        session = ort.InferenceSession(ctx_path, options)
        (model_input,) = session.get_inputs()
        shape = [int(d) for d in model_input.shape]
        features = np.fromfile(input_path, dtype="<f4").reshape(shape)
        (output,) = session.run(None, {model_input.name: features})
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)

    import onnx

    around = sorted({n.op_type for n in onnx.load(ctx_path).graph.node if n.op_type != "EPContext"})
    if around:
        print(f"ORT runs {', '.join(around)} on its CPU EP, around the EPContext node")
    np.asarray(output, dtype="<f4").tofile(output_path)
    print(f"ORT {ort.__version__} (QNN EP, HTP backend) on {os.path.basename(ctx_path)}: "
          f"{model_input.name} {shape} -> {session.get_outputs()[0].name} {list(output.shape)}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python examples/ort_reference.py MODEL_ctx.onnx INPUT.f32 OUTPUT.f32")
    main(*sys.argv[1:])
