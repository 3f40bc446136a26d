"""The layer that hurts: the float model and its QDQ model run side by side on ORT's CPU EP
(graph optimizations off), every intermediate tensor made a graph output, on the evaluation
samples; per tensor, how far the quantized value is from the float one and how much of that
error the layer producing it adds itself.

For `mix hexagon_tpu.compile --debug-layers` (the table and <output>.layers.json) and for
`--activations auto`'s mixed precision (hexagon_tpu_quality.choose raises the worst tensors,
by this ranking, to 16 bits).

Figures per tensor t (float model's value r, QDQ model's q, over every evaluation sample):

  - sqnr_db: 10 * log10(sum(r^2) / sum((r - q)^2)) (null when q is r exactly);
  - cosine: the cosine similarity of r and q, the lowest over the samples;
  - input_sqnr_db: the lowest sqnr_db among the activations the producing node reads (its
    weights and other constants are not inputs: their quantization is the layer's own error;
    null when it reads none: a graph input, or a node of constants only);
  - own_drop_db: input_sqnr_db - sqnr_db, the SQNR the layer loses (null without inputs);
  - alone_sqnr_db: the layer's own harm, measured: the float model run with only t quantized
    (t's scale, zero point and bits from the QDQ model, rounded and clamped as QuantizeLinear
    does) and everything else float; the lowest SQNR of the model's outputs against the float
    model's (null when they come out exact).

The rank orders the tensors by alone_sqnr_db, lowest first. Not by own_drop_db: a tensor's
SQNR weighs its channels by their energy, so one whose quantization swamps its small channels
under one outlier channel keeps a fine SQNR (outlier_channel's `h`: 38 dB at 8 bits), and the
drop shows only where a later layer reads the swamped channels (its output `y`: 0 dB). The
tensor quantized alone shows where the harm is born. One session runs every tensor's case: each
quantized copy is switched in by a scalar input (t + s * (qdq(t) - t), s 0 or 1).

Mapping QDQ tensors to the float model's names: in the QDQ model the float tensor t is the
output of a DequantizeLinear reading a QuantizeLinear of t (`t_DequantizeLinear_Output`, or t
itself for a graph output, whose producer then writes `t_QuantizeLinear_Input`); a type
conversion adds a second Q/DQ pair after the first. Each DequantizeLinear is followed back
through Q/DQ pairs to the tensor its chain quantizes; the representative of t is the graph
output when t is one (what the model gives), else the first DequantizeLinear of t's chain
(the producer's own type). A tensor the quantizer left float keeps its name and is compared as
it is (bits null).
"""

import json
import math
import os

from hexagon_tpu_answer import cosine_of
from hexagon_tpu_common import Failure, one_line
from hexagon_tpu_quality import Sums

TOP = 10


def _consts(graph):
    from onnx import numpy_helper

    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return consts


def float_tensors(model):
    """[(name, node name, op type, [activation input names])] of the float model's activations
    in graph order: its inputs, then every node's outputs (constants excluded)."""
    graph = model.graph
    consts = set(_consts(graph))
    tensors = [(v.name, None, "(graph input)", []) for v in graph.input if v.name not in consts]
    known = {t[0] for t in tensors}
    for node in graph.node:
        if node.op_type == "Constant":
            continue
        reads = [i for i in node.input if i and i in known]
        for out in node.output:
            if out and out not in known:
                tensors.append((out, node.name, node.op_type, reads))
                known.add(out)
    return tensors


def qdq_map(qdq_model, float_names):
    """({float name: (QDQ model tensor name, bits or None)} for the float tensors the QDQ
    model holds (module docstring: how the names are followed), {float name: (scale, zero
    point as a numpy scalar of its type)} of each representative DequantizeLinear that is per
    tensor)."""
    import numpy as np

    graph = qdq_model.graph
    consts = _consts(graph)
    producers = {out: node for node in graph.node for out in node.output if out}
    outputs = {o.name for o in graph.output}

    def source(tensor):
        """The tensor a DQ/Q chain quantizes, followed back from `tensor`."""
        seen = set()
        while tensor in producers and tensor not in seen:
            seen.add(tensor)
            node = producers[tensor]
            if node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
                break
            tensor = node.input[0]
        return tensor

    def bits(node):
        zp = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        return 8 * np.asarray(zp).dtype.itemsize if zp is not None else 8

    def float_name(tensor):
        if tensor in float_names:
            return tensor
        suffix = "_QuantizeLinear_Input"
        if tensor.endswith(suffix) and tensor[: -len(suffix)] in float_names:
            return tensor[: -len(suffix)]
        return None

    found = {}
    for node in graph.node:
        if node.op_type != "DequantizeLinear" or node.input[0] in consts:
            continue  # a weight's or bias's DequantizeLinear reads an initializer
        name = float_name(source(node.input[0]))
        if name is None:
            continue
        out = node.output[0]
        first = producers.get(node.input[0])
        first_of_chain = first is not None and first.op_type == "QuantizeLinear" and float_name(first.input[0]) == name
        if name in outputs and out == name:
            found[name] = (out, bits(node), 3)
        elif first_of_chain and found.get(name, (None, None, 0))[2] < 2:
            found[name] = (out, bits(node), 2)
        elif name not in found:
            found[name] = (out, bits(node), 1)
    mapped = {name: (tensor, b) for name, (tensor, b, _rank) in found.items()}
    params = {}
    for name, (tensor, _bits) in mapped.items():
        node = producers[tensor]  # the representative DequantizeLinear: its scale and zero point
        if node.input[1] not in consts:
            continue
        scale = np.asarray(consts[node.input[1]])
        zp = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else np.uint8(0)
        if scale.size == 1 and np.asarray(zp).size == 1:
            params[name] = (float(scale.reshape(())), np.asarray(zp).reshape(()))
    # tensors the quantizer left float (the same name, no Q/DQ)
    made = {out for node in graph.node for out in node.output} | {i.name for i in graph.input}
    for name in float_names:
        if name not in mapped and name in made:
            mapped[name] = (name, None)
    return mapped, params


def exposed(model, names, path):
    """Writes `model` with `names` as extra graph outputs to `path`."""
    import onnx

    have = {o.name for o in model.graph.output}
    for name in names:
        if name not in have:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
            have.add(name)
    onnx.save(model, path)
    return path


class Acc(Sums):
    """One tensor's running sums over the samples (hexagon_tpu_quality's, no output step),
    its lowest cosine similarity and its shape; a tensor that is not float is not compared."""

    def __init__(self):
        super().__init__(None)
        self.cosine = 1.0
        self.shape = None
        self.compared = False

    def add(self, ref, q):
        import numpy as np

        ref = np.asarray(ref)
        if not np.issubdtype(ref.dtype, np.floating):
            return
        self.shape = list(ref.shape)
        self.compared = True
        r = ref.astype(np.float64).ravel()
        s = np.asarray(q, np.float64).ravel()
        if r.size != s.size:
            raise Failure(f"the QDQ model's tensor has {s.size} values, the float model's {r.size}")
        super().add(r, s)
        self.cosine = min(self.cosine, cosine_of(r, s))


SWITCH = "hexagon_tpu_alone_"


def alone_model(model, params, path):
    """The float model with, for each tensor t of params, t + s_t * (qdq(t) - t) in its place
    (s_t a scalar float input named SWITCH + its index): qdq rounds half to even and clamps
    as QuantizeLinear does, from the QDQ model's scale and zero point; written to path.
    Returns [(tensor name, switch input name)]."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    names = sorted(params, key=list(params).index)
    switches = []
    extra_nodes = {}  # index of the producing node (-1: a graph input) -> nodes after it
    producers = {out: i for i, node in enumerate(graph.node) for out in node.output if out}
    renamed = {}
    for k, name in enumerate(names):
        scale, zp = params[name]
        info = np.iinfo(zp.dtype)
        switch = f"{SWITCH}{k}"
        p = f"{SWITCH}{k}_"
        consts = {
            "scale": np.float32(scale),
            "zp": np.float32(zp),
            "lo": np.float32(info.min),
            "hi": np.float32(info.max),
        }
        for key, v in consts.items():
            graph.initializer.append(numpy_helper.from_array(np.asarray(v, np.float32), p + key))
        if name in producers:
            source = p + "float"
            node = graph.node[producers[name]]
            for j, out in enumerate(node.output):
                if out == name:
                    node.output[j] = source
            target = name
        else:  # a graph input: its readers read the switched copy
            source, target = name, p + "switched"
            renamed[name] = target
        extra_nodes.setdefault(producers.get(name, -1), []).extend(
            [
                helper.make_node("Div", [source, p + "scale"], [p + "d"]),
                helper.make_node("Round", [p + "d"], [p + "r"]),
                helper.make_node("Add", [p + "r", p + "zp"], [p + "a"]),
                helper.make_node("Min", [p + "a", p + "hi"], [p + "m"]),
                helper.make_node("Max", [p + "m", p + "lo"], [p + "c"]),
                helper.make_node("Sub", [p + "c", p + "zp"], [p + "s"]),
                helper.make_node("Mul", [p + "s", p + "scale"], [p + "q"]),
                helper.make_node("Sub", [p + "q", source], [p + "e"]),
                helper.make_node("Mul", [p + "e", switch], [p + "g"]),
                helper.make_node("Add", [source, p + "g"], [target]),
            ]
        )
        graph.input.append(helper.make_tensor_value_info(switch, TensorProto.FLOAT, []))
        switches.append((name, switch))
    nodes = list(extra_nodes.get(-1, []))
    for i, node in enumerate(graph.node):
        for j, inp in enumerate(node.input):
            if inp in renamed:
                node.input[j] = renamed[inp]
        nodes.append(node)
        nodes.extend(extra_nodes.get(i, []))
    del graph.node[:]
    graph.node.extend(nodes)
    if not any(o.domain in ("", "ai.onnx") and o.version >= 11 for o in model.opset_import):
        raise Failure("the float model's opset is older than 11 (Round): cannot quantize its tensors one at a time")
    onnx.save(model, path)
    return switches


def debug(float_path, qdq_path, inputs, samples, work):
    """[row] for every activation of the float model at float_path (the one quantized into
    qdq_path) the QDQ model holds, ranked (module docstring); work: a directory for the models
    written on the way."""
    import numpy as np
    import onnx

    from hexagon_tpu_quality import cpu_session

    fmodel = onnx.load(float_path)
    qmodel = onnx.load(qdq_path)
    tensors = float_tensors(fmodel)
    mapping, params = qdq_map(qmodel, {t[0] for t in tensors})
    tensors = [t for t in tensors if t[0] in mapping]
    if not tensors:
        raise Failure(f"{qdq_path} holds none of {float_path}'s tensors by name: nothing to compare")
    fnames = [t[0] for t in tensors]
    qnames = [mapping[n][0] for n in fnames]
    outputs = [o.name for o in fmodel.graph.output]
    params = {n: params[n] for n in fnames if n in params}
    try:
        switches = alone_model(onnx.load(float_path), params, os.path.join(work, "layers_alone.onnx"))
        fsession = cpu_session(exposed(fmodel, fnames, os.path.join(work, "layers_float.onnx")))
        qsession = cpu_session(exposed(qmodel, qnames, os.path.join(work, "layers_qdq.onnx")))
        asession = cpu_session(os.path.join(work, "layers_alone.onnx"))
    except Failure:
        raise
    except Exception as error:  # noqa: BLE001 - ORT's reason, on one line
        raise Failure(f"ONNX Runtime cannot run the models rewritten for the layer figures: {one_line(error, None)}") from None
    accs = {n: Acc() for n in fnames}
    alone = {n: [Acc() for _ in outputs] for n, _s in switches}
    off = {s: np.array(0.0, np.float32) for _n, s in switches}
    for sample in samples:
        feeds = {name: np.asarray(sample[name]).astype(dtype) for name, dtype, _shape in inputs}
        refs = fsession.run(fnames, feeds)
        quants = qsession.run(qnames, feeds)
        for name, ref, q in zip(fnames, refs, quants):
            try:
                accs[name].add(ref, q)
            except Failure as error:
                raise Failure(f"tensor '{name}': {error}") from None
        floats = dict(zip(fnames, refs))
        for name, switch in switches:
            got = asession.run(outputs, {**feeds, **off, switch: np.array(1.0, np.float32)})
            for acc, out, value in zip(alone[name], outputs, got):
                acc.add(floats[out] if out in floats else value, value)
    rows = []
    sqnrs = {}
    for name, node, op_type, reads in tensors:
        acc = accs[name]
        if not acc.compared:
            continue  # integer tensors (shapes, indices): not quantized
        sqnr = acc.sqnr()
        sqnrs[name] = sqnr
        measured = [sqnrs[r] for r in reads if r in sqnrs]
        worst_in = min((math.inf if s is None else s for s in measured), default=None)
        by_output = [a.sqnr() for a in alone.get(name, []) if a.compared]
        rows.append(
            {
                "name": name,
                "node": node,
                "op_type": op_type,
                "shape": acc.shape,
                "bits": mapping[name][1],
                "qdq_tensor": mapping[name][0],
                "sqnr_db": sqnr,
                "cosine": acc.cosine,
                "input_sqnr_db": worst_in,
                "own_drop_db": None if worst_in is None or sqnr is None or worst_in == math.inf else worst_in - sqnr,
                "alone_sqnr_db": min((math.inf if s is None else s for s in by_output), default=None),
            }
        )
    key = lambda i: (math.inf if rows[i]["alone_sqnr_db"] is None else rows[i]["alone_sqnr_db"], i)  # noqa: E731
    for rank, i in enumerate(sorted(range(len(rows)), key=key), 1):
        rows[i]["rank"] = rank
    return sorted(rows, key=lambda r: r["rank"])


def shown(value, unit=" dB"):
    if value is None:
        return "exact" if unit else "-"
    if value == math.inf:
        return "exact"
    return f"{value:.1f}{unit}"


def table(rows, top=TOP):
    """The top rows as lines of text."""
    lines = [f"{'rank':>4}  {'alone':>9}  {'drop':>8}  {'SQNR':>9}  {'cosine':>7}  bits  tensor (node, op)"]
    for row in rows[:top]:
        drop = "-" if row["own_drop_db"] is None else f"{row['own_drop_db']:.1f} dB"
        lines.append(
            f"{row['rank']:>4}  {shown(row['alone_sqnr_db']):>9}  {drop:>8}  {shown(row['sqnr_db']):>9}  "
            f"{row['cosine']:>7.4f}  {str(row['bits'] or '-'):>4}  {row['name']} ({row['node'] or '-'}, {row['op_type']})"
        )
    return lines


def finite(value):
    """JSON has no infinities or NaN: +inf (exact) and NaN are null, -inf -1e308."""
    if value is None or math.isnan(value) or value == math.inf:
        return None
    return max(value, -1e308)


def write(path, model_path, qdq_description, rows, samples):
    """<output>.layers.json."""
    document = {
        "version": 1,
        "model": os.path.basename(model_path),
        "quantized": qdq_description,
        "samples": samples,
        "measured_with": "the float model and the QDQ model on ONNX Runtime's CPU EP, graph optimizations off",
        "ranked_by": "alone_sqnr_db, lowest first: the model's outputs with only this tensor quantized",
        "tensors": [
            dict(row, **{k: finite(row[k]) for k in ("sqnr_db", "cosine", "input_sqnr_db", "own_drop_db", "alone_sqnr_db")})
            for row in rows
        ],
    }
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(path + ".tmp", path)
    return path


def raisable(rows, float_path):
    """The ranked tensors --activations auto may raise to 16 bits: the 8-bit ones whose
    quantization changes the outputs,
    that ORT's mixed-precision fixer knows (its shape inference gives them a type)."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(float_path))
    typed = {v.name for v in list(model.graph.value_info) + list(model.graph.output) + list(model.graph.input)}
    return [r["name"] for r in rows if r["bits"] == 8 and r["alone_sqnr_db"] is not None and r["name"] in typed]
