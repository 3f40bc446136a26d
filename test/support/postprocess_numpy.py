"""HexagonTpu.Postprocess's definitions written again in numpy, from its moduledoc: the
reference of test/postprocess_numpy_test.exs (:qnn_host, the QNN venv's Python has numpy) and the
numpy side of bench/postprocess.exs.

    python postprocess_numpy.py run PARAMS_JSON OUT_JSON     (PARAMS_JSON: one case or a list)
    python postprocess_numpy.py bench PARAMS_JSON RUNS      (prints the median ms)

PARAMS_JSON: {"op": "top_k" | "nms" | "yolov8" | "yolov5" | "mask", ...}
  top_k:  scores (file), k, softmax
  mask:   output (file), h, w, classes, layout ("hwc" | "chw"); the answer: the class per pixel
  ssd_anchors: MediaPipe's SsdAnchorsCalculator options (input_size_width, ...); the answer:
          [[x_center, y_center, w, h]]
  ssd:    boxes (file, N x coords), scores (file, N x classes), anchor_options, coords,
          classes, x/y/w/h_scale, reverse_output_order, apply_exponential_on_box_size,
          sigmoid_score, score_clipping_thresh, and the NMS options
  nms:    boxes (file, N x 4), scores (file), n, classes (C, or 0 for one score per box),
          box_classes (a list, or null), format, and the NMS options below
  yolo*:  output (file), n, classes, letterbox ([s, dx, dy] or null), clip ([w, h] or null)
NMS options: score_threshold, iou_threshold, max_detections (or null), class_agnostic,
multi_label. Files hold f32 little-endian values. The answer: top_k [[index, score]], the
others [[index, class, score, [x1, y1, x2, y2]]], in the result's order.
"""

import json
import sys
import time

import numpy as np

F = np.float32


def xyxy(b, fmt):
    b = b.astype(F)
    if fmt == "xyxy":
        return b
    if fmt == "xywh":
        return np.stack([b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]], axis=1)
    hw, hh = b[:, 2] * F(0.5), b[:, 3] * F(0.5)
    return np.stack([b[:, 0] - hw, b[:, 1] - hh, b[:, 0] + hw, b[:, 1] + hh], axis=1)


def iou_against(a, others):
    """IoU of box a with each row of others: inter / (area_a + area_b - inter), 0 where the
    union is 0; all in float32, no +1."""
    iw = np.maximum(np.minimum(a[2], others[:, 2]) - np.maximum(a[0], others[:, 0]), F(0))
    ih = np.maximum(np.minimum(a[3], others[:, 3]) - np.maximum(a[1], others[:, 1]), F(0))
    inter = iw * ih
    area_a = max(a[2] - a[0], F(0)) * max(a[3] - a[1], F(0))
    areas = np.maximum(others[:, 2] - others[:, 0], F(0)) * np.maximum(
        others[:, 3] - others[:, 1], F(0)
    )
    union = area_a + areas - inter
    safe = np.where(union > 0, union, F(1))
    return np.where(union > 0, inter / safe, F(0))


def candidates(scores, box_classes, p):
    """(index, class, score) arrays of the candidates: score > threshold, strictly."""
    thr = F(p["score_threshold"])
    if scores.ndim == 1:
        idx = np.nonzero(scores > thr)[0]
        cls = np.zeros(len(scores), np.int64) if box_classes is None else np.asarray(box_classes)
        return idx, cls[idx], scores[idx]
    if p["multi_label"]:
        idx, cls = np.nonzero(scores > thr)
        return idx, cls, scores[idx, cls]
    best = np.argmax(scores, axis=1)  # the first of equal maxima
    top = scores[np.arange(len(scores)), best]
    idx = np.nonzero(top > thr)[0]
    return idx, best[idx], top[idx]


def greedy(boxes, idx, cls, score, p):
    """Visit by descending score, then lower index, then lower class; keep unless a kept box of
    the same class (any class: class_agnostic) has IoU > iou_threshold; stop at max."""
    order = np.lexsort((cls, idx, -score))
    thr = F(p["iou_threshold"])
    limit = p["max_detections"]
    kept = []
    for o in order:
        if limit is not None and len(kept) >= limit:
            break
        rivals = [k for k in kept if p["class_agnostic"] or cls[k] == cls[o]]
        if rivals and np.any(iou_against(boxes[idx[o]], boxes[idx[rivals]]) > thr):
            continue
        kept.append(o)
    return [(int(idx[k]), int(cls[k]), score[k], boxes[idx[k]].copy()) for k in kept]


def ssd_scale(lo, hi, i, count):
    # MediaPipe's CalculateScale: (max - min) in float32, the rest in double, back to float32
    if count == 1:
        return F((F(lo) + F(hi)) * F(0.5))
    return F(np.float64(F(lo)) + np.float64(F(hi) - F(lo)) * i / (count - 1.0))


def ssd_anchors(o):
    """SsdAnchorsCalculator, written from its definition: runs of layers of one stride share a
    feature map; per layer one anchor per aspect ratio (and one interpolated), per cell."""
    strides, n = o["strides"], len(o["strides"])
    out = []
    layer = 0
    while layer < n:
        ratios, scales = [], []
        last = layer
        while last < n and strides[last] == strides[layer]:
            s = ssd_scale(o["min_scale"], o["max_scale"], last, n)
            if last == 0 and o.get("reduce_boxes_in_lowest_layer", False):
                ratios += [F(1.0), F(2.0), F(0.5)]
                scales += [F(0.1), s, s]
            else:
                for r in o.get("aspect_ratios", [1.0]):
                    ratios.append(F(r))
                    scales.append(s)
                interp = o.get("interpolated_scale_aspect_ratio", 1.0)
                if interp > 0:
                    nxt = F(1.0) if last == n - 1 else ssd_scale(o["min_scale"], o["max_scale"], last + 1, n)
                    scales.append(np.sqrt(s * nxt))
                    ratios.append(F(interp))
            last += 1
        sizes = [(sc * np.sqrt(r), sc / np.sqrt(r)) for r, sc in zip(ratios, scales)]
        fh = -(-o["input_size_height"] // strides[layer])
        fw = -(-o["input_size_width"] // strides[layer])
        for y in range(fh):
            for x in range(fw):
                for w, h in sizes:
                    cx = (F(x) + F(o.get("anchor_offset_x", 0.5))) / F(fw)
                    cy = (F(y) + F(o.get("anchor_offset_y", 0.5))) / F(fh)
                    if o.get("fixed_anchor_size", False):
                        w, h = F(1.0), F(1.0)
                    out.append([cx, cy, w, h])
        layer = last
    return np.array(out, dtype=F).reshape(-1, 4)


def ssd_decode(raw, scores, anchors, p):
    """TensorsToDetectionsCalculator's box decoding and score sigmoid, per anchor."""
    if p["reverse_output_order"]:
        x, y, w, h = raw[:, 0], raw[:, 1], raw[:, 2], raw[:, 3]
    else:
        y, x, h, w = raw[:, 0], raw[:, 1], raw[:, 2], raw[:, 3]
    ax, ay, aw, ah = anchors[:, 0], anchors[:, 1], anchors[:, 2], anchors[:, 3]
    cx = x / F(p["x_scale"]) * aw + ax
    cy = y / F(p["y_scale"]) * ah + ay
    if p["apply_exponential_on_box_size"]:
        w = np.exp(w / F(p["w_scale"])) * aw
        h = np.exp(h / F(p["h_scale"])) * ah
    else:
        w = w / F(p["w_scale"]) * aw
        h = h / F(p["h_scale"]) * ah
    boxes = np.stack([cx - w / F(2), cy - h / F(2), cx + w / F(2), cy + h / F(2)], axis=1)
    if p["sigmoid_score"]:
        x64 = scores.astype(np.float64)
        t = p["score_clipping_thresh"]
        if t is not None:
            x64 = np.clip(x64, -np.float64(F(t)), np.float64(F(t)))
        scores = (1.0 / (1.0 + np.exp(-x64))).astype(F)
    return boxes.astype(F), scores


def read(name, shape=None):
    values = np.fromfile(name, dtype="<f4")
    return values if shape is None else values.reshape(shape)


def frame(kept, p):
    out = []
    for i, c, s, b in kept:
        b = b.astype(np.float64)
        if p.get("letterbox") is not None:
            # the map model = frame * s + offset, as the transform frame = model * (1 / s) + (-offset / s), in f64
            sc, dx, dy = (np.float64(v) for v in p["letterbox"])
            xs, xo, yo = 1 / sc, -dx / sc, -dy / sc
            b = np.array([b[0] * xs + xo, b[1] * xs + yo, b[2] * xs + xo, b[3] * xs + yo])
        if p.get("clip") is not None:
            w, h = np.float64(p["clip"][0]), np.float64(p["clip"][1])
            b = np.array([np.clip(b[0], 0, w), np.clip(b[1], 0, h), np.clip(b[2], 0, w), np.clip(b[3], 0, h)])
        out.append((i, c, s, b))
    return out


def run(p, arrays):
    op = p["op"]
    if op == "top_k":
        x = arrays["scores"]
        if p["softmax"]:
            x64 = x.astype(np.float64)
            e = np.exp(x64 - x64.max())
            x = (e / e.sum()).astype(F)
        order = np.lexsort((np.arange(len(x)), -x))[: p["k"]]
        return [[int(i), float(x[i])] for i in order]
    if op == "mask":
        out = arrays["output"]
        # np.argmax: the first of equal maxima
        classes = np.argmax(out, axis=2 if p["layout"] == "hwc" else 0)
        return [int(k) for k in classes.reshape(-1)]
    if op == "ssd_anchors":
        return [[float(v) for v in a] for a in ssd_anchors(p)]
    if op == "ssd":
        anchors = ssd_anchors(p["anchor_options"])
        boxes, scores = ssd_decode(arrays["boxes"][:, :4], arrays["scores"], anchors, p)
        kept = greedy(boxes, *candidates(scores, None, p), p)
        return [[i, c, float(s), [float(v) for v in b]] for i, c, s, b in kept]
    if op == "nms":
        boxes = xyxy(arrays["boxes"], p["format"])
        scores = arrays["scores"]
        kept = greedy(boxes, *candidates(scores, p["box_classes"], p), p)
    else:
        out = arrays["output"]
        if op == "yolov8":
            boxes, scores = out[:4].T, out[4:].T
        else:
            boxes, scores = out[:, :4], out[:, 4:5] * out[:, 5:]
        boxes = xyxy(np.ascontiguousarray(boxes), "cxcywh")
        kept = frame(greedy(boxes, *candidates(np.ascontiguousarray(scores), None, p), p), p)
    return [[i, c, float(s), [float(v) for v in b]] for i, c, s, b in kept]


def load(p):
    n, c = p.get("n"), p.get("classes")
    if p["op"] == "top_k":
        return {"scores": read(p["scores"])}
    if p["op"] == "ssd_anchors":
        return {}
    if p["op"] == "ssd":
        return {
            "boxes": read(p["boxes"], (n, p["coords"])),
            "scores": read(p["scores"], (n, c)),
        }
    if p["op"] == "mask":
        h, w = p["h"], p["w"]
        return {"output": read(p["output"], (h, w, c) if p["layout"] == "hwc" else (c, h, w))}
    if p["op"] == "nms":
        return {
            "boxes": read(p["boxes"], (n, 4)),
            "scores": read(p["scores"], (n,) if c == 0 else (n, c)),
        }
    shape = (4 + c, n) if p["op"] == "yolov8" else (n, 5 + c)
    return {"output": read(p["output"], shape)}


def main():
    mode, params = sys.argv[1:3]
    p = json.loads(params)
    if mode == "run":
        answer = [run(q, load(q)) for q in p] if isinstance(p, list) else run(p, load(p))
        with open(sys.argv[3], "w") as f:
            json.dump(answer, f)
    else:
        arrays = load(p)
        runs = int(sys.argv[3])
        run(p, arrays)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            run(p, arrays)
            times.append((time.perf_counter() - start) * 1e3)
        print(json.dumps({"median_ms": float(np.median(times)), "min_ms": min(times)}))


if __name__ == "__main__":
    main()
