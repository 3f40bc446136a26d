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


def taps(src, dst, column):
    """OpenCV's INTER_LINEAR taps for u8 (resize.cpp's resizeGeneric set-up): the position in
    f32, the two neighbours and their 11-bit weights. Columns clamp the position at the
    borders (fraction 0); rows clamp only the neighbours."""
    scale = 1.0 / (dst / src)
    f = ((np.arange(dst, dtype=np.float64) + 0.5) * scale - 0.5).astype(np.float32)
    s = np.floor(f)
    f = (f - s).astype(np.float32)
    s = s.astype(np.int64)
    if column:
        f = np.where((s < 0) | (s >= src - 1), np.float32(0), f).astype(np.float32)
        s = np.clip(s, 0, src - 1)
    w0 = np.rint((np.float32(1) - f) * np.float32(2048)).astype(np.int64)
    w1 = np.rint(f * np.float32(2048)).astype(np.int64)
    return np.clip(s, 0, src - 1), np.clip(s + 1, 0, src - 1), w0, w1


def bilinear(frame, dw, dh):
    """cv2.resize(INTER_LINEAR) of a u8 image, written out: a horizontal pass per row (>> 4 to
    16 bits), then OpenCV's 16-bit vertical blend (mulhi, rounding shift by 2)."""
    sh, sw = frame.shape[:2]
    y0, y1, b0, b1 = taps(sh, dh, False)
    x0, x1, a0, a1 = taps(sw, dw, True)
    f = frame.astype(np.int64)
    h = (f[:, x0] * a0[None, :, None] + f[:, x1] * a1[None, :, None]) >> 4
    v = ((h[y0] * b0[:, None, None]) >> 16) + ((h[y1] * b1[:, None, None]) >> 16)
    return np.clip((v + 2) >> 2, 0, 255).astype(np.uint8)


def preprocess(frame, p):
    sh, sw, dh, dw = p["sh"], p["sw"], p["dh"], p["dw"]
    # 1. resize (u8 values, as f32)
    if p["resize"] == "nearest":
        ys = np.minimum(((2 * np.arange(dh) + 1) * sh) // (2 * dh), sh - 1)
        xs = np.minimum(((2 * np.arange(dw) + 1) * sw) // (2 * dw), sw - 1)
        v = frame[ys[:, None], xs[None, :], :].astype(np.float32)
    else:
        v = bilinear(frame, dw, dh).astype(np.float32)
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
