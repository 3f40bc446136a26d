"""Writes the real-stack demo's model: a small float ONNX classifier, seeded.

    python examples/tiny_model.py OUT_DIR

OUT_DIR gets
  tiny_classifier.onnx      features f32[1,16] -> Gemm(16x32) -> Relu -> Gemm(32x4) -> Softmax
                            -> probabilities f32[1,4]: four classes, each a random prototype
                            vector; weights from a seeded generator
  calibration/features_<n>.npy   64 seeded samples for the quantizer (the layout
                            `mix hexagon_tpu.compile --calibration` reads)
  input.f32                 one more sample, raw little-endian f32, for the demo's prediction

It needs onnx and numpy: scripts/demo.sh runs it with the Python of the venv that
`mix hexagon_tpu.compile --setup` made. Nothing here is Qualcomm's.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FEATURES, HIDDEN, CLASSES, SAMPLES = 16, 32, 4, 64


def main(out_dir: str) -> None:
    rng = np.random.default_rng(20261201)
    prototypes = rng.uniform(0.0, 1.0, size=(CLASSES, FEATURES)).astype(np.float32)
    # The hidden units match noisy copies of the (centred) prototypes; each votes for its class.
    centred = prototypes - prototypes.mean(axis=0)
    w1 = np.concatenate(
        [centred + rng.normal(0.0, 0.1, size=centred.shape) for _ in range(HIDDEN // CLASSES)]
    ).astype(np.float32)  # [HIDDEN, FEATURES]
    b1 = (-w1 @ prototypes.mean(axis=0)).astype(np.float32)
    w2 = np.zeros((CLASSES, HIDDEN), dtype=np.float32)
    for h in range(HIDDEN):
        w2[h % CLASSES, h] = 0.5
    b2 = np.zeros(CLASSES, dtype=np.float32)

    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["features", "w1", "b1"], ["hidden"], transB=1),
            helper.make_node("Relu", ["hidden"], ["hidden_relu"]),
            helper.make_node("Gemm", ["hidden_relu", "w2", "b2"], ["logits"], transB=1),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1),
        ],
        "tiny_classifier",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, FEATURES])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, CLASSES])],
        initializer=[
            numpy_helper.from_array(w1, "w1"),
            numpy_helper.from_array(b1, "b1"),
            numpy_helper.from_array(w2, "w2"),
            numpy_helper.from_array(b2, "b2"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)

    os.makedirs(out_dir, exist_ok=True)
    onnx.save(model, os.path.join(out_dir, "tiny_classifier.onnx"))

    def sample(label):
        noise = rng.normal(0.0, 0.15, size=FEATURES)
        return np.clip(prototypes[label] + noise, 0.0, 1.0).astype(np.float32).reshape(1, FEATURES)

    calibration = os.path.join(out_dir, "calibration")
    os.makedirs(calibration, exist_ok=True)
    for n in range(SAMPLES):
        np.save(os.path.join(calibration, f"features_{n}.npy"), sample(n % CLASSES))

    label = int(rng.integers(CLASSES))
    sample(label).astype("<f4").tofile(os.path.join(out_dir, "input.f32"))
    print(f"wrote {out_dir}/tiny_classifier.onnx, {SAMPLES} calibration samples, "
          f"and input.f32 (a noisy sample of class {label})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/tiny_model.py OUT_DIR")
    main(sys.argv[1])
