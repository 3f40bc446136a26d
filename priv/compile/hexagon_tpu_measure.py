"""hexagon_tpu_compile.py's quality steps for a float model, on the measures of
hexagon_tpu_quality.py and hexagon_tpu_layers.py: the quantization measured (and chosen, with
--min-sqnr or --activations auto) on ORT's CPU, the layer figures (--debug-layers), what mixed
precision costs in binary size, the figures again on the binary run by the HTP emulator, and
<binary>.quality.json.
"""

import os

import hexagon_tpu_ep as ep
from hexagon_tpu_common import Failure, captured_output, one_line, say


def measured(path, reference, qdq, inputs, evaluation, source, args, quantize_with, splits, work):
    """Quantizes (once, or per candidate with --min-sqnr) and measures against the float model
    `reference` (the rewritten model that was quantized); messages name the user's `path`."""
    import hexagon_tpu_quality as quality

    record = quality.choose(path, qdq, inputs, evaluation, source, args, quantize_with, say, reference=reference, splits=splits, work=work)
    return record  # its warnings are said once the binary is measured (measure_on_htp)


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


def mixed_cost(path, record, made, models, args, work):
    """What the mixed precision costs: the binary's size against the all-u8 and all-u16 ones,
    each compiled alone; in the record and as an info line."""
    sizes = {"mixed": os.path.getsize(made)}
    for activations, qdq in models.items():
        where = os.path.join(work, f"cost_{activations}")
        os.makedirs(where, exist_ok=True)
        ctx = os.path.join(where, "ctx.onnx")
        error, _log = ep.run_sessions([qdq], [ctx], args, fallback=args.io == "quantized")
        if error is not None or not os.path.exists(ctx):
            say("warning", f"{path}: compiling the all-{activations} model for the comparison failed: {one_line(error or 'no context binary')}")
            continue
        sizes[activations] = os.path.getsize(ep.context_bin(ctx))
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
            so.add_provider_for_devices(ep.qnn_device(), ep.provider_options(args))
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

