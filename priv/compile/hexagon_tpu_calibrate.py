"""A float model's calibration and quantization in hexagon_tpu_compile.py: the calibration
samples (<input>_<n>.npy files, or seeded random ones), the evaluation samples the quality is
measured on (--eval DIR, or calibration samples held out), and ONNX Runtime's QNN QDQ
quantization of the prepared model (per-channel weights; 16-bit overrides for mixed precision),
its warnings passed on once each.
"""

import glob
import logging
import os
import re

import hexagon_tpu_prepare
from hexagon_tpu_common import ANSI, Failure, captured_output, one_line, say

CALIBRATION_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile", "distribution": "Distribution"}


def file_stem(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def load_calibration(directory, inputs, kind="calibration"):
    """A list of samples ({input name: float32 array}), read from <input>_<n>.npy files (kind:
    "calibration", or "evaluation" for --eval DIR, names the data in errors)."""
    import numpy as np

    if not os.path.isdir(directory):
        raise Failure(f"{kind} directory {directory} does not exist")
    per_input = {}
    for name, _dtype, shape in inputs:
        pattern = re.compile(re.escape(file_stem(name)) + r"_(\d+)\.npy$")
        found = {}
        for path in glob.glob(os.path.join(glob.escape(directory), "*.npy")):
            match = pattern.match(os.path.basename(path))
            if match:
                found[int(match.group(1))] = path
        if not found:
            raise Failure(
                f"{kind} data for input '{name}' is missing: expected "
                f"{os.path.join(directory, file_stem(name))}_<n>.npy files of shape {list(shape)}"
            )
        per_input[name] = found
    counts = {name: sorted(found) for name, found in per_input.items()}
    first = next(iter(counts))
    for name, indices in counts.items():
        if indices != counts[first]:
            missing = sorted(set(counts[first]) ^ set(indices))
            raise Failure(
                f"{kind} samples {missing} lack a file for input '{name}' or '{first}' "
                "(every sample needs one .npy per input)"
            )
    samples = []
    for n in counts[first]:
        sample = {}
        for name, _dtype, shape in inputs:
            path = per_input[name][n]
            try:
                array = np.load(path, allow_pickle=False)
            except Exception as error:  # noqa: BLE001 - report any unreadable file
                raise Failure(f"{kind} file {path} cannot be read: {error}") from None
            if tuple(array.shape) != shape:
                raise Failure(
                    f"{kind} file {path} for input '{name}' has shape {list(array.shape)}, "
                    f"expected {list(shape)}"
                )
            sample[name] = array.astype(np.float32)
        samples.append(sample)
    return samples


def random_calibration(inputs, count):
    import numpy as np

    rng = np.random.default_rng(0)
    return [
        {name: rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) for name, _dtype, shape in inputs}
        for _ in range(count)
    ]


def calibration_samples(path, inputs, args):
    """The samples a float model is quantized with: --calibration DIR, or --random-calibration N
    (warned about); refused without either."""
    if args.calibration:
        return load_calibration(args.calibration, inputs)
    if args.random_calibration:
        say(
            "warning",
            f"{path}: quantizing with {args.random_calibration} random calibration samples "
            "(uniform in [-1, 1]): accuracy will suffer; pass --calibration DIR with real inputs",
        )
        return random_calibration(inputs, args.random_calibration)
    names = ", ".join(f"'{n}' {list(s)}" for n, _d, s in inputs)
    raise Failure(
        f"{path} is a float model and needs calibration data to be quantized: "
        f"pass --calibration DIR (<input>_<n>.npy files for {names}) "
        "or --random-calibration N"
    )


def evaluation_samples(path, samples, inputs, args):
    """(calibration samples, evaluation samples, where these come from): --eval DIR, or some of
    the calibration samples held out (hexagon_tpu_quality.split)."""
    import hexagon_tpu_quality as quality

    if args.eval:
        return samples, load_calibration(args.eval, inputs, "evaluation"), f"--eval {args.eval}"
    if args.random_calibration:
        # more samples of the same seeded stream: the calibration keeps all N it was asked for
        count = args.random_calibration
        extra = max(1, count // 4)
        evaluation = random_calibration(inputs, count + extra)[count:]
        return samples, evaluation, f"{extra} more random sample(s) (uniform in [-1, 1])"
    calibration, evaluation, source, warning = quality.split(samples)
    if warning:
        say("warning", f"{path}: {warning}")
    return calibration, evaluation, source


class Warnings(logging.Handler):
    """Keeps the quantizer's own warnings (Python logging, e.g. `Expected bias ... to be an
    initializer`), each once, to pass on as warning lines."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.add(record.getMessage())

    # Not passed on: ORT raising the opset to 21 for 16-bit activations is what u16 needs (its
    # "Please verify the quantized model" is done: the quality figures measure it); its advice
    # to run the pre-processing, which ran (ort_pre_process: when it fails, that is said), but
    # whose mark in metadata_props qnn_pre_process must drop.
    EXPECTED = re.compile(r"does not support 16-bit integer quantization natively|consider (to run )?pre-processing before quantization")

    def add(self, message):
        message = " ".join(ANSI.sub("", str(message)).split())
        if self.EXPECTED.search(message):
            return
        if message not in self.messages:
            self.messages.append(message)


def quantize(path, out_path, samples, activations, args, work, warnings, overrides=None):
    """Quantizes the prepared float model at path: ORT's quantization pre-processing (folds
    constants; its result is always written), then its QNN pre-processing (which writes a model
    only when it fused something: otherwise its input is the one to quantize), a copy of each
    shared bias per node (hexagon_tpu_prepare.unshared_biases), then the QNN QDQ configuration; overrides: tensors of that model to quantize to 16 bits (ORT's
    mixed-precision overrides; the graph's outputs stay `activations`). Returns the float model
    it quantized (the layer debugger's reference: the QDQ model's tensors have its names)."""
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantType, quantize as ort_quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.samples = iter(samples)

        def get_next(self):
            return next(self.samples, None)

    folded = hexagon_tpu_prepare.ort_pre_process(path, os.path.join(work, "folded.onnx"), warnings.add)
    prepared = hexagon_tpu_prepare.qnn_pre_process(folded, os.path.join(work, "preprocessed.onnx"))
    prepared = hexagon_tpu_prepare.unshared_biases(prepared, os.path.join(work, "unshared.onnx"))
    types = {"u8": QuantType.QUInt8, "u16": QuantType.QUInt16, "s8": QuantType.QInt8}
    config = get_qnn_qdq_config(
        prepared,
        Reader(),
        calibrate_method=getattr(CalibrationMethod, CALIBRATION_METHODS[args.calibration_method]),
        activation_type=types[activations],
        weight_type=types[args.weights],
        per_channel=True,
        init_overrides={name: [{"quant_type": QuantType.QUInt16}] for name in overrides} if overrides else None,
    )
    if overrides:
        keep_outputs(config, prepared, overrides, types[activations])
    ort_quantize(prepared, out_path, config)
    activations_on_inputs(out_path)
    return prepared


# Ops ORT's quantizer quantizes through their output alone (it folds them into the op before):
# one reading a graph input is left float, which the HTP (v68: no float) cannot run.
OUTPUT_QUANTIZED = {"Relu", "Clip"}


def activations_on_inputs(path):
    """Gives a Relu or Clip that reads a graph input the QuantizeLinear/DequantizeLinear of its
    own output: what it computes is unchanged (every value it makes lies in that range, and
    every input value outside it maps to the range's end, as the op itself does), and the HTP
    then gets it quantized, like the rest."""
    import onnx
    from onnx import helper

    model = onnx.load(path)
    graph = model.graph
    inputs = {v.name for v in graph.input}
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    changed = False
    for node in list(graph.node):
        if node.op_type not in OUTPUT_QUANTIZED or node.input[0] not in inputs:
            continue
        q = next((c for c in consumers.get(node.output[0], []) if c.op_type == "QuantizeLinear"), None)
        if q is None:
            continue
        source = node.input[0]
        quantized, dequantized = f"{source}_{node.name}_QuantizeLinear_Output", f"{source}_{node.name}_DequantizeLinear_Output"
        at = list(graph.node).index(node)
        graph.node.insert(at, helper.make_node("DequantizeLinear", [quantized, *q.input[1:]], [dequantized], name=f"{node.name}/input_dq"))
        graph.node.insert(at, helper.make_node("QuantizeLinear", [source, *q.input[1:]], [quantized], name=f"{node.name}/input_q"))
        node.input[0] = dequantized
        changed = True
    if changed:
        onnx.save(model, path, save_as_external_data=model.ByteSize() > 2_000_000_000)


def keep_outputs(config, model_path, raised, qtype):
    """ORT's mixed-precision fixer carries 16 bits on to the outputs of the nodes that read a
    raised tensor, and a graph output has no reader to convert back for: such an output (not
    raised itself) is converted back to `qtype`, so the graph's I/O keep their type."""
    import onnx

    outputs = {o.name for o in onnx.load(model_path, load_external_data=False).graph.output}
    for name, entries in config.extra_options.get("TensorQuantOverrides", {}).items():
        if name in outputs and name not in raised:
            for entry in entries:
                if entry.get("quant_type", qtype) != qtype and "convert" not in entry:
                    entry["convert"] = {"quant_type": qtype}


class Quantizer:
    """Quantizes one float model (the prepared one, at prepared; path names it in messages) with
    its calibration samples, as quality.choose and the mixed precision's comparison ask:
    quantizer(activations, overrides=None, out=qdq) writes the QDQ model to out (by default qdq)
    and returns the float model it quantized, kept as `last` (the layer debugger's reference)."""

    def __init__(self, path, prepared, samples, args, work, qdq):
        self.path, self.prepared, self.samples, self.args, self.work, self.qdq = path, prepared, samples, args, work, qdq
        self.last = None

    def __call__(self, activations, overrides=None, out=None):
        path, args = self.path, self.args
        raised = f", {', '.join(overrides)} at 16 bits" if overrides else ""
        say(
            "info",
            f"{path}: quantizing ({activations} activations{raised}, {args.weights} per-channel "
            f"weights, {len(self.samples)} calibration samples, {args.calibration_method} calibration)",
        )
        warnings = Warnings()
        logging.getLogger().addHandler(warnings)
        with captured_output(args.verbose):
            try:
                quantized = quantize(self.prepared, out or self.qdq, self.samples, activations, args, self.work, warnings, overrides)
                error = None
            except Exception as caught:  # noqa: BLE001 - report any quantizer failure
                error = caught
            finally:
                logging.getLogger().removeHandler(warnings)
        for message in warnings.messages:
            say("warning", f"{path}: the quantizer: {message}")
        if error is not None:
            raise Failure(f"quantizing {path} failed: {one_line(error)}")
        self.last = quantized
        return quantized
