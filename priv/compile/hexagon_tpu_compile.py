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
meet the bar: for both, each candidate is measured on ORT's CPU, and one that meets it there is
compiled and judged again on the HTP emulator, which rounds 16-bit tensors otherwise.

On failure it prints one line, `hexagon_tpu_compile: error: ...`, on stderr and exits 1; nodes
the HTP refuses are each named (more than a few: in <output>.refused.txt). <output>.names keeps
the graph's name and the model's names of its inputs and outputs (ORT renames them in the
binary).

The steps live in modules beside this one: hexagon_tpu_common (say, the one error type
Failure), hexagon_tpu_prepare (the rewrites), hexagon_tpu_tflite (TFLite conversion; hexagon_tpu_tflite_fixes),
hexagon_tpu_calibrate (calibration and quantization), hexagon_tpu_measure (the quality steps, on
hexagon_tpu_quality, hexagon_tpu_answer and hexagon_tpu_layers), hexagon_tpu_ep (ORT's QNN EP
compile, the verbose-log child), hexagon_tpu_refused (the nodes the HTP refuses, and why) and
hexagon_tpu_names (<output>.names).
"""

import argparse
import contextlib
import math
import os
import re
import shutil
import sys
import tempfile

import hexagon_tpu_calibrate as calibrate
import hexagon_tpu_ep as ep
import hexagon_tpu_measure as measure
import hexagon_tpu_names
import hexagon_tpu_prepare
import hexagon_tpu_refused as refusals
import hexagon_tpu_tflite
from hexagon_tpu_common import Failure, captured_output, entry, one_line, say

PREFIX = "hexagon_tpu_compile"
# How many calibration samples check a converted TFLite model against the TFLite interpreter.
CONVERSION_SAMPLES = 8
# A graph name a person can type (and a file name): what --graph-name accepts.
GRAPH_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


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
            raise Failure(
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
        raise Failure(
            f"{path}: fp16 tensors ({shown}) cannot run on HTP v{htp_arch}, which has no fp16: "
            "export the model in float32 (it is then quantized) or target --htp-arch 73 or newer"
        )


def is_qdq(model):
    ops = {node.op_type for node in model.graph.node}
    return bool(ops & {"QuantizeLinear", "DequantizeLinear"})




# ------------------------------------------------------------------------------- the steps


def checked_models(args):
    """(file stems, graph names) of the models, once the options are checked against each other."""
    for path in args.models:
        if not os.path.isfile(path):
            raise Failure(f"model {path} does not exist")
    if os.path.exists(args.output) and not args.force:
        raise Failure(f"{args.output} already exists (use --force to overwrite it)")
    if args.calibration and args.random_calibration:
        raise Failure("give --calibration DIR or --random-calibration N, not both")
    if args.min_sqnr is not None and args.activations:
        raise Failure("give --activations or --min-sqnr (which chooses the activations), not both")
    stems = [os.path.splitext(os.path.basename(p))[0] for p in args.models]
    if len(set(stems)) != len(stems):
        raise Failure(f"models need distinct file names, given {args.models}")
    names = args.graph_name or [re.sub(r"[^A-Za-z0-9_.-]", "_", stem) for stem in stems]
    if len(names) != len(args.models):
        raise Failure(f"give one --graph-name per model: {len(names)} for {len(args.models)} models")
    for name in names:
        if not GRAPH_NAME.fullmatch(name):
            raise Failure(f"invalid graph name {name!r}: use letters, digits, '_', '.' and '-'")
    if len(set(names)) != len(names):
        raise Failure(f"graph names must be distinct, given {names}")
    if args.backend_path and not os.path.isfile(args.backend_path):
        raise Failure(f"the backend library {args.backend_path} does not exist")
    return stems, names


def parse_shapes(args):
    """{input name: [dims]} of --input-shape, each naming an input of one of the models."""
    import onnx

    shapes = hexagon_tpu_prepare.parse_input_shapes(args.input_shape)
    if shapes:
        names = set()
        for path in args.models:
            if hexagon_tpu_tflite.is_tflite(path):
                names |= set(hexagon_tpu_tflite.input_names(path))  # tflite2onnx keeps them
                continue
            try:
                names |= {v.name for v in onnx.load(path, load_external_data=False).graph.input}
            except Exception as error:  # noqa: BLE001 - any parse failure
                raise Failure(f"{path} is not an ONNX model: {one_line(error)}") from None
        unknown = sorted(set(shapes) - names)
        if unknown:
            raise Failure(f"--input-shape names no input of the model: {', '.join(unknown)} (its inputs: {', '.join(sorted(names))})")
    return shapes


class Build:
    """What compiling the models gathers, model by model, for the binary and the files beside it."""

    def __init__(self, args, work, out_dir):
        self.args, self.work, self.out_dir = args, work, out_dir
        self.ready = []  # the QDQ models to compile, in the models' order
        self.qualities = {}  # float model path -> its quality record (hexagon_tpu_quality)
        self.splits = {}  # model stem -> the YOLO heads split (hexagon_tpu_prepare.split_heads)
        self.on_htp = {}  # float model path -> what measuring its binary on the emulator needs
        self.alternatives = {}  # float model path -> its all-u8 and all-u16 QDQ models (mixed precision's cost)


def as_onnx(path, stem, args, work):
    """path as an ONNX model: a TFLite model converted into work (said), else path itself."""
    if not hexagon_tpu_tflite.is_tflite(path):
        return path
    onnx_path = os.path.join(work, f"{stem}_converted.onnx")
    with captured_output(args.verbose):  # what the converter prints
        converter = hexagon_tpu_tflite.convert(path, onnx_path)
    say("info", f"{path}: converted to ONNX by {converter}")
    return onnx_path


def model_to_compile(build, path, stem, shapes):
    """The QDQ model to compile for the model at path: converted from TFLite, rewritten as
    hexagon_tpu_prepare says, then a QDQ model compiled as it is, a float one quantized (quantized)."""
    import onnx

    args, work = build.args, build.work
    onnx_path = as_onnx(path, stem, args, work)
    try:
        model = onnx.load(onnx_path, load_external_data=False)
    except Exception as error:  # noqa: BLE001 - any parse failure
        raise Failure(f"{path} is not an ONNX model: {one_line(error)}") from None
    check_fp16(model, args.htp_arch, path)
    qdq_model = is_qdq(model)
    ours = {n: s for n, s in shapes.items() if n in {v.name for v in model.graph.input}}
    # the model as exporters write it, rewritten for the quantizer and the EP
    prepared = os.path.join(work, f"{stem}_prepared.onnx")
    build.splits[stem] = hexagon_tpu_prepare.prepare(onnx_path, prepared, ours, not qdq_model, say, split=not args.no_split_head, label=path)
    inputs = static_inputs(onnx.load(prepared, load_external_data=False))
    if not qdq_model:
        return quantized(build, path, onnx_path, prepared, stem, inputs)
    if args.calibration or args.random_calibration:
        say("warning", f"{prepared} is already quantized (QDQ): calibration data is not used")
    if args.eval or args.min_sqnr is not None or args.debug_layers:
        say("warning", f"{prepared} is already quantized (QDQ): no float reference, so no quality figures")
    say("info", f"{prepared}: QDQ model, compiled as it is; no float reference to measure its quality against")
    return prepared


def quantized(build, path, onnx_path, prepared, stem, inputs):
    """The QDQ model of the float model at path (prepared: its rewrite, which is quantized),
    its quality measured (hexagon_tpu_measure) against that rewrite, the one quantized, with
    static shapes; and again on the binary once it is made (build.on_htp)."""
    import onnx

    args, work = build.args, build.work
    samples = calibrate.calibration_samples(path, inputs, args)
    if onnx_path != path:
        # the conversion, checked against the TFLite interpreter on the calibration samples
        for warning in hexagon_tpu_tflite.compared(path, onnx_path, samples[:CONVERSION_SAMPLES], say):
            say("warning", warning)
    qdq = os.path.join(work, f"{stem}_qdq.onnx")
    samples, evaluation, evaluated_on = calibrate.evaluation_samples(path, samples, inputs, args)
    quantize_with = calibrate.Quantizer(path, prepared, samples, args, work, qdq)
    record = measure.measured(path, prepared, qdq, inputs, evaluation, evaluated_on, args, quantize_with, build.splits[stem], work)
    build.qualities[path] = record
    if args.debug_layers:  # the layer that hurts, in the QDQ model compiled (hexagon_tpu_layers)
        measure.debug_layers(path, quantize_with.last, qdq, inputs, evaluation, record, args, work, stem)
    if "mixed_precision" in record:  # what the 16-bit tensors cost
        build.alternatives[path] = measure.mixed_alternatives(stem, quantize_with, work)
    build.on_htp[path] = (stem, prepared, qdq, inputs, evaluation)
    check_fp16(onnx.load(qdq, load_external_data=False), args.htp_arch, qdq)
    if args.save_qdq:
        kept = os.path.join(build.out_dir, f"{stem}_qdq.onnx")
        shutil.copyfile(qdq, kept)
        say("info", f"the quantized model: {kept}")
    return qdq


def compiled(ready, stems, args, work):
    """The EP-context models ORT's QNN EP writes for the QDQ models (one context for all),
    refused with the nodes the HTP cannot run and why (hexagon_tpu_refused)."""
    ctx_paths = [os.path.join(work, f"{stem}_ctx.onnx") for stem in stems]
    say("info", f"compiling for HTP v{args.htp_arch}, SoC model {args.soc_model} with {ep.qairt_version(args)}")
    # ORT offloads the graph's I/O (de)quantization to the host (quantized QNN I/O) only
    # when CPU fallback is allowed: for --io quantized it is, and every node other than
    # that I/O Q/DQ is then refused here instead.
    quantized_io = args.io == "quantized"
    error, log = ep.run_sessions(ready, ctx_paths, args, fallback=quantized_io)
    if error is not None:
        raise Failure(refusals.explain_failure(error, log, ready, args, work))
    untaken = [model for model, ctx in zip(ready, ctx_paths) if not os.path.exists(ctx)]
    if untaken:
        raise Failure(refusals.nothing_taken(untaken, args))
    left = refusals.left_to_cpu(ready, ctx_paths, log, args)
    if left:
        raise Failure(left)
    return ctx_paths


def checked_binary(ctx_paths, compiler_id, args):
    """(the context binary ORT wrote, its build id), checked before it is put in place: its
    build id must be the compiling library's (with --qnn-sdk: the SDK's, not the wheel's) and
    not newer than the target."""
    bins = {ep.context_bin(ctx) for ctx in ctx_paths}
    if len(bins) != 1:
        raise Failure(f"ORT wrote {len(bins)} context binaries, expected one: {sorted(bins)}")
    made = bins.pop()
    written_id = ep.build_id_of(made)
    if written_id != compiler_id:
        raise Failure(
            f"the binary carries QAIRT {written_id}, not the compiling library's {compiler_id} "
            f"({ep.compiler_lib(args)}): not written"
        )
    ep.check_target(written_id, "the binary", args)
    return made, written_id


def write_outputs(build, made, written_id, ctx_paths, names, stems):
    """The binary put in place as --output, with its .names and .quality.json (and, with
    --save-ctx, ORT's EP-context models) beside it."""
    args = build.args
    pairs = hexagon_tpu_names.graph_names(ctx_paths, names)
    os.replace(made, args.output)
    hexagon_tpu_names.write_names(args.output, pairs, {name: build.splits.get(stem, []) for name, stem in zip(names, stems)})
    measure.write_quality(args, names, build.qualities)
    say("info", f"build id {written_id}")
    for name, qnn, _tensors in pairs:
        say("info", f"graph {name} (QNN graph {qnn})")
    if args.save_ctx:
        for ctx, stem in zip(ctx_paths, stems):
            say("info", f"ORT's EP-context model: {hexagon_tpu_names.save_ctx(ctx, args.output, stem)}")


def compile_models(args):
    """The binary of args.models at args.output: the options checked, each model made a QDQ
    model (model_to_compile), all compiled into one context (compiled, checked_binary), the
    float models' quality measured again on the binary, and the files written (write_outputs)."""
    stems, names = checked_models(args)
    # The QAIRT that will make the binary, refused before anything runs when it is too new.
    compiler_id = ep.build_id_of(ep.compiler_lib(args))
    ep.check_target(compiler_id, f"the compiler ({ep.compiler_lib(args)})", args)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise Failure(f"output directory {out_dir} does not exist")
    shapes = parse_shapes(args)
    with contextlib.suppress(FileNotFoundError):
        os.remove(refusals.refused_path(args))  # a list from an earlier failure
    with tempfile.TemporaryDirectory(prefix="hexagon_tpu_compile.", dir=out_dir) as work:
        build = Build(args, work, out_dir)
        for path, stem in zip(args.models, stems):
            build.ready.append(model_to_compile(build, path, stem, shapes))
        ctx_paths = compiled(build.ready, stems, args, work)
        made, written_id = checked_binary(ctx_paths, compiler_id, args)
        measure.measure_on_htp(build.qualities, build.on_htp, dict(zip(stems, ctx_paths)), args, build.splits)
        ctx_by_stem = dict(zip(stems, ctx_paths))
        for path, models in build.alternatives.items():
            stem, _prepared, _qdq, inputs, evaluation = build.on_htp[path]
            measure.mixed_cost(path, build.qualities[path], made, ctx_by_stem[stem], models, (inputs, evaluation), args, work)
        write_outputs(build, made, written_id, ctx_paths, names, stems)
    say("info", f"wrote {args.output}")


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
    parser.add_argument("--calibration-method", choices=sorted(calibrate.CALIBRATION_METHODS), default="minmax", help="how ORT's calibrator picks the ranges")
    parser.add_argument("--input-shape", action="append", metavar="NAME=DxD...", help="the static shape of a dynamic input (repeatable)")
    parser.add_argument("--eval", metavar="DIR", help="measure the quantization on these samples (<input>_<n>.npy) instead of held-out calibration samples")
    parser.add_argument("--min-sqnr", type=float, metavar="DB", help="choose the cheapest activations (u8, then u16) whose SQNR meets DB on every output, on ORT's CPU and then on the HTP emulator")
    parser.add_argument("--io", choices=["quantized", "float"], default="quantized", help="graph I/O types")
    parser.add_argument("--no-split-head", action="store_true", help="keep a YOLOv8 or YOLOv5 head's boxes and scores in one output (split by default: one quantization step for both rounds the scores away)")
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
    entry(PREFIX)
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        if args.lib_dir:
            print(ep.lib_dir())
            print(ep.qairt_version(args))
        elif args.qnn_verbose_log:
            return ep.compile_verbosely(args)
        else:
            compile_models(args)
    except Failure as error:
        say("error", str(error))
        return 1
    except ImportError as error:
        say("error", f"a Python package is missing ({error}): install priv/compile/requirements.txt")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
