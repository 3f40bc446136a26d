"""OpenCV as the independent reference of HexagonTpu.Preprocess's YUV -> RGB and bilinear
resize, and of HexagonTpu.Postprocess's NMS (test/preprocess_opencv_test.exs,
test/postprocess_opencv_test.exs), and the OpenCV side of bench/preprocess.exs and
bench/postprocess.exs.

Run with the compile venv's Python and PYTHONPATH=<real-models set-up>/site (where
test/support/real_models.py installs the pinned opencv-python-headless):

    python opencv_reference.py yuv DIR
        DIR/cases.json: [{format: nv12|nv21|i420|yuyv, width, height, stride, chroma_stride}];
        DIR/frame<i>: the frame's bytes (rows padded to the strides, chroma right after the Y
        plane); writes DIR/out<i>: cv2.cvtColor(COLOR_YUV2RGB_<FORMAT>) of the frame repacked
        without the padding, u8 {h, w, 3}
    python opencv_reference.py resize DIR
        DIR/cases.json: [{format: rgb|nv12|nv21|i420|yuyv, width, height, stride,
        chroma_stride, crop: [x, y, w, h] | null, dw, dh, fit: stretch|letterbox, pad}];
        DIR/frame<i> as for yuv; writes DIR/out<i>: the frame converted (cvtColor) and cropped,
        cv2.resize(INTER_LINEAR) to the content's size, copyMakeBorder'd with pad (letterbox:
        HexagonTpu.Preprocess's placement), u8 {dh, dw, 3}
    python opencv_reference.py nms DIR
        DIR/cases.json: [{boxes: file (N x 4 f32 x, y, w, h), scores: file (N f32), classes:
        [int] or null, score_threshold, iou_threshold, eta, top_k}]; writes DIR/out.json, the
        kept indices per case: cv2.dnn.NMSBoxes, or NMSBoxesBatched with classes
    python opencv_reference.py bench-preprocess WIDTH HEIGHT DW DH FIT RESIZE RUNS
        prints the median ms of cvtColor(NV12 -> RGB) + resize (INTER_LINEAR, or
        INTER_NEAREST_EXACT) [+ copyMakeBorder's letterbox pad 114] + numpy's ImageNet
        normalisation and u8 quantization, the steps done apart, on a random NV12 frame
    python opencv_reference.py bench-nms BOXES SCORES N C THRESHOLD RUNS
        BOXES: N x 4 f32 xyxy, SCORES: N x C f32; prints the median ms of numpy's conversion to
        OpenCV's inputs (xywh, best class and score) and NMSBoxesBatched (IoU 0.45)
"""

import json
import os
import sys
import time

import cv2
import numpy as np

CODES = {
    "nv12": cv2.COLOR_YUV2RGB_NV12,
    "nv21": cv2.COLOR_YUV2RGB_NV21,
    "i420": cv2.COLOR_YUV2RGB_I420,
    "yuyv": cv2.COLOR_YUV2RGB_YUYV,
}


def packed(frame, fmt, w, h, stride, chroma_stride):
    """The frame without its row padding, in the array shape cvtColor takes."""
    data = np.frombuffer(frame, np.uint8)
    if fmt == "yuyv":
        rows = data[: h * stride].reshape(h, stride)[:, : 2 * w]
        return np.ascontiguousarray(rows).reshape(h, w, 2)
    y = data[: h * stride].reshape(h, stride)[:, :w]
    rest = data[h * stride:]
    if fmt in ("nv12", "nv21"):
        uv = rest[: (h // 2) * chroma_stride].reshape(h // 2, chroma_stride)[:, :w]
        return np.ascontiguousarray(np.vstack([y, uv]))
    plane = (h // 2) * chroma_stride
    u = rest[:plane].reshape(h // 2, chroma_stride)[:, : w // 2]
    v = rest[plane: 2 * plane].reshape(h // 2, chroma_stride)[:, : w // 2]
    # OpenCV's I420: the three planes back to back, seen as h * 3 / 2 rows of w
    return np.concatenate([y.ravel(), u.ravel(), v.ravel()]).reshape(h * 3 // 2, w)


def yuv(directory):
    with open(os.path.join(directory, "cases.json")) as f:
        cases = json.load(f)
    for i, c in enumerate(cases):
        with open(os.path.join(directory, f"frame{i}"), "rb") as f:
            frame = f.read()
        src = packed(frame, c["format"], c["width"], c["height"], c["stride"], c["chroma_stride"])
        rgb = cv2.cvtColor(src, CODES[c["format"]])
        assert rgb.shape == (c["height"], c["width"], 3), rgb.shape
        with open(os.path.join(directory, f"out{i}"), "wb") as f:
            f.write(rgb.tobytes())


def placement(dw, dh, cw, ch, fit):
    """The content rectangle (left, top, width, height): HexagonTpu.Preprocess's letterbox
    (round half up, at least 1, centred, the odd pixel at the bottom or right)."""
    if fit == "stretch":
        return 0, 0, dw, dh
    if dw * ch <= dh * cw:
        nw, nh = dw, min(dh, max(1, (2 * ch * dw + cw) // (2 * cw)))
    else:
        nw, nh = min(dw, max(1, (2 * cw * dh + ch) // (2 * ch))), dh
    return (dw - nw) // 2, (dh - nh) // 2, nw, nh


def resize(directory):
    with open(os.path.join(directory, "cases.json")) as f:
        cases = json.load(f)
    for i, c in enumerate(cases):
        with open(os.path.join(directory, f"frame{i}"), "rb") as f:
            frame = f.read()
        w, h, stride = c["width"], c["height"], c["stride"]
        if c["format"] == "rgb":
            rows = np.frombuffer(frame, np.uint8)[: h * stride].reshape(h, stride)
            rgb = rows[:, : 3 * w].reshape(h, w, 3)
        else:
            src = packed(frame, c["format"], w, h, stride, c["chroma_stride"])
            rgb = cv2.cvtColor(src, CODES[c["format"]])
        x, y, cw, ch = c["crop"] or (0, 0, w, h)
        crop = np.ascontiguousarray(rgb[y: y + ch, x: x + cw])
        left, top, nw, nh = placement(c["dw"], c["dh"], cw, ch, c["fit"])
        out = cv2.resize(crop, (nw, nh), interpolation=cv2.INTER_LINEAR)
        pad = c["pad"]
        out = cv2.copyMakeBorder(out, top, c["dh"] - nh - top, left, c["dw"] - nw - left,
                                 cv2.BORDER_CONSTANT, value=(pad, pad, pad))
        assert out.shape == (c["dh"], c["dw"], 3), out.shape
        with open(os.path.join(directory, f"out{i}"), "wb") as f:
            f.write(out.tobytes())


def nms(directory):
    with open(os.path.join(directory, "cases.json")) as f:
        cases = json.load(f)
    out = []
    for c in cases:
        boxes = np.fromfile(os.path.join(directory, c["boxes"]), np.float32).reshape(-1, 4)
        scores = np.fromfile(os.path.join(directory, c["scores"]), np.float32)
        # Rect2d boxes (floats) and float scores: the Python binding's float overload
        bboxes = [tuple(map(float, b)) for b in boxes]
        args = (c["score_threshold"], c["iou_threshold"], c["eta"], c["top_k"])
        if c["classes"] is None:
            kept = cv2.dnn.NMSBoxes(bboxes, scores.tolist(), *args)
        else:
            kept = cv2.dnn.NMSBoxesBatched(bboxes, scores.tolist(), c["classes"], *args)
        out.append([int(i) for i in np.asarray(kept).reshape(-1)])
    with open(os.path.join(directory, "out.json"), "w") as f:
        json.dump(out, f)


def median_ms(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return float(np.median(times))


def bench_preprocess(w, h, dw, dh, fit, resize, runs):
    rng = np.random.default_rng(7)
    frame = rng.integers(0, 256, (h * 3 // 2, w), np.uint8)
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    # bench/preprocess.exs's u8 input: scale 0.018658, zero point 114
    scale, zero_point = np.float32(0.018658), np.float32(114)
    inter = cv2.INTER_NEAREST_EXACT if resize == "nearest" else cv2.INTER_LINEAR

    def run():
        rgb = cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_NV12)
        if fit == "letterbox":
            r = min(dw / w, dh / h)
            cw, ch = round(w * r), round(h * r)
            small = cv2.resize(rgb, (cw, ch), interpolation=inter)
            top, left = (dh - ch) // 2, (dw - cw) // 2
            small = cv2.copyMakeBorder(small, top, dh - ch - top, left, dw - cw - left,
                                       cv2.BORDER_CONSTANT, value=(114, 114, 114))
        else:
            small = cv2.resize(rgb, (dw, dh), interpolation=inter)
        x = (small.astype(np.float32) / np.float32(255) - mean) / std
        return np.clip(np.rint(x / scale) + zero_point, 0, 255).astype(np.uint8)

    print(f"{median_ms(run, runs):.3f}")


def bench_nms(boxes_path, scores_path, n, classes, threshold, runs):
    """bench/postprocess.exs's nms rows: xyxy boxes {N, 4} and scores {N, C} to OpenCV's
    inputs (x, y, w, h; each box's best class and score, numpy), then NMSBoxesBatched (IoU 0.45;
    every box it keeps, as nms/3 with max_detections: nil)."""
    boxes = np.fromfile(boxes_path, np.float32).reshape(n, 4)
    scores = np.fromfile(scores_path, np.float32).reshape(n, classes)

    def run():
        xywh = np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1).astype(np.float64)
        best = scores.argmax(axis=1)
        top = scores[np.arange(n), best]
        return cv2.dnn.NMSBoxesBatched(xywh, top, best.astype(np.int32), threshold, 0.45)

    print(f"{median_ms(run, runs):.3f}")


def main(argv):
    command = argv[0]
    if command == "yuv":
        yuv(argv[1])
    elif command == "resize":
        resize(argv[1])
    elif command == "nms":
        nms(argv[1])
    elif command == "bench-preprocess":
        w, h, dw, dh = map(int, argv[1:5])
        bench_preprocess(w, h, dw, dh, argv[5], argv[6], int(argv[7]))
    elif command == "bench-nms":
        bench_nms(argv[1], argv[2], int(argv[3]), int(argv[4]), float(argv[5]), int(argv[6]))
    else:
        sys.exit(f"opencv_reference: error: unknown command {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
