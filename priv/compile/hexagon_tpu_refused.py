"""The nodes the HTP refuses, named with their reasons: what hexagon_tpu_compile.py says when
ORT's QNN EP fails to compile a model, leaves nodes to the CPU, or takes no node at all. The
nodes come from the CPU nodes ORT left (compiled again with fallback allowed), QNN's validation
failures in its log and, for a failed graph finalize, QNN's verbose log (a child process,
hexagon_tpu_ep.qnn_verbose_log); more than a few are listed in <output>.refused.txt.
"""

import os
import re

import hexagon_tpu_ep as ep
from hexagon_tpu_common import one_line, say

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
        fallback_error, fallback_log = ep.run_sessions(models, ctx_paths, args, fallback=True)
        refused.add_log(fallback_log)
        if fallback_error is None:
            for ctx in ctx_paths:
                for op_type, name in ep.cpu_nodes(ctx):
                    refused.add(op_type, name)
        if refused.nodes:
            return refused.message(text, refused_path(args))
        return "some nodes cannot run on the HTP and CPU fallback is disabled: " + one_line(text)
    code = re.search(r"(?:error code|Code)[: ]+(\d+)", "\n".join(log) + text)
    if "finalize" in text.lower():
        # QNN names the op it could not build only at its verbose log level: compiled again so.
        refused = Refused(models, args)
        refused.add_finalize(ep.qnn_verbose_log(models, args, work), int(code.group(1)) if code else None)
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



def left_to_cpu(models, ctx_paths, log, args):
    """The error for the nodes ORT left outside the QNN partitions of the EP-context models it
    wrote (cpu_nodes: with --io quantized CPU fallback is allowed), or None when it left none."""
    found = [node for ctx in ctx_paths for node in ep.cpu_nodes(ctx)]
    if not found:
        return None
    refused = Refused(models, args)
    refused.add_log(log)
    for op_type, name in found:
        refused.add(op_type, name)
    return refused.message(None, refused_path(args))
