"""Quantization quality for `mix hexagon_tpu.compile`: the float model (ONNX Runtime's CPU EP)
against the quantized one, on samples the calibration did not see. First the QDQ model on ORT's
CPU EP (--min-sqnr and --activations auto judge a candidate that meets the bar there again on
its own binary: choose's judge); then, once the binary is made, the binary itself on the HTP
emulator (on_htp), whose figures set the bar: the two differ where the HTP's kernels round
otherwise than the CPU's QDQ arithmetic.

Per output, the answer the user sees (hexagon_tpu_answer.py: top-1 agreement for class
scores, the float model's detections found again for a YOLO head, mask IoU for a probability
map, the error in the output's units for landmarks, cosine similarity for embeddings and
anything else), which sets the bar and the warning; and, as one line among them:

  - SQNR in dB, 10 * log10(sum(ref^2) / sum((ref - q)^2)) over every held-out sample, ref the
    float model's output and q the QDQ model's;
  - the share of values within one quantization step (the scale of the DequantizeLinear that
    makes the output in the QDQ model) of the float value.

--min-sqnr DB still chooses by SQNR. The figures are written beside the binary as
<binary>.quality.json (schema in docs/models.md).
"""

import json
import math
import os

import hexagon_tpu_answer as answer
from hexagon_tpu_common import Failure, one_line

# What --min-sqnr is suggested with: at 20 dB the error's RMS is a tenth of the signal's.
SUGGESTED_SQNR_DB = 20.0
# Every HOLD_OUT-th calibration sample (the 5th, 10th, ...) is held out for the evaluation.
HOLD_OUT = 5
ACTIVATIONS = ["u8", "u16"]
VERSION = 2


def split(samples):
    """(calibration samples, evaluation samples, how they were chosen, warning or None): every
    HOLD_OUT-th sample held out, at least one; a single sample is used for both, and said so."""
    count = len(samples)
    if count == 1:
        return samples, samples, "the 1 calibration sample (not held out)", (
            "only 1 calibration sample: the quality figures are measured on that same sample, not on "
            "held-out data; pass more samples or --eval DIR"
        )
    held = list(range(HOLD_OUT - 1, count, HOLD_OUT)) or [count - 1]
    calibration = [s for i, s in enumerate(samples) if i not in held]
    evaluation = [samples[i] for i in held]
    source = f"{len(held)} of {count} calibration samples held out (every {HOLD_OUT}th)"
    warning = None
    if count < HOLD_OUT:
        source = f"the last of {count} calibration samples held out"
        warning = (
            f"only {count} calibration samples: 1 is held out to measure the quality, {count - 1} "
            "calibrate; the figures are rough: pass more samples or --eval DIR"
        )
    return calibration, evaluation, source, warning


def cpu_session(path):
    """ORT's CPU EP with its graph optimizations off, so the QDQ model computes exactly as
    written (fused, the CPU's int8 kernels round differently on different machines)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - ORT raises several types
        # the float model ran before, so this is the quantizer's model (or a rewrite's)
        raise Failure(f"ONNX Runtime's CPU EP cannot load {os.path.basename(path)}: {one_line(str(error), 300)}") from None


def output_steps(qdq_path):
    """{output name: (scale, bits)} for the outputs a per-tensor DequantizeLinear makes."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(qdq_path, load_external_data=False).graph
    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    producers = {out: node for node in graph.node for out in node.output}
    steps = {}
    for output in graph.output:
        node = producers.get(output.name)
        if node is None or node.op_type != "DequantizeLinear" or node.input[1] not in consts:
            continue
        scale = np.asarray(consts[node.input[1]])
        if scale.size != 1:
            continue
        zero_points = consts.get(node.input[2]) if len(node.input) > 2 else None
        bits = 8 * np.asarray(zero_points).dtype.itemsize if zero_points is not None else 8
        steps[output.name] = (float(scale.reshape(())), bits)
    return steps


class Sums:
    """One output's running sums over the samples: sum(ref^2), sum((ref - q)^2), the values
    within one step and all values (one sample's arrays at a time: a detector's outputs over
    many samples need not fit in memory together)."""

    def __init__(self, step):
        self.step = step
        self.signal = self.noise = 0.0
        self.within = self.values = 0

    def add(self, ref, q):
        import numpy as np

        ref = np.asarray(ref, np.float64).ravel()
        error = ref - np.asarray(q, np.float64).ravel()
        self.signal += float(np.dot(ref, ref))
        self.noise += float(np.dot(error, error))
        if self.step:
            self.within += int(np.count_nonzero(np.abs(error) <= self.step))
        self.values += ref.size

    def sqnr(self):
        """In dB; None when the two agree exactly; -inf when there is no signal or when a
        value is not finite (a log of 0 in one model and not in the other: no ratio holds)."""
        if self.noise == 0.0:
            return None
        if self.signal == 0.0 or not (math.isfinite(self.signal) and math.isfinite(self.noise)):
            return -math.inf
        return 10.0 * math.log10(self.signal / self.noise)

    def within_one_step(self):
        return self.within / self.values if self.step and self.values else None


def measure(float_path, qdq_path, inputs, samples, task=None, splits=(), quantized=None):
    """[{name, sqnr_db, within_one_step, step, bits, values, answer, meets_bar}] per output;
    meets_bar is the answer's (hexagon_tpu_answer). The quantized answers are the QDQ model's
    on ORT's CPU, or `quantized`'s (a session of the same outputs: the binary on the HTP
    emulator). A YOLO head the task split (splits: hexagon_tpu_prepare.split_heads's) is
    answered as one: the scores output carries the detections of both parts put back
    together."""
    import numpy as np

    reference = cpu_session(float_path)
    quantized = quantized or cpu_session(qdq_path)
    names = [o.name for o in reference.get_outputs()]
    qnames = [o.name for o in quantized.get_outputs()]
    # the quantizer keeps the graph's output names; by position otherwise
    pick = [qnames.index(name) if name in qnames else i for i, name in enumerate(names)]
    steps = output_steps(qdq_path)
    sums = [Sums(steps.get(qnames[j], (None, None))[0]) for j in pick]
    answers = None
    # scores output -> (its boxes' index, the head's layout, the axis the two join on)
    heads = {scores: (names.index(boxes), layout, 1 if layout == "v8" else 2) for _whole, boxes, scores, _dims, layout in splits}
    for sample in samples:
        feeds = {name: np.asarray(sample[name]).astype(dtype) for name, dtype, _shape in inputs}
        refs, quants = reference.run(None, feeds), quantized.run(None, feeds)
        if answers is None:
            answers = [
                answer.Answer("detections", joined_shape(np.shape(refs[heads[name][0]]), np.shape(ref), heads[name][2]), task, heads[name][1])
                if name in heads
                else answer.Answer(answer.kind_of(np.shape(ref), ref, task), np.shape(ref), task)
                for name, ref in zip(names, refs)
            ]
        for name, acc, said, ref, j in zip(names, sums, answers, refs, pick):
            acc.add(ref, quants[j])
            if name in heads:
                b, _layout, axis = heads[name]
                said.add(np.concatenate([refs[b], ref], axis=axis), np.concatenate([quants[pick[b]], quants[j]], axis=axis))
            else:
                said.add(ref, quants[j])
    outputs = []
    for name, acc, said, j in zip(names, sums, answers, pick):
        step, bits = steps.get(qnames[j], (None, None))
        figures = said.figures()
        outputs.append(
            {
                "name": name,
                "sqnr_db": acc.sqnr(),
                "within_one_step": acc.within_one_step(),
                "step": step,
                "bits": bits,
                "values": acc.values,
                "answer": figures,
                "meets_bar": figures["meets_bar"],
            }
        )
    return outputs


def joined_shape(boxes, scores, axis):
    """The shape of a split head's boxes and scores joined again on `axis`."""
    return tuple(b + s if k == axis else s for k, (b, s) in enumerate(zip(boxes, scores)))


def worst_sqnr(outputs):
    """The lowest SQNR over the outputs (inf when every output is exact)."""
    return min((o["sqnr_db"] if o["sqnr_db"] is not None else math.inf) for o in outputs)


def shown_db(sqnr):
    if sqnr is None or sqnr == math.inf:
        return "exact"
    return f"{sqnr:.1f} dB"


def describe(output):
    within = output["within_one_step"]
    share = f", {100 * within:.1f}% within one step ({output['step']:.3g})" if within is not None else ", no output step"
    said = output["answer"]
    return f"output '{output['name']}' ({said['kind']}): {said['verdict']}; SQNR {shown_db(output['sqnr_db'])}{share}"


def hint(activations):
    """What to try when a recipe is below the bar: only what this task and ORT's QNN tools offer."""
    if activations == "u8":
        return (
            "try --activations u16 (or --activations auto to take it only when the answer needs it), or keep only the "
            "tensors that need it at 16 bits: quantize with onnxruntime's get_qnn_qdq_config(..., "
            "init_overrides={'TENSOR': [{'quant_type': QuantType.QUInt16}]}) (its TensorQuantOverrides) and "
            "compile that QDQ model as it is"
        )
    if activations == "mixed":
        return (
            "the tensors raised to 16 bits are enough on ORT's CPU, not here: try --activations u16, and see "
            "which layers lose the signal with --debug-layers (<output>.layers.json)"
        )
    return (
        "16-bit activations are not enough: check that the calibration data look like the model's real inputs "
        "(their ranges set the steps), and find the layer that loses the signal with --debug-layers "
        "(<output>.layers.json: every tensor of the QDQ model against the float one)"
    )


# --activations auto's mixed precision: how many of the worst tensors (by the layer debugger's
# rank) each try raises to 16 bits, before all of them (all-u16) is tried.
MIXED_SIZES = [1, 2, 4, 8, 16, 32]


def choose(model_path, qdq_path, inputs, evaluation, source, args, quantize, say, reference=None, splits=(), work=None, judge=None):
    """Quantizes model_path into qdq_path (quantize(activations, overrides) returns the float
    model it quantized) and measures it against the float model `reference` (default:
    model_path; messages name model_path) on the evaluation samples (chosen as `source` says).
    With args.min_sqnr, tries u8 then u16 activations and keeps the first whose every output
    meets it; with --activations auto, u8, else u8 with the worst tensors at 16 bits (mixed,
    by hexagon_tpu_layers' rank, 1, 2, 4, ... of them), else u16: the first whose every answer
    meets its bar (u16 when none does, with the warning). A candidate that meets it on ORT's
    CPU is kept only if judge(qdq_path) (its outputs on the HTP emulator; None: not judged)
    meets it too. Returns this graph's record for the sidecar."""
    min_sqnr = getattr(args, "min_sqnr", None)
    auto = args.activations == "auto"
    candidates = ACTIVATIONS if min_sqnr is not None or auto else [args.activations or "u8"]
    tried = []
    task = getattr(args, "task", None)
    mixed = None
    for activations in candidates:
        quantized_float = quantize(activations, None)
        outputs = measure(reference or model_path, qdq_path, inputs, evaluation, task, splits)
        tried.append({"activations": activations, "weights": args.weights, "min_sqnr_db": finite(worst_sqnr(outputs)), "meets_bar": all(o["meets_bar"] for o in outputs)})
        for output in outputs:
            say("info", f"{model_path} ({activations} activations, {args.weights} weights): {describe(output)}")
        if (min_sqnr is None and not auto) or kept(outputs, tried[-1], min_sqnr, auto, judge, qdq_path, f"{model_path} ({activations} activations)", say):
            break
        if auto and activations == "u8":
            mixed = mixed_precision(model_path, quantized_float, qdq_path, inputs, evaluation, args, quantize, say, reference, splits, work, tried, judge)
            if mixed is not None:
                activations, outputs = "mixed", mixed.pop("outputs")
                break
    else:
        if auto:
            return record(model_path, activations, outputs, tried, evaluation, source, args, task, min_sqnr, say)
        figures_seen = ", ".join(f"{t['activations']} activations {shown_db(t['min_sqnr_db'])}{judged(t)}" for t in tried)
        raise Failure(
            f"{model_path}: no precision meets --min-sqnr {min_sqnr:g} dB on every output (lowest SQNR: "
            f"{figures_seen}); lower the bar, check the calibration data, or quantize it yourself with "
            "per-tensor overrides (onnxruntime's get_qnn_qdq_config init_overrides) and compile that QDQ model"
        )
    if min_sqnr is not None:
        say("info", f"{model_path}: --min-sqnr {min_sqnr:g} dB: chose {activations} activations, {args.weights} weights")
    chosen = record(model_path, activations, outputs, tried, evaluation, source, args, task, min_sqnr, say)
    if mixed is not None:
        chosen["mixed_precision"] = mixed
    return chosen


def kept(outputs, entry, min_sqnr, auto, judge, qdq_path, label, say):
    """Whether a candidate is the one to keep: its outputs meet --min-sqnr (or, for --activations
    auto, every answer its bar) on ORT's CPU, and then on the HTP emulator (judge; its figures
    go into the tried entry as "htp")."""

    def meets(measured):
        return (min_sqnr is None or worst_sqnr(measured) >= min_sqnr) and (not auto or all(o["meets_bar"] for o in measured))

    if not meets(outputs):
        return False
    htp = judge(qdq_path) if judge else None
    if htp is None:
        return True
    entry["htp"] = {"min_sqnr_db": finite(worst_sqnr(htp)), "meets_bar": all(o["meets_bar"] for o in htp)}
    if meets(htp):
        return True
    worst = min(htp, key=lambda o: (o["meets_bar"], o["sqnr_db"] if o["sqnr_db"] is not None else math.inf))
    say("info", f"{label}: meets it on ORT's CPU, not on the HTP emulator ({describe(worst)}): not kept")
    return False


def judged(entry):
    """A tried entry's HTP figure, for messages."""
    htp = entry.get("htp")
    return f" (HTP emulator: {shown_db(htp['min_sqnr_db'] if htp['min_sqnr_db'] is not None else math.inf)})" if htp else ""


def mixed_precision(model_path, quantized_float, qdq_path, inputs, evaluation, args, quantize, say, reference, splits, work, tried, judge=None):
    """After u8 fell below the bar: the layer debugger ranks the u8 QDQ model's tensors, and
    the worst 1, 2, 4, ... (MIXED_SIZES, fewer than all of them) are raised to 16 bits until
    every answer meets its bar, on ORT's CPU and then on the HTP emulator (judge). Returns
    {"u16_tensors", "ranking", "outputs"} of the first that does (its QDQ model left at
    qdq_path), or None (tried entries appended either way)."""
    import hexagon_tpu_layers as layers

    try:
        rows = layers.debug(quantized_float, qdq_path, inputs, evaluation, work)
    except Failure as error:
        say("warning", f"{model_path}: --activations auto: no mixed precision tried: the layer figures failed: {error}")
        return None
    ranked = layers.raisable(rows, quantized_float)
    say("info", f"{model_path}: --activations auto: u8 is below the bar; tensors ranked by the layer that hurts: " + ", ".join(ranked[:8]))
    for size in MIXED_SIZES:
        if size >= len(ranked):
            break
        raised = ranked[:size]
        quantize("u8", raised)
        outputs = measure(reference or model_path, qdq_path, inputs, evaluation, getattr(args, "task", None), splits)
        tried.append({"activations": "mixed", "u16_tensors": raised, "weights": args.weights, "min_sqnr_db": finite(worst_sqnr(outputs)), "meets_bar": all(o["meets_bar"] for o in outputs)})
        label = f"{model_path} (u8 activations, {', '.join(raised)} at 16 bits"
        for output in outputs:
            say("info", f"{label}, {args.weights} weights): {describe(output)}")
        if kept(outputs, tried[-1], None, True, judge, qdq_path, label + ")", say):
            top = [{k: (finite(r[k]) if k.endswith("_db") else r[k]) for k in ("name", "rank", "bits", "sqnr_db", "alone_sqnr_db")} for r in rows[:10]]
            return {"u16_tensors": raised, "tried": [t["u16_tensors"] for t in tried if "u16_tensors" in t], "ranking": top, "outputs": outputs}
    return None


def record(model_path, activations, outputs, tried, evaluation, source, args, task, min_sqnr, say):
    """The graph's record for the sidecar, and the warning for the outputs below their bar."""
    if args.activations == "auto" and activations == "mixed":
        raised = ", ".join(tried[-1]["u16_tensors"])
        say("info", f"{model_path}: --activations auto: chose mixed precision, u8 activations with {raised} at 16 bits, {args.weights} weights")
    elif args.activations == "auto":
        say("info", f"{model_path}: --activations auto: chose {activations} activations, {args.weights} weights")
    return {
        "activations": activations,
        "weights": args.weights,
        "task": task,
        "evaluation": {"source": source, "samples": len(evaluation)},
        "outputs": [dict(o, sqnr_db=finite(o["sqnr_db"])) for o in outputs],
        "tried": tried if min_sqnr is not None or args.activations == "auto" else [],
        "min_sqnr_db": min_sqnr,
        "measured_on": "the QDQ model on ORT's CPU EP",
        "warnings": below_bar(model_path, activations, outputs),
    }


def on_htp(record, model_path, reference, qdq_path, ctx_session, inputs, evaluation, task, splits, say):
    """The record measured again on the binary itself, run by the HTP emulator (ORT's QNN EP
    on the EP-context model): what the device computes, which differs from ORT's CPU running
    the QDQ model where the HTP's kernels round otherwise (measured: a mel front end's cosine
    0.93 on the CPU, 0.05 on the emulator, at u16; cpu_said says what is known of why). Its
    outputs become the record's, each keeping the CPU's figures as `qdq_cpu`; the bar and the
    warning follow them."""
    outputs = measure(reference, qdq_path, inputs, evaluation, task, splits, quantized=ctx_session)
    for htp, cpu in zip(outputs, record["outputs"]):
        htp["qdq_cpu"] = {"sqnr_db": cpu["sqnr_db"], "answer": cpu["answer"], "meets_bar": cpu["meets_bar"]}
        say("info", f"{model_path} on the HTP emulator: {describe(htp)}")
    record["outputs"] = [dict(o, sqnr_db=finite(o["sqnr_db"])) for o in outputs]
    record["measured_on"] = "the binary on the HTP emulator (ORT's QNN EP); qdq_cpu: the QDQ model on ORT's CPU EP"
    record["warnings"] = below_bar(model_path, record["activations"], outputs)
    return record


def below_bar(model_path, activations, outputs):
    """The warning for the outputs below their bar ([] when none is)."""
    below = [o for o in outputs if not o["meets_bar"]]
    if not below:
        return []
    shown = "; ".join(f"{describe(o)} (bar: {answer.bar_text(o['answer']['kind'])}){cpu_said(o, activations)}" for o in below)
    return [f"{model_path}: quantized with {activations} activations, {len(below)} output(s) below the quality bar: {shown}; {hint(activations)}"]


def cpu_said(output, activations):
    """Where ORT's CPU running the QDQ model met the bar and the binary on the HTP does not."""
    cpu = output.get("qdq_cpu")
    if not cpu or not cpu["meets_bar"]:
        return ""
    why = (
        "the HTP's 16-bit tensors carry a constant offset per channel, up to about 4e-4 of their zero point "
        "(near 32768: up to ~13 steps), which the CPU's arithmetic does not; a tensor whose useful values span "
        "few of its steps (an outlier channel sets its range) loses them to it (docs/models.md, "
        "\"When the HTP and the CPU disagree\")"
        if activations != "u8"
        else "the HTP's kernels round otherwise"
    )
    return f" (on ORT's CPU the QDQ model meets it: {cpu['answer']['verdict']}, SQNR {shown_db(cpu['sqnr_db'])}; {why}, and the binary is what runs)"


def finite(sqnr):
    """JSON has no infinities: an exact output is null, a zero signal with noise -1e308."""
    if sqnr is None or sqnr == math.inf:
        return None
    return max(sqnr, -1e308)


def path_of(bin_path):
    return bin_path + ".quality.json"


def write(bin_path, graphs, unmeasured):
    """<binary>.quality.json: graphs is [(graph name, model path, record)] of the float models,
    unmeasured the graph names of the QDQ ones (no float reference); with no float model no
    file, and a stale one is removed."""
    path = path_of(bin_path)
    if not graphs:
        if os.path.exists(path):
            os.remove(path)
        return None
    document = {
        "version": VERSION,
        "binary": os.path.basename(bin_path),
        "bar": {kind: answer.bar_text(kind) for kind in ("scores", "detections", "map", "points", "values")},
        "measured_with": "the float model on ONNX Runtime's CPU EP against the binary on the HTP emulator (each graph's measured_on)",
        "graphs": [dict({"name": name, "model": os.path.basename(model)}, **record) for name, model, record in graphs],
        "unmeasured": unmeasured,
    }
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(path + ".tmp", path)
    return path
