#!/usr/bin/env python3
"""Compiles ONNX models into one QNN context binary for the Hexagon NPU (HTP).

This is the Python half of `mix hexagon_tpu.compile`; it runs in the venv that task creates
(priv/compile/requirements.txt) and can also be run by hand in any environment with those
packages:

    python hexagon_tpu_compile.py model.onnx -o model.bin --calibration calib/

A model that already holds QuantizeLinear/DequantizeLinear nodes (QDQ) is compiled as it is;
a float model is rewritten as hexagon_tpu_prepare.py says (Constant weights, old opsets,
--input-shape for dynamic inputs), then quantized with ONNX Runtime's QNN configuration
(per-channel weights) and calibration data. ONNX Runtime's QNN execution provider then compiles it for the chosen
HTP architecture and SoC with CPU fallback disabled: every node must run on the HTP. (With
--io quantized, ORT leaves the graph's input QuantizeLinear and output DequantizeLinear to the
host, which it does only with fallback allowed: then any other node left outside the QNN
partition is an error.)

Calibration data: a directory of .npy files, one per sample and input, named
`<input>_<n>.npy` (n = 0, 1, ...), where <input> is the ONNX input name with every character
other than letters, digits, '.', '_' and '-' replaced by '_'. Each array has exactly the
input's shape.

A float model's quantization is measured on the answer (hexagon_tpu_answer.py) against the
float model, on held-out calibration samples or --eval DIR (hexagon_tpu_quality.py): the QDQ
model on ORT's CPU EP, then the binary on the HTP emulator, whose figures are printed, warned
about below the bar, and written beside the binary as <binary>.quality.json. --min-sqnr DB
chooses the cheapest activations (u8, then u16) whose SQNR meets DB on every output;
--activations auto the cheapest (u8, u8 with its worst tensors at 16 bits, u16) whose answers
meet the bar (both on the CPU's figures).

On failure it prints one line, `hexagon_tpu_compile: error: ...`, on stderr and exits 1; nodes
the HTP refuses are each named (more than a few: in <output>.refused.txt). <output>.names keeps
the graph's name and the model's names of its inputs and outputs (ORT renames them in the
binary).
"""

import argparse
import contextlib
import glob
import logging
import math
import os
import re
import shutil
import sys
import tempfile

import hexagon_tpu_prepare
import hexagon_tpu_tflite

PREFIX = "hexagon_tpu_compile"
# How many calibration samples check a converted TFLite model against the TFLite interpreter.
CONVERSION_SAMPLES = 8
# A graph name a person can type (and a file name): what --graph-name accepts.
GRAPH_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


class CompileError(Exception):
    """A failure to report as one line."""


# ORT colours its log lines; none of that reaches a message.
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def say(kind, message):
    print(f"{PREFIX}: {kind}: {ANSI.sub('', str(message))}", file=sys.stderr, flush=True)


def lib_dir():
    """The onnxruntime_qnn package directory: libQnnHtp.so and libQnnSystem.so live there."""
    import onnxruntime_qnn

    return os.path.dirname(os.path.abspath(onnxruntime_qnn.__file__))


def qairt_version(args):
    """"QAIRT 2.51.0 (onnxruntime-qnn 2.7.0)": the QNN SDK whose libraries the wheel carries, or
    the build id of the SDK library given with --backend-path. A binary needs a device runtime
    at least as new."""
    from onnxruntime_qnn import build_and_package_info as info

    if args.backend_path:
        return f"QAIRT {build_id_of(args.backend_path)} ({args.backend_path})"
    return f"QAIRT {info.qnn_version} (onnxruntime-qnn {info.__version__})"


def compiler_lib(args):
    """The libQnnHtp.so that compiles: --backend-path, or the wheel's own."""
    return args.backend_path or os.path.join(lib_dir(), "libQnnHtp.so")


def build_id_of(path):
    """The QAIRT build id a library or binary carries (hexagon_tpu_runtime.build_id)."""
    import hexagon_tpu_runtime

    try:
        found = hexagon_tpu_runtime.build_id(path)
    except hexagon_tpu_runtime.Failure as error:
        raise CompileError(str(error)) from None
    if not found:
        raise CompileError(f"{path} carries no QAIRT build id")
    return found


def check_target(found, what, args):
    """Refuses a build id newer than --qairt-target, naming both."""
    import hexagon_tpu_runtime

    if args.qairt_target and hexagon_tpu_runtime.newer_than(found, args.qairt_target):
        raise CompileError(
            f"{what} is QAIRT {found}, newer than the target runtime {args.qairt_target}, which refuses "
            "binaries of a newer QAIRT: compile with --qnn-sdk PATH, a QAIRT SDK no newer than "
            f"{args.qairt_target}, or install this compiler's runtime on the device (mix hexagon_tpu.runtime)"
        )


@contextlib.contextmanager
def captured_output(verbose):
    """Sends what ORT and QNN print (QNN writes to fd 1) to a file; yields a reader of it. The
    lines are read for errors in any case, and with --verbose shown on stderr afterwards (without
    ORT's colour codes), failing or not."""
    log = tempfile.TemporaryFile(mode="w+b")
    lines = []
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    try:
        yield lambda: lines
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        log.seek(0)
        lines.extend(ANSI.sub("", line) for line in log.read().decode("utf-8", "replace").splitlines())
        log.close()
        if verbose:
            for line in lines:
                print(line, file=sys.stderr)
            sys.stderr.flush()


# ---------------------------------------------------------------------------------- checks


def file_stem(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def static_inputs(model):
    """[(name, numpy dtype, shape)] of the graph inputs that are not initializers."""
    from onnx import helper

    initializers = {i.name for i in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]
        if any(not isinstance(d, int) or d <= 0 for d in dims):
            raise CompileError(
                f"input '{value.name}' has a dynamic shape {dims}; the HTP needs static shapes: "
                f"give one with --input-shape {value.name}=" + "x".join(str(d) if isinstance(d, int) and d > 0 else "N" for d in dims)
            )
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        inputs.append((value.name, dtype, tuple(dims)))
    return inputs


def check_fp16(model, htp_arch, path):
    from onnx import TensorProto

    graph = model.graph
    values = list(graph.input) + list(graph.output) + list(graph.value_info)
    names = [v.name for v in values if v.type.tensor_type.elem_type == TensorProto.FLOAT16]
    names += [i.name for i in graph.initializer if i.data_type == TensorProto.FLOAT16]
    if names and htp_arch <= 68:
        shown = ", ".join(sorted(set(names))[:5]) + (", ..." if len(set(names)) > 5 else "")
        raise CompileError(
            f"{path}: fp16 tensors ({shown}) cannot run on HTP v{htp_arch}, which has no fp16: "
            "export the model in float32 (it is then quantized) or target --htp-arch 73 or newer"
        )


def is_qdq(model):
    ops = {node.op_type for node in model.graph.node}
    return bool(ops & {"QuantizeLinear", "DequantizeLinear"})


# ---------------------------------------------------------------------------- calibration


def load_calibration(directory, inputs, kind="calibration"):
    """A list of samples ({input name: float32 array}), read from <input>_<n>.npy files (kind:
    "calibration", or "evaluation" for --eval DIR, names the data in errors)."""
    import numpy as np

    if not os.path.isdir(directory):
        raise CompileError(f"{kind} directory {directory} does not exist")
    per_input = {}
    for name, _dtype, shape in inputs:
        pattern = re.compile(re.escape(file_stem(name)) + r"_(\d+)\.npy$")
        found = {}
        for path in glob.glob(os.path.join(glob.escape(directory), "*.npy")):
            match = pattern.match(os.path.basename(path))
            if match:
                found[int(match.group(1))] = path
        if not found:
            raise CompileError(
                f"{kind} data for input '{name}' is missing: expected "
                f"{os.path.join(directory, file_stem(name))}_<n>.npy files of shape {list(shape)}"
            )
        per_input[name] = found
    counts = {name: sorted(found) for name, found in per_input.items()}
    first = next(iter(counts))
    for name, indices in counts.items():
        if indices != counts[first]:
            missing = sorted(set(counts[first]) ^ set(indices))
            raise CompileError(
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
                raise CompileError(f"{kind} file {path} cannot be read: {error}") from None
            if tuple(array.shape) != shape:
                raise CompileError(
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


CALIBRATION_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile", "distribution": "Distribution"}


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
    only when it fused something: otherwise its input is the one to quantize), then the QNN
    QDQ configuration; overrides: tensors of that model to quantize to 16 bits (ORT's
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
    return prepared


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


# -------------------------------------------------------------------------------- compile


def session_options(ctx_path, fallback, share):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", "0")
    so.add_session_config_entry("ep.context_file_path", ctx_path)
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "0" if fallback else "1")
    if share:
        so.add_session_config_entry("ep.share_ep_contexts", "1")
    if share == "last":
        so.add_session_config_entry("ep.stop_share_ep_contexts", "1")
    return so


def qnn_device():
    import onnxruntime as ort
    import onnxruntime_qnn

    if "QNNExecutionProvider" not in [d.ep_name for d in ort.get_ep_devices()]:
        ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
    return [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"][:1]


def provider_options(args):
    options = {
        "htp_arch": str(args.htp_arch),
        "soc_model": str(args.soc_model),
        "offload_graph_io_quantization": "1" if args.io == "quantized" else "0",
    }
    if args.backend_path:
        # Another QAIRT's libQnnHtp.so: the EP refuses a backend of another QAIRT version
        # ("Unable to find a valid interface") unless told to skip its version check.
        options.update(backend_path=args.backend_path, skip_qnn_version_check="1")
    else:
        options["backend_type"] = "htp"
    return options


def run_sessions(models, ctx_paths, args, fallback):
    """Compiles every model (sharing one context when there are several); returns the error
    (or None) and what ORT and QNN printed."""
    import onnxruntime as ort

    share = len(models) > 1
    with captured_output(args.verbose) as log:
        try:
            for i, (model, ctx) in enumerate(zip(models, ctx_paths)):
                mode = ("last" if i == len(models) - 1 else True) if share else None
                so = session_options(ctx, fallback, mode)
                if fallback:
                    so.log_severity_level = 2  # ORT's warnings say why a node was rejected
                if args.qnn_verbose_log:
                    so.log_severity_level = 0
                so.add_provider_for_devices(qnn_device(), provider_options(args))
                ort.InferenceSession(model, so)
            error = None
        except Exception as caught:  # noqa: BLE001 - ORT raises several exception types
            error = caught
    return error, log()


def qnn_verbose_log(models, args, work):
    """QNN's log at its verbose level (where it names the op a graph finalize failed on) of
    compiling models again, filtered to its errors. QNN takes its log level once per process,
    from ORT's default logger when the EP first loads it, so this runs in a process of its own."""
    import subprocess

    argv = [sys.executable, os.path.abspath(__file__), *models, "-o", os.path.join(work, "verbose.bin")]
    argv += ["--htp-arch", str(args.htp_arch), "--soc-model", str(args.soc_model), "--io", args.io]
    argv += ["--backend-path", args.backend_path] if args.backend_path else []
    argv += ["--qnn-verbose-log", work]
    keep = []
    with tempfile.TemporaryFile() as out:
        subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
        out.seek(0)
        for raw in out:
            line = ANSI.sub("", raw.decode("utf-8", "replace").rstrip("\n"))
            if "<E>" in line or "No registered op" in line:
                keep.append(line)
    return keep


def compile_verbosely(args):
    """The child of qnn_verbose_log: the models compiled once with ORT's and QNN's logs verbose."""
    import onnxruntime as ort

    ort.set_default_logger_severity(0)  # before the EP creates its QNN log: QNN's level follows it
    args.verbose = True  # the captured lines go to stderr, for the parent to read
    ctx_paths = [os.path.join(args.qnn_verbose_log, f"verbose_{i}_ctx.onnx") for i in range(len(args.models))]
    error, _log = run_sessions(args.models, ctx_paths, args, fallback=False)
    return 1 if error is not None else 0


def cpu_nodes(ctx_path):
    """[(op_type, name)] of the nodes ORT left outside the QNN partitions in ctx_path, except
    the QuantizeLinear of a graph input and the DequantizeLinear of a graph output (graph I/O
    quantization offloaded to the host, --io quantized)."""
    import onnx

    graph = onnx.load(ctx_path, load_external_data=False).graph
    inputs = {i.name for i in graph.input}
    outputs = {o.name for o in graph.output}
    left = []
    for n in graph.node:
        io_q = n.op_type == "QuantizeLinear" and n.input[0] in inputs
        io_dq = n.op_type == "DequantizeLinear" and n.output[0] in outputs
        if n.op_type != "EPContext" and not io_q and not io_dq:
            left.append((n.op_type, n.name or "(unnamed)"))
    real = [n for n in left if n[0] not in ("QuantizeLinear", "DequantizeLinear")]
    return real or left


# QNN's codes for a node it refuses (QnnOpPackage.h), and what they mean here.
QNN_OP_CODES = {
    3100: "QNN_OP_PACKAGE_ERROR_INVALID_INFRASTRUCTURE",
    3101: "QNN_OP_PACKAGE_ERROR_INVALID_INFO",
    3110: "QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE",
    3200: "QNN_OP_PACKAGE_ERROR_INVALID_ARGUMENT",
}
# "QNN.backendValidateOpConfig() failed for node `relu` of type `Relu` with error code 3110"
VALIDATION = re.compile(r"failed for node `([^`]*)` of type `([^`]*)` with error code (\d+)")
# ORT names the nodes it makes from the model's (the layout transformer's NHWC copy, another
# validation pass's, both): `p2o.Conv.1_token_29`, `relu_2` and `conv_token_1_2` are the
# model's `p2o.Conv.1`, `relu` and `conv`; and the QNN nodes it builds one model node from
# (`bilstm_cell0_forward` of the LSTM `bilstm`) start with its name.
TOKEN = re.compile(r"(_token)?_\d+$")
LISTED = 8
WEIGHTED = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
# QNN's verbose log when a graph's finalize fails on an op: the QNN node it could not build
# (`<E> "bilstm_cell0_forward" generated: could not create op`) and the kernel it looked for
# (`No registered op found for 0x440300000087 'q::QNN_LSTM_FAIL'`).
NOT_BUILT = re.compile(r'<E> "([^"]+)" generated: (.+?)\s*$', re.M)
NO_KERNEL = re.compile(r"No registered op found for \S+ '([^']+)'")
# Inputs the HTP's op takes only as constants (ORT's QNN EP leaves the node to the CPU when one
# is a graph input or computed), by ONNX op type: their positions.
CONSTANT_INPUTS = {
    "BatchNormalization": [1, 2, 3, 4],
    "Clip": [1, 2],
    "Reshape": [1],
    "Resize": [1, 2, 3],
    "Upsample": [1],
    "Pad": [1, 2, 3],
    "Slice": [1, 2, 3, 4],
    "Expand": [1],
    "Tile": [1],
    "TopK": [1],
    "Squeeze": [1],
    "Unsqueeze": [1],
    "ReduceMax": [1],
    "ReduceMin": [1],
    "ReduceMean": [1],
    "ReduceSum": [1],
    "InstanceNormalization": [1, 2],
    "LayerNormalization": [1, 2],
    "PRelu": [1],
}
# Control flow, which the HTP does not run: ORT's QNN EP then takes no node of the graph.
CONTROL_FLOW = {"If", "Loop", "Scan"}
# What works instead, by the op type the HTP could not build.
INSTEAD = {
    "LSTM": (
        "export it unrolled (per time step: MatMul, Add, Sigmoid, Tanh, Mul, which the HTP builds; "
        "silero-vad's if-less export is one), or keep the recurrent part on the CPU"
    ),
    "GRU": "export it unrolled (per time step: MatMul, Add, Sigmoid, Tanh, Mul), or keep the recurrent part on the CPU",
}


REWRITE = "; quantize the float ones, or rewrite the others with supported ops (e.g. Sum -> Add) or remove them"


class Refused:
    """The nodes the HTP refuses, gathered from the CPU nodes ORT left, QNN's validation
    failures and the op a graph finalize failed on, each with its op type, QNN's code and a
    reason in words."""

    def __init__(self, models, args):
        import onnx

        self.args = args
        self.nodes = {}  # name -> [op type, QNN op type, code, QNN's words (finalize) or None]
        self.graphs = [onnx.load(m, load_external_data=False).graph for m in models]
        self.by_name = {n.name: n for g in self.graphs for n in g.node}
        self.dequantized = {n.output[0] for g in self.graphs for n in g.node if n.op_type == "DequantizeLinear"}
        # an initializer the graph also lists as an input is a default a caller may override
        self.initializers = {i.name for g in self.graphs for i in g.initializer} - {v.name for g in self.graphs for v in g.input}
        self.dequantized |= self.initializers
        self.producer = {o: n for g in self.graphs for n in g.node for o in n.output}
        self.ep_ops = None

    def model_node(self, name):
        """The model's name for a node ORT or QNN named (itself when none matches)."""
        found = name
        while found not in self.by_name and TOKEN.search(found):
            found = TOKEN.sub("", found)
        if found in self.by_name:
            return found
        prefixes = [n for n in self.by_name if n and name.startswith(n)]
        return max(prefixes, key=len) if prefixes else name

    def op_of(self, name, fallback):
        return self.by_name[name].op_type if name in self.by_name else fallback

    def add(self, op_type, name):
        self.nodes.setdefault(name, [op_type, None, None, None])

    def add_log(self, log):
        for name, qnn_op, code in VALIDATION.findall("\n".join(log)):
            model_name = self.model_node(name)
            entry = self.nodes.setdefault(model_name, [self.op_of(model_name, qnn_op), None, None, None])
            entry[1], entry[2] = qnn_op, int(code)

    def add_finalize(self, log, code):
        """The nodes QNN's verbose log names at a failed finalize (code: the finalize's error)."""
        text = "\n".join(log)
        kernels = NO_KERNEL.findall(text)
        for qnn_node, words in NOT_BUILT.findall(text):
            model_name = self.model_node(qnn_node)
            said = f"QNN: \"{qnn_node}\" {words}" + (f": no kernel {', '.join(sorted(set(kernels)))}" if kernels else "")
            self.nodes.setdefault(model_name, [self.op_of(model_name, "?"), None, code, said])

    def reason(self, name, code, said=None):
        node = self.by_name.get(name)
        op_type = node.op_type if node is not None else None
        if said is not None:
            why = f"the HTP has no implementation of it for these types and sizes, found when the graph was finalized ({said})"
            return why + (f"; {INSTEAD[op_type]}" if op_type in INSTEAD else "")
        if code is None and op_type in CONTROL_FLOW:
            return (
                f"data-dependent control flow (an {op_type} on a value computed from the input; a constant one is "
                "folded away): the HTP runs none; compute both branches and choose with Where, or run this part on the host"
            )
        if code is None:
            computed = self.not_constant(node)
            if computed:
                return (
                    f"its input '{computed}' is not a constant (a graph input, or computed from one), and the HTP's "
                    f"{op_type} takes it only as a constant"
                )
            if op_type is not None and self.ep_has(op_type):
                return (
                    f"ONNX Runtime's QNN EP has an HTP op for {op_type} but did not take this one (its attributes, "
                    "types or shapes are outside what it maps; --verbose shows ORT's own reason)"
                )
            return "no HTP op for it in ONNX Runtime's QNN EP"
        float_inputs = node is not None and any(i and i not in self.dequantized for i in node.input)
        if code == 3110 and self.args.htp_arch <= 68 and (float_inputs or node is None):
            return f"float op on v{self.args.htp_arch}: not quantized"
        if code == 3110 and node.op_type in WEIGHTED and len(node.input) > 1 and not self.from_initializer(node.input[1]):
            return "its weight is not an initializer (a Constant node?), so it was quantized as an activation"
        return QNN_OP_CODES.get(code, "refused by QNN's op validation")

    def not_constant(self, node):
        """The first input of node that its op needs constant and is not, or None."""
        if node is None:
            return None
        for i in CONSTANT_INPUTS.get(node.op_type, []):
            if i < len(node.input) and node.input[i] and not self.from_initializer(node.input[i]):
                return node.input[i]
        return None

    def ep_has(self, op_type):
        """Whether the QNN EP's library names op_type (its op builders are registered by name)."""
        if self.ep_ops is None:
            import onnxruntime_qnn

            with open(onnxruntime_qnn.get_library_path(), "rb") as f:
                self.ep_ops = f.read()
        return b"\0" + op_type.encode() + b"\0" in self.ep_ops

    def from_initializer(self, tensor):
        node = self.producer.get(tensor)
        via_dq = node is not None and node.op_type == "DequantizeLinear" and node.input[0] in self.initializers
        return tensor in self.initializers or via_dq

    def lines(self):
        """One line per node: op type, name, what it makes, QNN's code and the reason."""
        out = []
        for name, (op_type, qnn_op, code, said) in self.nodes.items():
            qnn = f" (QNN {qnn_op})" if qnn_op and qnn_op != op_type else ""
            node = self.by_name.get(name)
            # the quantizer renames a node's output that a QuantizeLinear takes: the model's name back
            made = re.sub(r"_QuantizeLinear_Input$", "", node.output[0]) if node is not None and node.output else ""
            makes = f" (makes '{made}')" if made else ""
            where = f"QNN error {code}: " if code is not None else ""
            out.append(f"{op_type} '{name}'{makes}{qnn}: {where}{self.reason(name, code, said)}")
        return out

    def message(self, ort_text, where, advice=REWRITE):
        """The one-line error: every node when few, else a summary by op type and code that
        says where the full list is (written there, with ORT's own message); then advice."""
        lines = self.lines()
        head = f"the HTP (v{self.args.htp_arch}) cannot run {len(lines)} node(s)"
        if len(lines) <= LISTED:
            text = f"{head}: {'; '.join(lines)}"
        else:
            groups = {}
            for name, (op_type, _qnn, code, said) in self.nodes.items():
                key = (op_type, code, self.reason(name, code, said))
                groups[key] = groups.get(key, 0) + 1
            summary = ", ".join(f"{n} {op} ({f'QNN error {code}: ' if code is not None else ''}{why})" for (op, code, why), n in groups.items())
            with open(where, "w", encoding="utf-8") as f:
                f.write(f"# nodes the HTP (v{self.args.htp_arch}) cannot run (mix hexagon_tpu.compile)\n")
                if ort_text:
                    f.write(f"# ONNX Runtime: {one_line(ort_text)}\n")
                f.write("\n".join(lines) + "\n")
            text = f"{head}: {summary}; every node is listed in {where} (and with --verbose)"
        if self.args.verbose:
            for line in lines:
                say("info", f"refused: {line}")
        return text + advice


def refused_path(args):
    return args.output + ".refused.txt"


def explain_failure(error, log, models, args, work):
    text = str(error)
    refused_nodes = (
        "assigned to the default CPU EP" in text
        or "fallback to CPU EP has been explicitly disabled" in text
        or "but was not selected by that EP" in text
    )
    if refused_nodes or VALIDATION.search("\n".join(log)):
        # Which nodes, and why: again with CPU fallback allowed, where ORT leaves each refused
        # node to its CPU and QNN logs each validation failure.
        refused = Refused(models, args)
        refused.add_log(log)
        ctx_paths = [os.path.join(work, f"fallback_{i}_ctx.onnx") for i in range(len(models))]
        fallback_error, fallback_log = run_sessions(models, ctx_paths, args, fallback=True)
        refused.add_log(fallback_log)
        if fallback_error is None:
            for ctx in ctx_paths:
                for op_type, name in cpu_nodes(ctx):
                    refused.add(op_type, name)
        if refused.nodes:
            return refused.message(text, refused_path(args))
        return "some nodes cannot run on the HTP and CPU fallback is disabled: " + one_line(text)
    code = re.search(r"(?:error code|Code)[: ]+(\d+)", "\n".join(log) + text)
    if "finalize" in text.lower():
        # QNN names the op it could not build only at its verbose log level: compiled again so.
        refused = Refused(models, args)
        refused.add_finalize(qnn_verbose_log(models, args, work), int(code.group(1)) if code else None)
        if refused.nodes:
            return refused.message(text, refused_path(args), advice=f" (ONNX Runtime: {one_line(text)})")
    detail = one_line(text)
    qnn = [line for line in log if "<E>" in line or "error code" in line.lower()]
    if qnn:
        detail += " (QNN: " + one_line(qnn[-1]) + ")"
    if code:
        detail = f"QNN error {code.group(1)}: " + detail
    return "ONNX Runtime's QNN EP failed to compile the model: " + detail


def nothing_taken(models, args):
    """The error for models of which ORT's QNN EP took no node (it then writes no EP-context
    model): their control flow named, which is what leaves a whole graph to the CPU."""
    refused = Refused(models, args)
    for graph in refused.graphs:
        for node in graph.node:
            if node.op_type in CONTROL_FLOW:
                refused.add(node.op_type, node.name)
    if refused.nodes:
        return refused.message(None, refused_path(args), advice="; ONNX Runtime's QNN EP took no node of the model")
    return "ONNX Runtime's QNN EP took no node of the model and wrote no context binary (--verbose shows its reasons)"


def one_line(text):
    return " ".join(ANSI.sub("", str(text)).split())[:600]


def context_bin(ctx_path):
    """The .bin file ORT wrote for ctx_path (the EPContext node's ep_cache_context)."""
    import onnx

    ctx = onnx.load(ctx_path, load_external_data=False)
    for node in ctx.graph.node:
        if node.op_type == "EPContext":
            for attr in node.attribute:
                if attr.name == "ep_cache_context":
                    return os.path.join(os.path.dirname(ctx_path), attr.s.decode())
    raise CompileError(f"ORT wrote no EPContext node into {ctx_path}")


def graph_names(ctx_paths, names):
    """[(name, QNN graph name, [(kind, index, model tensor name)])]: each model's EPContext nodes
    (ORT names the QNN graph after the node; nobody can choose it) under the name chosen for the
    model, with the model's names of the QNN graph's inputs and outputs. QNN's tensors are the
    EPContext node's, in its order (not always the model's: measured, two outputs come out
    swapped), and named by ORT (an output `y` is `QuantizeLinear_token_17_out0`); the model's name
    of each is the graph input its QuantizeLinear reads, or the graph output its
    DequantizeLinear writes (graph I/O quantization offloaded to the host), or its own."""
    import onnx

    pairs = []
    for ctx_path, name in zip(ctx_paths, names):
        graph = onnx.load(ctx_path, load_external_data=False).graph
        inputs = {v.name for v in graph.input}
        outputs = {v.name for v in graph.output}
        producer = {o: n for n in graph.node for o in n.output}
        consumers = {}
        for n in graph.node:
            for i in n.input:
                consumers.setdefault(i, []).append(n)

        def model_input(tensor):
            node = producer.get(tensor)
            if tensor in inputs:
                return tensor
            if node is not None and node.op_type == "QuantizeLinear" and node.input[0] in inputs:
                return node.input[0]
            return None

        def model_output(tensor):
            if tensor in outputs:
                return tensor
            found = [n.output[0] for n in consumers.get(tensor, []) if n.op_type == "DequantizeLinear" and n.output[0] in outputs]
            return found[0] if len(found) == 1 else None

        nodes = [node for node in graph.node if node.op_type == "EPContext"]
        for i, node in enumerate(nodes):
            tensors = [("input", j, model_input(t)) for j, t in enumerate(node.input)]
            tensors += [("output", j, model_output(t)) for j, t in enumerate(node.output)]
            pairs.append((name if i == 0 else f"{name}_{i}", node.name, [t for t in tensors if t[2] is not None]))
    return pairs


def names_token(name):
    """A tensor name as one token of the .names file: '%', whitespace and '#' percent-encoded."""
    return re.sub(r"[%#\s]", lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), name)


def write_names(bin_path, pairs, splits):
    """<binary>.names: the graph names of the binary, which HexagonTpu.Context reads beside it,
    then the model's names of each graph's inputs and outputs, by their index in the binary;
    an output the task split (splits: graph name -> hexagon_tpu_prepare.split_heads's) is said
    in a comment."""
    path = bin_path + ".names"
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"# the graphs of {os.path.basename(bin_path)} (mix hexagon_tpu.compile): name, QNN graph name\n")
        for name, qnn, _tensors in pairs:
            f.write(f"{name} {qnn}\n")
        for name, split in splits.items():
            for whole, boxes, scores, dims in split:
                f.write(
                    f"# {name}: the model's output {whole} {dims} is split into {boxes} (its rows 0-3) and {scores} "
                    f"(rows 4-{dims[1] - 1}), quantized apart; Postprocess.yolov8/2 takes [{boxes}, {scores}]\n"
                )
        f.write("# the model's names of their tensors: graph, input|output, index in the binary, name\n")
        for name, _qnn, tensors in pairs:
            for kind, index, tensor in tensors:
                f.write(f"{name} {kind} {index} {names_token(tensor)}\n")
    os.replace(path + ".tmp", path)
    return path


def save_ctx(ctx_path, bin_path, stem):
    """Writes ORT's EP-context model for this binary beside it (ORT reads the .bin only from
    the model's own directory)."""
    import onnx

    out = os.path.join(os.path.dirname(os.path.abspath(bin_path)), f"{stem}_ctx.onnx")
    ctx = onnx.load(ctx_path, load_external_data=False)
    for node in ctx.graph.node:
        if node.op_type == "EPContext":
            for attr in node.attribute:
                if attr.name == "ep_cache_context":
                    attr.s = os.path.basename(bin_path).encode()
    onnx.save(ctx, out)
    return out


def parse_shapes(args):
    """{input name: [dims]} of --input-shape, each naming an input of one of the models."""
    import onnx

    try:
        shapes = hexagon_tpu_prepare.parse_input_shapes(args.input_shape)
    except hexagon_tpu_prepare.PrepareError as error:
        raise CompileError(str(error)) from None
    if shapes:
        names = set()
        for path in args.models:
            if hexagon_tpu_tflite.is_tflite(path):
                names |= tflite_inputs(path)
                continue
            try:
                names |= {v.name for v in onnx.load(path, load_external_data=False).graph.input}
            except Exception as error:  # noqa: BLE001 - any parse failure
                raise CompileError(f"{path} is not an ONNX model: {one_line(error)}") from None
        unknown = sorted(set(shapes) - names)
        if unknown:
            raise CompileError(f"--input-shape names no input of the model: {', '.join(unknown)} (its inputs: {', '.join(sorted(names))})")
    return shapes


def tflite_inputs(path):
    """The input names of a TFLite model (tflite2onnx keeps them)."""
    try:
        return set(hexagon_tpu_tflite.input_names(path))
    except hexagon_tpu_tflite.TfliteError as error:
        raise CompileError(str(error)) from None


def compile_models(args):
    import onnx

    for path in args.models:
        if not os.path.isfile(path):
            raise CompileError(f"model {path} does not exist")
    if os.path.exists(args.output) and not args.force:
        raise CompileError(f"{args.output} already exists (use --force to overwrite it)")
    if args.calibration and args.random_calibration:
        raise CompileError("give --calibration DIR or --random-calibration N, not both")
    if args.min_sqnr is not None and args.activations:
        raise CompileError("give --activations or --min-sqnr (which chooses the activations), not both")
    stems = [os.path.splitext(os.path.basename(p))[0] for p in args.models]
    if len(set(stems)) != len(stems):
        raise CompileError(f"models need distinct file names, given {args.models}")
    names = args.graph_name or [re.sub(r"[^A-Za-z0-9_.-]", "_", stem) for stem in stems]
    if len(names) != len(args.models):
        raise CompileError(f"give one --graph-name per model: {len(names)} for {len(args.models)} models")
    for name in names:
        if not GRAPH_NAME.fullmatch(name):
            raise CompileError(f"invalid graph name {name!r}: use letters, digits, '_', '.' and '-'")
    if len(set(names)) != len(names):
        raise CompileError(f"graph names must be distinct, given {names}")
    if args.backend_path and not os.path.isfile(args.backend_path):
        raise CompileError(f"the backend library {args.backend_path} does not exist")
    # The QAIRT that will make the binary, refused before anything runs when it is too new.
    compiler_id = build_id_of(compiler_lib(args))
    check_target(compiler_id, f"the compiler ({compiler_lib(args)})", args)

    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise CompileError(f"output directory {out_dir} does not exist")

    shapes = parse_shapes(args)
    with contextlib.suppress(FileNotFoundError):
        os.remove(refused_path(args))  # a list from an earlier failure
    with tempfile.TemporaryDirectory(prefix="hexagon_tpu_compile.", dir=out_dir) as work:
        ready = []
        qualities = {}  # float model path -> its quality record (hexagon_tpu_quality)
        splits = {}  # model stem -> the YOLO heads split (hexagon_tpu_prepare.split_heads)
        on_htp = {}  # float model path -> what measuring its binary on the emulator needs
        alternatives = {}  # float model path -> its all-u8 and all-u16 QDQ models (mixed precision's cost)
        for path, stem in zip(args.models, stems):
            onnx_path = path
            if hexagon_tpu_tflite.is_tflite(path):
                onnx_path = os.path.join(work, f"{stem}_converted.onnx")
                try:
                    with captured_output(args.verbose):  # what the converter prints
                        converter = hexagon_tpu_tflite.convert(path, onnx_path)
                except hexagon_tpu_tflite.TfliteError as error:
                    raise CompileError(str(error)) from None
                say("info", f"{path}: converted to ONNX by {converter}")
            try:
                model = onnx.load(onnx_path, load_external_data=False)
            except Exception as error:  # noqa: BLE001 - any parse failure
                raise CompileError(f"{path} is not an ONNX model: {one_line(error)}") from None
            check_fp16(model, args.htp_arch, path)
            qdq_model = is_qdq(model)
            ours = {n: s for n, s in shapes.items() if n in {v.name for v in model.graph.input}}
            source = path
            # the model as exporters write it, rewritten for the quantizer and the EP
            path = os.path.join(work, f"{stem}_prepared.onnx")
            try:
                splits[stem] = hexagon_tpu_prepare.prepare(onnx_path, path, ours, not qdq_model, say, split=not args.no_split_head, label=source)
            except hexagon_tpu_prepare.PrepareError as error:
                raise CompileError(str(error)) from None
            model = onnx.load(path, load_external_data=False)
            inputs = static_inputs(model)
            if qdq_model:
                if args.calibration or args.random_calibration:
                    say("warning", f"{path} is already quantized (QDQ): calibration data is not used")
                if args.eval or args.min_sqnr is not None or args.debug_layers:
                    say("warning", f"{path} is already quantized (QDQ): no float reference, so no quality figures")
                say("info", f"{path}: QDQ model, compiled as it is; no float reference to measure its quality against")
                ready.append(path)
                continue
            path, prepared = source, path
            if args.calibration:
                samples = load_calibration(args.calibration, inputs)
            elif args.random_calibration:
                say(
                    "warning",
                    f"{path}: quantizing with {args.random_calibration} random calibration samples "
                    "(uniform in [-1, 1]): accuracy will suffer; pass --calibration DIR with real inputs",
                )
                samples = random_calibration(inputs, args.random_calibration)
            else:
                names = ", ".join(f"'{n}' {list(s)}" for n, _d, s in inputs)
                raise CompileError(
                    f"{path} is a float model and needs calibration data to be quantized: "
                    f"pass --calibration DIR (<input>_<n>.npy files for {names}) "
                    "or --random-calibration N"
                )
            if onnx_path != source:
                # the conversion, checked against the TFLite interpreter on the calibration samples
                for warning in hexagon_tpu_tflite.compared(source, onnx_path, samples[:CONVERSION_SAMPLES], say):
                    say("warning", warning)
            qdq = os.path.join(work, f"{stem}_qdq.onnx")
            samples, evaluation, evaluated_on = evaluation_samples(path, samples, inputs, args)

            quantized_float = [None]  # the float model quantize_with quantized last

            def quantize_with(activations, overrides=None, out=qdq):
                raised = f", {', '.join(overrides)} at 16 bits" if overrides else ""
                say(
                    "info",
                    f"{path}: quantizing ({activations} activations{raised}, {args.weights} per-channel "
                    f"weights, {len(samples)} calibration samples, {args.calibration_method} calibration)",
                )
                warnings = Warnings()
                logging.getLogger().addHandler(warnings)
                with captured_output(args.verbose):
                    try:
                        quantized = quantize(prepared, out, samples, activations, args, work, warnings, overrides)
                        error = None
                    except Exception as caught:  # noqa: BLE001 - report any quantizer failure
                        error = caught
                    finally:
                        logging.getLogger().removeHandler(warnings)
                for message in warnings.messages:
                    say("warning", f"{path}: the quantizer: {message}")
                if error is not None:
                    raise CompileError(f"quantizing {path} failed: {one_line(error)}")
                quantized_float[0] = quantized
                return quantized

            # measured against the rewritten float model: the one quantized, with static shapes
            qualities[path] = measured(path, prepared, qdq, inputs, evaluation, evaluated_on, args, quantize_with, splits[stem], work)
            if args.debug_layers:  # the layer that hurts, in the QDQ model compiled (hexagon_tpu_layers)
                debug_layers(path, quantized_float[0], qdq, inputs, evaluation, qualities[path], args, work, stem)
            if "mixed_precision" in qualities[path]:  # what the 16-bit tensors cost
                alternatives[path] = mixed_alternatives(stem, quantize_with, work)
            # and again on the binary, once it is made (on_htp below)
            on_htp[path] = (stem, prepared, qdq, inputs, evaluation)
            check_fp16(onnx.load(qdq, load_external_data=False), args.htp_arch, qdq)
            if args.save_qdq:
                kept = os.path.join(out_dir, f"{stem}_qdq.onnx")
                shutil.copyfile(qdq, kept)
                say("info", f"the quantized model: {kept}")
            ready.append(qdq)

        ctx_paths = [os.path.join(work, f"{stem}_ctx.onnx") for stem in stems]
        say("info", f"compiling for HTP v{args.htp_arch}, SoC model {args.soc_model} with {qairt_version(args)}")
        # ORT offloads the graph's I/O (de)quantization to the host (quantized QNN I/O) only
        # when CPU fallback is allowed: for --io quantized it is, and every node other than
        # that I/O Q/DQ is then refused here instead.
        quantized_io = args.io == "quantized"
        error, log = run_sessions(ready, ctx_paths, args, fallback=quantized_io)
        if error is not None:
            raise CompileError(explain_failure(error, log, ready, args, work))
        untaken = [model for model, ctx in zip(ready, ctx_paths) if not os.path.exists(ctx)]
        if untaken:
            raise CompileError(nothing_taken(untaken, args))
        found = [node for ctx in ctx_paths for node in cpu_nodes(ctx)]
        if found:
            refused = Refused(ready, args)
            refused.add_log(log)
            for op_type, name in found:
                refused.add(op_type, name)
            raise CompileError(refused.message(None, refused_path(args)))

        bins = {context_bin(ctx) for ctx in ctx_paths}
        if len(bins) != 1:
            raise CompileError(f"ORT wrote {len(bins)} context binaries, expected one: {sorted(bins)}")
        made = bins.pop()
        # What was written, checked before it is put in place: its build id must be the
        # compiling library's (with --qnn-sdk: the SDK's, not the wheel's) and not newer than
        # the target.
        written_id = build_id_of(made)
        if written_id != compiler_id:
            raise CompileError(
                f"the binary carries QAIRT {written_id}, not the compiling library's {compiler_id} "
                f"({compiler_lib(args)}): not written"
            )
        check_target(written_id, "the binary", args)
        measure_on_htp(qualities, on_htp, dict(zip(stems, ctx_paths)), args, splits)
        for path, models in alternatives.items():
            mixed_cost(path, qualities[path], made, models, args, work)
        pairs = graph_names(ctx_paths, names)
        os.replace(made, args.output)
        write_names(args.output, pairs, {name: splits.get(stem, []) for name, stem in zip(names, stems)})
        write_quality(args, names, qualities)
        say("info", f"build id {written_id}")
        for name, qnn, _tensors in pairs:
            say("info", f"graph {name} (QNN graph {qnn})")
        if args.save_ctx:
            for ctx, stem in zip(ctx_paths, stems):
                say("info", f"ORT's EP-context model: {save_ctx(ctx, args.output, stem)}")
    say("info", f"wrote {args.output}")


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


def measured(path, reference, qdq, inputs, evaluation, source, args, quantize_with, splits, work):
    """Quantizes (once, or per candidate with --min-sqnr) and measures against the float model
    `reference` (the rewritten model that was quantized); messages name the user's `path`."""
    import hexagon_tpu_quality as quality

    try:
        record = quality.choose(path, qdq, inputs, evaluation, source, args, quantize_with, say, reference=reference, splits=splits, work=work)
    except quality.QualityError as error:
        raise CompileError(str(error)) from None
    return record  # its warnings are said once the binary is measured (measure_on_htp)


def debug_layers(path, quantized_float, qdq, inputs, evaluation, record, args, work, stem):
    """--debug-layers: the QDQ model about to be compiled against the float model it was made
    from, tensor by tensor (hexagon_tpu_layers): the top of the ranking as info lines, every
    tensor in <output>.layers.json (<output>.<graph>.layers.json for each of several models)."""
    import hexagon_tpu_layers as layers

    try:
        rows = layers.debug(quantized_float, qdq, inputs, evaluation, work)
    except layers.LayersError as error:
        raise CompileError(f"{path}: --debug-layers: {error}") from None
    described = f"{record['activations']} activations, {record['weights']} weights"
    if "mixed_precision" in record:
        described += f" ({', '.join(record['mixed_precision']['u16_tensors'])} at 16 bits)"
    say("info", f"{path}: the layers that hurt ({described}; of {len(rows)} tensors; alone: the outputs' SQNR with only that tensor quantized):")
    for line in layers.table(rows):
        say("info", "  " + line)
    target = args.output + (f".{stem}" if len(args.models) > 1 else "") + ".layers.json"
    layers.write(target, path, described, rows, len(evaluation))
    say("info", f"layer figures: {target}")


def mixed_alternatives(stem, quantize_with, work):
    """The all-u8 and all-u16 QDQ models of a model --activations auto made mixed, to compile
    for the comparison (mixed_cost)."""
    models = {}
    for activations in ("u8", "u16"):
        models[activations] = os.path.join(work, f"{stem}_{activations}_qdq.onnx")
        quantize_with(activations, None, models[activations])
    return models


def mixed_cost(path, record, made, models, args, work):
    """What the mixed precision costs: the binary's size against the all-u8 and all-u16 ones,
    each compiled alone; in the record and as an info line."""
    sizes = {"mixed": os.path.getsize(made)}
    for activations, qdq in models.items():
        where = os.path.join(work, f"cost_{activations}")
        os.makedirs(where, exist_ok=True)
        ctx = os.path.join(where, "ctx.onnx")
        error, _log = run_sessions([qdq], [ctx], args, fallback=args.io == "quantized")
        if error is not None or not os.path.exists(ctx):
            say("warning", f"{path}: compiling the all-{activations} model for the comparison failed: {one_line(error or 'no context binary')}")
            continue
        sizes[activations] = os.path.getsize(context_bin(ctx))
    record["mixed_precision"]["binary_bytes"] = sizes
    shown = ", ".join(f"{k} {v / 1024:.1f} KiB" for k, v in sizes.items())
    say("info", f"{path}: mixed precision costs: binary size {shown}")


def measure_on_htp(qualities, on_htp, ctx_by_stem, args, splits):
    """Each float model's quality measured again on its binary, run by the HTP emulator through
    ORT's EP-context model (hexagon_tpu_quality.on_htp); skipped with --backend-path, whose
    SDK's emulator need not run on this machine (said)."""
    import hexagon_tpu_quality as quality
    import onnxruntime as ort

    for path, (stem, prepared, qdq, inputs, evaluation) in on_htp.items():
        record = qualities[path]
        if args.backend_path:
            say("info", f"{path}: the quality figures are the QDQ model's on ORT's CPU (with --backend-path the binary is not run here)")
        else:
            so = ort.SessionOptions()
            so.log_severity_level = 3
            so.add_provider_for_devices(qnn_device(), provider_options(args))
            with captured_output(args.verbose):
                session = ort.InferenceSession(ctx_by_stem[stem], so)
            record = quality.on_htp(record, path, prepared, qdq, session, inputs, evaluation, args.task, splits[stem], say)
        for warning in record["warnings"]:
            say("warning", warning)


def write_quality(args, names, qualities):
    import hexagon_tpu_quality as quality

    graphs = [(name, path, qualities[path]) for path, name in zip(args.models, names) if path in qualities]
    unmeasured = [name for path, name in zip(args.models, names) if path not in qualities]
    written = quality.write(args.output, graphs, unmeasured)
    if written:
        say("info", f"quality figures: {written}")


def parse(argv):
    parser = argparse.ArgumentParser(prog=PREFIX, description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", metavar="MODEL.onnx", help="one model (ONNX, or TFLite: converted first), or several graphs of one binary")
    parser.add_argument("-o", "--output", help="the context binary to write")
    parser.add_argument("--htp-arch", type=int, default=68, help="HTP architecture (QCS6490: 68)")
    parser.add_argument("--soc-model", type=int, default=35, help="QNN SoC model id (QCS6490: 35)")
    parser.add_argument("--calibration", metavar="DIR", help="calibration data: <input>_<n>.npy files")
    parser.add_argument("--random-calibration", type=int, metavar="N", help="quantize with N random samples")
    parser.add_argument("--activations", choices=["u8", "u16", "auto"], help="activation type of a float model (default u8; auto: u8, else u8 with its worst tensors at 16 bits, else u16: the first whose answers meet the bar)")
    parser.add_argument("--task", choices=["classify", "detect", "landmarks", "embed", "segment"], help="what the model answers, for the quality measure (default: from each output's shape and values)")
    parser.add_argument("--weights", choices=["u8", "s8"], default="s8", help="per-channel weight type")
    parser.add_argument("--calibration-method", choices=sorted(CALIBRATION_METHODS), default="minmax", help="how ORT's calibrator picks the ranges")
    parser.add_argument("--input-shape", action="append", metavar="NAME=DxD...", help="the static shape of a dynamic input (repeatable)")
    parser.add_argument("--eval", metavar="DIR", help="measure the quantization on these samples (<input>_<n>.npy) instead of held-out calibration samples")
    parser.add_argument("--min-sqnr", type=float, metavar="DB", help="choose the cheapest activations (u8, then u16) whose SQNR meets DB on every output")
    parser.add_argument("--io", choices=["quantized", "float"], default="quantized", help="graph I/O types")
    parser.add_argument("--no-split-head", action="store_true", help="keep a YOLOv8 head's boxes and scores in one output (split by default: one quantization step for both rounds the scores away)")
    parser.add_argument("--save-qdq", action="store_true", help="keep quantized models as <model>_qdq.onnx beside the output")
    parser.add_argument("--debug-layers", action="store_true", help="rank the quantized model's tensors by the error each adds (the float and QDQ models on ORT's CPU, tensor by tensor): a table, and <output>.layers.json")
    parser.add_argument("--save-ctx", action="store_true", help="write ORT's EP-context models, <model>_ctx.onnx, beside the output")
    parser.add_argument("--force", action="store_true", help="overwrite the output")
    parser.add_argument("--verbose", action="store_true", help="show ORT's and QNN's own output")
    parser.add_argument("--backend-path", metavar="LIB", help="compile with this libQnnHtp.so (an x86-64 QAIRT SDK's) instead of the wheel's")
    parser.add_argument("--qairt-target", metavar="VERSION", help="refuse to write a binary of a QAIRT newer than VERSION")
    parser.add_argument("--graph-name", action="append", metavar="NAME", help="the graph's name (one per model; default: the model's file name)")
    parser.add_argument("--lib-dir", action="store_true", help="print the QNN library directory and the QAIRT version, and exit")
    parser.add_argument("--qnn-verbose-log", metavar="DIR", help=argparse.SUPPRESS)  # qnn_verbose_log's child
    args = parser.parse_args(argv)
    if not args.lib_dir and (not args.models or not args.output):
        parser.error("give MODEL.onnx ... -o OUTPUT.bin")
    if args.random_calibration is not None and args.random_calibration <= 0:
        parser.error("--random-calibration needs a positive count")
    if args.min_sqnr is not None and not math.isfinite(args.min_sqnr):
        parser.error("--min-sqnr needs a finite number of dB")
    return args


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        if args.lib_dir:
            print(lib_dir())
            print(qairt_version(args))
        elif args.qnn_verbose_log:
            return compile_verbosely(args)
        else:
            compile_models(args)
    except CompileError as error:
        say("error", str(error))
        return 1
    except ImportError as error:
        say("error", f"a Python package is missing ({error}): install priv/compile/requirements.txt")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
