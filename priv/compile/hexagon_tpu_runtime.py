#!/usr/bin/env python3
"""Qualcomm's QNN libraries from PyPI's onnxruntime-qnn wheels, fetched and checked by sha256.

The Python half of `mix hexagon_tpu.runtime` (the device runtime, laid out for a Nerves
rootfs_overlay), also used by `.ci/aarch64.sh` and the test suite. Standard library only, plus
pip in the running interpreter (for `pip download`):

    python hexagon_tpu_runtime.py overlay --into DIR [--htp-arch 68 ...] [--requirements FILE] [--cache DIR]
        installs the device runtime of the pinned onnxruntime-qnn's aarch64 wheel into DIR:
        usr/lib/libQnnHtp.so, usr/lib/libQnnSystem.so, usr/lib/libQnnHtpV<arch>Stub.so,
        usr/lib/dsp/libQnnHtpV<arch>Skel.so, and Qualcomm's license beside them
        (usr/share/doc/qairt/Qualcomm_LICENSE.pdf)
    python hexagon_tpu_runtime.py libs --wheel FILE.whl --sha256 HEX --into DIR [--cache DIR]
        unpacks a wheel's libQnnHtp*.so, libHtpPrepare.so, libQnnSystem.so and
        onnxruntime_qnn.libs/ into DIR (as the wheel lays them out), e.g. an older x86-64
        wheel's HTP emulator and compiler; once: a DIR already unpacked is used as it is
    python hexagon_tpu_runtime.py build-id FILE...
        the QAIRT build id each file carries (libQnnHtp.so, a stub or skel, a context binary)

The pin of the device runtime is a line of priv/compile/requirements.txt (the one owner of the
pins): `# device-runtime: <wheel file name> sha256=<hex>`, for the same onnxruntime-qnn version
as its `onnxruntime-qnn==` line. Wheels are kept in <cache>/wheels; a cached wheel is checked
against its sha256 before every use and downloaded again when it does not match.

Results go to stdout as `key: value` lines; progress and errors to stderr as
`hexagon_tpu_runtime: info|error: ...`; on failure the exit status is 1.
"""

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

from hexagon_tpu_common import Failure, entry, say

PREFIX = "hexagon_tpu_runtime"
REQUIREMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements.txt")
# "v2.51.0.260929181845": QAIRT major.minor.patch, then the build's date and time.
BUILD_ID = re.compile(rb"v([1-9][0-9]?)\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{6,14})(?![0-9])")
# What `libs` unpacks: the HTP backend and what it loads to compile (libHtpPrepare.so), QnnSystem,
# the C++ runtime the x86-64 wheels bundle, and the license.
LIBS = re.compile(r"onnxruntime_qnn/(libQnnHtp\S*\.so|libHtpPrepare\.so|libQnnSystem\.so|Qualcomm_LICENSE\.pdf)|onnxruntime_qnn\.libs/[^/]+")
PIN = re.compile(r"^# device-runtime: (onnxruntime_qnn-(\S+?)-(cp\d+)-cp\d+-(\S+)\.whl) sha256=([0-9a-f]{64})\s*$", re.M)


# ------------------------------------------------------------------------------- build ids


def build_id(path):
    """The QAIRT build id in a file's bytes ("v2.51.0.260929181845"), or None when it has none.
    QNN writes it into its libraries (libQnnHtp.so, the stubs and skels; not libQnnSystem.so)
    and into every context binary it serializes."""
    try:
        with open(path, "rb") as f:
            found = {m.group(0).decode() for m in BUILD_ID.finditer(f.read())}
    except OSError as error:
        raise Failure(f"cannot read {path}: {error.strerror}") from None
    if len(found) > 1:
        raise Failure(f"{path} holds several QAIRT build ids: {', '.join(sorted(found))}")
    return found.pop() if found else None


def version_of(text):
    """(major, minor, patch) of a build id or version ("v2.51.0.2609...", "2.42", "2.42.0")."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.\d+)?", text)
    if not match:
        raise Failure(f"not a QAIRT version: {text!r} (expected e.g. 2.42 or 2.42.0)")
    major, minor, patch = match.groups()
    return tuple(int(x) for x in (major, minor, patch) if x is not None)


def newer_than(found, target):
    """Whether build id `found` is newer than the version `target`, compared on the parts the
    target gives (a target of 2.47 accepts every 2.47.x)."""
    want = version_of(target)
    return version_of(found)[: len(want)] > want


# ---------------------------------------------------------------------------------- wheels


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def device_pin(requirements):
    """(wheel file name, version, sha256) of the device runtime pinned in `requirements`."""
    try:
        with open(requirements, encoding="utf-8") as f:
            text = f.read()
    except OSError as error:
        raise Failure(f"cannot read {requirements}: {error.strerror}") from None
    pinned = re.search(r"^onnxruntime-qnn==(\S+)\s*$", text, re.M)
    pins = PIN.findall(text)
    if not pinned:
        raise Failure(f"{requirements} pins no onnxruntime-qnn version")
    if len(pins) != 1:
        raise Failure(
            f"{requirements} needs exactly one `# device-runtime: <aarch64 wheel> sha256=<hex>` line, has {len(pins)}"
        )
    wheel, version, _python, _platform, digest = pins[0]
    if version != pinned.group(1):
        raise Failure(
            f"{requirements}: the device runtime is pinned at onnxruntime-qnn {version} but the compiler at "
            f"{pinned.group(1)}: both sides must come from one version"
        )
    return wheel, digest


def wheel_spec(wheel):
    """pip's view of a wheel file name: (requirement, python version, platform); a pure-Python
    wheel (`py3-none-any`) has neither version nor platform (None). Only files are taken out of
    a wheel here, so it may be another interpreter's."""
    match = re.fullmatch(r"(\S+?)-(\S+?)-(py3|cp\d+)-(none|abi3|cp\d+)-(\S+)\.whl", os.path.basename(wheel))
    if not match:
        raise Failure(f"not a wheel file name: {wheel}")
    name, version, python, _abi, platform = match.groups()
    if platform == "any":
        return f"{name}=={version}", None, None
    # a multi-tag platform (manylinux_2_17_x86_64.manylinux2014_x86_64): pip takes its first
    return f"{name}=={version}", f"{python[2]}.{python[3:]}", platform.split(".")[0]


def offline(output):
    return re.search(
        r"NewConnectionError|Temporary failure in name resolution|Network is unreachable|"
        r"Failed to establish a new connection|No matching distribution found|Could not find a version",
        output,
    )


def fetch_wheel(wheel, digest, cache):
    """The path of `wheel` in <cache>/wheels, downloaded with pip unless a copy with the right
    sha256 is there already."""
    wheels = os.path.join(cache, "wheels")
    path = os.path.join(wheels, wheel)
    try:
        os.makedirs(wheels, exist_ok=True)
    except OSError as error:
        raise Failure(f"cannot create {wheels}: {error.strerror}") from None
    if os.path.isfile(path):
        if sha256(path) == digest:
            return path
        say("info", f"the cached {path} does not have the pinned sha256: downloading it again")
    requirement, python, platform = wheel_spec(wheel)
    say("info", f"downloading {wheel} from PyPI into {wheels}")
    tmp = tempfile.mkdtemp(prefix="download.", dir=wheels)
    try:
        command = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-input", "-q",
                   "--no-deps", "--only-binary=:all:", requirement, "-d", tmp]
        if platform:
            command += ["--platform", platform, "--python-version", python]
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if run.returncode != 0:
            lines = [line.strip() for line in run.stdout.splitlines() if line.strip()]
            last = next((line for line in reversed(lines) if line.startswith("ERROR:")), lines[-1] if lines else "")
            why = "offline, or PyPI unreachable" if offline(run.stdout) else f"pip exited {run.returncode}"
            raise Failure(f"cannot download {wheel} ({why}): {last}")
        got = os.path.join(tmp, wheel)
        if not os.path.isfile(got):
            raise Failure(f"pip downloaded {', '.join(os.listdir(tmp)) or 'nothing'}, not {wheel}")
        actual = sha256(got)
        if actual != digest:
            raise Failure(f"{wheel} as downloaded has sha256 {actual}, not the pinned {digest}: refused")
        os.replace(got, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def writable_dir(path, what):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise Failure(f"cannot create {what} {path}: {error.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise Failure(f"cannot write into {what} {path}: permission denied")


def extract(archive, member, dest):
    """Writes a wheel member to dest through a temporary file (never a half-written library)."""
    tmp = dest + ".tmp"
    try:
        with archive.open(member) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except OSError as error:
        raise Failure(f"cannot write {dest}: {error.strerror}") from None


# -------------------------------------------------------------------------------- commands


def overlay(args):
    """Installs the device runtime into args.into (see the module doc); prints each file and
    the build id."""
    wheel, digest = device_pin(args.requirements)
    into = os.path.abspath(args.into)
    if os.path.exists(into) and not os.path.isdir(into):
        raise Failure(f"{into} is not a directory")
    libdir, dspdir, docdir = (os.path.join(into, p) for p in ("usr/lib", "usr/lib/dsp", "usr/share/doc/qairt"))
    for d in (into, libdir, dspdir, docdir):
        writable_dir(d, "the overlay directory")
    path = fetch_wheel(wheel, digest, args.cache)
    say("info", f"{wheel}: sha256 {digest} ok")
    archs = sorted(set(args.htp_arch or [68]))
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        offered = sorted(int(m.group(1)) for n in names for m in [re.fullmatch(r"onnxruntime_qnn/libQnnHtpV(\d+)Skel\.so", n)] if m)
        files = [("libQnnHtp.so", libdir), ("libQnnSystem.so", libdir)]
        for arch in archs:
            if arch not in offered:
                raise Failure(
                    f"{wheel} has no HTP v{arch} libraries (it has v{', v'.join(map(str, offered))})"
                )
            files += [(f"libQnnHtpV{arch}Stub.so", libdir), (f"libQnnHtpV{arch}Skel.so", dspdir)]
        files.append(("Qualcomm_LICENSE.pdf", docdir))
        written = []
        for name, d in files:
            dest = os.path.join(d, name)
            extract(archive, f"onnxruntime_qnn/{name}", dest)
            written.append(dest)
    ids = {}
    for dest in written:
        if dest.endswith(".so"):
            found = build_id(dest)
            if found:
                ids[dest] = found
    if len(set(ids.values())) != 1:
        raise Failure(f"the libraries of {wheel} disagree on their build id: {ids}")
    for dest in written:
        print(f"file: {os.path.relpath(dest, into)}")
    print(f"build_id: {ids[os.path.join(libdir, 'libQnnHtp.so')]}")
    print(f"wheel: {wheel}")


def libs(args):
    """Unpacks a wheel's QNN libraries (and the C++ runtime it bundles) into args.into."""
    into = os.path.abspath(args.into)
    if not os.path.isfile(os.path.join(into, "onnxruntime_qnn", "libQnnHtp.so")):
        path = fetch_wheel(os.path.basename(args.wheel), args.sha256, args.cache)
        parent = os.path.dirname(into)
        writable_dir(parent, "the directory")
        tmp = tempfile.mkdtemp(prefix=os.path.basename(into) + ".tmp.", dir=parent)
        try:
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    if LIBS.fullmatch(member):
                        dest = os.path.join(tmp, member)
                        os.makedirs(os.path.dirname(dest), exist_ok=True)
                        extract(archive, member, dest)
            shutil.rmtree(into, ignore_errors=True)
            os.replace(tmp, into)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    lib_dir = os.path.join(into, "onnxruntime_qnn")
    print(f"lib_dir: {lib_dir}")
    print(f"build_id: {build_id(os.path.join(lib_dir, 'libQnnHtp.so')) or ''}")


def parse(argv):
    parser = argparse.ArgumentParser(prog=PREFIX, description=__doc__.split("\n\n")[0])
    default_cache = os.environ.get("HEXAGON_TPU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hexagon_tpu")
    sub = parser.add_subparsers(dest="command", required=True)
    o = sub.add_parser("overlay", help="install the pinned device runtime into a rootfs overlay")
    o.add_argument("--into", required=True, metavar="DIR")
    o.add_argument("--htp-arch", type=int, action="append", metavar="N", help="HTP architecture (default 68; repeatable)")
    o.add_argument("--requirements", default=REQUIREMENTS)
    o.add_argument("--cache", default=default_cache)
    w = sub.add_parser("libs", help="unpack a pinned wheel's QNN libraries")
    w.add_argument("--wheel", required=True)
    w.add_argument("--sha256", required=True)
    w.add_argument("--into", required=True, metavar="DIR")
    w.add_argument("--cache", default=default_cache)
    b = sub.add_parser("build-id", help="print the QAIRT build id of files")
    b.add_argument("files", nargs="+")
    return parser.parse_args(argv)


def main(argv=None):
    entry(PREFIX)
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "overlay":
            overlay(args)
        elif args.command == "libs":
            libs(args)
        else:
            for path in args.files:
                print(f"{path}: {build_id(path) or 'none'}")
    except Failure as error:
        say("error", str(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
