"""TFLite models in `mix hexagon_tpu.compile` (hexagon_tpu_compile.py calls it): a `.tflite` is
converted to ONNX first, then compiled as an ONNX model is, and the conversion is checked
against the TFLite interpreter.

The converter is tflite2onnx (pinned in requirements.txt), chosen by measurement on MediaPipe
0.10.14's 14 models (docs/models.md, "TFLite models"): with four fixes of ours
(hexagon_tpu_tflite_fixes) it converts the 9 that tf2onnx 1.17 converts right, to the same
figures against the TFLite interpreter, and the 2 sparse ones neither converted, without
TensorFlow (tensorflow-cpu 2.21 is a 274 MB wheel, and the venv grows from 360 MB to 1.8 GB);
what it cannot convert it says, where tf2onnx leaves ops it cannot map in as `TFL_*` custom
ops and exits 0.

Before converting, every op the model holds is read (the `tflite` package's schema): a custom op
(MediaPipe's `Convolution2DTransposeBias`, `TransformLandmarks`, ...) is refused by name, with
the nodes that use it, as is a builtin op tflite2onnx does not convert (`HARD_SWISH`). After
converting, the ONNX model and the TFLite interpreter (ai-edge-litert) run the same samples;
the difference is said, and warned about when it is more than float rounding.
"""

from hexagon_tpu_common import Failure, one_line

# Below this cosine similarity over all the samples (or above this share of the output's range
# in its largest difference) the converted model does not compute what the TFLite one does.
# Float rounding of the same graph stays near 1e-6 in cosine; in the largest difference it
# reaches 1.5e-3 of the range on pose_landmark_full's logits (2.71 of 1842, where TFLite's own
# XNNPACK and reference kernels differ by 1.29).
COSINE_WARN = 0.9999
RANGE_WARN = 5e-3
# A TFLite flatbuffer's file identifier, at bytes 4..8.
IDENTIFIER = b"TFL3"


def ops_of(path):
    """[(op name, custom code or None, output tensor name)] of every operator of every subgraph."""
    import tflite

    model = parsed(path)
    out = []
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            code = model.OperatorCodes(op.OpcodeIndex())
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            name = tflite.opcode2name(builtin) if builtin in tflite.BUILTIN_OPCODE2NAME else str(builtin)
            custom = code.CustomCode().decode("utf-8", "replace") if name == "CUSTOM" and code.CustomCode() else None
            output = graph.Tensors(op.Outputs(0)).Name().decode("utf-8", "replace") if op.OutputsLength() else ""
            out.append((name, custom, output))
    return out


def input_names(path):
    """The names of the main subgraph's inputs."""
    model = parsed(path)
    graph = model.Subgraphs(0)
    return [graph.Tensors(graph.Inputs(i)).Name().decode("utf-8", "replace") for i in range(graph.InputsLength())]


def parsed(path):
    """The tflite.Model of the file at path."""
    import tflite

    with open(path, "rb") as f:
        data = f.read()
    if data[4:8] != IDENTIFIER:
        raise Failure(f"{path} is not a TFLite model (no {IDENTIFIER.decode()} identifier)")
    try:
        return tflite.Model.GetRootAsModel(data, 0)
    except Exception as error:  # noqa: BLE001 - any parse failure
        raise Failure(f"{path} is not a TFLite model: {one_line(error, 200)}") from None


def check_ops(path):
    """Refuses, naming them, the custom ops and the builtin ops tflite2onnx does not convert."""
    import tflite
    from tflite2onnx.op.common import OpFactory

    converted = {tflite.opcode2name(code) for code in OpFactory.registry if code in tflite.BUILTIN_OPCODE2NAME}
    custom, missing = {}, {}
    for name, code, output in ops_of(path):
        if name == "CUSTOM":
            custom.setdefault(code or "?", []).append(output)
        elif name not in converted:
            missing.setdefault(name, []).append(output)
    shown = lambda found: "; ".join(  # noqa: E731
        f"{op} ({len(outs)} node(s), making {', '.join(repr(o) for o in outs[:3])}{', ...' if len(outs) > 3 else ''})"
        for op, outs in sorted(found.items())
    )
    if custom:
        raise Failure(
            f"{path} holds custom ops that no converter maps to ONNX: {shown(custom)}; they are its authors' own "
            "code (MediaPipe's run in MediaPipe's calculators): export the model without them, or run that part on the host"
            + (f"; it also holds ops tflite2onnx does not convert: {shown(missing)}" if missing else "")
        )
    if missing:
        hints = {"DENSIFY": "sparse weights: export the model dense", "HARD_SWISH": "x * relu6(x + 3) / 6"}
        said = "; ".join(f"{op}: {hints[op]}" for op in sorted(missing) if op in hints)
        raise Failure(
            f"{path} holds ops that tflite2onnx {version('tflite2onnx')} does not convert: {shown(missing)}"
            + (f" ({said})" if said else "")
            + "; convert it with tf2onnx (python -m tf2onnx.convert --tflite MODEL.tflite --output MODEL.onnx, which "
            "needs TensorFlow; check that it left no custom op) and compile the ONNX model"
        )


def version(package):
    from importlib.metadata import version as found

    return found(package)


def convert(path, out_path):
    """Converts the TFLite model at path into the ONNX model out_path; returns the converter's
    name and version."""
    import logging

    import hexagon_tpu_tflite_fixes
    import tflite2onnx

    hexagon_tpu_tflite_fixes.apply(version("tflite2onnx"))  # before check_ops: it adds ops
    check_ops(path)
    # tflite2onnx logs each fp16 weight ("Data type float16 not supported/tested yet"): the
    # weights are dequantized to float32 by the model's own DEQUANTIZE ops, which it converts
    logging.getLogger("tflite2onnx").setLevel(logging.ERROR)
    try:
        tflite2onnx.convert(path, out_path)
    except Exception as error:  # noqa: BLE001 - the converter raises several types
        raise Failure(
            f"tflite2onnx {version('tflite2onnx')} failed to convert {path}: {type(error).__name__}: "
            f"{one_line(error, 200)}; convert it with tf2onnx (--tflite, needs TensorFlow) and "
            "compile the ONNX model"
        ) from None
    return f"tflite2onnx {version('tflite2onnx')}"


def compared(tflite_path, onnx_path, samples, say):
    """Runs the TFLite interpreter (ai-edge-litert) and ONNX Runtime's CPU EP on the converted
    model with the same samples ({onnx input: array}, in the ONNX model's layout: an NCHW input
    is an NHWC one in TFLite); says, per output, the largest difference and the cosine similarity;
    returns the warnings. Inputs and outputs are matched by name, else by position; a rank-4
    tensor whose shape is the other's NHWC form is transposed."""
    import numpy as np
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=tflite_path)
    interpreter.allocate_tensors()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    session = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    t_inputs, t_outputs = interpreter.get_input_details(), interpreter.get_output_details()
    o_inputs, o_outputs = session.get_inputs(), session.get_outputs()
    if len(t_inputs) != len(o_inputs) or len(t_outputs) != len(o_outputs):
        return [f"{tflite_path}: the converted model has {len(o_inputs)} input(s) and {len(o_outputs)} output(s), the TFLite one {len(t_inputs)} and {len(t_outputs)}: not compared"]
    feeds_to = paired([i.name for i in o_inputs], [d["name"] for d in t_inputs])
    results_of = paired([o.name for o in o_outputs], [d["name"] for d in t_outputs])
    # per output: largest difference, range, and the sums of the cosine over all samples (one
    # sample's cosine of an output of one value near 0 says nothing)
    worst = {o.name: [0.0, 0.0, 0.0, 0.0, 0.0] for o in o_outputs}
    for sample in samples:
        for o_input, t in zip(o_inputs, feeds_to):
            detail = t_inputs[t]
            interpreter.set_tensor(detail["index"], to_shape(np.asarray(sample[o_input.name], np.float32), tuple(detail["shape"])).astype(detail["dtype"]))
        interpreter.invoke()
        ours = session.run(None, {i.name: np.asarray(sample[i.name], np.float32) for i in o_inputs})
        for o_output, got, t in zip(o_outputs, ours, results_of):
            want = interpreter.get_tensor(t_outputs[t]["index"])
            got = to_shape(np.asarray(got, np.float64), want.shape).ravel()
            want = np.asarray(want, np.float64).ravel()
            entry = worst[o_output.name]
            entry[0] = max(entry[0], float(np.max(np.abs(got - want))) if want.size else 0.0)
            entry[1] = max(entry[1], float(np.ptp(want)) if want.size else 0.0)
            entry[2] += float(np.dot(got, want))
            entry[3] += float(np.dot(got, got))
            entry[4] += float(np.dot(want, want))
    warnings = []
    runtime = f"ai-edge-litert {version('ai-edge-litert')}"
    for name, (largest, span, dot, got_sq, want_sq) in worst.items():
        norms = (got_sq * want_sq) ** 0.5
        cosine = dot / norms if norms else float(got_sq == want_sq)
        said = f"output '{name}' against the TFLite interpreter ({runtime}) on {len(samples)} sample(s): largest difference {largest:.3g}, cosine similarity {cosine:.6f}"
        say("info", f"{tflite_path}: {said}")
        if cosine < COSINE_WARN or (span > 0 and largest > RANGE_WARN * span):
            warnings.append(f"{tflite_path}: the conversion changed the answer: {said}; check the converted model, or convert it otherwise")
    return warnings


def paired(onnx_names, tflite_names):
    """For each ONNX name, the index of the TFLite tensor of the same name, else of its position."""
    return [tflite_names.index(n) if n in tflite_names else i for i, n in enumerate(onnx_names)]


def to_shape(array, shape):
    """array in `shape`: as it is, transposed between NCHW and NHWC, or reshaped (same size)."""
    if tuple(array.shape) == tuple(shape):
        return array
    if array.ndim == 4 and len(shape) == 4:
        for perm in ((0, 2, 3, 1), (0, 3, 1, 2)):
            if tuple(array.transpose(perm).shape) == tuple(shape):
                return array.transpose(perm)
    return array.reshape(shape)


def is_tflite(path):
    """Whether path is a TFLite model: named .tflite, or holding the flatbuffer's identifier."""
    with open(path, "rb") as f:
        head = f.read(8)
    return path.lower().endswith(".tflite") or head[4:8] == IDENTIFIER
