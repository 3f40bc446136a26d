#!/usr/bin/env python3
"""The Erlang smoke in .ci/aarch64.sh builds three of the NIF's option maps by hand; the NIF
decodes each with every key required (src/protocol.rs). Prints each map whose keys differ from
its type's fields, nothing when they agree. Run from native/hexagon_tpu_nif."""
import re
import sys

PAIRS = {"RuntimeArgs": "RuntimeArg", "Load": "LoadArg", "Options": "ExecuteArg"}

protocol = open("src/protocol.rs").read()
smoke = open("../../.ci/aarch64.sh").read()
for var, rust in PAIRS.items():
    body = re.search(r"pub struct %s\b[^{]*\{(.*?)\n\}" % rust, protocol, re.S)
    erl = re.search(r"\b%s = #\{(.*?)\}," % var, smoke, re.S)
    if not body or not erl:
        print(f"{rust} / {var}: not found (src/protocol.rs, .ci/aarch64.sh)")
        continue
    fields = set(re.findall(r"^\s*(?:pub\s+)?([a-z_][a-z0-9_]*)\s*:", body.group(1), re.M))
    keys = set(re.findall(r"([a-z_][a-z0-9_]*)\s*=>", erl.group(1)))
    if fields != keys:
        print(f".ci/aarch64.sh's {var} and src/protocol.rs's {rust} differ: "
              f"missing {sorted(fields - keys)}, extra {sorted(keys - fields)}")
sys.exit(0)
