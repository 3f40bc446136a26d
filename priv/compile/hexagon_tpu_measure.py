"""hexagon_tpu_compile.py's quality steps for a float model, on the measures of
hexagon_tpu_quality.py and hexagon_tpu_layers.py: the quantization measured on ORT's CPU (and
chosen, with --min-sqnr or --activations auto, on the HTP emulator: judge), the layer figures
(--debug-layers), what mixed precision costs in binary size and in the emulator's cycles, the
figures again on the binary run by the HTP emulator, and <binary>.quality.json.
"""

import csv
import itertools
import os

import hexagon_tpu_ep as ep
from hexagon_tpu_common import Failure, captured_output, one_line, say


def measured(path, reference, qdq, inputs, evaluation, source, args, quantize_with, splits, work):
    """Quantizes (once, or per candidate with --min-sqnr or --activations auto) and measures
    against the float model `reference` (the rewritten model that was quantized); messages name
    the user's `path`. A candidate that meets the bar on ORT's CPU is chosen only once its own
    binary meets it on the HTP emulator too (judge)."""
    import hexagon_tpu_quality as quality

    choosing = args.min_sqnr is not None or args.activations == "auto"
    judge = htp_judge(path, reference, inputs, evaluation, args, splits, work) if choosing else None
    record = quality.choose(path, qdq, inputs, evaluation, source, args, quantize_with, say, reference=reference, splits=splits, work=work, judge=judge)
    return record  # its warnings are said once the binary is measured (measure_on_htp)


def htp_judge(path, reference, inputs, evaluation, args, splits, work):
    """judge(qdq) -> the QDQ model's outputs measured on its own binary, run by the HTP emulator
    (None when it does not compile: the CPU's figures then decide, said). The HTP rounds 16-bit
    tensors otherwise than ORT's CPU (docs/models.md, "When the HTP and the CPU disagree"), so
    a choice made on the CPU alone can be one the binary does not keep. None with
    --backend-path, whose SDK's emulator need not run here."""
    import hexagon_tpu_quality as quality

    if args.backend_path:
        return None
    trials = itertools.count()

    def judge(qdq):
        ctx, error = compiled_alone(qdq, os.path.join(work, f"judged_{next(trials)}"), args)
        if ctx is None:
            say("warning", f"{path}: compiling a candidate to judge it on the HTP emulator failed, chosen on ORT's CPU: {error}")
            return None
        return quality.measure(reference, qdq, inputs, evaluation, args.task, splits, quantized=htp_session(ctx, args))

    return judge


def compiled_alone(qdq, where, args):
    """(the EP-context model of the QDQ model qdq compiled alone, in the new folder where, None)
    or (None, why not)."""
    os.makedirs(where, exist_ok=True)
    ctx = os.path.join(where, "ctx.onnx")
    error, _log = ep.run_sessions([qdq], [ctx], args, fallback=args.io == "quantized")
    if error is not None or not os.path.exists(ctx):
        return None, one_line(error or "no context binary")
    return ctx, None


def htp_session(ctx, args, profile_to=None):
    """ORT's QNN EP running an EP-context model's binary on the HTP emulator; with profile_to,
    QNN's detailed profile (the level that counts cycles) is written there as CSV once the
    session is released."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    options = ep.provider_options(args)
    if profile_to:
        options.update(profiling_level="detailed", profiling_file_path=profile_to)
    so.add_provider_for_devices(ep.qnn_device(), options)
    with captured_output(args.verbose):
        return ort.InferenceSession(ctx, so)


# The profile's row of the whole graph's execute, in the HTP's cycles (the emulator counts
# them as the device would; its microseconds are the x86 host's).
EXECUTE_CYCLES = "Accelerator (execute) time (cycles)"


def emulator_cycles(ctx, inputs, sample, args, where):
    """The HTP's cycles for one execute of the binary behind ctx on one sample (QNN's basic
    profile on the emulator), or None when the profile has no such row."""
    import gc

    import numpy as np

    profile = os.path.join(where, "profile.csv")
    session = htp_session(ctx, args, profile_to=profile)
    session.run(None, {name: np.asarray(sample[name]).astype(dtype) for name, dtype, _shape in inputs})
    del session
    gc.collect()  # the CSV is written when the session is released
    if not os.path.exists(profile):
        return None
    with open(profile, newline="", encoding="utf-8") as f:
        rows = [row for row in csv.DictReader(f, skipinitialspace=True) if row.get("Event Identifier") == EXECUTE_CYCLES]
    return int(rows[-1]["Time"]) if rows else None


def debug_layers(path, quantized_float, qdq, inputs, evaluation, record, args, work, stem):
    """--debug-layers: the QDQ model about to be compiled against the float model it was made
    from, tensor by tensor (hexagon_tpu_layers): the top of the ranking as info lines, every
    tensor in <output>.layers.json (<output>.<graph>.layers.json for each of several models)."""
    import hexagon_tpu_layers as layers

    try:
        rows = layers.debug(quantized_float, qdq, inputs, evaluation, work)
    except Failure as error:
        raise Failure(f"{path}: --debug-layers: {error}") from None
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


def mixed_cost(path, record, made, mixed_ctx, models, measuring, args, work):
    """What the mixed precision costs: the binary's size, and the HTP's cycles for one execute
    on the emulator (--backend-path: not run), against the all-u8 and all-u16 ones, each
    compiled alone; in the record and as an info line. measuring: (inputs, evaluation)."""
    inputs, evaluation = measuring
    sizes, cycles = {"mixed": os.path.getsize(made)}, {}
    ctxs = {"mixed": mixed_ctx}
    for activations, qdq in models.items():
        ctx, error = compiled_alone(qdq, os.path.join(work, f"cost_{activations}"), args)
        if ctx is None:
            say("warning", f"{path}: compiling the all-{activations} model for the comparison failed: {error}")
            continue
        sizes[activations] = os.path.getsize(ep.context_bin(ctx))
        ctxs[activations] = ctx
    if not args.backend_path:
        for kind, ctx in ctxs.items():
            where = os.path.join(work, f"cycles_{kind}")
            os.makedirs(where, exist_ok=True)
            cycles[kind] = emulator_cycles(ctx, inputs, evaluation[0], args, where)
    record["mixed_precision"]["binary_bytes"] = sizes
    record["mixed_precision"]["emulator_cycles"] = cycles
    shown = ", ".join(f"{k} {v / 1024:.1f} KiB" for k, v in sizes.items())
    counted = ", ".join(f"{k} {v:,}" for k, v in cycles.items() if v is not None)
    said = f"; the HTP's cycles per execute (emulator, one sample): {counted}" if counted else ""
    say("info", f"{path}: mixed precision costs: binary size {shown}{said}")


def measure_on_htp(qualities, on_htp, ctx_by_stem, args, splits):
    """Each float model's quality measured again on its binary, run by the HTP emulator through
    ORT's EP-context model (hexagon_tpu_quality.on_htp); skipped with --backend-path, whose
    SDK's emulator need not run on this machine (said)."""
    import hexagon_tpu_quality as quality

    for path, (stem, prepared, qdq, inputs, evaluation) in on_htp.items():
        record = qualities[path]
        if args.backend_path:
            say("info", f"{path}: the quality figures are the QDQ model's on ORT's CPU (with --backend-path the binary is not run here)")
        else:
            session = htp_session(ctx_by_stem[stem], args)
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

