#!/usr/bin/env python3
"""Compares qnn's quantize/dequantize kernels with their peers in one run.

Peers: onnxruntime's QuantizeLinear / DequantizeLinear (MLAS kernels, one thread) and the
same formula in numpy. For 224x224x3 and 640x640x3 inputs and u8/i8/u16/i16 it prints each
implementation's median time per call, a memcpy of the same f32 buffer as the physical
reference, and how many elements differ from qnn's result (ties included; NaN is excluded
from the comparison and reported apart: qnn maps it to the zero point, the peers do not).

    python3 -m venv venv && venv/bin/pip install onnxruntime onnx numpy
    venv/bin/python native/hexagon_tpu_nif/qnn/bench/quant_peers.py

It builds and runs `cargo run --release -p qnn --example quant_compare`.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

CRATE = Path(__file__).resolve().parents[2]
TYPES = {
    # name: (numpy dtype, onnx type, scale, zero point)
    "u8": (np.uint8, TensorProto.UINT8, 1.0 / 128.0, 128),
    "i8": (np.int8, TensorProto.INT8, 1.0 / 64.0, -3),
    "u16": (np.uint16, TensorProto.UINT16, 1.0 / 8192.0, 32768),
    "i16": (np.int16, TensorProto.INT16, 1.0 / 16384.0, 5),
}
SHAPES = {"224x224x3": (1, 224, 224, 3), "640x640x3": (1, 640, 640, 3)}


def median_us(fn, iterations):
    samples = []
    for _ in range(iterations):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return samples[len(samples) // 2] * 1e6


def session(op, in_type, out_type, scale, zero_point, zp_type):
    x = helper.make_tensor_value_info("x", in_type, None)
    y = helper.make_tensor_value_info("y", out_type, None)
    inits = [
        helper.make_tensor("scale", TensorProto.FLOAT, [], [scale]),
        helper.make_tensor("zp", zp_type, [], [zero_point]),
    ]
    graph = helper.make_graph([helper.make_node(op, ["x", "scale", "zp"], ["y"])], op, [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def inputs(shape, scale, lo, hi, rng):
    """Random values over the type's range and beyond, with a share of exact ties."""
    count = int(np.prod(shape))
    span_lo, span_hi = (lo - 8) * scale, (hi + 8) * scale
    x = rng.uniform(span_lo, span_hi, count).astype(np.float32)
    ties = rng.integers(lo, hi, count // 10).astype(np.float32) + np.float32(0.5)
    x[: ties.size] = ties * np.float32(scale)  # exact: scale is a power of two
    rng.shuffle(x)
    return x.reshape(shape)


def ours(op, source, ty, scale, zero_point, iterations, workdir):
    src, dst = workdir / "in.bin", workdir / "out.bin"
    src.write_bytes(source.tobytes())
    exe = CRATE / "target" / "release" / "examples" / "quant_compare"
    out = subprocess.run(
        [str(exe), op, str(src), str(dst), ty, repr(scale), str(zero_point), str(iterations)],
        check=True, capture_output=True, text=True,
    )
    return float(out.stdout.strip()), dst.read_bytes()


def main():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "qnn", "--example", "quant_compare"],
                   cwd=CRATE, check=True)
    rng = np.random.default_rng(2026)
    print(f"onnxruntime {ort.__version__}, numpy {np.__version__}, one thread each; times are medians (µs per call)")
    header = f"{'op':<10} {'type':<4} {'shape':<10} {'qnn':>9} {'onnxrt':>9} {'numpy':>9} {'memcpy':>9} {'≠ onnxrt':>9} {'≠ numpy':>8}"
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for label, shape in SHAPES.items():
            iterations = 200 if np.prod(shape) < 500_000 else 40
            for ty, (np_type, onnx_type, scale, zp) in TYPES.items():
                info = np.iinfo(np_type)
                x = inputs(shape, scale, info.min, info.max, rng)
                copy_target = np.empty_like(x)
                memcpy = median_us(lambda: np.copyto(copy_target, x), iterations)

                q_sess = session("QuantizeLinear", TensorProto.FLOAT, onnx_type, scale, zp, onnx_type)
                ort_q = q_sess.run(None, {"x": x})[0]
                ort_us = median_us(lambda: q_sess.run(None, {"x": x}), iterations)
                np_fn = lambda: np.clip(np.rint(x / np.float32(scale)) + zp, info.min, info.max).astype(np_type)
                np_q = np_fn()
                np_us = median_us(np_fn, iterations)
                our_us, raw = ours("quantize", x, ty, scale, zp, iterations, workdir)
                our_q = np.frombuffer(raw, dtype=np_type).reshape(shape)
                print(f"{'quantize':<10} {ty:<4} {label:<10} {our_us:>9.1f} {ort_us:>9.1f} {np_us:>9.1f} {memcpy:>9.1f}"
                      f" {int(np.count_nonzero(our_q != ort_q)):>9} {int(np.count_nonzero(our_q != np_q)):>8}")

                d_sess = session("DequantizeLinear", onnx_type, TensorProto.FLOAT, scale, zp, onnx_type)
                ort_d = d_sess.run(None, {"x": our_q})[0]
                ort_us = median_us(lambda: d_sess.run(None, {"x": our_q}), iterations)
                np_fn = lambda: ((our_q.astype(np.int32) - zp).astype(np.float32) * np.float32(scale))
                np_d = np_fn()
                np_us = median_us(np_fn, iterations)
                our_us, raw = ours("dequantize", our_q, ty, scale, zp, iterations, workdir)
                our_d = np.frombuffer(raw, dtype=np.float32).reshape(shape)
                print(f"{'dequantize':<10} {ty:<4} {label:<10} {our_us:>9.1f} {ort_us:>9.1f} {np_us:>9.1f} {memcpy:>9.1f}"
                      f" {int(np.count_nonzero(our_d != ort_d)):>9} {int(np.count_nonzero(our_d != np_d)):>8}")

        # NaN, apart: the documented difference.
        nan = np.array([np.nan, -np.nan, np.inf, -np.inf], dtype=np.float32)
        q_sess = session("QuantizeLinear", TensorProto.FLOAT, TensorProto.UINT8, 1.0 / 128.0, 128, TensorProto.UINT8)
        _, raw = ours("quantize", nan, "u8", 1.0 / 128.0, 128, 1, workdir)
        print(f"u8 (scale 1/128, zero point 128) of [NaN, -NaN, +Inf, -Inf]: qnn {list(raw)},"
              f" onnxruntime {q_sess.run(None, {'x': nan})[0].tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
