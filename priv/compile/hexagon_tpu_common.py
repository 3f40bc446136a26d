"""What every script of priv/compile shares: how it says what it does (`say`), the one error it
raises for a failure or refusal the user reads (`Failure`), messages on one line (`one_line`) and
what ORT and QNN print, kept off the script's own output (`captured_output`). Standard library
only: hexagon_tpu_runtime.py runs outside the compile venv.

Every line a script says goes to stderr as `<program>: <kind>: <message>` (kind: info, warning,
error), the form HexagonTpu.Compiler and HexagonTpu.DeviceRuntime read; <program> is the entry
script's name (hexagon_tpu_compile, hexagon_tpu_runtime), set by its main() with `entry`.
A `Failure` is said once, as the error line, by the entry's main(), which then exits 1.
"""

import contextlib
import os
import re
import sys
import tempfile

# ORT colours its log lines; none of that reaches a message.
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# The name the lines start with: the entry script's (entry), else the running script's file name.
PROGRAM = None


class Failure(Exception):
    """A failure or refusal to report as one line: the message is what the user reads."""


def entry(program):
    """Names the program whose lines say prints (its main() calls this first)."""
    global PROGRAM
    PROGRAM = program


def program():
    return PROGRAM or os.path.splitext(os.path.basename(sys.argv[0] or "python"))[0]


def say(kind, message):
    """One line on stderr: `<program>: <kind>: <message>`, without colour codes."""
    print(f"{program()}: {kind}: {ANSI.sub('', str(message))}", file=sys.stderr, flush=True)


def one_line(text, limit=600):
    """text (an exception's, a library's) on one line, without colour codes, at most limit characters."""
    return " ".join(ANSI.sub("", str(text)).split())[:limit]


@contextlib.contextmanager
def captured_output(verbose):
    """Sends what ORT and QNN print (QNN writes to fd 1) to a file; yields a reader of it. The
    lines are read for errors in any case, and with --verbose shown on stderr afterwards (without
    ORT's colour codes), failing or not."""
    log = tempfile.TemporaryFile(mode="w+b")
    lines = []
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    try:
        yield lambda: lines
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        log.seek(0)
        lines.extend(ANSI.sub("", line) for line in log.read().decode("utf-8", "replace").splitlines())
        log.close()
        if verbose:
            for line in lines:
                print(line, file=sys.stderr)
            sys.stderr.flush()
