#!/usr/bin/env python3
"""qnn's host kernels against memcpy and ONNX Runtime, interleaved in one run.

    python bench/kernels.py PATH/TO/quant_bench [--rounds N] [--only PREFIX]

`bench/run.sh kernels` builds `quant_bench` (the `qnn` crate's example) and runs this with the
QNN venv's Python (onnxruntime, onnx, numpy). `quant_bench --serve` times our kernels in Rust;
this process times ONNX Runtime's `QuantizeLinear` / `DequantizeLinear` / `Cast` (CPU execution
provider, one intra-op thread, sequential), inputs and outputs bound with `io_binding` to
preallocated OrtValues so neither side allocates. Each round measures, for every size and
kernel, our kernel then ORT's then memcpy, alternately; a figure is the best of its rounds and
each measurement the best of a few batches of at least MIN_MS ms.

GB/s counts the bytes of the f32 side only (the input of quantize and f32->f16, the output of
dequantize and f16->f32; memcpy's counts the f32 buffer it copies). "ORT call" is ORT's time
per call on a 3-element tensor (the fixed cost of a run through Python, included in its
figures); "/ORT-call" compares against ORT's time with that cost taken off, the stricter ratio.
This is a benchmark: it prints figures and asserts nothing.
"""

import argparse
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

SIZES = [(224, 224, 3), (640, 640, 3)]
MIN_MS = 20
BATCHES = 3

# name: (description, op, onnx type, numpy type, scale, zero point); the same parameters as
# quant_bench's (its offsets are these zero points negated).
PER_TENSOR = {
    "u8": (TensorProto.UINT8, np.uint8, 2.0 / 255.0, 128),
    "i8": (TensorProto.INT8, np.int8, 2.0 / 255.0, 0),
    "u16": (TensorProto.UINT16, np.uint16, 2.0 / 65535.0, 32768),
    "i16": (TensorProto.INT16, np.int16, 2.0 / 65535.0, 0),
}
KERNELS = [
    ("q_u8", "quantize f32->u8"),
    ("q_i8", "quantize f32->s8"),
    ("q_u16", "quantize f32->u16"),
    ("q_i16", "quantize f32->s16"),
    ("qaxis_u8", "quantize f32->u8 per-axis (c=3, last)"),
    ("dq_u8", "dequantize u8->f32"),
    ("dq_i8", "dequantize s8->f32"),
    ("dq_u16", "dequantize u16->f32"),
    ("dq_i16", "dequantize s16->f32"),
    ("dqaxis_u8", "dequantize u8->f32 per-axis (c=3, last)"),
    ("f32_f16", "f32->f16 (ORT: Cast)"),
    ("f16_f32", "f16->f32 (ORT: Cast)"),
]


def best_per_call(fn):
    """Seconds per call: calibrate a batch to at least MIN_MS, then the best of BATCHES."""
    fn()
    reps = 1
    while True:
        started = time.perf_counter()
        for _ in range(reps):
            fn()
        elapsed = time.perf_counter() - started
        if elapsed >= MIN_MS / 1000:
            break
        reps = int(reps * min(100, max(2, np.ceil(MIN_MS / 1000 / max(elapsed, 1e-9) * 1.2))))
    best = float("inf")
    for _ in range(BATCHES):
        started = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - started) / reps)
    return best


def make_session(node, inputs, outputs, inits):
    graph = helper.make_graph([node], "k", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def ort_kernel(kernel, shape, rng):
    """A callable that runs ORT's peer of `kernel` once on preallocated, bound buffers."""
    c = shape[-1]
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    axis = kernel.startswith(("qaxis", "dqaxis"))
    ty = kernel.rsplit("_", 1)[1]
    if kernel.startswith(("q_", "dq_", "qaxis", "dqaxis")):
        onnx_type, np_type, scale, zp = PER_TENSOR[ty]
        if axis:
            scales = [scale * (1.0 + i * 0.1) for i in range(c)]
            zps = [zp - i for i in range(c)]
            inits = [helper.make_tensor("s", TensorProto.FLOAT, [c], scales),
                     helper.make_tensor("z", onnx_type, [c], zps)]
            attrs = {"axis": len(shape) - 1}
        else:
            inits = [helper.make_tensor("s", TensorProto.FLOAT, [], [scale]),
                     helper.make_tensor("z", onnx_type, [], [zp])]
            attrs = {}
        quantize = kernel.startswith("q")
        op = "QuantizeLinear" if quantize else "DequantizeLinear"
        in_type, out_type = (TensorProto.FLOAT, onnx_type) if quantize else (onnx_type, TensorProto.FLOAT)
        node = helper.make_node(op, ["x", "s", "z"], ["y"], **attrs)
        if quantize:
            src, dst = x, np.empty(shape, np_type)
        else:
            info = np.iinfo(np_type)
            src = rng.integers(info.min, info.max, shape, endpoint=True).astype(np_type)
            dst = np.empty(shape, np.float32)
    else:
        to_half = kernel == "f32_f16"
        in_type, out_type = (TensorProto.FLOAT, TensorProto.FLOAT16) if to_half else (TensorProto.FLOAT16, TensorProto.FLOAT)
        node = helper.make_node("Cast", ["x"], ["y"], to=out_type)
        inits = []
        src = x if to_half else x.astype(np.float16)
        dst = np.empty(shape, np.float16 if to_half else np.float32)
    sess = make_session(node, [helper.make_tensor_value_info("x", in_type, list(shape))],
                        [helper.make_tensor_value_info("y", out_type, list(shape))], inits)
    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", ort.OrtValue.ortvalue_from_numpy(src))
    binding.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_numpy(dst))
    binding.synchronize_inputs()
    return lambda: sess.run_with_iobinding(binding)


class Ours:
    def __init__(self, exe):
        self.proc = subprocess.Popen([exe, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def time(self, kernel, shape):
        h, w, c = shape
        self.proc.stdin.write(f"{kernel} {h} {w} {c} {MIN_MS} {BATCHES}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if not answer or answer.startswith("error"):
            raise SystemExit(f"quant_bench --serve: {kernel}: {answer or 'no answer'}")
        return float(answer)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("quant_bench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="only the kernels whose name starts with this (q_, dq, f)")
    args = parser.parse_args()
    global KERNELS
    KERNELS = [k for k in KERNELS if k[0].startswith(args.only)]
    rng = np.random.default_rng(2026)
    ours = Ours(args.quant_bench)
    peers = {(k, s): ort_kernel(k, (1, *s), rng) for s in SIZES for k, _ in KERNELS}
    tiny = {k: ort_kernel(k, (1, 1, 1, 3), rng) for k, _ in KERNELS}
    call = {k: best_per_call(fn) for k, fn in tiny.items()}
    best = {}

    def record(key, secs):
        best[key] = min(best.get(key, float("inf")), secs)

    for _ in range(args.rounds):
        for shape in SIZES:
            record(("memcpy", shape), ours.time("memcpy", shape))
            for kernel, _ in KERNELS:
                record(("ours", kernel, shape), ours.time(kernel, shape))
                record(("ort", kernel, shape), best_per_call(peers[(kernel, shape)]))
            record(("memcpy", shape), ours.time("memcpy", shape))
    ours.close()

    print(f"onnxruntime {ort.__version__} (CPU EP, 1 thread, io_binding), numpy {np.__version__};"
          f" best of {args.rounds} interleaved rounds; GB/s of the f32 side")
    head = (f"{'kernel':<40} {'size':<9} {'ours':>7} {'memcpy':>7} {'ORT':>7} {'ORT call':>9}"
            f" {'/memcpy':>8} {'/ORT':>6} {'/ORT-call':>9}")
    print(head)
    print("-" * len(head))
    for shape in SIZES:
        n = shape[0] * shape[1] * shape[2]
        gbs = lambda secs: 4 * n / secs / 1e9
        memcpy = best[("memcpy", shape)]
        for kernel, what in KERNELS:
            o, p = best[("ours", kernel, shape)], best[("ort", kernel, shape)]
            bare = max(p - call[kernel], 1e-12)
            print(f"{what:<40} {'x'.join(map(str, shape)):<9} {gbs(o):>7.2f} {gbs(memcpy):>7.2f} {gbs(p):>7.2f}"
                  f" {call[kernel] * 1e6:>7.1f}us {memcpy / o:>8.2f} {p / o:>6.2f} {bare / o:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
