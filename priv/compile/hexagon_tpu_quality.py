"""Quantization quality for `mix hexagon_tpu.compile`: the quantized (QDQ) model against the
float one it was made from, both run by ONNX Runtime's CPU EP on samples the calibration did
not see. The figures measure the quantization recipe (activation and weight types, calibration
data), not the HTP: the binary runs the same QDQ arithmetic, within a step or two.

Per output:

  - SQNR in dB, 10 * log10(sum(ref^2) / sum((ref - q)^2)) over every held-out sample, ref the
    float model's output and q the QDQ model's;
  - the share of values within one quantization step (the scale of the DequantizeLinear that
    makes the output in the QDQ model) of the float value.

The bar (see docs/models.md, "Quantization quality"): SQNR >= 20 dB, and for 8-bit outputs at
least half the values within one step. Below it the task warns and says what to try.

The figures are written beside the binary as <binary>.quality.json (schema in docs/models.md).
"""

import json
import math
import os

# 20 dB: the error's RMS is a tenth of the signal's. Well-quantized 8-bit networks measure 30 dB
# and more on their outputs; under 20 dB, the answers (top classes, boxes, masks) visibly move.
BAR_SQNR_DB = 20.0
# An 8-bit output's own rounding errs by at most half a step; the layers before it add their
# own. Measured here with u8 activations: seeded SqueezeNet and ResNet-50 75% and 78% within one
# step (at 36 and 34 dB), a two-conv model with an outlier channel 2% (-0.1 dB). When fewer than
# half the values are within one step, the typical error is several of the output's own steps.
# A 16-bit output's step is 256 times finer than 8-bit weights resolve, so its share is shown
# but not held to this bar.
BAR_WITHIN = 0.5
# Every HOLD_OUT-th calibration sample (the 5th, 10th, ...) is held out for the evaluation.
HOLD_OUT = 5
ACTIVATIONS = ["u8", "u16"]
VERSION = 1


class QualityError(Exception):
    """A failure to report as one line (hexagon_tpu_compile turns it into its CompileError)."""


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
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


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
        """In dB; None when the two agree exactly."""
        if self.noise == 0.0:
            return None
        if self.signal == 0.0:
            return -math.inf
        return 10.0 * math.log10(self.signal / self.noise)

    def within_one_step(self):
        return self.within / self.values if self.step and self.values else None


def measure(float_path, qdq_path, inputs, samples):
    """[{name, sqnr_db, within_one_step, step, bits, values, meets_bar}] per output."""
    import numpy as np

    reference, quantized = cpu_session(float_path), cpu_session(qdq_path)
    names = [o.name for o in reference.get_outputs()]
    qnames = [o.name for o in quantized.get_outputs()]
    # the quantizer keeps the graph's output names; by position otherwise
    pick = [qnames.index(name) if name in qnames else i for i, name in enumerate(names)]
    steps = output_steps(qdq_path)
    sums = [Sums(steps.get(qnames[j], (None, None))[0]) for j in pick]
    for sample in samples:
        feeds = {name: np.asarray(sample[name]).astype(dtype) for name, dtype, _shape in inputs}
        refs, quants = reference.run(None, feeds), quantized.run(None, feeds)
        for acc, ref, j in zip(sums, refs, pick):
            acc.add(ref, quants[j])
    outputs = []
    for name, acc, j in zip(names, sums, pick):
        step, bits = steps.get(qnames[j], (None, None))
        sqnr, within = acc.sqnr(), acc.within_one_step()
        outputs.append(
            {
                "name": name,
                "sqnr_db": sqnr,
                "within_one_step": within,
                "step": step,
                "bits": bits,
                "values": acc.values,
                "meets_bar": meets_bar(sqnr, within, bits),
            }
        )
    return outputs


def meets_bar(sqnr, within, bits):
    if sqnr is not None and sqnr < BAR_SQNR_DB:
        return False
    return not (bits == 8 and within is not None and within < BAR_WITHIN)


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
    if within is not None and output["bits"] != 8:
        share += f" (a {output['bits']}-bit step: not held to the bar)"
    return f"output '{output['name']}': SQNR {shown_db(output['sqnr_db'])}{share}"


def hint(activations):
    """What to try when a recipe is below the bar: only what this task and ORT's QNN tools offer."""
    if activations == "u8":
        return (
            f"try --activations u16 (or --min-sqnr {BAR_SQNR_DB:g} to take it only when needed), or keep only the "
            "tensors that need it at 16 bits: quantize with onnxruntime's get_qnn_qdq_config(..., "
            "init_overrides={'TENSOR': [{'quant_type': QuantType.QUInt16}]}) (its TensorQuantOverrides) and "
            "compile that QDQ model as it is"
        )
    return (
        "16-bit activations are not enough: check that the calibration data look like the model's real inputs "
        "(their ranges set the steps), and find the layer that loses the signal by comparing the QDQ model "
        "(--save-qdq) with the float one tensor by tensor"
    )


def choose(model_path, qdq_path, inputs, evaluation, source, args, quantize, say, reference=None):
    """Quantizes model_path into qdq_path (quantize(activations)) and measures it against the
    float model `reference` (default: model_path; messages name model_path) on the evaluation samples (chosen as `source` says); with args.min_sqnr, tries u8 then u16
    activations and keeps the first whose every output meets it. Returns this graph's record
    for the sidecar."""
    min_sqnr = getattr(args, "min_sqnr", None)
    candidates = ACTIVATIONS if min_sqnr is not None else [args.activations or "u8"]
    tried = []
    for activations in candidates:
        quantize(activations)
        outputs = measure(reference or model_path, qdq_path, inputs, evaluation)
        worst = worst_sqnr(outputs)
        tried.append({"activations": activations, "weights": args.weights, "min_sqnr_db": finite(worst)})
        for output in outputs:
            say("info", f"{model_path} ({activations} activations, {args.weights} weights): {describe(output)}")
        if min_sqnr is None or worst >= min_sqnr:
            break
    else:
        figures_seen = ", ".join(f"{t['activations']} activations {shown_db(t['min_sqnr_db'])}" for t in tried)
        raise QualityError(
            f"{model_path}: no precision meets --min-sqnr {min_sqnr:g} dB on every output (lowest SQNR: "
            f"{figures_seen}); lower the bar, check the calibration data, or quantize it yourself with "
            "per-tensor overrides (onnxruntime's get_qnn_qdq_config init_overrides) and compile that QDQ model"
        )
    if min_sqnr is not None:
        say("info", f"{model_path}: --min-sqnr {min_sqnr:g} dB: chose {activations} activations, {args.weights} weights")
    below = [o for o in outputs if not o["meets_bar"]]
    warnings = []
    if below:
        shown = "; ".join(describe(o) for o in below)
        warnings.append(
            f"{model_path}: quantized with {activations} activations, {len(below)} output(s) below the quality bar "
            f"(SQNR {BAR_SQNR_DB:g} dB, {100 * BAR_WITHIN:g}% within one step): {shown}; {hint(activations)}"
        )
    return {
        "activations": activations,
        "weights": args.weights,
        "evaluation": {"source": source, "samples": len(evaluation)},
        "outputs": [dict(o, sqnr_db=finite(o["sqnr_db"])) for o in outputs],
        "tried": tried if min_sqnr is not None else [],
        "min_sqnr_db": min_sqnr,
        "warnings": warnings,
    }


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
        "bar": {"sqnr_db": BAR_SQNR_DB, "within_one_step": BAR_WITHIN},
        "measured_with": "ONNX Runtime CPU EP: the float model against the QDQ model",
        "graphs": [dict({"name": name, "model": os.path.basename(model)}, **record) for name, model, record in graphs],
        "unmeasured": unmeasured,
    }
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(path + ".tmp", path)
    return path
