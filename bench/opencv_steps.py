"""OpenCV doing the preprocessing as an expert writes it for a u8 model input, in two uses:

    python3 opencv_steps.py CASE FRAME K [OUT]
    python3 opencv_steps.py serve

The first runs a case K times, for counting instructions (bench/aarch64/count.sh runs it with
Debian's arm64 python3 under qemu-aarch64 and the insn_count plugin, once with K1 and once with
K2 passes; the difference leaves out the interpreter's start-up and the imports). The second
times it for bench/preprocess_opencv.exs, which interleaves it with our pass in one run: it
reads lines `CASE FRAME THREADS N` (THREADS 0: OpenCV's default) and `memcpy BYTES N` on stdin
and answers each with one line, N times in milliseconds; `out CASE FRAME PATH` writes one
pass's output (for the comparison with ours) and answers `ok`.

CASE is one of count_preprocess's (native/hexagon_tpu_nif/qnn/examples/count_preprocess.rs):
letterbox720, letterbox1080, imagenet224, nearest720; FRAME the NV12 frame that program wrote
(the same bytes our pass ran on). One untimed warm-up pass, then K. With OUT, the last pass's
output is written there (count.sh compares it with ours).

The steps, all u8, one thread (cv2.setNumThreads(1)): cv2.cvtColor(COLOR_YUV2RGB_NV12),
cv2.resize (INTER_LINEAR; INTER_NEAREST_EXACT for nearest, the same pixel choice as ours), for
a letterbox cv2.copyMakeBorder (pad 114, Ultralytics' placement), cv2.LUT with the
quantized normalization's 256-entry table per channel (a u8 input's normalization and
quantization are a function of the pixel value), then for NCHW a transpose made contiguous.
"""

import sys

import cv2
import numpy as np

# name: (frame w, h, model input w, h, letterbox, NCHW, nearest); ImageNet's mean and std
# and the u8 scale 0.018658 / offset -114 without a letterbox, identity with one (scale 1/255,
# offset 0), as qnn/examples/count_preprocess.rs builds them.
CASES = {
    "letterbox720": (1280, 720, 640, 640, True, True, False),
    "letterbox1080": (1920, 1080, 640, 640, True, True, False),
    "imagenet224": (1280, 720, 224, 224, False, False, False),
    "nearest720": (1280, 720, 640, 640, True, True, True),
}


def table(letterbox):
    """The quantized normalization of every u8 value per channel, (1, 256, 3) for cv2.LUT:
    x = (v / 255 - mean) / std in f32, q = round_half_even(x / scale) - offset, saturated."""
    if letterbox:
        mean, std, scale, offset = [0.0] * 3, [1.0] * 3, 1.0 / 255.0, 0
    else:
        mean, std, scale, offset = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225], 0.018658, -114
    v = np.arange(256, dtype=np.float32)[:, None]
    x = (v / np.float32(255) - np.array(mean, np.float32)) / np.array(std, np.float32)
    q = np.rint(x / np.float32(scale)) - np.float32(offset)
    return np.clip(q, 0, 255).astype(np.uint8).reshape(1, 256, 3)


def steps(name, frame_path):
    """The case's pass as a function of no arguments, over the NV12 frame at frame_path."""
    w, h, dw, dh, letterbox, nchw, nearest = CASES[name]
    frame = np.fromfile(frame_path, np.uint8)[: w * h * 3 // 2].reshape(h * 3 // 2, w)
    lut = table(letterbox)
    inter = cv2.INTER_NEAREST_EXACT if nearest else cv2.INTER_LINEAR
    if letterbox:
        # the width binds for these frames: round(h * dw / w) high, centred
        cw, ch = dw, round(h * dw / w)
        top, left = (dh - ch) // 2, 0
    else:
        cw, ch, top, left = dw, dh, 0, 0

    def run():
        rgb = cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_NV12)
        small = cv2.resize(rgb, (cw, ch), interpolation=inter)
        if letterbox:
            small = cv2.copyMakeBorder(small, top, dh - ch - top, left, dw - cw - left,
                                       cv2.BORDER_CONSTANT, value=(114, 114, 114))
        q = cv2.LUT(small, lut)
        return np.ascontiguousarray(q.transpose(2, 0, 1)) if nchw else q

    return run


def serve():
    import time

    default_threads = cv2.getNumThreads()
    passes = {}
    for line in sys.stdin:
        words = line.split()
        if words[0] == "memcpy":
            src = np.ones(int(words[1]), np.uint8)
            dst = np.empty_like(src)
            times = []
            for _ in range(int(words[2])):
                t = time.perf_counter()
                np.copyto(dst, src)
                times.append((time.perf_counter() - t) * 1000)
        elif words[0] == "out":
            cv2.setNumThreads(1)
            steps(words[1], words[2])().tofile(words[3])
            times = None
        else:
            name, frame_path, threads, n = words[0], words[1], int(words[2]), int(words[3])
            cv2.setNumThreads(threads or default_threads)
            run = passes.setdefault((name, frame_path), steps(name, frame_path))
            run()
            times = []
            for _ in range(n):
                t = time.perf_counter()
                run()
                times.append((time.perf_counter() - t) * 1000)
        print("ok" if times is None else " ".join(f"{t:.6f}" for t in times), flush=True)


def main(argv):
    if argv[0] == "serve":
        return serve()
    name, k = argv[0], int(argv[2])
    cv2.setNumThreads(1)
    run = steps(name, argv[1])
    out = run()
    for _ in range(k):
        out = run()
    if len(argv) > 3:
        out.tofile(argv[3])
    w, h, dw, dh = CASES[name][:4]
    print(f"pixels {dw * dh}")


if __name__ == "__main__":
    main(sys.argv[1:])
