#!/usr/bin/env python3
"""Makes the context binary that qnn_tests/tests/real_stack.rs reads, with ORT's QNN EP.

Usage: PYTHON real_stack_model.py OUT_DIR

PYTHON is a venv's python with onnxruntime-qnn (and onnx, numpy) installed; the
script needs nothing else. It writes into OUT_DIR:

  real_stack_qdq.onnx      the QDQ model, built with onnx.helper
  real_stack_ctx.onnx      ORT's EPContext model (names the .bin below)
  real_stack_ctx_qnn.bin   the QNN context binary for the QCS6490 (htp_arch 68,
                           soc_model 35), compiled with CPU fallback disabled
  real_stack.graph         the QNN graph name, as ORT's EPContext node records it

The model, with uint8 graph I/O so the QNN tensors keep exactly these encodings
(QNN stores real = (q + offset) * scale, offset = -zero_point):

  a   u8 [1, 16]   scale 0.02   zero point 128 ─┐
                                                 ├─ Add ── sum  u8 [1, 16]  scale 0.04  zero point 128
  b   u8 [1, 16]   scale 0.02   zero point 128 ─┘    └─ Relu ── relu u8 [1, 16] scale 0.02 zero point 0

The Rust test asserts these names, shapes, dtypes and encodings as read back by
Qualcomm's libQnnSystem.so (x86-64 natively, aarch64 under qemu). Nothing this
script writes is committed: it is made at CI time.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = [1, 16]
IN_SCALE, IN_ZP = 0.02, 128
SUM_SCALE, SUM_ZP = 0.04, 128
RELU_SCALE, RELU_ZP = 0.02, 0
HTP_OPTIONS = {"backend_type": "htp", "htp_arch": "68", "soc_model": "35"}


def qparams(name, scale, zero_point):
    return [
        numpy_helper.from_array(np.array(scale, dtype=np.float32), f"{name}_scale"),
        numpy_helper.from_array(np.array(zero_point, dtype=np.uint8), f"{name}_zp"),
    ]


def build_model():
    nodes = [
        helper.make_node("DequantizeLinear", ["a", "in_scale", "in_zp"], ["a_f"]),
        helper.make_node("DequantizeLinear", ["b", "in_scale", "in_zp"], ["b_f"]),
        helper.make_node("Add", ["a_f", "b_f"], ["sum_f"]),
        helper.make_node("QuantizeLinear", ["sum_f", "sum_scale", "sum_zp"], ["sum"]),
        helper.make_node("DequantizeLinear", ["sum", "sum_scale", "sum_zp"], ["sum_dq"]),
        helper.make_node("Relu", ["sum_dq"], ["relu_f"]),
        helper.make_node("QuantizeLinear", ["relu_f", "relu_scale", "relu_zp"], ["relu"]),
    ]
    initializers = (
        qparams("in", IN_SCALE, IN_ZP)
        + qparams("sum", SUM_SCALE, SUM_ZP)
        + qparams("relu", RELU_SCALE, RELU_ZP)
    )
    graph = helper.make_graph(
        nodes,
        "real_stack",
        [helper.make_tensor_value_info(n, TensorProto.UINT8, SHAPE) for n in ("a", "b")],
        [helper.make_tensor_value_info(n, TensorProto.UINT8, SHAPE) for n in ("sum", "relu")],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def compile_context(qdq_path, ctx_path):
    import onnxruntime as ort
    import onnxruntime_qnn as oq

    ort.register_execution_provider_library("QNNExecutionProvider", oq.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
    if not devices:
        sys.exit("error: onnxruntime lists no QNNExecutionProvider device")
    so = ort.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", "0")
    so.add_session_config_entry("ep.context_file_path", ctx_path)
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    so.add_provider_for_devices(devices[:1], HTP_OPTIONS)
    ort.InferenceSession(qdq_path, so)


def ep_context_node(ctx_path):
    nodes = [n for n in onnx.load(ctx_path).graph.node if n.op_type == "EPContext"]
    if len(nodes) != 1:
        sys.exit(f"error: {ctx_path} has {len(nodes)} EPContext nodes, expected 1")
    attrs = {a.name: helper.get_attribute_value(a) for a in nodes[0].attribute}
    return nodes[0], attrs


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    qdq_path = os.path.join(out, "real_stack_qdq.onnx")
    ctx_path = os.path.join(out, "real_stack_ctx.onnx")
    bin_path = os.path.join(out, "real_stack_ctx_qnn.bin")
    for stale in (ctx_path, bin_path):
        if os.path.exists(stale):
            os.remove(stale)

    onnx.save(build_model(), qdq_path)
    compile_context(qdq_path, ctx_path)

    node, attrs = ep_context_node(ctx_path)
    cache = attrs.get("ep_cache_context", b"")
    cache = cache.decode() if isinstance(cache, bytes) else str(cache)
    if os.path.join(out, cache) != bin_path or not os.path.isfile(bin_path):
        sys.exit(f"error: ORT wrote the context to {cache!r}, expected {bin_path}")
    with open(os.path.join(out, "real_stack.graph"), "w") as f:
        f.write(node.name + "\n")
    print(f"{bin_path}: {os.path.getsize(bin_path)} bytes, graph {node.name}")


if __name__ == "__main__":
    main()
