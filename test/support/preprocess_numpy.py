"""HexagonTpu.Preprocess's steps done separately in numpy: the reference of
test/preprocess_test.exs (:qnn_host, the QNN venv's Python has numpy) and the numpy side of
bench/preprocess.exs.

    python preprocess_numpy.py run PARAMS_JSON FRAME_FILE OUT_FILE
    python preprocess_numpy.py bench PARAMS_JSON FRAME_FILE RUNS   (prints the median ms)

PARAMS_JSON: sw, sh (frame), dw, dh (model input), resize ("nearest" | "bilinear"), layout
("nhwc" | "nchw"), swap (RGB <-> BGR), divisor (255.0 | 1.0), mean, std (3 numbers each),
out: "f32" | "f16" | {"type": "u8" | "s8" | "u16" | "s16", "scale", "zero_point", "qmin",
"qmax"}. The frame file holds sh * sw * 3 bytes, HWC u8.
"""

import json
import sys
import time

import numpy as np

DTYPES = {"u8": "<u1", "s8": "<i1", "u16": "<u2", "s16": "<i2"}


def taps(src, dst):
    # pixel centres: t = max((d + 0.5) * (src / dst) - 0.5, 0) in f64
    t = np.maximum((np.arange(dst, dtype=np.float64) + 0.5) * (src / dst) - 0.5, 0.0)
    i0 = np.minimum(np.floor(t).astype(np.int64), src - 1)
    i1 = np.minimum(i0 + 1, src - 1)
    w1 = (t - i0).astype(np.float32)
    w0 = np.float32(1.0) - w1
    return i0, i1, w0, w1


def preprocess(frame, p):
    sh, sw, dh, dw = p["sh"], p["sw"], p["dh"], p["dw"]
    # 1. resize (f32 values)
    if p["resize"] == "nearest":
        ys = np.minimum(((2 * np.arange(dh) + 1) * sh) // (2 * dh), sh - 1)
        xs = np.minimum(((2 * np.arange(dw) + 1) * sw) // (2 * dw), sw - 1)
        v = frame[ys[:, None], xs[None, :], :].astype(np.float32)
    else:
        y0, y1, wy0, wy1 = taps(sh, dh)
        x0, x1, wx0, wx1 = taps(sw, dw)
        f = frame.astype(np.float32)
        r0, r1 = f[y0], f[y1]
        wx0, wx1 = wx0[None, :, None], wx1[None, :, None]
        top = r0[:, x0] * wx0 + r0[:, x1] * wx1
        bottom = r1[:, x0] * wx0 + r1[:, x1] * wx1
        v = top * wy0[:, None, None] + bottom * wy1[:, None, None]
    # 2. channel order
    if p["swap"]:
        v = v[..., ::-1]
    # 3. normalize
    mean = np.asarray(p["mean"], dtype=np.float32)
    std = np.asarray(p["std"], dtype=np.float32)
    x = (v / np.float32(p["divisor"]) - mean) / std
    # 4. layout
    if p["layout"] == "nchw":
        x = x.transpose(2, 0, 1)
    x = np.ascontiguousarray(x)
    # 5. the input's type (np.round: half to even)
    out = p["out"]
    if out == "f32":
        return x.astype("<f4")
    if out == "f16":
        return x.astype("<f2")
    q = np.round(x / np.float32(out["scale"])) + np.float32(out["zero_point"])
    return np.clip(q, out["qmin"], out["qmax"]).astype(DTYPES[out["type"]])


def main():
    mode, params, frame_file = sys.argv[1:4]
    p = json.loads(params)
    frame = np.fromfile(frame_file, dtype=np.uint8).reshape(p["sh"], p["sw"], 3)
    if mode == "run":
        preprocess(frame, p).tofile(sys.argv[4])
    else:
        runs = int(sys.argv[4])
        preprocess(frame, p)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            preprocess(frame, p)
            times.append((time.perf_counter() - start) * 1e3)
        print(json.dumps({"median_ms": float(np.median(times)), "min_ms": min(times)}))


if __name__ == "__main__":
    main()
