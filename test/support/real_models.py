#!/usr/bin/env python3
"""Real pretrained models and real images for test/qnn_host_real_models_test.exs.

Run with the venv of `mix hexagon_tpu.compile` (test/support/real_models.ex calls it):

    python real_models.py setup --cache DIR
        once per pin set: DIR/real-models-<hash>/ with
          models/face_detection_short_range.onnx  mediapipe 0.10.14's BlazeFace (short range),
                                                  converted from its .tflite by tflite2onnx
          models/ch_PP-OCRv4_det_infer.onnx       rapidocr-onnxruntime 1.4.4's PaddleOCR text
                                                  detector, as the wheel ships it
          images/<name>.npy                       scikit-image 0.25.2's sample PNGs, u8 {h, w, 3} RGB,
                                                  and lfw_<n>.npy: the first faces of its lfw_subset.npy
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
TEXT_ONNX = "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"
# scikit-image's bundled samples: photographs and scans, colour and grey
IMAGES = [
    "astronaut", "camera", "coffee", "chelsea", "motorcycle_left", "coins", "page", "text",
    "brick", "grass", "gravel", "color", "logo", "horse", "moon", "cell", "clock_motion", "ihc",
]

FACES = 8


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
        tflite = os.path.join(tmp, os.path.basename(FACE_TFLITE))
        extract(wheels["mediapipe"], FACE_TFLITE, tflite)
        sys.path.insert(0, site)
        import tflite2onnx

        tflite2onnx.convert(tflite, os.path.join(models, "face_detection_short_range.onnx"))
        extract(wheels["rapidocr_onnxruntime"], TEXT_ONNX, os.path.join(models, os.path.basename(TEXT_ONNX)))
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
        os.remove(tflite)
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
