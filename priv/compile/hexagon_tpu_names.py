"""What hexagon_tpu_compile.py writes beside the context binary about its graphs: their names
(<binary>.names: the graph name chosen, ORT's QNN graph name, the model's names of each graph's
inputs and outputs by their index in the binary, which HexagonTpu.Context reads) and, with
--save-ctx, ORT's EP-context models.
"""

import os
import re


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
            for whole, boxes, scores, dims, layout in split:
                # YOLOv8's [1, 4 + C, N] splits by rows, YOLOv5's [1, N, 5 + C] by columns
                lines, last, takes = ("rows", dims[1] - 1, "yolov8") if layout == "v8" else ("columns", dims[2] - 1, "yolov5")
                f.write(
                    f"# {name}: the model's output {whole} {dims} is split into {boxes} (its {lines} 0-3) and {scores} "
                    f"({lines} 4-{last}), quantized apart; Postprocess.{takes}/2 takes [{boxes}, {scores}]\n"
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

