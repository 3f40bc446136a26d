"""Test models of the compile task's head splits (hexagon_tpu_prepare.split_heads), and the
check that its rewrites keep the model's function (onnx_models.py prepared-diff). onnx_models.py
registers the models; this file imports nothing of it.
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]

# yolov5_head: a 256 x 256 input, two levels (strides 16 and 32), 3 anchors a cell, 3 classes
# (5 + 3 values a box); Ultralytics' P4 and P5 anchors, in pixels: boxes up to 4 x 373 wide.
V5_SIZE, V5_CLASSES = 256, 3
V5_LEVELS = [(16, [[30, 61], [62, 45], [59, 119]]), (32, [[116, 90], [156, 198], [373, 326]])]


def conv(rng, name, x, out, cin, cout, kernel, stride, scale):
    """Conv x -> out, seeded weights of std `scale`, and its initializers."""
    w = numpy_helper.from_array((rng.standard_normal([cout, cin, kernel, kernel]) * scale).astype(np.float32), f"{name}.w")
    b = numpy_helper.from_array((rng.standard_normal([cout]) * 0.1).astype(np.float32), f"{name}.b")
    node = helper.make_node("Conv", [x, w.name, b.name], [out], name=name, kernel_shape=[kernel, kernel], strides=[stride, stride])
    return node, [w, b]


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def yolov5_head(rng):
    """A YOLOv5 detector's shape as Ultralytics' export writes its Detect layer (v6.x, v7):
    a small backbone, then per level Conv -> Reshape [1, 3, 5 + C, H, W] -> Transpose
    [1, 3, H, W, 5 + C] -> Sigmoid -> Split [2, 2, 1 + C] -> xy = (xy * 2 + grid) * stride,
    wh = (wh * 2) ** 2 * anchor_grid -> Concat(axis 4) -> Reshape [1, 3HW, 5 + C]; then the
    levels concatenated, output0 [1, 960, 8]: boxes in the input's pixels (hundreds), objectness
    and class scores in [0, 1]. The objectness bias is low and its weights large, so a few boxes
    a sample score high and the rest near 0; the classes' bias favours a class a box."""
    no = 5 + V5_CLASSES
    nodes, inits = [], []
    for name, x, out, cin, cout, k, s in [("stem", "images", "c1", 3, 16, 4, 4), ("p4", "r1", "c2", 16, 16, 4, 4), ("p5", "r2", "c3", 16, 16, 2, 2)]:
        node, made = conv(rng, name, x, out, cin, cout, k, s, np.sqrt(2.0 / (cin * k * k)))
        nodes += [node, helper.make_node("Relu", [out], ["r" + out[1:]], name=f"{name}.relu")]
        inits += made
    levels = []
    for i, ((stride, anchors), feature) in enumerate(zip(V5_LEVELS, ["r2", "r3"])):
        h = w = V5_SIZE // stride
        m, made = conv(rng, f"m.{i}", feature, f"m{i}", 16, 3 * no, 1, 1, 0.5)
        bias = numpy_helper.to_array(made[1]).reshape(3, no).copy()
        bias[:, 4] = -13.0  # objectness: most boxes near 0
        weights = numpy_helper.to_array(made[0]).reshape(3, no, 16, 1, 1).copy()
        weights[:, 4] *= 10.0  # ...and a few high
        weights[:, :4] *= 0.5
        weights[:, 5:] *= 5.0
        made = [numpy_helper.from_array(weights.reshape(3 * no, 16, 1, 1), made[0].name), numpy_helper.from_array(bias.reshape(-1).astype(np.float32), made[1].name)]
        yv, xv = np.meshgrid(np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32), indexing="ij")
        grid = np.broadcast_to(np.stack([xv, yv], 2)[None, None] - 0.5, (1, 3, h, w, 2)).astype(np.float32)
        anchor_grid = np.broadcast_to(np.array(anchors, np.float32).reshape(1, 3, 1, 1, 2), (1, 3, h, w, 2)).astype(np.float32)
        p = f"/model.24/{i}"  # the names Ultralytics' export gives
        inits += made + [
            const(f"{p}/shape5", np.array([1, 3, no, h, w], np.int64)),
            const(f"{p}/split", np.array([2, 2, no - 4], np.int64)),
            const(f"{p}/two", np.array(2.0, np.float32)),
            const(f"{p}/grid", grid),
            const(f"{p}/stride", np.array(float(stride), np.float32)),
            const(f"{p}/anchor_grid", anchor_grid),
            const(f"{p}/shape3", np.array([1, 3 * h * w, no], np.int64)),
        ]
        nodes += [
            m,
            helper.make_node("Reshape", [f"m{i}", f"{p}/shape5"], [f"{p}/r5"], name=f"{p}/Reshape"),
            helper.make_node("Transpose", [f"{p}/r5"], [f"{p}/t"], name=f"{p}/Transpose", perm=[0, 1, 3, 4, 2]),
            helper.make_node("Sigmoid", [f"{p}/t"], [f"{p}/s"], name=f"{p}/Sigmoid"),
            helper.make_node("Split", [f"{p}/s", f"{p}/split"], [f"{p}/xy", f"{p}/wh", f"{p}/conf"], name=f"{p}/Split", axis=4),
            helper.make_node("Mul", [f"{p}/xy", f"{p}/two"], [f"{p}/xy2"], name=f"{p}/Mul"),
            helper.make_node("Add", [f"{p}/xy2", f"{p}/grid"], [f"{p}/xyg"], name=f"{p}/Add"),
            helper.make_node("Mul", [f"{p}/xyg", f"{p}/stride"], [f"{p}/xys"], name=f"{p}/Mul_1"),
            helper.make_node("Mul", [f"{p}/wh", f"{p}/two"], [f"{p}/wh2"], name=f"{p}/Mul_2"),
            helper.make_node("Pow", [f"{p}/wh2", f"{p}/two"], [f"{p}/whp"], name=f"{p}/Pow"),
            helper.make_node("Mul", [f"{p}/whp", f"{p}/anchor_grid"], [f"{p}/whs"], name=f"{p}/Mul_3"),
            helper.make_node("Concat", [f"{p}/xys", f"{p}/whs", f"{p}/conf"], [f"{p}/cat"], name=f"{p}/Concat", axis=4),
            helper.make_node("Reshape", [f"{p}/cat", f"{p}/shape3"], [f"{p}/level"], name=f"{p}/Reshape_1"),
        ]
        levels.append(f"{p}/level")
    n = sum(3 * (V5_SIZE // s) ** 2 for s, _a in V5_LEVELS)
    nodes.append(helper.make_node("Concat", levels, ["output0"], name="/model.24/Concat", axis=1))
    graph = helper.make_graph(
        nodes,
        "yolov5_head",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, V5_SIZE, V5_SIZE])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, n, no])],
        inits,
    )
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def ssd_regressor(rng):
    """An SSD's box regressor, BlazeFace's shape: per level Conv -> Transpose (NHWC) -> Reshape
    [1, HW x anchors, 16], the levels concatenated on axis 1: [1, 896, 16], a YOLOv5 head's
    shape, which the task must not split (a Transpose makes its last axis)."""
    nodes, inits, levels = [], [], []
    for i, (size, anchors) in enumerate([(16, 2), (8, 6)]):
        node, made = conv(rng, f"reg.{i}", "x", f"c{i}", 3, 16 * anchors, 128 // size, 128 // size, 0.3)
        inits += made + [const(f"shape{i}", np.array([1, size * size * anchors, 16], np.int64))]
        nodes += [
            node,
            helper.make_node("Transpose", [f"c{i}"], [f"t{i}"], name=f"t{i}", perm=[0, 2, 3, 1]),
            helper.make_node("Reshape", [f"t{i}", f"shape{i}"], [f"l{i}"], name=f"reshape{i}"),
        ]
        levels.append(f"l{i}")
    nodes.append(helper.make_node("Concat", levels, ["regressors"], name="concat", axis=1))
    graph = helper.make_graph(
        nodes,
        "ssd_regressor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 128, 128])],
        [helper.make_tensor_value_info("regressors", TensorProto.FLOAT, [1, 896, 16])],
        inits,
    )
    return helper.make_model(graph, opset_imports=OPSET), (-1.0, 1.0)


MODELS = {f.__name__: f for f in [yolov5_head, ssd_regressor]}


def prepared_diff(args):
    """The compile task's rewrites (hexagon_tpu_prepare.prepare, as for a float model) against
    the model as shipped, both on ORT's CPU EP with its optimizations off, on 4 seeded random
    samples of the shape given: prints `rewrites: ...` (what prepare said), `outputs: ...` (the
    prepared model's), `max_abs_diff X` (the largest difference over every output), and
    `max_abs X` (the largest value). With --split, the heads split (split_heads) are compared
    joined again, as the float model's one output."""
    import tempfile

    import onnxruntime as ort

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "priv", "compile"))
    import hexagon_tpu_prepare

    shapes = hexagon_tpu_prepare.parse_input_shapes(args.input_shape)
    said = []
    with tempfile.TemporaryDirectory() as work:
        prepared = os.path.join(work, "prepared.onnx")
        splits = hexagon_tpu_prepare.prepare(args.model, prepared, shapes, True, lambda _k, m: said.append(m), split=args.split)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sessions = [ort.InferenceSession(m, so, providers=["CPUExecutionProvider"]) for m in (args.model, prepared)]
        names = [o.name for o in sessions[1].get_outputs()]
        rng = np.random.default_rng(7)
        worst = largest = 0.0
        for _ in range(4):
            feeds = {i.name: rng.uniform(args.low, args.high, size=shapes[i.name]).astype(np.float32) for i in sessions[1].get_inputs()}
            got = dict(zip(names, sessions[1].run(None, feeds)))
            for whole, boxes, scores, _dims, layout in splits:
                got[whole] = np.concatenate([got.pop(boxes), got.pop(scores)], axis=1 if layout == "v8" else 2)
            for output, want in zip(sessions[0].get_outputs(), sessions[0].run(None, feeds)):
                worst = max(worst, float(np.max(np.abs(np.asarray(want, np.float64) - got[output.name]))))
                largest = max(largest, float(np.max(np.abs(want))))
    for line in said:
        print(f"rewrites: {line}")
    print(f"outputs: {' '.join(names)}")
    print(f"max_abs_diff {worst!r}")
    print(f"max_abs {largest!r}")
