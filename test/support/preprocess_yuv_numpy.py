"""HexagonTpu.Preprocess's YUV frames, strides, crop and letterbox done separately in numpy,
written from the formulas of the module docs: the reference of test/preprocess_yuv_test.exs
(:qnn_host, the QNN venv's Python has numpy).

    python preprocess_yuv_numpy.py DIR

DIR/cases.json is a list of cases; case i reads DIR/frame<i> and writes DIR/out<i>. A case is
the parameters of preprocess_numpy.py (sw, sh: the frame's size; dw, dh: the model input's;
resize, layout, swap, divisor, mean, std, out) and: format ("rgb" | "bgr" | "nv12" | "nv21"
| "i420" | "yuyv"), matrix ("bt601" | "bt709"), range ("limited" | "full"), stride,
chroma_stride, chroma_offset (null: the defaults), crop ([x, y, w, h] or null), fit
("stretch" | "letterbox"), pad (3 u8 values, the model's channel order).

Prints a JSON summary: the largest difference, over every case's frame, between the
fixed-point conversion and the float formula rounded (must be <= 1).
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from preprocess_numpy import preprocess  # noqa: E402

KR_KB = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}
# OpenCV's ITUR_BT_601_* (COLOR_YUV2RGB_NV12 and its siblings): 1.164, 1.596, -0.813,
# -0.391, 2.018 times 2^20
OPENCV_601 = (1220542, 1673527, -852492, -409993, 2116026)


def coefficients(matrix, rng):
    """(CY, CVR, CVG, CUG, CUB) times 2^20, from the standard's Kr and Kb."""
    if (matrix, rng) == ("bt601", "limited"):
        return OPENCV_601
    kr, kb = KR_KB[matrix]
    kg = 1.0 - kr - kb
    sy, sc = (255 / 219, 255 / 224) if rng == "limited" else (1.0, 1.0)
    c = (sy, 2 * (1 - kr) * sc, -2 * (1 - kr) * kr / kg * sc, -2 * (1 - kb) * kb / kg * sc,
         2 * (1 - kb) * sc)
    return tuple(int(round(x * 2**20)) for x in c)


def planes(buf, p):
    """Y (h, w) and U, V at full resolution (each pixel's chroma sample), as int64."""
    w, h, fmt = p["sw"], p["sh"], p["format"]
    row = {"yuyv": 2 * w}.get(fmt, w)
    stride = p["stride"] or row
    take = lambda start, rows, st, n: np.stack(  # noqa: E731
        [buf[start + r * st: start + r * st + n] for r in range(rows)]).astype(np.int64)
    if fmt == "yuyv":
        packed = take(0, h, stride, 2 * w)
        y = packed[:, 0::2]
        u = np.repeat(packed[:, 1::4], 2, axis=1)
        v = np.repeat(packed[:, 3::4], 2, axis=1)
        return y, u, v
    y = take(0, h, stride, w)
    coff = p["chroma_offset"] if p["chroma_offset"] is not None else h * stride
    if fmt in ("nv12", "nv21"):
        cs = p["chroma_stride"] or stride
        uv = take(coff, h // 2, cs, w)
        u, v = (uv[:, 0::2], uv[:, 1::2]) if fmt == "nv12" else (uv[:, 1::2], uv[:, 0::2])
    else:
        cs = p["chroma_stride"] or stride // 2
        u = take(coff, h // 2, cs, w // 2)
        v = take(coff + (h // 2) * cs, h // 2, cs, w // 2)
    up = lambda c: np.repeat(np.repeat(c, 2, axis=0), 2, axis=1)  # noqa: E731
    return y, up(u), up(v)


def to_rgb(buf, p):
    """The whole frame as HWC u8 RGB (the fixed-point formulas), and the largest difference
    to the float formula rounded."""
    y, u, v = planes(buf, p)
    cy, cvr, cvg, cug, cub = coefficients(p["matrix"], p["range"])
    y0 = 16 if p["range"] == "limited" else 0
    yy = np.maximum(y - y0, 0) * cy
    u, v = u - 128, v - 128
    half = 1 << 19
    # >> on int64 is floor division by 2^20, as the arithmetic shift
    rgb = [(yy + half + cvr * v) >> 20, (yy + half + cvg * v + cug * u) >> 20,
           (yy + half + cub * u) >> 20]
    rgb = np.clip(np.stack(rgb, axis=-1), 0, 255).astype(np.uint8)
    kr, kb = KR_KB[p["matrix"]]
    kg = 1 - kr - kb
    sy, sc = (255 / 219, 255 / 224) if p["range"] == "limited" else (1.0, 1.0)
    lum = np.maximum((y - y0) * sy, 0.0)
    cb, cr = u * sc, v * sc
    fl = np.stack([lum + 2 * (1 - kr) * cr,
                   lum - 2 * (1 - kb) * kb / kg * cb - 2 * (1 - kr) * kr / kg * cr,
                   lum + 2 * (1 - kb) * cb], axis=-1)
    fl = np.clip(np.round(fl), 0, 255)
    return rgb, int(np.max(np.abs(fl - rgb.astype(np.float64))))


def rgb_frame(buf, p):
    w, h = p["sw"], p["sh"]
    stride = p["stride"] or 3 * w
    return np.stack([buf[r * stride: r * stride + 3 * w] for r in range(h)]).reshape(h, w, 3)


def placement(p, cw, ch):
    """The content rectangle (left, top, width, height) in the model input."""
    dw, dh = p["dw"], p["dh"]
    if p["fit"] == "stretch":
        return 0, 0, dw, dh
    if dw * ch <= dh * cw:  # the width binds: round(ch * dw / cw), halves up
        nw, nh = dw, min(dh, max(1, (2 * ch * dw + cw) // (2 * cw)))
    else:
        nw, nh = min(dw, max(1, (2 * cw * dh + ch) // (2 * ch))), dh
    return (dw - nw) // 2, (dh - nh) // 2, nw, nh


def run(buf, p):
    if p["format"] in ("rgb", "bgr"):
        frame, diff = rgb_frame(buf, p), 0
    else:
        frame, diff = to_rgb(buf, p)
    x, y, cw, ch = p["crop"] or (0, 0, p["sw"], p["sh"])
    frame = np.ascontiguousarray(frame[y: y + ch, x: x + cw])
    left, top, nw, nh = placement(p, cw, ch)
    inner = dict(p, sw=cw, sh=ch, dw=nw, dh=nh, layout="nhwc")
    content = preprocess(frame, inner)
    pad = np.asarray(p["pad"], dtype=np.uint8)
    pad_frame = (pad[::-1] if p["swap"] else pad).reshape(1, 1, 3)
    pad_value = preprocess(pad_frame, dict(p, sw=1, sh=1, dw=1, dh=1, layout="nhwc"))
    out = np.empty((p["dh"], p["dw"], 3), dtype=content.dtype)
    out[...] = pad_value.reshape(3)
    out[top: top + nh, left: left + nw] = content
    if p["layout"] == "nchw":
        out = out.transpose(2, 0, 1)
    return np.ascontiguousarray(out), diff


def main():
    d = sys.argv[1]
    with open(os.path.join(d, "cases.json")) as f:
        cases = json.load(f)
    worst = 0
    for i, p in enumerate(cases):
        buf = np.fromfile(os.path.join(d, f"frame{i}"), dtype=np.uint8)
        out, diff = run(buf, p)
        worst = max(worst, diff)
        out.tofile(os.path.join(d, f"out{i}"))
    print(json.dumps({"cases": len(cases), "float_max_diff": worst}))


if __name__ == "__main__":
    main()
