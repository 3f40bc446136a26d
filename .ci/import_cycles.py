#!/usr/bin/env python3
"""Prints every circle of imports between qnn's modules (`<layer>::<module>`, e.g.
exec::graph), one line each with the modules in it; prints nothing when there is none.

A module's imports are the `crate::` and `super::` paths in its files, comments and test
files (`tests.rs`, `#[cfg(test)]` blocks are not told apart: a test's import counts) left out
where they are whole files. Used by .ci/architecture.sh.
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "qnn/src"

files = {}  # path -> module path as a list, e.g. ["exec", "graph"]
for dirpath, _, names in os.walk(root):
    for name in names:
        if not name.endswith(".rs") or name == "tests.rs":
            continue
        path = os.path.join(dirpath, name)
        parts = os.path.relpath(path, root)[:-3].split(os.sep)
        if parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        files[path] = parts


def node(parts):
    return "::".join(parts[:2])


nodes = {node(p) for p in files.values() if len(p) >= 2}
edges = {n: set() for n in nodes}
path_re = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
for path, parts in files.items():
    if len(parts) < 2:
        continue
    src = node(parts)
    code = re.sub(r"//[^\n]*", "", open(path, encoding="utf-8").read())
    for m in path_re.finditer(code):
        base = [] if m.group(1) == "crate" else parts[:-1]
        target = base + m.group(2).split("::")[1:]
        target_node = node(target)
        if len(target) >= 2 and target_node in nodes and target_node != src:
            edges[src].add(target_node)

# Tarjan's strongly connected components
index, low, stack, on_stack, found = {}, {}, [], set(), []
counter = [0]
sys.setrecursionlimit(10000)


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on_stack.add(v)
    for w in sorted(edges[v]):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop()
            on_stack.discard(w)
            component.append(w)
            if w == v:
                break
        if len(component) > 1:
            found.append(sorted(component))


for v in sorted(nodes):
    if v not in index:
        visit(v)
for component in found:
    print("import circle: " + " <-> ".join(component))
