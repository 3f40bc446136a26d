"""Instructions per output pixel by function of the pass, for count.sh's `profile` step: the
per-block profiles insn_count.c wrote (profile=PATH) for K1 and K2 passes of count_preprocess,
the K1 run's subtracted, divided by (K2 - K1) * pixels, and summed by the function each block
belongs to.

    python3 profile.py EXE LOAD_BIAS PIXELS PASSES PROFILE_K1 PROFILE_K2

EXE: the aarch64 count_preprocess built with line tables (debug = "line-tables-only"), so that
addr2line sees through inlining (the release build inlines the whole pass into a few
functions); LOAD_BIAS: where qemu loaded it (hex: main's run-time address less its link-time
one); PASSES: K2 - K1. A block is named by the innermost function of preprocess/ that its
first instruction's inline chain passes through (a block's instructions after an inlined call
boundary count with its first: an approximation at the edges), and the source line; blocks
outside the executable (the C library's memcpy, memset) are "(outside the executable)".
"""

import subprocess
import sys
from collections import Counter

OUTSIDE = "(outside the executable)"


def load(path, bias):
    blocks = Counter()
    with open(path) as f:
        for line in f:
            vaddr, executed = line.split()
            blocks[int(vaddr, 16) - bias] += int(executed)
    return blocks


def inline_chains(exe, addrs):
    """addr -> [(function, file:line), ...], innermost first (addr2line -i)."""
    out = subprocess.run(
        ["aarch64-linux-gnu-addr2line", "-f", "-i", "-C", "-a", "-e", exe] + [hex(a) for a in addrs],
        capture_output=True, text=True, check=True).stdout.splitlines()
    chains, current, lines = {}, None, []
    for line in out:
        if line.startswith("0x") and all(ch in "0123456789abcdefx" for ch in line):
            if current is not None:
                chains[current] = list(zip(lines[0::2], lines[1::2]))
            current, lines = int(line, 16), []
        else:
            lines.append(line)
    if current is not None:
        chains[current] = list(zip(lines[0::2], lines[1::2]))
    return chains


def name(chain):
    if not chain or chain[0][0] == "??":
        return OUTSIDE, ""
    for function, where in chain:
        if "/preprocess" in where or "preprocess.rs" in where:
            function = function.replace("qnn::tools::preprocess::", "")
            return function, where.split("/")[-1].split(" ")[0]
    return chain[-1][0][:60], ""


def main(argv):
    exe, bias, pixels, passes = argv[0], int(argv[1], 16), int(argv[2]), int(argv[3])
    k1, k2 = load(argv[4], bias), load(argv[5], bias)
    addrs = sorted(a for a in k2 if a >= 0)
    chains = inline_chains(exe, addrs)
    by_function, by_line = Counter(), Counter()
    for a, executed in k2.items():
        function, where = name(chains.get(a))
        d = (executed - k1.get(a, 0)) / (passes * pixels)
        by_function[function] += d
        by_line[(function, where)] += d
    total = sum(by_function.values())
    print("by function:")
    for function, v in by_function.most_common():
        if v >= 0.05:
            print(f"  {v:7.1f} {100 * v / total:5.1f}%  {function}")
    print(f"  {total:7.1f} 100.0%  (all)")
    print("by line (the ten first):")
    for (function, where), v in by_line.most_common(10):
        print(f"  {v:7.1f} {100 * v / total:5.1f}%  {function} {where}")


if __name__ == "__main__":
    main(sys.argv[1:])
