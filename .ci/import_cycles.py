#!/usr/bin/env python3
"""Prints every circle of imports between the files of one Rust crate; prints nothing when
there is none. Used by .ci/architecture.sh, on qnn/src and on qnn_sim/src.

    import_cycles.py CRATE_SRC [--edges]   (the directory holding the crate's lib.rs;
                                           --edges lists every edge instead)

Nodes: every `.rs` file of the crate's module tree, found the way rustc finds it: from
lib.rs, each `mod x;` is `x.rs` or `x/mod.rs` beside (or, from a non-mod.rs file `f.rs`,
under `f/`) the declaring file. Files nothing declares (`src/bin/`, leftovers) are not
nodes. A `#[path]` attribute is not followed: it is reported, so the check cannot be
misled by one. Inline modules (`mod tests { … }`) belong to their file.

Edges: file A → file B when A's code (comments and string literals left out; test code
counts like any other) names a path that resolves into B:
  - every path of a `use` declaration, its trees expanded (`use a::{b, c::*}`), globs
    included whether or not anything of them is used;
  - every other path (an expression, a type, an attribute's argument) that starts with
    `crate`, `$crate`, `super` (chained too) or `self`, or with a name the module itself
    binds: a child module it declares or a name one of its `use` declarations brings in
    (`mem::live()` beside `mod mem;`, `calls::x()` after `use crate::ffi::calls;`).
    Names bound nowhere in the crate (`std::…`, local variables) are not edges.
A path is followed segment by segment through modules; at the first segment that is not
a module it stops in the file that defines that item, following re-exports and globs
(`pub use voter::*` in a parent is a way through to voter.rs, not a dead end in the
parent), so routing an import through a facade does not hide where it really goes.
`pub(in path)` is a visibility, not an edge.

The rule: no two files import each other, directly or around a longer circle, with one
exception stated here on purpose: a file and a child module it declares (`mod x;`, the
child's file) may import each other, the usual Rust shape where a parent re-exports or
calls its child and the child uses the parent's types through `super::`. Only that pair
is allowed: a child→parent import that closes any circle longer than the pair (parent →
sibling → child → parent, parent → child → grandchild → parent, …) is a circle, and so is a
grandchild importing its grandparent around the declaring file.

Each circle is printed as `import circle: a.rs -> b.rs -> … -> a.rs`, every step followed by
the first line that makes the edge; a group of files that are all tangled (a strongly
connected component) is also listed whole.
"""
import os
import re
import sys
from collections import deque

root_dir = sys.argv[1] if len(sys.argv) > 1 else "qnn/src"
errors = []

# ---------------------------------------------------------------- lexing


def ident_char(c):
    return c.isalnum() or c == "_"


def raw_string_start(text, i):
    """Whether the `r` at i opens a raw string (`r"`, `r#"`, `br"`, `cr"`), not ends a name."""
    if i == 0 or not ident_char(text[i - 1]):
        return True
    return text[i - 1] in "bc" and (i == 1 or not ident_char(text[i - 2]))


def strip(text):
    """Returns text with comments and string/char literals blanked (newlines kept, so line
    numbers hold)."""
    out = []
    i, n = 0, len(text)

    def blank(s):
        return re.sub(r"[^\n]", " ", s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and raw_string_start(text, i):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(blank(text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i : j + 1]))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]+\}|.)|[^\\'\n])'", text[i:])
            if m:
                out.append(blank(m.group(0)))
                i += m.end()
            else:  # a lifetime or a label
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


token_re = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*|::|\S")


def tokens(code):
    line = 1
    last = 0
    for m in token_re.finditer(code):
        line += code.count("\n", last, m.start())
        last = m.start()
        yield m.group(0), line


# ---------------------------------------------------------------- the module tree


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of names from the crate root
        self.file = file
        self.children = set()  # names of child modules (file or inline)
        self.bindings = {}  # name -> list of (scope path, segments): what `use` brings in
        self.globs = []  # (scope path, segments) of `use …::*`
        self.defs = set()  # names of items defined here


modules = {}  # path tuple -> Module
files = {}  # file -> path tuple of its module
refs = []  # (file, line, scope path, segments, source kind)
item_kw = {"fn", "struct", "enum", "union", "trait", "type", "const", "static", "mod"}


def parse_use_tree(toks, i, prefix, scope, line, file):
    """Parses one use tree starting at toks[i]; returns (index after it, list of
    (segments, binding name or '*'))."""
    out = []
    segs = list(prefix)
    while i < len(toks):
        t = toks[i][0]
        if t == "::":
            i += 1
        elif t == "{":
            i += 1
            while toks[i][0] != "}":
                i, sub = parse_use_tree(toks, i, segs, scope, line, file)
                out += sub
                if toks[i][0] == ",":
                    i += 1
            return i + 1, out
        elif t == "*":
            out.append((segs, "*"))
            return i + 1, out
        elif re.match(r"\$?[A-Za-z_]", t):
            if t == "self" and segs:
                name = segs[-1]
                nxt = toks[i + 1][0] if i + 1 < len(toks) else ""
                if nxt == "as":
                    name = toks[i + 2][0]
                    i += 2
                out.append((segs, name))
                return i + 1, out
            segs = segs + [t]
            nxt = toks[i + 1][0] if i + 1 < len(toks) else ""
            if nxt == "as":
                out.append((segs, toks[i + 2][0]))
                return i + 3, out
            if nxt != "::":
                out.append((segs, t))
                return i + 1, out
            i += 1
        else:
            return i, out
    return i, out


def mod_file(decl_file, decl_is_modrs, inline_path, name):
    base = os.path.dirname(decl_file)
    if not decl_is_modrs:
        base = os.path.join(base, os.path.basename(decl_file)[:-3])
    base = os.path.join(base, *inline_path, name)
    for cand in (base + ".rs", os.path.join(base, "mod.rs")):
        if os.path.isfile(cand):
            return cand
    return None


def load(file, path):
    files[file] = path
    raw = open(file, encoding="utf-8").read()
    code = strip(raw)
    for m in re.finditer(r"#\s*\[\s*path\s*=", raw):
        errors.append(f"{file}:{raw.count(chr(10), 0, m.start()) + 1}: #[path] is not followed by .ci/import_cycles.py")
    toks = list(tokens(code))
    is_modrs = os.path.basename(file) in ("mod.rs", "lib.rs", "main.rs")
    modules[path] = Module(path, file)
    # stack of (kind, module path, inline names): kind 'mod' opens a module, 'block' not
    stack = [("mod", path, [])]
    depth_in_mod = [0]  # braces open inside the current module's body (0: module level)
    i = 0
    prev = ""
    while i < len(toks):
        t, line = toks[i]
        cur = stack[-1][1]
        inline = stack[-1][2]
        at_module_level = depth_in_mod[-1] == 0
        if t == "mod" and i + 2 < len(toks) and re.match(r"[A-Za-z_]", toks[i + 1][0]) and prev != "::":
            name, nxt = toks[i + 1][0], toks[i + 2][0]
            modules[cur].children.add(name)
            if nxt == ";":
                child = mod_file(file, is_modrs, inline, name)
                if child is None:
                    errors.append(f"{file}:{line}: mod {name}; has no file")
                else:
                    load(child, cur + (name,))
                i += 3
                prev = ";"
                continue
            if nxt == "{":
                sub = cur + (name,)
                modules[sub] = Module(sub, file)
                stack.append(("mod", sub, inline + [name]))
                depth_in_mod.append(0)
                i += 3
                prev = "{"
                continue
        if t == "use" and prev != "::":
            j = i + 1
            if toks[j][0] == "::":  # `use ::extern_crate…`
                while toks[j][0] != ";":
                    j += 1
                i, prev = j + 1, ";"
                continue
            j, items = parse_use_tree(toks, j, [], cur, line, file)
            while j < len(toks) and toks[j][0] != ";":
                j += 1
            for segs, name in items:
                if not segs:
                    continue
                refs.append((file, line, cur, segs, "use"))
                if not at_module_level:
                    continue
                if name == "*":
                    modules[cur].globs.append((cur, segs))
                elif name != "_":
                    modules[cur].bindings.setdefault(name, []).append((cur, segs))
            i, prev = j + 1, ";"
            continue
        if t == "in" and prev == "(" and i >= 2 and toks[i - 2][0] == "pub":  # pub(in path)
            while toks[i][0] != ")":
                i += 1
            continue
        if t in item_kw and at_module_level and i + 1 < len(toks):
            name = toks[i + 1][0]
            if re.match(r"[A-Za-z_]", name) and name not in ("fn", "_"):
                modules[cur].defs.add(name)
        if t == "macro_rules" and i + 2 < len(toks):
            modules[cur].defs.add(toks[i + 2][0])
        if t == "{":
            depth_in_mod[-1] += 1
        elif t == "}":
            if depth_in_mod[-1] == 0 and len(stack) > 1:
                stack.pop()
                depth_in_mod.pop()
            else:
                depth_in_mod[-1] -= 1
        elif re.match(r"\$?[A-Za-z_]", t) and prev != "::" and i + 2 < len(toks) and toks[i + 1][0] == "::":
            segs = [t]
            j = i + 1
            while j + 1 < len(toks) and toks[j][0] == "::" and re.match(r"\$?[A-Za-z_]", toks[j + 1][0]):
                segs.append(toks[j + 1][0])
                j += 2
            refs.append((file, line, cur, segs, "path"))
            prev = segs[-1]
            i = j
            continue
        prev = t
        i += 1


lib = os.path.join(root_dir, "lib.rs")
if not os.path.isfile(lib):
    sys.exit(f"{root_dir}: no lib.rs")
load(lib, ())

# ---------------------------------------------------------------- resolution

EXTERNAL = "external"


def start(scope, segs, guard):
    """The module a path starts from and the segments left, or None (external, unknown)."""
    first = segs[0]
    if first in ("crate", "$crate"):
        return (), segs[1:]
    if first in ("super", "self"):
        cur = scope
        k = 0
        while k < len(segs) and segs[k] in ("super", "self"):
            if segs[k] == "super":
                cur = cur[:-1]
            k += 1
        return cur, segs[k:]
    mod = modules.get(scope)
    if mod is None:
        return None
    if first in mod.children:
        return scope + (first,), segs[1:]
    if first in mod.bindings:
        target = follow_binding(mod, first, guard)
        if target is None or target == EXTERNAL:
            return None
        if target[1] is None:  # a module
            return target[0], segs[1:]
        return None  # an item's associated path (`Type::new`): the use already is the edge
    return None


def follow_binding(mod, name, guard):
    """Where a name a module binds with `use` points: (module path, item name or None for the
    module itself), or EXTERNAL."""
    key = (mod.path, name)
    if key in guard:
        return None
    guard = guard | {key}
    for scope, segs in mod.bindings[name]:
        r = resolve(scope, segs, guard)
        if r is not None:
            return r
    return EXTERNAL


def lookup(modpath, name, guard):
    """Resolves one name inside a module: (module path, item or None), EXTERNAL (bound to
    another crate's path) or None (unknown)."""
    mod = modules.get(modpath)
    if mod is None:
        return None
    if name in mod.children:
        return modpath + (name,), None
    if name in mod.bindings:
        return follow_binding(mod, name, guard)
    if name in mod.defs:
        return modpath, name
    for scope, segs in mod.globs:
        key = (modpath, "*", tuple(segs))
        if key in guard:
            continue
        g = resolve(scope, segs, guard | {key})
        if g is None or g == EXTERNAL or g[1] is not None:
            continue
        r = lookup(g[0], name, guard | {key})
        if r is not None and r != EXTERNAL:
            return r
    return None


def resolve(scope, segs, guard=frozenset()):
    """(module path, item name or None) for a path, EXTERNAL, or None."""
    s = start(scope, segs, guard)
    if s is None:
        return EXTERNAL
    cur, rest = s
    if cur not in modules:
        return None
    for seg in rest:
        r = lookup(cur, seg, guard)
        if r == EXTERNAL:  # a re-export of another crate (`crate::sys`)
            return EXTERNAL
        if r is None:  # unknown here (a generated item, an enum's variant): stop in cur
            return cur, seg
        if r[1] is not None:
            return r
        cur = r[0]
    return cur, None


edges = {f: {} for f in files}  # file -> {file: (line, source text)}
sources = {}
for file, line, scope, segs, kind in refs:
    r = resolve(scope, segs)
    if r is None or r == EXTERNAL:
        continue
    target = modules[r[0]].file
    if target != file and target not in edges[file]:
        if file not in sources:
            sources[file] = open(file, encoding="utf-8").read().split("\n")
        edges[file][target] = (line, sources[file][line - 1].strip())

if "--edges" in sys.argv:  # every edge, for a person looking into a circle
    for a in sorted(edges):
        for b, (line, text) in sorted(edges[a].items()):
            print(f"{a} -> {b}    {a}:{line}: {text}")
    sys.exit(0)

# The declaring file of each file (its parent module's file).
parent = {}
for file, path in files.items():
    if path:
        parent[file] = modules[path[:-1]].file

# ---------------------------------------------------------------- circles


def strongly_connected(nodes, succ):
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ(v)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def path_between(a, b, succ):
    """Shortest path a -> … -> b (a list of files) or None."""
    prev = {a: None}
    queue = deque([a])
    while queue:
        v = queue.popleft()
        for w in sorted(succ(v)):
            if w not in prev:
                prev[w] = v
                if w == b:
                    out = [b]
                    while prev[out[-1]] is not None:
                        out.append(prev[out[-1]])
                    return out[::-1]
                queue.append(w)
    return None


def is_up(a, b):  # a child's import of the file that declares it
    return parent.get(a) == b


reported = set()


def report(cycle, group=None):
    """cycle: [a, b, …, a]."""
    body = cycle[:-1]
    k = body.index(min(body))
    key = tuple(body[k:] + body[:k])
    if key in reported:
        return
    reported.add(key)
    print("import circle: " + " -> ".join(cycle))
    for a, b in zip(cycle, cycle[1:]):
        line, text = edges[a][b]
        print(f"    {a}:{line}: {text}")
    if group and len(group) > len(body):
        print("  tangled with it: " + " ".join(sorted(set(group) - set(body))))


# 1. Circles with no child→parent import in them.
def down(v):
    return [w for w in edges[v] if not is_up(v, w)]


for comp in strongly_connected(files, down):
    members = set(comp)
    a = comp[0]
    best = None
    for b in down(a):
        if b in members:
            p = path_between(b, a, lambda v: [w for w in down(v) if w in members])
            if p and (best is None or len(p) < len(best)):
                best = p
    report([a] + best, comp)

# 2. A child→parent import closes a circle longer than the pair.
for child in sorted(edges):
    par = parent.get(child)
    if par is None or par not in edges[child]:
        continue
    p = path_between(par, child, lambda v: [w for w in edges[v] if not (v == par and w == child)])
    if p:
        report([child] + p)

for e in errors:
    print(e)
