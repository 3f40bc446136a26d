"""Test models for the :qnn_host suite, and ONNX Runtime's reference runs of them.

Run with the venv of `mix hexagon_tpu.compile` (test/support/qnn_host.ex calls it):

    python onnx_models.py model NAME DIR      writes DIR/NAME.onnx (float or QDQ),
                                              DIR/calibration/ and DIR/inputs/ (<input>_<n>.npy)
    python onnx_models.py run MODEL.onnx INPUTS OUT --backend cpu|qnn [--raw] [--lib-dir D]
                                              runs MODEL on every sample in INPUTS, writing
                                              OUT/<output index>_<n>.npy, the inputs it fed
                                              (OUT/in<input index>_<n>.npy) and, for a QDQ
                                              model, each output's scale (OUT/scale<index>.npy)
    python onnx_models.py weight-scales QDQ.onnx
                                              each quantized weight: its scale count and spread
    python onnx_models.py quantize MODEL.onnx CALIBRATION OUT.onnx
                                              a QDQ model made outside the compile task
    python onnx_models.py prepared-diff MODEL.onnx --input-shape NAME=DxD... [--low L --high H]
                                  [--split]   the compile task's rewrites of a float model
                                              against the model as shipped (ORT's CPU EP;
                                              onnx_rewrites.py), heads split with --split
    python onnx_models.py ort-compile QDQ.onnx DIR --lib-dir D
                                              ONNX Runtime's own compile (the recipe of
                                              real-qnn-stack.md): DIR/<stem>_ctx.onnx + .bin

Every model is small and seeded: the same bytes on every run. `--raw` runs only the EPContext
node of an EP-context model, so its inputs and outputs are the QNN graph's own (quantized)
tensors.
"""

import argparse
import os
import sys
import zlib

import numpy as np
import onnx
import onnx_rewrites
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]
SAMPLES = {"calibration": 8, "inputs": 2}


def stem(name):
    import re

    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def save(model, path):
    # IR 8 at most (helper.make_model writes the newest); an old export keeps its own
    model.ir_version = min(model.ir_version, 8)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def init(rng, name, shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    scale = scale if scale is not None else np.sqrt(2.0 / fan_in)
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def value(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


# ----------------------------------------------------------------------------- the models


def float_io(rng):
    """Conv 3x3 -> Relu -> Conv 1x1 -> Sigmoid on [1, 3, 8, 8]: a float model, float graph I/O."""
    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2"),
        helper.make_node("Sigmoid", ["c2"], ["probs"], name="sigmoid"),
    ]
    inits = [init(rng, "w1", [8, 3, 3, 3]), init(rng, "b1", [8], 0.1), init(rng, "w2", [4, 8, 1, 1]), init(rng, "b2", [4], 0.1)]
    graph = helper.make_graph(nodes, "float_io", [value("image", [1, 3, 8, 8])], [value("probs", [1, 4, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def u8_io(rng):
    """A hand-written QDQ model with uint8 graph I/O: y = q(relu(dq(x) * c + d))."""

    def q(name, scale, zp):
        return [
            helper.make_tensor(name + "_scale", TensorProto.FLOAT, [], [scale]),
            helper.make_tensor(name + "_zp", TensorProto.UINT8, [], [zp]),
        ]

    c = rng.uniform(0.5, 2.0, size=[1, 16]).astype(np.float32)
    d = rng.uniform(-1.0, 1.0, size=[1, 16]).astype(np.float32)
    c_scale, d_scale = float(c.max() / 255), float(2 / 255)
    consts = [
        numpy_helper.from_array(np.round(c / c_scale).astype(np.uint8), "c_q"),
        numpy_helper.from_array((np.round(d / d_scale) + 128).astype(np.uint8), "d_q"),
        helper.make_tensor("c_q_scale", TensorProto.FLOAT, [], [c_scale]),
        helper.make_tensor("c_q_zp", TensorProto.UINT8, [], [0]),
        helper.make_tensor("d_q_scale", TensorProto.FLOAT, [], [d_scale]),
        helper.make_tensor("d_q_zp", TensorProto.UINT8, [], [128]),
    ]
    consts += q("x", 0.02, 128) + q("m", 0.04, 128) + q("s", 0.05, 110) + q("y", 0.03, 0)
    dq = lambda i, o, p: helper.make_node("DequantizeLinear", [i, p + "_scale", p + "_zp"], [o], name="dq_" + o)  # noqa: E731
    qn = lambda i, o, p: helper.make_node("QuantizeLinear", [i, p + "_scale", p + "_zp"], [o], name="q_" + o)  # noqa: E731
    nodes = [
        dq("x", "x_f", "x"),
        dq("c_q", "c_f", "c_q"),
        dq("d_q", "d_f", "d_q"),
        helper.make_node("Mul", ["x_f", "c_f"], ["m"], name="mul"),
        qn("m", "m_q", "m"),
        dq("m_q", "m_f", "m"),
        helper.make_node("Add", ["m_f", "d_f"], ["s"], name="add"),
        qn("s", "s_q", "s"),
        dq("s_q", "s_f", "s"),
        helper.make_node("Relu", ["s_f"], ["r"], name="relu"),
        qn("r", "y", "y"),
    ]
    graph = helper.make_graph(
        nodes, "u8_io", [value("x", [1, 16], TensorProto.UINT8)], [value("y", [1, 16], TensorProto.UINT8)], consts
    )
    return helper.make_model(graph, opset_imports=OPSET), (0, 255)


def a16w8(rng):
    """Conv -> Tanh -> Conv -> Add (residual) on [1, 4, 8, 8], for 16-bit activations."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Tanh", ["c1"], ["t1"], name="tanh"),
        helper.make_node("Conv", ["t1", "w2", "b2"], ["c2"], name="conv2"),
        helper.make_node("Add", ["c2", "x"], ["y"], name="residual"),
    ]
    inits = [init(rng, "w1", [8, 4, 3, 3]), init(rng, "b1", [8], 0.1), init(rng, "w2", [4, 8, 1, 1]), init(rng, "b2", [4], 0.1)]
    graph = helper.make_graph(nodes, "a16w8", [value("x", [1, 4, 8, 8])], [value("y", [1, 4, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (-1.0, 1.0)


def per_channel_conv(rng):
    """A conv whose output channels' weights differ in magnitude by 1000x: only per-channel
    weight scales keep the small channels."""
    w = rng.standard_normal([6, 3, 3, 3]).astype(np.float32)
    w *= (10.0 ** np.linspace(-2, 1, 6)).astype(np.float32).reshape(6, 1, 1, 1)
    nodes = [
        helper.make_node("Conv", ["img", "w", "b"], ["c"], name="conv_pc", strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["out"], name="relu"),
    ]
    inits = [numpy_helper.from_array(w, "w"), init(rng, "b", [6], 0.01)]
    graph = helper.make_graph(nodes, "per_channel_conv", [value("img", [1, 3, 16, 16])], [value("out", [1, 6, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def graph_a(rng):
    """First graph of the two-graph binary: Conv -> Relu -> GlobalAveragePool."""
    nodes = [
        helper.make_node("Conv", ["pixels", "wa", "ba"], ["ca"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["ca"], ["ra"], name="relu_a"),
        helper.make_node("GlobalAveragePool", ["ra"], ["pooled"], name="pool_a"),
    ]
    inits = [init(rng, "wa", [8, 3, 3, 3]), init(rng, "ba", [8], 0.1)]
    graph = helper.make_graph(nodes, "graph_a", [value("pixels", [1, 3, 8, 8])], [value("pooled", [1, 8, 1, 1])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def graph_b(rng):
    """Second graph of the two-graph binary: MatMul -> Add -> Tanh on [1, 12]."""
    nodes = [
        helper.make_node("MatMul", ["features", "wb"], ["mb"], name="matmul_b"),
        helper.make_node("Add", ["mb", "bb"], ["ab"], name="add_b"),
        helper.make_node("Tanh", ["ab"], ["encoded"], name="tanh_b"),
    ]
    inits = [init(rng, "wb", [12, 6], 0.3), init(rng, "bb", [6], 0.1)]
    graph = helper.make_graph(nodes, "graph_b", [value("features", [1, 12])], [value("encoded", [1, 6])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (-1.0, 1.0)


def squeezenet(rng):
    """onnx's bundled light_squeezenet (SqueezeNet 1.1, weights left out) with seeded He-init
    weights, at 112x112, up to its pooled logits (without the final Softmax)."""
    path = os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light/light_squeezenet.onnx")
    src = onnx.load(path)
    shapes = {i.name: numpy_helper.to_array(i) for i in src.graph.initializer}
    # every weight and bias gets a seeded value: biases small and positive, weights He-scaled
    weights = {n.output[0]: [int(d) for d in shapes[n.input[0]]] for n in src.graph.node if n.op_type == "ConstantOfShape"}
    weights.update({name: list(a.shape) for name, a in shapes.items() if not name.endswith("__SHAPE")})
    (pooled,) = [n.output[0] for n in src.graph.node if n.op_type == "GlobalAveragePool"]
    inits, nodes = [], []
    for name, shape in sorted(weights.items()):
        if len(shape) == 1:
            inits.append(numpy_helper.from_array(rng.uniform(0.0, 0.1, size=shape).astype(np.float32), name))
        else:
            inits.append(init(rng, name, shape))
    for node in src.graph.node:
        if node.op_type == "ConstantOfShape":
            continue
        elif node.op_type == "Dropout":
            nodes.append(helper.make_node("Identity", [node.input[0]], [node.output[0]], name=node.name))
        elif node.op_type == "Softmax":
            # left out: over 1000 classes of random weights, u8 probabilities are nearly all 0,
            # and a comparison of zeros shows little; the pooled logits are the output
            continue
        else:
            nodes.append(node)
    graph = helper.make_graph(
        nodes, "squeezenet", [value("data_0", [1, 3, 112, 112])], [value(pooled, [1, 1000, 1, 1])], inits
    )
    # Conv, Relu, MaxPool, Concat and GlobalAveragePool mean the same in opset 9 and 17
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def resnet50(rng):
    """onnx's bundled light_resnet50 (ResNet-50 v1 from Caffe2, 224x224; its weights are
    ConstantOfShape nodes filling 0.02, the "light" models' stand-in) with seeded weights
    instead: He-scaled conv and FC weights, batch norms that keep activations near unit scale.
    Sum becomes Add (the HTP has no Sum) and the final Softmax is left out (logits out). A
    big binary (about 26 MB), slow to execute on the emulator: the exit tests' model."""
    path = os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light/light_resnet50.onnx")
    src = onnx.load(path)
    shapes = {i.name: numpy_helper.to_array(i) for i in src.graph.initializer}
    weights = {n.output[0]: [int(d) for d in shapes[n.input[0]]] for n in src.graph.node if n.op_type == "ConstantOfShape"}
    # the float initializers are weights too; the int64 ones (Reshape's shape) stay as they are
    inits = [numpy_helper.from_array(a, n) for n, a in shapes.items() if a.dtype == np.int64 and not n.endswith("__SHAPE")]
    weights.update({n: list(a.shape) for n, a in shapes.items() if a.dtype == np.float32})
    nodes = []
    for name, shape in sorted(weights.items()):
        if name.endswith("_bn_s_0"):
            data = rng.uniform(0.5, 1.0, size=shape)
        elif name.endswith("_bn_b_0") or name.endswith("_bn_rm_0"):
            data = rng.uniform(-0.1, 0.1, size=shape)
        elif name.endswith("_bn_riv_0"):
            data = rng.uniform(0.9, 1.1, size=shape)
        elif len(shape) == 1:
            data = rng.uniform(0.0, 0.1, size=shape)
        else:
            inits.append(init(rng, name, shape))
            continue
        inits.append(numpy_helper.from_array(data.astype(np.float32), name))
    for node in src.graph.node:
        if node.op_type in ("ConstantOfShape", "Softmax"):
            continue
        elif node.op_type == "Sum":
            nodes.append(helper.make_node("Add", list(node.input), list(node.output), name=node.output[0] + "_add"))
        else:
            nodes.append(node)
    (logits,) = [n.output[0] for n in src.graph.node if n.op_type == "Gemm"]
    graph = helper.make_graph(
        nodes, "resnet50", [value("gpu_0/data_0", [1, 3, 224, 224])], [value(logits, [1, 1000])], inits
    )
    # Conv, BatchNormalization (inference), Relu, MaxPool, AveragePool, Reshape and Gemm mean
    # the same in opset 9 and 17
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def mlp(rng):
    """Gemm -> Sigmoid -> Gemm -> Softmax on [1, 20]; the test quantizes it to QDQ first."""
    nodes = [
        helper.make_node("Gemm", ["v", "w1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("Sigmoid", ["h"], ["hs"], name="sigmoid"),
        helper.make_node("Gemm", ["hs", "w2", "b2"], ["logits"], name="fc2", transB=1),
        helper.make_node("Softmax", ["logits"], ["p"], name="softmax", axis=1),
    ]
    inits = [init(rng, "w1", [32, 20]), init(rng, "b1", [32], 0.1), init(rng, "w2", [5, 32]), init(rng, "b2", [5], 0.1)]
    graph = helper.make_graph(nodes, "mlp", [value("v", [1, 20])], [value("p", [1, 5])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (-1.0, 1.0)


def unsupported(rng):
    """Mod has no HTP implementation: the compile must fail naming it."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Mod", ["r", "k"], ["y"], name="the_mod_node", fmod=1),
    ]
    inits = [numpy_helper.from_array(np.full([1, 8], 0.7, np.float32), "k")]
    graph = helper.make_graph(nodes, "unsupported", [value("x", [1, 8])], [value("y", [1, 8])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def fp16(rng):
    """A float16 model: v68 has no fp16."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu16")]
    graph = helper.make_graph(nodes, "fp16", [value("x", [1, 8], TensorProto.FLOAT16)], [value("y", [1, 8], TensorProto.FLOAT16)])
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def const(rng, name, shape, scale=None):
    """A weight as exporters write it: a Constant node, not an initializer."""
    return helper.make_node("Constant", [], [name], name=name + "_const", value=init(rng, name, shape, scale))


def constant_weights(rng):
    """Weights as Constant nodes (paddle2onnx, TFLite converters): Conv -> Relu -> depthwise
    Conv -> Sigmoid on [1, 3, 16, 16], two outputs of different shapes (a paddle-style name
    first) to tell them apart by shape."""
    nodes = [
        const(rng, "w1", [8, 3, 3, 3]),
        const(rng, "b1", [8], 0.1),
        const(rng, "dw", [8, 1, 3, 3]),
        const(rng, "db", [8], 0.1),
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], name="p2o.Conv.0", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="p2o.Relu.0"),
        helper.make_node("Conv", ["r1", "dw", "db"], ["c2"], name="p2o.Conv.1", pads=[1, 1, 1, 1], group=8),
        helper.make_node("Sigmoid", ["c2"], ["sigmoid_0.tmp_0"], name="p2o.Sigmoid.0"),
        helper.make_node("GlobalAveragePool", ["r1"], ["feat.1"], name="p2o.Pool.0"),
    ]
    outputs = [value("sigmoid_0.tmp_0", [1, 8, 16, 16]), value("feat.1", [1, 8, 1, 1])]
    graph = helper.make_graph(nodes, "constant_weights", [value("image", [1, 3, 16, 16])], outputs)
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def opset11(rng):
    """A small float model as older exporters write it: opset 11, every constant (weights, Clip's
    bounds) a Constant node."""
    nodes = [
        const(rng, "w", [4, 2, 3, 3]),
        const(rng, "b", [4], 0.1),
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Clip", ["r", "lo", "hi"], ["k"], name="clip"),
        helper.make_node("Sigmoid", ["k"], ["y"], name="sigmoid"),
    ]
    nodes[4:4] = [
        helper.make_node("Constant", [], ["lo"], name="lo_const", value=helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0])),
        helper.make_node("Constant", [], ["hi"], name="hi_const", value=helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0])),
    ]
    graph = helper.make_graph(nodes, "opset11", [value("x", [1, 2, 8, 8])], [value("y", [1, 4, 8, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), (-1.0, 1.0)


def dynamic_input(rng):
    """Dynamic batch, height and width: compiled with --input-shape x=1x3x12x20."""
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["out"], name="relu"),
    ]
    inits = [init(rng, "w", [4, 3, 3, 3]), init(rng, "b", [4], 0.1)]
    graph = helper.make_graph(
        nodes, "dynamic_input", [value("x", ["batch", 3, "height", "width"])], [value("out", ["batch", 4, "height", "width"])], inits
    )
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def with_metadata(rng):
    """float_io's graph with one metadata_props entry (any made ORT 1.32's QNN pre-processing fail)."""
    model, span = float_io(rng)
    helper.set_model_props(model, {"author": "hexagon_tpu tests"})
    return model, span


def many_unsupported(rng):
    """Twelve nodes the HTP refuses (Mod), between supported ones: each must be named."""
    nodes, last = [helper.make_node("Relu", ["x"], ["r0"], name="relu0")], "r0"
    for i in range(12):
        nodes.append(helper.make_node("Mod", [last, "k"], [f"m{i}"], name=f"mod_{i}", fmod=1))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i + 1}"], name=f"relu{i + 1}"))
        last = f"r{i + 1}"
    nodes[-1].output[0] = "y"
    inits = [numpy_helper.from_array(np.full([1, 8], 0.7, np.float32), "k")]
    graph = helper.make_graph(nodes, "many_unsupported", [value("x", [1, 8])], [value("y", [1, 8])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


# Models as exporters wrote them that the compile task once refused (issue 33's failing shapes):
# test/qnn_host_compile_test.exs compiles each with the option it names.


def shared_symbolic(rng):
    """PaddleOCR's direction classifier's input: [-1, 3, '?', '?'], both spatial dimensions one
    symbolic name; Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax.
    --input-shape x=1x3x12x20 must fix them by position."""
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="pool"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc", "fb"], ["l"], name="fc", transB=1),
        helper.make_node("Softmax", ["l"], ["probs"], name="softmax", axis=1),
    ]
    inits = [init(rng, "w", [8, 3, 3, 3]), init(rng, "b", [8], 0.1), init(rng, "fc", [4, 8], 1.0), init(rng, "fb", [4], 0.1)]
    graph = helper.make_graph(nodes, "shared_symbolic", [value("x", [-1, 3, "?", "?"])], [value("probs", [-1, 4])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def old_export(rng):
    """An old PyTorch export (opset 9, IR 4): a fixed input [10, 3, 8, 8] named 'input.1' that its
    application rewrites at load time, every initializer also listed as a graph input, nodes
    unnamed, and a BatchNormalization whose parameters are thus inputs. Compiled with
    --input-shape input.1=1x3x12x20."""
    nodes = [
        helper.make_node("Conv", ["input.1", "0.weight"], ["7"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["7", "1.weight", "1.bias", "1.running_mean", "1.running_var"], ["8"]),
        helper.make_node("Relu", ["8"], ["9"]),
        helper.make_node("Conv", ["9", "3.weight", "3.bias"], ["10"]),
    ]
    inits = [
        init(rng, "0.weight", [8, 3, 3, 3]),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, [8]).astype(np.float32), "1.weight"),
        numpy_helper.from_array(rng.uniform(-0.2, 0.2, [8]).astype(np.float32), "1.bias"),
        numpy_helper.from_array(rng.uniform(-0.1, 0.1, [8]).astype(np.float32), "1.running_mean"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, [8]).astype(np.float32), "1.running_var"),
        init(rng, "3.weight", [4, 8, 1, 1]),
        init(rng, "3.bias", [4], 0.1),
    ]
    inputs = [value("input.1", [10, 3, 8, 8])] + [value(i.name, list(i.dims)) for i in inits]
    graph = helper.make_graph(nodes, "torch-jit-export", inputs, [value("10", [10, 4, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    return model, (0.0, 1.0)


def computed_clip(rng):
    """A mel front end's top-dB clamp: levels in dB (the input times 130: 0 to 130 dB),
    Clip(db, ReduceMax(db) - 80), then a 1x1 Conv. The Clip's minimum is computed: the task
    rewrites it as Max. On uniform inputs the clamp holds about 40% of the values."""
    nodes = [
        helper.make_node("Mul", ["x", "span"], ["db"], name="to_db"),
        helper.make_node("ReduceMax", ["db"], ["top"], name="top", keepdims=0),
        helper.make_node("Sub", ["top", "range"], ["floor"], name="floor"),
        helper.make_node("Clip", ["db", "floor"], ["clamped"], name="top_db"),
        helper.make_node("Conv", ["clamped", "w", "b"], ["y"], name="conv"),
    ]
    inits = [
        numpy_helper.from_array(np.array(130.0, np.float32), "span"),
        numpy_helper.from_array(np.array(80.0, np.float32), "range"),
        init(rng, "w", [4, 1, 1, 1], 0.05),
        init(rng, "b", [4], 0.1),
    ]
    graph = helper.make_graph(nodes, "computed_clip", [value("x", [1, 1, 16, 20])], [value("y", [1, 4, 16, 20])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (0.0, 1.0)


def constant_if(rng):
    """An If on the input's height (16: Sigmoid, else Tanh) before a Conv, the input dynamic: once
    --input-shape x=1x3x16x16 fixes it, the condition is a constant and the If is inlined."""
    then_graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["t"], name="then_sigmoid")], "then", [], [value("t", None)])
    else_graph = helper.make_graph([helper.make_node("Tanh", ["x"], ["e"], name="else_tanh")], "else", [], [value("e", None)])
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "two"], ["height"], name="height", axis=0),
        helper.make_node("Equal", ["height", "sixteen"], ["is16"], name="is16"),
        helper.make_node("If", ["is16"], ["a"], name="by_height", then_branch=then_graph, else_branch=else_graph),
        helper.make_node("Conv", ["a", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1]),
    ]
    inits = [
        numpy_helper.from_array(np.array(2, np.int64), "two"),
        numpy_helper.from_array(np.array(16, np.int64), "sixteen"),
        init(rng, "w", [4, 3, 3, 3]),
        init(rng, "b", [4], 0.1),
    ]
    graph = helper.make_graph(nodes, "constant_if", [value("x", [1, 3, "h", "w"])], [value("y", [1, 4, "h", "w"])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (-1.0, 1.0)


def relu_input(rng):
    """A Relu reading the graph input (a network that starts with its activation): ORT's
    quantizer quantizes a Relu through its output only, and left this one float, which v68
    cannot run; the task gives its input the output's Q/DQ."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w"], ["y"], name="mm"),
    ]
    inits = [init(rng, "w", [8, 4], 0.5)]
    graph = helper.make_graph(nodes, "relu_input", [value("x", [1, 8])], [value("y", [1, 4])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (-1.0, 1.0)


def float_op_qdq(rng):
    """A QDQ model (compiled as it is) whose Relu reads the float graph input before a
    quantized MatMul: a float op, which v68 cannot run (QNN's 3110)."""
    w = np.clip(np.round(rng.standard_normal([8, 4]) * 40), -127, 127).astype(np.int8)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"], name="r_q"),
        helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["rd"], name="r_dq"),
        helper.make_node("DequantizeLinear", ["wq", "ws"], ["wd"], name="w_dq"),
        helper.make_node("MatMul", ["rd", "wd"], ["m"], name="mm"),
        helper.make_node("QuantizeLinear", ["m", "ys", "z"], ["mq"], name="m_q"),
        helper.make_node("DequantizeLinear", ["mq", "ys", "z"], ["y"], name="m_dq"),
    ]
    inits = [
        numpy_helper.from_array(np.array(1 / 255, np.float32), "s"),
        numpy_helper.from_array(np.array(0, np.uint8), "z"),
        numpy_helper.from_array(w, "wq"),
        numpy_helper.from_array(np.array(1 / 127, np.float32), "ws"),
        numpy_helper.from_array(np.array(8 / 255, np.float32), "ys"),
    ]
    graph = helper.make_graph(nodes, "float_op_qdq", [value("x", [1, 8])], [value("y", [1, 4])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (-1.0, 1.0)


def lstm(rng):
    """A bidirectional LSTM over a [1, 8, 16] sequence (an OCR recognizer's neck): the HTP's
    graph finalize fails on it (QNN error 1002) and the refusal must name the node."""
    hidden = 16
    nodes = [
        helper.make_node("Transpose", ["x"], ["seq"], name="to_time_major", perm=[1, 0, 2]),
        helper.make_node("LSTM", ["seq", "W", "R", "B"], ["h"], name="bilstm", hidden_size=hidden, direction="bidirectional"),
        helper.make_node("Transpose", ["h"], ["ht"], name="to_batch_major", perm=[2, 0, 1, 3]),
        helper.make_node("Reshape", ["ht", "flat"], ["y"], name="merge_directions"),
    ]
    inits = [
        init(rng, "W", [2, 4 * hidden, 16], 0.2),
        init(rng, "R", [2, 4 * hidden, hidden], 0.2),
        init(rng, "B", [2, 8 * hidden], 0.1),
        numpy_helper.from_array(np.array([1, 8, 2 * hidden], np.int64), "flat"),
    ]
    graph = helper.make_graph(nodes, "lstm", [value("x", [1, 8, 16])], [value("y", [1, 8, 2 * hidden])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (-1.0, 1.0)


def data_if(rng):
    """A wake-word model's verifier: an If on the first stage's score (data-dependent: the
    HTP runs no control flow), then or else a second Gemm; ORT leaves the whole graph to the
    CPU and writes no EP-context model."""
    then_graph = helper.make_graph(
        [helper.make_node("Gemm", ["h", "w2", "b2"], ["t"], name="verify", transB=1)], "then", [], [value("t", None)]
    )
    else_graph = helper.make_graph([helper.make_node("Identity", ["zero"], ["e"], name="skip")], "else", [], [value("e", None)])
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="stage1", transB=1),
        helper.make_node("ReduceMax", ["h"], ["top"], name="top", keepdims=0),
        helper.make_node("Greater", ["top", "half"], ["sure"], name="sure"),
        helper.make_node("If", ["sure"], ["y"], name="verify_if_sure", then_branch=then_graph, else_branch=else_graph),
    ]
    inits = [
        init(rng, "w1", [4, 8]),
        init(rng, "b1", [4], 0.1),
        init(rng, "w2", [1, 4]),
        init(rng, "b2", [1], 0.1),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
        numpy_helper.from_array(np.zeros([1, 1], np.float32), "zero"),
    ]
    graph = helper.make_graph(nodes, "data_if", [value("x", [1, 8])], [value("y", [1, 1])], inits)
    return helper.make_model(graph, opset_imports=OPSET), (-1.0, 1.0)


def custom_op(rng):
    """A node a converter left as a custom op (tf2onnx's TFLite path leaves TFL_* ops in the
    'ai.onnx.converters.tensorflow' domain), between two supported ones: refused by name."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("TFL_HARD_SWISH", ["r"], ["h"], name="hard_swish", domain="ai.onnx.converters.tensorflow"),
        helper.make_node("Sigmoid", ["h"], ["y"], name="sigmoid"),
    ]
    graph = helper.make_graph(nodes, "custom_op", [value("x", [1, 8])], [value("y", [1, 8])])
    opsets = OPSET + [helper.make_opsetid("ai.onnx.converters.tensorflow", 1)]
    return helper.make_model(graph, opset_imports=opsets), (0.0, 1.0)


# The sample shapes of inputs whose shape the model leaves dynamic (or declares wrongly).
SAMPLE_SHAPES = {
    "dynamic_input": {"x": [1, 3, 12, 20]},
    "shared_symbolic": {"x": [1, 3, 12, 20]},
    "old_export": {"input.1": [1, 3, 12, 20]},
    "constant_if": {"x": [1, 3, 16, 16]},
}


MODELS = {
    f.__name__: f
    for f in [float_io, u8_io, a16w8, per_channel_conv, graph_a, graph_b, squeezenet, resnet50, mlp, unsupported, fp16]
    + [constant_weights, opset11, dynamic_input, with_metadata, many_unsupported]
    + [shared_symbolic, old_export, computed_clip, constant_if, relu_input, float_op_qdq, lstm, custom_op, data_if]
}


# Models of the quantization-quality tests (test/qnn_host_quality_test.exs).


def outlier_channel(rng):
    """Conv -> Conv on [1, 4, 8, 8] whose middle activation has one channel 300x the others (an
    outlier channel, as real networks have), which the second conv ignores: 8-bit activation
    steps of the whole range swamp the small channels that make the output; 16-bit ones keep them."""
    return outlier_convs(rng, "outlier_channel", 300.0, sign=lambda a: a), (-1.0, 1.0)


def outlier_positive(rng):
    """outlier_channel (its outlier 1000x) with non-negative weights, biases and inputs: `h` is never
    negative, so at 16 bits its zero point is 0, where the HTP's 16-bit offset (zero-point-offset)
    vanishes: u8 ruins the output, `h` alone at 16 bits mends it on the CPU and the HTP alike."""
    return outlier_convs(rng, "outlier_positive", 1000.0, sign=np.abs), (0.0, 1.0)


def outlier_convs(rng, name, outlier, sign):
    """conv1 (channel 0 `outlier` times the others; `sign` applied to its weights and bias) ->
    `h` -> conv2, which reads every channel of h but 0."""
    w1 = sign(rng.standard_normal([8, 4, 3, 3]).astype(np.float32)) * 0.25
    w1[0] *= outlier
    w2 = rng.standard_normal([4, 8, 1, 1]).astype(np.float32) * 0.5
    w2[:, 0] = 0.0
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["h"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["h", "w2", "b2"], ["y"], name="conv2"),
    ]
    inits = [
        numpy_helper.from_array(w1, "w1"),
        numpy_helper.from_array(sign(rng.standard_normal(8) * 0.1).astype(np.float32), "b1"),
        numpy_helper.from_array(w2, "w2"),
        init(rng, "b2", [4], 0.1),
    ]
    graph = helper.make_graph(nodes, name, [value("x", [1, 4, 8, 8])], [value("y", [1, 4, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=OPSET)


MODELS.update({f.__name__: f for f in [outlier_channel, outlier_positive]})
# the head splits' (test/support/onnx_rewrites.py)
MODELS.update(onnx_rewrites.MODELS)


def write_model(name, directory):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    model, (low, high) = MODELS[name](rng)
    os.makedirs(directory, exist_ok=True)
    save(model, os.path.join(directory, name + ".onnx"))
    inits = {i.name for i in model.graph.initializer}
    for kind, count in SAMPLES.items():
        sub = os.path.join(directory, kind)
        os.makedirs(sub, exist_ok=True)
        for v in model.graph.input:
            if v.name in inits:
                continue
            shape = SAMPLE_SHAPES.get(name, {}).get(v.name) or [d.dim_value for d in v.type.tensor_type.shape.dim]
            dtype = helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
            for n in range(count):
                if np.issubdtype(dtype, np.integer):
                    data = rng.integers(low, high, size=shape, endpoint=True).astype(dtype)
                else:
                    data = rng.uniform(low, high, size=shape).astype(dtype)
                np.save(os.path.join(sub, f"{stem(v.name)}_{n}.npy"), data)


# -------------------------------------------------------------------------- reference runs


def qnn_session(path, lib_dir, fallback, provider_options=None):
    import onnxruntime as ort
    import onnxruntime_qnn

    if "QNNExecutionProvider" not in [d.ep_name for d in ort.get_ep_devices()]:
        ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
    devs = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"][:1]
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "0" if fallback else "1")
    options = {"backend_path": os.path.join(lib_dir, "libQnnHtp.so"), **(provider_options or {})}
    so.add_provider_for_devices(devs, options)
    return ort.InferenceSession(path, so)


def profile(args):
    """One inference of an EP-context model on the emulator with the QNN EP's profiling at
    `--level`, written as ORT's CSV to `csv` (the events of the last QNN call: the execute)."""
    options = {"profiling_level": args.level, "profiling_file_path": args.csv}
    session = qnn_session(args.model, args.lib_dir, fallback=True, provider_options=options)
    feeds = {}
    for i in session.get_inputs():
        feeds[i.name] = np.load(os.path.join(args.inputs, f"{stem(i.name)}_0.npy"))
    session.run(None, feeds)


def raw_model(ctx_path, out_path):
    """Only the EPContext node of an EP-context model, with the QNN graph's own tensor types."""
    model = onnx.load(ctx_path, load_external_data=False)
    graph = model.graph
    types = {v.name: v for v in list(graph.input) + list(graph.output) + list(graph.value_info)}
    inits = {i.name: i for i in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    consumers = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, n)
    (ep,) = [n for n in graph.node if n.op_type == "EPContext"]

    def typed(name, node, shape_from):
        if name in types:
            return types[name]
        zp = inits[node.input[2]]
        shape = [d.dim_value for d in types[shape_from].type.tensor_type.shape.dim]
        return value(name, shape, zp.data_type)

    ins = [typed(i, producers.get(i), producers[i].input[0] if i in producers else i) for i in ep.input]
    outs = [typed(o, consumers.get(o), consumers[o].output[0] if o in consumers else o) for o in ep.output]
    raw = helper.make_graph([ep], "raw", ins, outs)
    raw_model = helper.make_model(raw, opset_imports=list(model.opset_import))
    raw_model.ir_version = model.ir_version
    onnx.save(raw_model, out_path)
    return out_path


def run(args):
    import onnxruntime as ort

    model_path = args.model
    # the sample file of each session input: for --raw, a QNN input made by a QuantizeLinear
    # is fed the quantized sample of the graph input that Q reads
    sources = {}
    if args.raw:
        model_path = raw_model(args.model, os.path.join(os.path.dirname(args.model), "raw_" + os.path.basename(args.model)))
        ctx = onnx.load(args.model, load_external_data=False)
        sources = {n.output[0]: n.input[0] for n in ctx.graph.node if n.op_type == "QuantizeLinear"}
    if args.backend == "qnn":
        # the EP-context model's graph I/O QuantizeLinear/DequantizeLinear run on ORT's CPU
        session = qnn_session(model_path, args.lib_dir, fallback=not args.raw)
    else:
        # The QDQ model as it is written (DequantizeLinear -> float op -> QuantizeLinear): with
        # ORT's graph optimizations on, the CPU fuses QDQ into its own int8 kernels, whose result
        # depends on the machine (on AVX2 without VNNI the u8s8 products saturate 16-bit sums:
        # 5 to 24 steps off on an AMD EPYC, where the unfused run stays within the steps that
        # test/qnn_host_test.exs states).
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    os.makedirs(args.out, exist_ok=True)
    n = 0
    while True:
        feeds = {}
        for i in session.get_inputs():
            path = os.path.join(args.inputs, f"{stem(sources.get(i.name, i.name))}_{n}.npy")
            if not os.path.exists(path):
                break
            feeds[i.name] = np.load(path)
        if len(feeds) != len(session.get_inputs()):
            break
        if args.raw:
            feeds = {k: quantize_like(session, k, v, args.model) for k, v in feeds.items()}
        for index, name in enumerate(i.name for i in session.get_inputs()):
            np.save(os.path.join(args.out, f"in{index}_{n}.npy"), feeds[name])
        for index, result in enumerate(session.run(None, feeds)):
            np.save(os.path.join(args.out, f"{index}_{n}.npy"), result)
        n += 1
    for index, scale in enumerate(output_scales(model_path, [o.name for o in session.get_outputs()])):
        np.save(os.path.join(args.out, f"scale{index}.npy"), np.float32(scale))
    if n == 0:
        sys.exit(f"no inputs for {model_path} in {args.inputs}")


def output_scales(model_path, outputs):
    """The scale of the DequantizeLinear (or QuantizeLinear) that makes each graph output."""
    model = onnx.load(model_path, load_external_data=False)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    producers = {o: n for n in model.graph.node for o in n.output}
    scales = []
    for name in outputs:
        node = producers.get(name)
        if node is None or node.op_type not in ("DequantizeLinear", "QuantizeLinear"):
            return []
        scales.append(float(inits[node.input[1]]))
    return scales


def quantize_like(session, name, data, ctx_path):
    """For --raw: quantizes a float sample with the ctx model's own QuantizeLinear parameters."""
    if data.dtype != np.float32:
        return data
    model = onnx.load(ctx_path, load_external_data=False)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    producers = [n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.output[0] == name]
    if not producers:
        return data  # a float QNN input (--io float)
    (node,) = producers
    scale, zp = inits[node.input[1]], inits[node.input[2]]
    info = np.iinfo(zp.dtype)
    return np.clip(np.round(data / scale) + zp.astype(np.int64), info.min, info.max).astype(zp.dtype)


def ort_compile(args):
    """real-qnn-stack.md's recipe, independent of priv/compile/hexagon_tpu_compile.py."""
    import onnxruntime as ort
    import onnxruntime_qnn

    ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
    devs = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
    name = os.path.splitext(os.path.basename(args.model))[0]
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", "0")
    so.add_session_config_entry("ep.context_file_path", os.path.join(args.out, name + "_ctx.onnx"))
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    so.add_provider_for_devices(devs[:1], {"backend_type": "htp", "htp_arch": "68", "soc_model": "35"})
    os.makedirs(args.out, exist_ok=True)
    ort.InferenceSession(args.model, so)


def quantize_qdq(args):
    """Quantizes a float model to QDQ (u8 activations, s8 per-channel weights) for a test
    that needs a QDQ model made outside the compile task."""
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    model = onnx.load(args.model)
    names = [i.name for i in model.graph.input]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.n = 0

        def get_next(self):
            paths = {k: os.path.join(args.calibration, f"{stem(k)}_{self.n}.npy") for k in names}
            if not all(os.path.exists(p) for p in paths.values()):
                return None
            self.n += 1
            return {k: np.load(p) for k, p in paths.items()}

    config = get_qnn_qdq_config(args.model, Reader(), activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
    quantize(args.model, args.out, config)


def weight_scales(args):
    """Prints `<weight> <number of scales> <largest / smallest scale>` for every quantized
    initializer of a QDQ model."""
    model = onnx.load(args.model)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] in inits and inits[node.input[0]].ndim > 1:
            scales = np.atleast_1d(inits[node.input[1]])
            print(node.input[0], scales.size, float(scales.max() / scales.min()))


def serve(args):
    """Times ORT's QNN EP `session.run` on the emulator for bench/versus_ort.exs: the first
    sample of `inputs`, one run per `run` line on stdin, each answered with its nanoseconds on
    stdout; the first run's output is written to `out` (raw little-endian f32). QNN and ORT may
    print on fd 1 as well: the answers go to a copy of it, fd 1 itself to /dev/null."""
    import time

    answers = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    session = qnn_session(args.model, args.lib_dir, fallback=True)
    feeds = {i.name: np.load(os.path.join(args.inputs, f"{stem(i.name)}_0.npy")) for i in session.get_inputs()}
    (output,) = session.run(None, feeds)
    np.asarray(output, dtype="<f4").tofile(args.out)
    os.write(answers, b"ready\n")
    for line in sys.stdin:
        if line.strip() != "run":
            break
        started = time.perf_counter_ns()
        session.run(None, feeds)
        os.write(answers, f"{time.perf_counter_ns() - started}\n".encode())


def tensor_figures(args):
    """One tensor of the float model against its QDQ model's, over the samples (`<input>_<n>.npy`
    in `inputs`, n from --samples), computed here without the compile task's code: prints
    `sqnr_db X` and `cosine_min X` (the layer debugger's figures, for test/qnn_host_layers_test.exs)."""
    import onnxruntime as ort

    def session(path, name):
        model = onnx.load(path)
        model.graph.output.append(onnx.ValueInfoProto(name=name))
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])

    f, q = session(args.float, args.name), session(args.qdq, args.qdq_name)
    signal = noise = 0.0
    cosine = 1.0
    for n in args.samples.split(","):
        feeds = {i.name: np.load(os.path.join(args.inputs, f"{stem(i.name)}_{n}.npy")) for i in f.get_inputs()}
        r = f.run([args.name], feeds)[0].astype(np.float64).ravel()
        v = q.run([args.qdq_name], feeds)[0].astype(np.float64).ravel()
        signal += float(r @ r)
        noise += float((r - v) @ (r - v))
        cosine = min(cosine, float(r @ v / (np.linalg.norm(r) * np.linalg.norm(v))))
    print(f"sqnr_db {float(10 * np.log10(signal / noise))!r}")
    print(f"cosine_min {cosine!r}")


def zero_point_offset(args):
    """What the HTP does to a 16-bit Conv output that the CPU does not: the QDQ model's tensor
    `name` made a graph output, its zero point set to each of --zero-points, run at input 0 on
    ORT's CPU and on the HTP emulator (the QDQ model compiled in memory). Prints one JSON line
    per zero point: the per-channel offset HTP - CPU in the tensor's steps (mean over the
    channel's values) and its spread (max - min)."""
    import json

    import onnx
    from onnx import numpy_helper

    model = onnx.load(args.qdq)
    graph = model.graph
    dq = next(n for n in graph.node if n.op_type == "DequantizeLinear" and n.input[0] == f"{args.name}_QuantizeLinear_Output")
    inits = {i.name: i for i in graph.initializer}
    scale = float(numpy_helper.to_array(inits[dq.input[1]]))
    dtype = numpy_helper.to_array(inits[dq.input[2]]).dtype
    graph.output.append(helper.make_tensor_value_info(dq.output[0], TensorProto.FLOAT, None))
    for zp in args.zero_points:
        inits[dq.input[2]].CopyFrom(numpy_helper.from_array(np.array(zp, dtype), dq.input[2]))
        path = os.path.join(args.work, f"zp{zp}.onnx")
        onnx.save(model, path)
        sessions = [
            ort_cpu_session(path),
            qnn_session(path, args.lib_dir, fallback=False, provider_options={"offload_graph_io_quantization": "0"}),
        ]
        feeds = {i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32) for i in sessions[0].get_inputs()}
        cpu, htp = (s.run([dq.output[0]], feeds)[0][0] for s in sessions)
        steps = ((htp - cpu) / scale).reshape(cpu.shape[0], -1)
        print(json.dumps({"zero_point": zp, "offsets": [round(float(c.mean()), 3) for c in steps], "spread": float((steps.max(1) - steps.min(1)).max())}))


def ort_cpu_session(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("model")
    m.add_argument("name", choices=sorted(MODELS))
    m.add_argument("dir")
    r = sub.add_parser("run")
    r.add_argument("model")
    r.add_argument("inputs")
    r.add_argument("out")
    r.add_argument("--backend", choices=["cpu", "qnn"], required=True)
    r.add_argument("--raw", action="store_true")
    r.add_argument("--lib-dir")
    p = sub.add_parser("profile")
    p.add_argument("model")
    p.add_argument("inputs")
    p.add_argument("csv")
    p.add_argument("--level", choices=["basic", "detailed"], default="detailed")
    p.add_argument("--lib-dir", required=True)
    v = sub.add_parser("serve")
    v.add_argument("model")
    v.add_argument("inputs")
    v.add_argument("out")
    v.add_argument("--lib-dir", required=True)
    c = sub.add_parser("ort-compile")
    c.add_argument("model")
    c.add_argument("out")
    q = sub.add_parser("quantize")
    q.add_argument("model")
    q.add_argument("calibration")
    q.add_argument("out")
    w = sub.add_parser("weight-scales")
    w.add_argument("model")
    t = sub.add_parser("tensor-figures")
    t.add_argument("float")
    t.add_argument("qdq")
    t.add_argument("inputs")
    t.add_argument("name")
    t.add_argument("qdq_name")
    t.add_argument("--samples", required=True)
    d = sub.add_parser("prepared-diff")
    d.add_argument("model")
    d.add_argument("--input-shape", action="append", required=True)
    d.add_argument("--low", type=float, default=0.0)
    d.add_argument("--high", type=float, default=1.0)
    d.add_argument("--split", action="store_true")
    z = sub.add_parser("zero-point-offset")
    z.add_argument("qdq")
    z.add_argument("name")
    z.add_argument("work")
    z.add_argument("--zero-points", type=int, nargs="+", required=True)
    z.add_argument("--lib-dir", required=True)
    args = parser.parse_args()
    if args.command == "model":
        write_model(args.name, args.dir)
    elif args.command == "run":
        run(args)
    elif args.command == "zero-point-offset":
        zero_point_offset(args)
    elif args.command == "profile":
        profile(args)
    elif args.command == "serve":
        serve(args)
    elif args.command == "ort-compile":
        ort_compile(args)
    elif args.command == "weight-scales":
        weight_scales(args)
    elif args.command == "tensor-figures":
        tensor_figures(args)
    elif args.command == "prepared-diff":
        onnx_rewrites.prepared_diff(args)
    else:
        quantize_qdq(args)


if __name__ == "__main__":
    main()
