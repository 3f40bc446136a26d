"""What a user sees of a quantized model's output, measured against the float model's
(hexagon_tpu_quality.py calls it for every output): SQNR over a whole output is the wrong measure
for scores, logits and maps, where only the order, the peaks or a threshold matter.

Each output gets one answer measure, from --task or, without it, from its shape and the float
model's values:

  kind          when                                          measure (bar)
  scores        --task classify; or [1, C] / [N, C] whose     top-1 agreement with the float
                float values are probabilities (in [0, 1],    model (>= 90% of rows), and
                rows summing to 1)                            top-5 overlap
  detections    --task detect, or a YOLO head: [1, 4+C, N]    the float model's detections found
                (YOLOv8: boxes then class scores) or          again: same class, IoU >= 0.5
                [1, N, 5+C] (YOLOv5: with objectness),        (recall and precision >= 90%)
                N >= 100 anchors, its scores in [0, 1]
  map           --task segment, or [1, C, H, W] probabilities the masks above 0.5: IoU (>= 0.9);
                                                              with C > 1 and --task segment, the
                                                              class per pixel: agreement (>= 95%)
  points        --task landmarks                              the error in the output's own units:
                                                              mean and largest, and as a share of
                                                              the float values' span (largest
                                                              <= 2% of it)
  values        anything else (--task embed, regressions,     cosine similarity (>= 0.98 on every
                feature maps)                                 sample) and the largest error in
                                                              the output's own units

A kind's figures are a dict; `verdict` says in words what they mean for the answer.
"""

import math

TASKS = ["classify", "detect", "landmarks", "embed", "segment"]

TOP1_BAR = 0.9
DETECT_BAR = 0.9
MASK_IOU_BAR = 0.9
PIXEL_BAR = 0.95
POINTS_SPAN_BAR = 0.02
# A probability map's masks: 0.5 sets the bar, the others are shown (a DB text detector's
# users threshold at 0.3, a heatmap's peaks can stay lower)
MASK_THRESHOLDS = (0.3, 0.5)
# The quantized output's values ending short of the float ones by more than this share of
# their span: its range (the calibration's) does not hold what the model computes
SHORT_RANGE = 0.1
COSINE_BAR = 0.98

# YOLO decoding, as the float model's users run it (Postprocess.yolov8/2's defaults)
SCORE_THRESHOLD = 0.25
NMS_IOU = 0.45
MATCH_IOU = 0.5
MIN_ANCHORS = 100


def kind_of(shape, first_ref, task):
    """The answer kind of an output of `shape`, from --task and the float model's first
    sample's values."""
    import numpy as np

    ref = np.asarray(first_ref, np.float64)
    yolo = yolo_layout(shape)
    if task == "detect" and yolo:
        return "detections"
    if task == "classify" and len(shape) >= 2:
        return "scores"
    if task == "landmarks":
        return "points"
    if task == "segment" and len(shape) == 4:
        return "map"
    if task in ("embed", "detect", "segment", "classify"):
        return "values"
    if yolo and scores_in_unit_range(ref, yolo):
        return "detections"
    probabilities = ref.size and ref.min() >= 0.0 and ref.max() <= 1.0
    if len(shape) == 2 and shape[1] >= 2 and probabilities and np.allclose(ref.sum(axis=1), 1.0, atol=1e-3):
        return "scores"
    if len(shape) == 4 and min(shape[2], shape[3]) >= 8 and probabilities:
        return "map"
    return "values"


def yolo_layout(shape):
    """"v8" for [1, 4+C, N], "v5" for [1, N, 5+C] (N >= MIN_ANCHORS anchors), else None."""
    if len(shape) != 3 or shape[0] != 1:
        return None
    if shape[2] >= MIN_ANCHORS and 5 <= shape[1] < shape[2] // 4:
        return "v8"
    if shape[1] >= MIN_ANCHORS and 6 <= shape[2] < shape[1] // 4:
        return "v5"
    return None


def scores_in_unit_range(ref, layout):
    """Whether a YOLO-shaped output's score part holds probabilities, as exported YOLO heads'
    do (an SSD's box regressors, `[1, 896, 16]`, have the shape of a YOLOv5 head but not that)."""
    scores = ref[0, 4:, :] if layout == "v8" else ref[0, :, 4:]
    return scores.size > 0 and scores.min() >= 0.0 and scores.max() <= 1.0


class Answer:
    """One output's answer measure, summed over the samples (ref: float model, q: quantized)."""

    def __init__(self, kind, shape, task, layout=None):
        self.kind, self.shape, self.task = kind, tuple(shape), task
        self.layout = layout  # a YOLO head's, when known (a split head's); else from the shape
        self.n = 0
        self.a = self.b = self.c = 0.0  # the kind's running sums (see figures())
        self.worst = 0.0
        self.low = math.inf
        self.high = -math.inf
        self.mean_sum = 0.0
        self.ends = [math.inf, -math.inf, math.inf, -math.inf]  # float min, max; quantized min, max
        self.masks = {}  # map: threshold -> (intersection, union) summed

    def add(self, ref, q):
        import numpy as np

        ref = np.asarray(ref, np.float64).reshape(self.shape)
        q = np.asarray(q, np.float64).reshape(self.shape)
        if ref.size:
            self.ends = [min(self.ends[0], ref.min()), max(self.ends[1], ref.max()), min(self.ends[2], q.min()), max(self.ends[3], q.max())]
        getattr(self, "_add_" + self.kind)(ref, q)

    def _add_scores(self, ref, q):
        import numpy as np

        rows_ref = ref.reshape(-1, ref.shape[-1]) if ref.ndim != 2 else ref
        rows_q = q.reshape(rows_ref.shape)
        k = min(5, rows_ref.shape[1])
        for r, s in zip(rows_ref, rows_q):
            self.n += 1
            self.a += float(np.argmax(r) == np.argmax(s))
            self.b += len(set(np.argsort(-r)[:k]) & set(np.argsort(-s)[:k])) / k

    def _add_detections(self, ref, q):
        layout = self.layout or yolo_layout(self.shape) or "v8"
        found_ref, found_q = decode_yolo(ref, layout), decode_yolo(q, layout)
        matched = match(found_ref, found_q)
        self.n += 1
        self.a += len(found_ref)
        self.b += len(found_q)
        self.c += matched

    def _add_map(self, ref, q):
        import numpy as np

        if self.task == "segment" and ref.shape[1] > 1:
            self.a += float(np.count_nonzero(np.argmax(ref, axis=1) == np.argmax(q, axis=1)))
            self.b += ref.shape[0] * ref.shape[2] * ref.shape[3]
        else:
            # 0.5 sets the bar; a DB text detector's users threshold at 0.3, a heatmap's lower
            for t in MASK_THRESHOLDS:
                mask_ref, mask_q = ref > t, q > t
                inter, union = self.masks.get(t, (0.0, 0.0))
                self.masks[t] = (inter + float(np.count_nonzero(mask_ref & mask_q)), union + float(np.count_nonzero(mask_ref | mask_q)))
        self.n += 1

    def _add_points(self, ref, q):
        import numpy as np

        error = np.abs(ref - q)
        self.n += error.size
        self.mean_sum += float(error.sum())
        self.worst = max(self.worst, float(error.max()))
        self.low, self.high = min(self.low, float(ref.min())), max(self.high, float(ref.max()))

    def _add_values(self, ref, q):
        import numpy as np

        r, s = ref.ravel(), q.ravel()
        cosine = cosine_of(r, s)
        self.low = min(self.low, cosine)
        self.a += cosine
        self.n += 1
        self.worst = max(self.worst, float(np.max(np.abs(r - s))) if r.size else 0.0)

    def figures(self):
        """{kind, measure figures..., meets_bar, verdict}; the verdict also says when the
        quantized output's range stops short of the float model's values."""
        figures = dict({"kind": self.kind}, **getattr(self, "_figures_" + self.kind)())
        clipped = self.clipped()
        if clipped:
            figures["clipped"] = clipped
            figures["verdict"] += f"; {clipped}"
        return figures

    def clipped(self):
        """Where the quantized values end short of the float ones by more than a tenth of the
        float values' span: the output's quantization range, set by the calibration data, does
        not hold what the model computes on these samples."""
        low, high, q_low, q_high = self.ends
        span = high - low
        if not span > 0:
            return None
        said = []
        if high - q_high > SHORT_RANGE * span:
            said.append(f"never above {q_high:.3g} where the float model reaches {high:.3g}")
        if q_low - low > SHORT_RANGE * span:
            said.append(f"never below {q_low:.3g} where the float model reaches {low:.3g}")
        if not said:
            return None
        return "the quantized output is " + " and ".join(said) + " (its range, set by the calibration data, ends there: calibrate on inputs like these)"

    def _figures_scores(self):
        top1, top5 = self.a / self.n, self.b / self.n
        k = min(5, self.shape[-1])
        meets = top1 >= TOP1_BAR
        verdict = f"top-1 class agrees with the float model on {round(self.a)} of {self.n} ({100 * top1:.0f}%), top-{k} overlap {100 * top5:.0f}%"
        return {"rows": self.n, "top1_agreement": top1, "topk_overlap": top5, "k": k, "meets_bar": meets, "verdict": verdict}

    def _figures_detections(self):
        ref, q, matched = int(self.a), int(self.b), int(self.c)
        if ref == 0:
            verdict = f"the float model detects nothing above {SCORE_THRESHOLD} on the {self.n} sample(s)"
            if q:
                verdict += f", the quantized one {q} detection(s)"
            verdict += ": give --eval samples with objects in them to judge the detections"
            return {"float_detections": 0, "quantized_detections": q, "matched": 0, "recall": None, "precision": None, "meets_bar": q == 0, "verdict": verdict}
        recall = matched / ref
        precision = matched / q if q else 0.0
        meets = recall >= DETECT_BAR and precision >= DETECT_BAR
        verdict = (
            f"finds {matched} of the float model's {ref} detection(s) (recall {100 * recall:.0f}%), "
            f"{q - matched} of its {q} not the float model's (precision {100 * precision:.0f}%), over {self.n} sample(s)"
        )
        return {"float_detections": ref, "quantized_detections": q, "matched": matched, "recall": recall, "precision": precision, "meets_bar": meets, "verdict": verdict}

    def _figures_map(self):
        if self.task == "segment" and self.shape[1] > 1:
            share = self.a / self.b if self.b else 1.0
            verdict = f"the class of {100 * share:.1f}% of the pixels agrees with the float model's"
            return {"pixel_agreement": share, "meets_bar": share >= PIXEL_BAR, "verdict": verdict}
        ious = {t: (inter / union if union else None) for t, (inter, union) in self.masks.items()}
        iou = ious[0.5]
        shown = ", ".join(f"{'-' if v is None else f'{v:.3f}'} at {t:g}" for t, v in sorted(ious.items()))
        if iou is None:
            verdict = f"no value above 0.5 in either model's map: the masks agree (both empty); IoU {shown}"
            return {"mask_iou": None, "mask_iou_by_threshold": by_key(ious), "meets_bar": True, "verdict": verdict}
        verdict = f"the mask above 0.5 overlaps the float model's at IoU {iou:.3f} (IoU {shown})"
        return {"mask_iou": iou, "mask_iou_by_threshold": by_key(ious), "meets_bar": iou >= MASK_IOU_BAR, "verdict": verdict}

    def _figures_points(self):
        span = self.high - self.low
        mean = self.mean_sum / self.n
        share = self.worst / span if span > 0 else (0.0 if self.worst == 0 else math.inf)
        verdict = (
            f"each coordinate within {self.worst:.3g} of the float model's (mean {mean:.3g}) in the output's own "
            f"units: {100 * share:.1f}% of the span of its values ({span:.3g})"
        )
        return {"mean_error": mean, "max_error": self.worst, "span": span, "meets_bar": share <= POINTS_SPAN_BAR, "verdict": verdict}

    def _figures_values(self):
        mean = self.a / self.n
        verdict = f"cosine similarity with the float model {self.low:.4f} at worst (mean {mean:.4f}), largest error {self.worst:.3g} in the output's own units"
        return {"cosine_min": self.low, "cosine_mean": mean, "max_error": self.worst, "meets_bar": self.low >= COSINE_BAR, "verdict": verdict}


def cosine_of(r, s):
    """The cosine similarity of two flat arrays: 1 for two zero ones, 0 for one zero one, and
    0 where a value is not finite (nothing is similar to an infinity)."""
    import numpy as np

    if not (np.isfinite(r).all() and np.isfinite(s).all()):
        return 0.0
    norms = float(np.linalg.norm(r) * np.linalg.norm(s))
    if not norms:
        return 1.0 if not r.any() and not s.any() else 0.0
    return float(np.dot(r, s) / norms)


def by_key(ious):
    """{threshold as text: IoU} (JSON keys are strings)."""
    return {f"{t:g}": v for t, v in sorted(ious.items())}


def bar_text(kind):
    return {
        "scores": f"top-1 agreement >= {100 * TOP1_BAR:g}%",
        "detections": f"recall and precision of the float model's detections >= {100 * DETECT_BAR:g}%",
        "map": f"mask IoU >= {MASK_IOU_BAR:g} (class agreement >= {100 * PIXEL_BAR:g}% with --task segment)",
        "points": f"largest error <= {100 * POINTS_SPAN_BAR:g}% of the span",
        "values": f"cosine similarity >= {COSINE_BAR:g}",
    }[kind]


def decode_yolo(out, layout):
    """[(class, score, box x1 y1 x2 y2)] kept by a greedy per-class NMS, from one sample's YOLO
    head ([1, 4+C, N] v8; [1, N, 5+C] v5, score = objectness x class score)."""
    import numpy as np

    if layout == "v8":
        rows = out[0].T  # [N, 4+C]
        boxes, scores = rows[:, :4], rows[:, 4:]
    else:
        rows = out[0]
        boxes, scores = rows[:, :4], rows[:, 5:] * rows[:, 4:5]
    classes = np.argmax(scores, axis=1)
    best = scores[np.arange(len(scores)), classes]
    keep = np.nonzero(best > SCORE_THRESHOLD)[0]
    cx, cy, w, h = (boxes[keep, i] for i in range(4))
    xyxy = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
    order = np.argsort(-best[keep], kind="stable")
    kept = []
    for i in order:
        if all(classes[keep[i]] != c or iou(xyxy[i], b) <= NMS_IOU for c, _s, b in kept):
            kept.append((int(classes[keep[i]]), float(best[keep[i]]), xyxy[i]))
    return kept


def iou(a, b):
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def match(found_ref, found_q):
    """How many of the float model's detections the quantized model found (same class, IoU >=
    MATCH_IOU), each of its detections matched once, greedily by score."""
    used = set()
    matched = 0
    for c, _s, box in found_ref:
        best, at = MATCH_IOU, None
        for j, (cq, _sq, bq) in enumerate(found_q):
            if j not in used and cq == c and iou(box, bq) >= best:
                best, at = iou(box, bq), j
        if at is not None:
            used.add(at)
            matched += 1
    return matched
