"""Rewrites an ONNX model the way exporters write it into one that ONNX Runtime's quantizer and
its QNN execution provider take (used by hexagon_tpu_compile.py). Each step says what it did;
nothing here changes the names of the graph's inputs and outputs.

Every model:

- a node of a custom op domain (one a converter left in) is refused by name: nothing here runs it;
- nodes without a name are named `<OpType>_<its first output>` (exporters of PyTorch's and
  Paddle's age leave them unnamed), so a refusal names a node the user can find;
- initializers that the graph also lists as inputs (every IR 3 export, and many later ones)
  are removed from the inputs: while they are inputs, ORT treats them as values a caller may
  override, so it neither folds them nor lets the QNN EP take them as weights
  (BatchNormalization's scale and mean, a Reshape's shape);
- `--input-shape name=1x3x640x640` fixes an input's shape BY POSITION, whatever its dimensions
  are called (exporters give two dimensions one symbolic name, `['?', '?']`) or declare (a fixed
  batch of 10 that the model's own application rewrites at load time): a fixed dimension given
  another size is overridden and said so; then the shapes are inferred again.

A float model (quantized here), besides:

- weights given as `Constant` nodes (paddle2onnx, the TFLite converters) become initializers:
  ORT's quantizer quantizes initializers only, and a weight left in float is refused by the
  v68 HTP (QNN error 3110 for every Conv);
- an opset older than 13 is converted to 13 (onnx.version_converter): per-channel
  QuantizeLinear/DequantizeLinear (their `axis`) need opset 13;
- constants are folded (ONNX Runtime's basic graph optimizations on its CPU EP): anchor grids,
  shape arithmetic, and an `If` whose condition is constant once the shapes are fixed, which
  ORT replaces by the branch it takes;
- a `Clip` whose bound is computed (a mel front end's `Clip(x, ReduceMax(x) - 80)`) becomes
  `Max(x, min)` and `Min(., max)`, which is the same function: the HTP's Clip takes constant
  bounds only;
- a YOLO head's output is split into `<output>_boxes` and `<output>_scores` (split_heads says
  why), unless --no-split-head: YOLOv8's `Concat(boxes [1, 4, N], scores [1, C, N])`, and
  YOLOv5's `[1, N, 5 + C]` at 4 on its last axis, through the Concats and Reshapes of
  Ultralytics' Detect layer (LastAxisSplit);
- ORT's own quantization pre-processing (onnxruntime.quantization.quant_pre_process: constant
  folding, shape inference) runs on the result, then its QNN one (qnn_preprocess_model) on a
  copy without `metadata_props` (ORT 1.32's fails on any: `cannot convert dictionary update
  sequence element #0`); the quantized model is written without them too.
"""

import re

from hexagon_tpu_common import Failure, one_line

# Per-channel QDQ (DequantizeLinear's axis) needs this opset of the default domain.
QDQ_OPSET = 13
SHAPE = re.compile(r"([^=]+)=(\d+(?:x\d+)*)")


def parse_input_shapes(specs):
    """{input name: [dims]} from --input-shape NAME=1x3x640x640 options (each name once)."""
    shapes = {}
    for spec in specs or []:
        match = SHAPE.fullmatch(spec)
        if not match:
            raise Failure(f"invalid --input-shape {spec!r}: expected NAME=DxDx... (e.g. image=1x3x640x640)")
        name, dims = match.group(1), [int(d) for d in match.group(2).split("x")]
        if any(d <= 0 for d in dims):
            raise Failure(f"invalid --input-shape {spec!r}: every dimension must be positive")
        if name in shapes:
            raise Failure(f"--input-shape gives input '{name}' twice")
        shapes[name] = dims
    return shapes


def dims_of(value):
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in value.type.tensor_type.shape.dim]


def shown(dims):
    return "[" + ", ".join(str(d) if isinstance(d, int) else repr(d) for d in dims) + "]"


# ------------------------------------------------------------------------ every model


# Op domains ONNX Runtime implements (its contrib ops included); a node of another domain is a
# custom op that a converter left in (tf2onnx's TFL_*, a plugin's), which nothing here can run.
KNOWN_DOMAINS = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft"}


def custom_ops(graph):
    """Refuses a graph with nodes of custom op domains, naming each (after name_nodes)."""
    custom = [n for n in graph.node if n.domain not in KNOWN_DOMAINS]
    if custom:
        listed = "; ".join(f"{n.op_type} '{n.name}' (domain '{n.domain}', makes '{n.output[0] if n.output else ''}')" for n in custom[:8])
        more = f" and {len(custom) - 8} more" if len(custom) > 8 else ""
        raise Failure(
            f"the model has {len(custom)} custom op node(s) that neither ONNX Runtime nor the HTP implements: {listed}{more}; "
            "convert or export the model so that these are standard ONNX ops (a converter that left them in "
            "could not map them), or remove them from the graph and do their work on the host"
        )


def name_nodes(graph):
    """Names the unnamed nodes `<OpType>_<first output>` (made unique); returns how many."""
    taken = {n.name for n in graph.node if n.name}
    named = 0
    for node in graph.node:
        if node.name:
            continue
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{node.op_type}_{node.output[0] if node.output else 'node'}")
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        node.name = name
        taken.add(name)
        named += 1
    return named


def initializers_out_of_inputs(model):
    """Removes the graph inputs that are initializers; returns how many (IR 3 requires them as
    inputs, so the model is raised to IR 4, which is what the rest of the pipeline writes)."""
    graph = model.graph
    initializers = {i.name for i in graph.initializer}
    kept = [v for v in graph.input if v.name not in initializers]
    removed = len(graph.input) - len(kept)
    if removed:
        del graph.input[:]
        graph.input.extend(kept)
        model.ir_version = max(model.ir_version, 4)
    return removed


def fix_input_shapes(model, shapes):
    """Fixes the inputs named in `shapes`, dimension by dimension; returns what it did. A name
    that is not an input or a rank that differs is an error; a fixed dimension given another
    size is overridden (and said)."""
    initializers = {i.name for i in model.graph.initializer}
    inputs = {v.name: v for v in model.graph.input if v.name not in initializers}
    done = []
    for name, shape in shapes.items():
        if name not in inputs:
            raise Failure(f"--input-shape: the model has no input '{name}' (its inputs: {', '.join(inputs)})")
        dims = dims_of(inputs[name])
        given = f"--input-shape {name}={'x'.join(map(str, shape))}"
        if len(dims) != len(shape):
            raise Failure(f"{given}: input '{name}' has rank {len(dims)} ({shown(dims)})")
        if dims == shape:
            continue
        overridden = [f"dimension {i} declared {have}" for i, (have, want) in enumerate(zip(dims, shape)) if isinstance(have, int) and have > 0 and have != want]
        for dim, want in zip(inputs[name].type.tensor_type.shape.dim, shape):
            dim.Clear()
            dim.dim_value = want
        step = f"input '{name}' {shown(dims)} fixed to {shape} by position"
        if overridden:
            step += f" (overriding {', '.join(overridden)}: the model must accept the size given there)"
        done.append(step)
    if done:
        forget_shapes(model)
    return done


def forget_shapes(model):
    """Drops every inferred or declared shape but the inputs' (they no longer hold once an input
    changed: an old export declares its outputs with its fixed batch), then infers them anew."""
    import onnx

    graph = model.graph
    del graph.value_info[:]
    for output in graph.output:
        output.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as error:  # noqa: BLE001 - onnx raises several types
        raise Failure(f"the model does not take the shape given (ONNX shape inference: {one_line(error, 300)})") from None
    model.CopyFrom(inferred)


# --------------------------------------------------------------------- float models


# The input that is a bias, by op type: quantized per node (its scale is the node's input scale
# times its weight scale), so a bias two nodes share needs one copy per node.
BIAS_INPUT = {"Conv": 2, "ConvTranspose": 2, "Gemm": 2}


def unshared_biases(path, out_path):
    """Gives each node its own copy of a bias initializer it shares with others (the TFLite
    converter merges equal constants, and ORT's optimizer shares them too): ORT's quantizer
    copies a shared bias under the name `<bias>2`, `<bias>3`, ... whatever tensor already has
    it, and an activation named so is then dequantized from that bias (MediaPipe's palm
    detector: Conv input `depthwise2` read as the 32 values of bias `depthwise`'s copy). Returns
    out_path with the copies made, or path when no bias is shared."""
    import onnx

    model = onnx.load(path)
    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    readers = {}
    for node in graph.node:
        at = BIAS_INPUT.get(node.op_type)
        if at is not None and len(node.input) > at and node.input[at] in initializers:
            readers.setdefault(node.input[at], []).append(node)
    shared = {name: nodes for name, nodes in readers.items() if len(nodes) > 1}
    if not shared:
        return path
    taken = {i.name for i in graph.initializer} | {o for n in graph.node for o in n.output} | {v.name for v in graph.input}
    for name, nodes in shared.items():
        for k, node in enumerate(nodes[1:], start=1):
            copy_name = f"{name}/bias_copy_{k}"
            while copy_name in taken:
                copy_name += "_"
            taken.add(copy_name)
            copy = onnx.TensorProto()
            copy.CopyFrom(initializers[name])
            copy.name = copy_name
            graph.initializer.append(copy)
            node.input[BIAS_INPUT[node.op_type]] = copy_name
    onnx.save(model, out_path, save_as_external_data=model.ByteSize() > 2_000_000_000)
    return out_path


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
        raise Failure(f"converting the model from opset {have} to {QDQ_OPSET} (needed for per-channel quantization) failed: {one_line(error, 300)}") from None


def fold_constants(model, work_path):
    """The model with its constants folded by ONNX Runtime's basic optimizations (CPU EP)."""
    import onnx
    import onnxruntime as ort

    onnx.save(model, work_path + ".in.onnx")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = work_path
    try:
        ort.InferenceSession(work_path + ".in.onnx", so, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - ORT raises several types
        raise Failure(f"ONNX Runtime cannot load the model to fold its constants: {one_line(error, 300)}") from None
    return onnx.load(work_path)


def constants_of(graph):
    """{name: numpy array} of the graph's initializers and Constant outputs."""
    from onnx import numpy_helper

    values = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def computed_clips(graph):
    """Rewrites each Clip with a computed (non-constant) bound: Max(x, min) for a computed
    minimum, Min(., max) for a computed maximum (the same function, in ops the HTP takes with a
    tensor operand); a constant bound stays a Clip's, and one beyond float32's range (an
    exporter's "no bound") is dropped: as a tensor it would set a quantization range of 1e38.
    Returns the names."""
    from onnx import helper

    consts = constants_of(graph)
    out, done = [], []
    for node in graph.node:
        bounds = (list(node.input[1:3]) + ["", ""])[:2]
        if node.op_type != "Clip" or not any(b and b not in consts for b in bounds):
            out.append(node)
            continue
        value, steps = node.input[0], []
        kept = ["", ""]  # constant bounds for a Clip after the Max/Min
        for k, (bound, op) in enumerate(zip(bounds, ("Max", "Min"))):
            if bound and bound not in consts:
                steps.append((op, bound))
            elif bound and abs(float(consts[bound].reshape(()))) < 1e38:
                kept[k] = bound
        if any(kept):
            steps.append(("Clip", kept))
        for n, (op, operand) in enumerate(steps):
            target = node.output[0] if n == len(steps) - 1 else f"{node.name}/{op.lower()}"
            inputs = [value, *operand] if op == "Clip" else [value, operand]
            out.append(helper.make_node(op, inputs, [target], name=f"{node.name}/{op.lower()}"))
            value = target
        done.append(node.name)
    if done:
        del graph.node[:]
        graph.node.extend(out)
    return done


# A YOLO head's outputs: boxes in the input's pixels, class scores in [0, 1]. Concatenated,
# they share one quantization step, set by the boxes (1.25 for a 320 input at u8): every score
# rounds to 0 or 1.25, and the detector finds nothing. Split, each part gets its own (AI Hub's
# YOLO exports are split the same way). At least this many anchors make an output a head.
HEAD_ANCHORS = 100


def split_heads(model):
    """Splits each graph output that is a YOLO head into two outputs, `<name>_boxes` and
    `<name>_scores`, at its place: a YOLOv8 head, a Concat of boxes [1, 4, N] and class scores
    [1, C, N] (axis 1); a YOLOv5 one, [1, N, 5 + C] split at 4 on its last axis (split_v5).
    Returns [(output, boxes, scores, its shape, "v8" | "v5")]."""
    splits, heads = [], None
    for out in list(model.graph.output):
        heads = heads or Heads(model)
        split = heads.split_v8(out) or heads.split_v5(out)
        if split:
            splits.append(split)
            heads = None  # the graph changed: its shapes and producers are read again
    return splits


class Heads:
    """A graph's shapes, producers, consumers and constants, for split_heads."""

    def __init__(self, model):
        import onnx

        self.graph = model.graph
        inferred = onnx.shape_inference.infer_shapes(model)
        self.shapes = {v.name: dims_of(v) for v in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input)}
        self.producer = {o: n for n in self.graph.node for o in n.output}
        self.consumers = {}
        for n in self.graph.node:
            for i in n.input:
                self.consumers[i] = self.consumers.get(i, 0) + 1
        self.outputs = {o.name for o in self.graph.output}
        self.consts = constants_of(self.graph)

    def replace_output(self, out, parts):
        """The graph output `out` replaced, at its place, by `parts` [(name, dims)]."""
        import onnx

        graph = self.graph
        at = list(graph.output).index(out)
        graph.output.remove(out)
        for k, (name, dims) in enumerate(parts):
            graph.output.insert(at + k, onnx.helper.make_tensor_value_info(name, out.type.tensor_type.elem_type, dims))

    def split_v8(self, out):
        """A Concat of YOLOv8 boxes [1, 4, N] and class scores [1, C, N] on axis 1, whose parts
        nothing else uses, split: the Concat removed, its inputs the outputs."""
        graph = self.graph
        node = self.producer.get(out.name)
        if node is None or node.op_type != "Concat" or len(node.input) != 2:
            return None
        axis = next((a.i for a in node.attribute if a.name == "axis"), None)
        parts = [self.shapes.get(i) for i in node.input]
        if axis not in (1, -2) or None in parts or self.shapes.get(out.name) is None or any(len(p) != 3 for p in parts):
            return None
        (b, four, n), (b2, classes, n2) = parts
        if not (b == b2 == 1 and four == 4 and n == n2 and isinstance(n, int) and n >= HEAD_ANCHORS and isinstance(classes, int)):
            return None
        if any(self.consumers.get(i, 0) != 1 or i in self.outputs for i in node.input):
            return None  # a part used elsewhere too: left as it is
        names = [f"{out.name}_boxes", f"{out.name}_scores"]
        for old, new in zip(node.input, names):
            for other in graph.node:
                other.output[:] = [new if o == old else o for o in other.output]
        graph.node.remove(node)
        self.replace_output(out, list(zip(names, parts)))
        return (out.name, names[0], names[1], [1, 4 + classes, n], "v8")

    def split_v5(self, out):
        """A YOLOv5 head, [1, N, K] (K = 5 + C >= 6, N >= HEAD_ANCHORS), split at 4 on its last
        axis into boxes [1, N, 4] and scores [1, N, K - 4] (objectness, then the classes), when
        the graph computes it as parts that the split can take apart (LastAxisSplit), each made
        by nodes that nothing else uses; the nodes that made the whole are removed."""
        whole = self.shapes.get(out.name)
        if not whole or len(whole) != 3 or whole[0] != 1 or not all(isinstance(d, int) for d in whole):
            return None
        _one, n, k = whole
        if k < 6 or n < HEAD_ANCHORS or self.consumers.get(out.name, 0):
            return None
        names = (f"{out.name}_boxes", f"{out.name}_scores")
        plan = LastAxisSplit(self)
        parts = plan.split(out.name, names, top=True)
        if parts is None:
            return None
        plan.apply(parts, names)
        self.replace_output(out, [(names[0], [1, n, 4]), (names[1], [1, n, k - 4])])
        return (out.name, names[0], names[1], whole, "v5")


class LastAxisSplit:
    """Plans the split of a tensor at 4 on its last axis by walking back through the nodes that
    make it, as Ultralytics' YOLOv5 export does (per level: Split or Slice of the sigmoid into
    xy, wh, conf; Concat([xy, wh, conf], axis -1); Reshape [1, 3HW, 5 + C]; then Concat of the
    levels on axis 1):

    - a Concat on the last axis whose inputs partition exactly at 4: its inputs up to 4 are the
      boxes (their Concat, or the one), the rest the scores;
    - a Concat on another axis: each input split, the parts concatenated on that axis;
    - a Reshape that keeps the last dimension: its input split, each part reshaped by the same
      shape with the last entry 4, or K - 4.

    Anything else is not a head. Every tensor walked through must be used by the walk alone
    (it is removed with its node)."""

    def __init__(self, heads):
        self.heads = heads
        self.nodes, self.removed, self.inits = [], [], []
        self.taken = set(heads.producer) | set(heads.consts) | set(heads.shapes) | {n.name for n in heads.graph.node}

    def fresh(self, name):
        base, n = name, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def split(self, name, targets, top=False):
        """(boxes, scores) tensor names of `name` split at 4 on its last axis (`targets`: the
        names of the new tensors it makes), or None."""
        h = self.heads
        node, dims = h.producer.get(name), h.shapes.get(name)
        if node is None or not dims or not isinstance(dims[-1], int) or len(node.output) != 1:
            return None
        if not top and (h.consumers.get(name, 0) != 1 or name in h.outputs):
            return None  # used elsewhere too: left as it is
        rank = len(dims)
        if node.op_type == "Concat":
            axis = next((a.i for a in node.attribute if a.name == "axis"), None)
            if axis is None:
                return None
            axis = axis + rank if axis < 0 else axis
            parts = self.partition(node, rank, targets) if axis == rank - 1 else self.levels(node, axis, targets)
        elif node.op_type == "Reshape":
            parts = self.reshape(node, dims, targets)
        else:
            return None
        if parts is not None:
            self.removed.append(node)
        return parts

    def partition(self, node, rank, targets):
        widths = [self.heads.shapes.get(i) for i in node.input]
        if any(not w or len(w) != rank or not isinstance(w[-1], int) for w in widths):
            return None
        cut, width = 0, 0
        while cut < len(widths) and width < 4:
            width += widths[cut][-1]
            cut += 1
        if width != 4 or cut == len(widths):
            return None
        return tuple(self.concat(node, list(inputs), rank - 1, target, part) for inputs, target, part in zip((node.input[:cut], node.input[cut:]), targets, ("boxes", "scores")))

    def levels(self, node, axis, targets):
        parts = []
        for i in node.input:
            split = self.split(i, (self.fresh(f"{i}_boxes"), self.fresh(f"{i}_scores")))
            if split is None:
                return None
            parts.append(split)
        return tuple(self.concat(node, [p[k] for p in parts], axis, target, part) for k, (target, part) in enumerate(zip(targets, ("boxes", "scores"))))

    def concat(self, like, inputs, axis, target, part):
        """`inputs` concatenated on `axis` into `target`; the one input itself."""
        from onnx import helper

        if len(inputs) == 1:
            return inputs[0]
        self.nodes.append(helper.make_node("Concat", inputs, [target], name=self.fresh(f"{like.name}/{part}"), axis=axis))
        return target

    def reshape(self, node, dims, targets):
        import numpy as np
        from onnx import helper, numpy_helper

        data = node.input[0]
        src = self.heads.shapes.get(data)
        shape = self.heads.consts.get(node.input[1]) if len(node.input) > 1 else None
        if not src or src[-1] != dims[-1] or shape is None or shape.ndim != 1 or len(shape) != len(dims):
            return None
        split = self.split(data, (self.fresh(f"{data}_boxes"), self.fresh(f"{data}_scores")))
        if split is None:
            return None
        made = []
        for part, width, target, kind in zip(split, (4, dims[-1] - 4), targets, ("boxes", "scores")):
            new_shape = np.array(shape, dtype=np.int64)
            new_shape[-1] = width
            shape_name = self.fresh(f"{node.input[1]}_{kind}")
            self.inits.append(numpy_helper.from_array(new_shape, shape_name))
            reshaped = helper.make_node("Reshape", [part, shape_name], [target], name=self.fresh(f"{node.name}/{kind}"))
            reshaped.attribute.extend(node.attribute)  # allowzero
            self.nodes.append(reshaped)
            made.append(target)
        return tuple(made)

    def apply(self, parts, names):
        """Puts the planned nodes in the graph where the head's last node was, the head's
        outputs named `names` (a part the graph already had is renamed, or copied by an Identity
        when something else uses it too), and removes the nodes walked through and what fed
        only them."""
        from onnx import helper

        h = self.heads
        graph = h.graph
        for part, name in zip(parts, names):
            if part == name:
                continue
            maker = h.producer.get(part)
            if maker is not None and h.consumers.get(part) == 1 and part not in h.outputs:
                maker.output[:] = [name if o == part else o for o in maker.output]  # the removed Concat's alone
            else:
                self.nodes.append(helper.make_node("Identity", [part], [name], name=self.fresh(f"{name}/identity")))
        removed = {id(n) for n in self.removed}
        top = self.removed[-1]
        kept = []
        for node in graph.node:
            if node is top:
                kept.extend(self.nodes)
            if id(node) not in removed:
                kept.append(node)
        del graph.node[:]
        graph.node.extend(kept)
        graph.initializer.extend(self.inits)
        unused(graph, self.removed)


def unused(graph, removed):
    """Removes what fed only the `removed` nodes (gone): the nodes and initializers nothing uses now."""
    producer = {o: n for n in graph.node for o in n.output}
    fed = {i for n in removed for i in n.input}
    suspects = set(fed)
    while suspects:
        used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        dead = {id(producer[s]): producer[s] for s in suspects if s in producer and not any(o in used for o in producer[s].output)}
        suspects = {i for n in dead.values() for i in n.input}
        fed |= suspects
        for n in dead.values():
            graph.node.remove(n)
    used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    kept = [i for i in graph.initializer if i.name in used or i.name not in fed]
    if len(kept) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(kept)


def simplify(model, work_path, say, path):
    """Folds constants (ORT's folding also replaces an If whose condition is constant by the
    branch it takes), rewrites computed Clips, and folds what that exposed."""
    model = fold_constants(model, f"{work_path}.folded.onnx")
    clips = computed_clips(model.graph)
    if not clips:
        return model
    say("info", f"{path}: {len(clips)} Clip(s) with a computed bound rewritten as Max/Min (the HTP's Clip takes constant bounds only): {', '.join(clips)}")
    return fold_constants(model, f"{work_path}.refolded.onnx")


def prepare(source, out_path, shapes, quantizing, say, split=True, label=None):
    """Writes the prepared model to out_path; returns the heads split, [(output, boxes, scores,
    its shape, "v8" | "v5")] (split_heads; only when split). For a QDQ model (quantizing False) only the
    structural steps run (names, initializers, input shapes). `say(kind, message)` reports
    each step, naming the model `label` (default: source; a converted TFLite model's path is
    the user's .tflite)."""
    import onnx

    path = label or source
    try:
        model = onnx.load(source)
    except Exception as error:  # noqa: BLE001 - any parse failure
        raise Failure(f"{path} is not an ONNX model: {one_line(error, 300)}") from None
    named = name_nodes(model.graph)
    if named:
        say("info", f"{path}: {named} unnamed node(s) named <OpType>_<first output> (how messages name them)")
    custom_ops(model.graph)
    removed = initializers_out_of_inputs(model)
    if removed:
        say("info", f"{path}: {removed} initializer(s) removed from the graph's inputs (as inputs they are not constants to ORT or the HTP)")
    for step in fix_input_shapes(model, shapes):
        say("info", f"{path}: {step}")
    if quantizing:
        moved = constants_to_initializers(model)
        if moved:
            say("info", f"{path}: {moved} Constant node(s) moved into initializers (the quantizer quantizes initializers)")
        model, had = convert_opset(model)
        if had is not None and had < QDQ_OPSET:
            say("info", f"{path}: converted from opset {had} to {QDQ_OPSET} (per-channel quantization needs it)")
    splits = []
    if quantizing and not dynamic(model):
        model = simplify(model, out_path, say, path)
        splits = split_heads(model) if split else []
        for split in splits:
            say("info", f"{path}: {split_said(*split)}")
    onnx.save(model, out_path, save_as_external_data=model.ByteSize() > 2_000_000_000)
    return splits


def split_said(whole, boxes, scores, dims, layout):
    """What prepare says of a head it split."""
    if layout == "v8":
        parts, what, takes = f"'{boxes}' [1, 4, {dims[2]}] and '{scores}' [1, {dims[1] - 4}, {dims[2]}]", "YOLO boxes and class scores", "yolov8"
    else:
        parts = f"'{boxes}' [1, {dims[1]}, 4] and '{scores}' [1, {dims[1]}, {dims[2] - 4}] (objectness, then the class scores)"
        what, takes = "YOLOv5 boxes, objectness and class scores", "yolov5"
    return (
        f"output '{whole}' {dims} ({what}) split into {parts}, each quantized on its own (one step for both would "
        f"round the scores away); Postprocess.{takes}/2 takes [boxes, scores]"
    )


def dynamic(model):
    """Whether an input still has a dynamic dimension (the caller then says which to fix)."""
    initializers = {i.name for i in model.graph.initializer}
    return any(not isinstance(d, int) or d <= 0 for v in model.graph.input if v.name not in initializers for d in dims_of(v))


def ort_pre_process(path, out_path, warn):
    """ORT's quantization pre-processing (constant folding, shape inference) of path into
    out_path; returns out_path, or path when ORT cannot process it (warn(message) says why)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        # symbolic shape inference is for dynamic shapes, which the HTP does not take
        quant_pre_process(path, out_path, skip_symbolic_shape=True)
        return out_path
    except Exception as error:  # noqa: BLE001 - report and go on without it
        warn(f"ORT's quantization pre-processing failed, quantizing without it: {one_line(error, 300)}")
        return path


def qnn_pre_process(path, out_path):
    """ORT's QNN pre-processing (fusions QNN prefers): out_path when it rewrote the model,
    path when it had nothing to do (it then writes nothing: its own constant folding is lost,
    which is why ort_pre_process runs first). It is given the model without metadata_props:
    ORT 1.32's fails on any (`cannot convert dictionary update sequence element #0`), and
    ort_pre_process adds one. Nodes ORT's pre-processing made are named here as prepare names
    the model's (qnn_preprocess_model would name them, with a warning each)."""
    import onnx
    from onnxruntime.quantization.execution_providers.qnn import qnn_preprocess_model

    model = onnx.load(path)
    del model.metadata_props[:]
    name_nodes(model.graph)  # what ORT's pre-processing made (its HardSigmoid of a HardSwish) is unnamed
    return out_path if qnn_preprocess_model(model, out_path) else path
