"""Rewrites an ONNX model the way exporters write it into one that ONNX Runtime's quantizer and
its QNN execution provider take (used by hexagon_tpu_compile.py):

- `--input-shape name=1x3x640x640` fixes a dynamic input's shape, and shape inference carries it
  to the outputs (onnxruntime.tools.onnx_model_utils);
- weights given as `Constant` nodes (paddle2onnx, the TFLite converters) become initializers:
  ORT's quantizer quantizes initializers only, and a weight left in float is refused by the
  v68 HTP (QNN error 3110 for every Conv);
- a float model of an opset older than 13 is converted to 13 (onnx.version_converter):
  per-channel QuantizeLinear/DequantizeLinear (their `axis`) need opset 13;
- ORT's own quantization pre-processing (onnxruntime.quantization.quant_pre_process: constant
  folding, shape inference) runs on the result, then its QNN one (qnn_preprocess_model) on a
  copy without `metadata_props` (ORT 1.32's fails on any: `cannot convert dictionary update
  sequence element #0`); the quantized model is written without them too.

Each step says what it did; nothing here changes the names of the graph's inputs and outputs.
"""

import re

# Per-channel QDQ (DequantizeLinear's axis) needs this opset of the default domain.
QDQ_OPSET = 13
SHAPE = re.compile(r"([^=]+)=(\d+(?:x\d+)*)")


class PrepareError(Exception):
    """A model (or an --input-shape) that cannot be prepared: one line to report."""


def parse_input_shapes(specs):
    """{input name: [dims]} from --input-shape NAME=1x3x640x640 options (each name once)."""
    shapes = {}
    for spec in specs or []:
        match = SHAPE.fullmatch(spec)
        if not match:
            raise PrepareError(f"invalid --input-shape {spec!r}: expected NAME=DxDx... (e.g. image=1x3x640x640)")
        name, dims = match.group(1), [int(d) for d in match.group(2).split("x")]
        if any(d <= 0 for d in dims):
            raise PrepareError(f"invalid --input-shape {spec!r}: every dimension must be positive")
        if name in shapes:
            raise PrepareError(f"--input-shape gives input '{name}' twice")
        shapes[name] = dims
    return shapes


def dims_of(value):
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in value.type.tensor_type.shape.dim]


def fix_input_shapes(model, shapes):
    """Fixes the inputs named in `shapes`; returns what it did. A name that is not an input, a
    rank that differs or a static dimension given another size is an error."""
    from onnxruntime.tools import onnx_model_utils

    initializers = {i.name for i in model.graph.initializer}
    inputs = {v.name: v for v in model.graph.input if v.name not in initializers}
    done = []
    for name, shape in shapes.items():
        if name not in inputs:
            raise PrepareError(f"--input-shape: the model has no input '{name}' (its inputs: {', '.join(inputs)})")
        dims = dims_of(inputs[name])
        if len(dims) != len(shape):
            raise PrepareError(f"--input-shape {name}={'x'.join(map(str, shape))}: input '{name}' has rank {len(dims)} ({dims})")
        for i, (have, want) in enumerate(zip(dims, shape)):
            if isinstance(have, int) and have > 0 and have != want:
                raise PrepareError(f"--input-shape {name}={'x'.join(map(str, shape))}: dimension {i} of input '{name}' is {have}, not {want}")
        if dims != shape:
            onnx_model_utils.make_input_shape_fixed(model.graph, name, shape)
            done.append(f"input '{name}' {dims} fixed to {shape}")
    if done:
        onnx_model_utils.fix_output_shapes(model)
    return done


def constants_to_initializers(model):
    """Moves the main graph's Constant nodes into initializers; returns how many it moved."""
    import numpy as np
    from onnx import numpy_helper

    graph = model.graph
    kept, moved = [], 0
    for node in graph.node:
        constant = node.op_type == "Constant" and node.domain in ("", "ai.onnx")
        tensor = constant_value(node, numpy_helper, np) if constant else None
        if tensor is None:
            kept.append(node)
            continue
        tensor.name = node.output[0]
        graph.initializer.append(tensor)
        moved += 1
    if moved:
        del graph.node[:]
        graph.node.extend(kept)
    return moved


def constant_value(node, numpy_helper, np):
    """The TensorProto a Constant node makes, or None for one this leaves alone (sparse, strings)."""
    (attr,) = node.attribute
    if attr.name == "value":
        return _copy(attr.t)
    arrays = {
        "value_float": lambda: np.array(attr.f, np.float32),
        "value_floats": lambda: np.array(list(attr.floats), np.float32),
        "value_int": lambda: np.array(attr.i, np.int64),
        "value_ints": lambda: np.array(list(attr.ints), np.int64),
    }
    return numpy_helper.from_array(arrays[attr.name]()) if attr.name in arrays else None


def _copy(tensor):
    from onnx import TensorProto

    out = TensorProto()
    out.CopyFrom(tensor)
    return out


def default_opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def convert_opset(model):
    """The model at opset QDQ_OPSET or newer (onnx.version_converter), and the opset it had."""
    from onnx import version_converter

    have = default_opset(model)
    if have is None or have >= QDQ_OPSET:
        return model, have
    try:
        return version_converter.convert_version(model, QDQ_OPSET), have
    except Exception as error:  # noqa: BLE001 - the converter raises several types
        text = " ".join(str(error).split())[:300]
        raise PrepareError(f"converting the model from opset {have} to {QDQ_OPSET} (needed for per-channel quantization) failed: {text}") from None


def prepare(path, out_path, shapes, quantizing, say):
    """Writes the prepared model to out_path. For a QDQ model (quantizing False) only the input
    shapes are fixed. `say(kind, message)` reports each step."""
    import onnx

    try:
        model = onnx.load(path)
    except Exception as error:  # noqa: BLE001 - any parse failure
        raise PrepareError(f"{path} is not an ONNX model: {' '.join(str(error).split())[:300]}") from None
    for step in fix_input_shapes(model, shapes):
        say("info", f"{path}: {step}")
    if quantizing:
        moved = constants_to_initializers(model)
        if moved:
            say("info", f"{path}: {moved} Constant node(s) moved into initializers (the quantizer quantizes initializers)")
        model, had = convert_opset(model)
        if had is not None and had < QDQ_OPSET:
            say("info", f"{path}: converted from opset {had} to {QDQ_OPSET} (per-channel quantization needs it)")
    onnx.save(model, out_path, save_as_external_data=model.ByteSize() > 2_000_000_000)
    return out_path


def ort_pre_process(path, out_path, warn):
    """ORT's quantization pre-processing (constant folding, shape inference) of path into
    out_path; returns out_path, or path when ORT cannot process it (warn(message) says why)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        # symbolic shape inference is for dynamic shapes, which the HTP does not take
        quant_pre_process(path, out_path, skip_symbolic_shape=True)
        return out_path
    except Exception as error:  # noqa: BLE001 - report and go on without it
        warn(f"ORT's quantization pre-processing failed, quantizing without it: {' '.join(str(error).split())[:300]}")
        return path


def qnn_pre_process(path, out_path):
    """ORT's QNN pre-processing (fusions QNN prefers): out_path when it rewrote the model,
    path when it had nothing to do (it then writes nothing: its own constant folding is lost,
    which is why ort_pre_process runs first). It is given the model without metadata_props:
    ORT 1.32's fails on any (`cannot convert dictionary update sequence element #0`), and
    ort_pre_process adds one."""
    import onnx
    from onnxruntime.quantization.execution_providers.qnn import qnn_preprocess_model

    model = onnx.load(path)
    del model.metadata_props[:]
    return out_path if qnn_preprocess_model(model, out_path) else path
