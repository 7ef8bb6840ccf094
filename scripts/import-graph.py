#!/usr/bin/env python3
"""Prints each Rust crate's module imports and the import cycles among its modules.

Usage: scripts/import-graph.py [CRATE ...] [--depth N] [--names] [--check] [--tests]

CRATE is a crate's name (`sluice-bench`) or its directory; without one, every crate under
crates/. A module is a file reached from the crate root by `mod` declarations (`foo.rs`,
`foo/mod.rs`); `--depth N` collapses modules to their first N path segments, so a folder
module (`handlers/`) counts as one node. An import is any `crate::`, `super::` or `self::`
path and any path through a child module, in a `use` or in code; `#[cfg(test)]` modules are
left out unless `--tests`, since only production imports shape the layers. `--names` lists the
imported names on every edge (otherwise only on the edges that close a cycle).

For each strongly connected component of more than one module (a cycle), it orders the
component's modules top-down (greedy minimum feedback arc set, Eades-Lin-Smyth) and lists
the edges that point back up: moving the names on those edges removes the cycle. `--check`
exits 1 if any crate has a cycle. Python standard library only: it reads the source text,
not the compiler's view, so macro-generated paths and `#[path]` attributes are not seen.
"""

import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_literals(text):
    """Blanks comments, string and char literals (keeping newlines), so paths are code only."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
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
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            j = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(?:\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


CFG_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])")


def drop_test_modules(code):
    """Removes `#[cfg(test)] mod x { ... }` bodies; returns the code and the names of
    `#[cfg(test)] mod x;` declarations (their files are left out too)."""
    test_files = set()
    while True:
        m = CFG_TEST_MOD.search(code)
        if not m:
            return code, test_files
        if m.group(2) == ";":
            test_files.add(m.group(1))
            end = m.end()
        else:
            end = matching_brace(code, m.end() - 1) + 1
        code = code[:m.start()] + "\n" * code.count("\n", m.start(), end) + code[end:]


def parse_use_tree(s):
    """Expands a `use` tree (`crate::{a::B, c::{self, D as E}}`) into segment lists."""
    tokens = re.findall(IDENT + r"|::|[{},*]|\$crate", s)
    pos = 0

    def tree(prefix):
        nonlocal pos
        paths = []
        path = list(prefix)
        while pos < len(tokens):
            t = tokens[pos]
            if t == "{":
                pos += 1
                while pos < len(tokens) and tokens[pos] != "}":
                    if tokens[pos] == ",":
                        pos += 1
                        continue
                    paths += tree(path)
                pos += 1
                return paths
            if t in (",", "}"):
                break
            if t == "as":
                pos += 2
                break
            if t == "::":
                pos += 1
                continue
            if t == "self" and path:
                pos += 1
                continue
            path.append(t)
            pos += 1
        paths.append(path)
        return paths

    return tree([])


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of segments; () is the crate root
        self.file = file
        self.children = set()
        self.code = ""


def discover(crate_dir, with_tests):
    """Follows `mod` declarations from src/lib.rs (or src/main.rs) and returns the modules."""
    src = os.path.join(crate_dir, "src")
    root_file = os.path.join(src, "lib.rs")
    if not os.path.exists(root_file):
        root_file = os.path.join(src, "main.rs")
    modules = {}
    todo = [((), root_file, src)]
    while todo:
        path, file, child_dir = todo.pop()
        mod = Module(path, file)
        modules[path] = mod
        with open(file, encoding="utf-8") as f:
            code = strip_comments_and_literals(f.read())
        test_files = set()
        if not with_tests:
            code, test_files = drop_test_modules(code)
        mod.code = code
        for m in re.finditer(r"(?:^|[;}\]\s])mod\s+(" + IDENT + r")\s*;", code):
            name = m.group(1)
            if name in test_files:
                continue
            for cand, sub_dir in (
                (os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name)),
                (os.path.join(child_dir, name, "mod.rs"), os.path.join(child_dir, name)),
            ):
                if os.path.exists(cand):
                    mod.children.add(name)
                    todo.append((path + (name,), cand, sub_dir))
                    break
    return modules


def macro_homes(modules):
    """`#[macro_export]` macros are named `crate::m!` but live in their defining module."""
    homes = {}
    for path, mod in modules.items():
        for m in re.finditer(r"#\[macro_export\]\s*(?:#\[[^\]]*\]\s*)*macro_rules!\s*(" + IDENT + ")", mod.code):
            homes[m.group(1)] = path
    return homes


def inline_module_at(code):
    """Returns a function giving, for an offset, the inline `mod x { }` path around it."""
    spans = []
    for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", code):
        spans.append((m.end() - 1, matching_brace(code, m.end() - 1), m.group(1)))

    def at(offset):
        return tuple(name for start, end, name in spans if start < offset < end)

    return at


def resolve(segments, here, modules, homes):
    """The module a path names, from module `here`; None if it leaves the crate."""
    if not segments:
        return None, None
    first = segments[0]
    if first == "crate":
        base, rest = (), segments[1:]
    elif first in ("super", "self"):
        base, rest = here, segments
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    elif here + (first,) in modules:
        base, rest = here, segments
    else:
        return None, None
    node = base
    for seg in rest:
        if node + (seg,) in modules:
            node = node + (seg,)
        else:
            break
    names = rest[len(node) - len(base):]
    name = names[0] if names else "self"
    if node == () and name in homes:
        node = homes[name]
    return node, name


def imports(modules, homes):
    """edges[(from, to)] = set of names imported over it (at file-module granularity)."""
    edges = defaultdict(set)
    for path, mod in modules.items():
        code = mod.code
        inline_at = inline_module_at(code)
        found = []
        use_spans = []
        for m in re.finditer(r"\buse\s+([^;]*);", code):
            use_spans.append((m.start(), m.end()))
            for segs in parse_use_tree(m.group(1)):
                found.append((m.start(), segs))
        child_names = "|".join(re.escape(n) for n in sorted(mod.children)) or "(?!)"
        path_re = re.compile(
            r"(?<![\w:$])((?:crate|super|self|" + child_names + r")(?:\s*::\s*(?:" + IDENT + r"|\{))+)"
        )
        for m in path_re.finditer(code):
            if any(s <= m.start() < e for s, e in use_spans):
                continue
            if re.search(r"\bin\s+$", code[max(0, m.start() - 8):m.start()]):
                continue  # pub(in crate::x) is a visibility, not an import
            segs = [s for s in re.split(r"\s*::\s*", m.group(1)) if s and s != "{"]
            found.append((m.start(), segs))
        for offset, segs in found:
            here = path + inline_at(offset)
            # A bare child name inside an inline module is not the file's child.
            if segs and segs[0] not in ("crate", "super", "self") and here != path:
                continue
            node, name = resolve(segs, here, modules, homes)
            if node is None or node == path:
                continue
            edges[(path, node)].add(name)
    return edges


def collapse(edges, depth):
    if depth is None:
        return edges
    out = defaultdict(set)
    for (a, b), names in edges.items():
        a2, b2 = a[:depth], b[:depth]
        if a2 != b2:
            out[(a2, b2)] |= {"::".join(b[depth:] + (n,)) if b[depth:] else n for n in names}
    return out


def sccs(nodes, succ):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                result.append(sorted(comp))
    return result


def top_down_order(comp, succ):
    """Eades-Lin-Smyth: importers first, imported last; edges against it close the cycle."""
    left = set(comp)
    head, tail = [], []
    while left:
        changed = True
        while changed:
            changed = False
            for v in sorted(left):
                if not (succ[v] & left):  # imports nothing left: goes to the bottom
                    tail.insert(0, v)
                    left.discard(v)
                    changed = True
            for v in sorted(left):
                if not any(v in succ[u] for u in left if u != v):  # nobody left imports it
                    head.append(v)
                    left.discard(v)
                    changed = True
        if left:
            def score(v):
                out_deg = len(succ[v] & left)
                in_deg = sum(1 for u in left if v in succ[u])
                return (out_deg - in_deg, name_of(v))
            v = max(left, key=score)
            head.append(v)
            left.discard(v)
    return head + tail


def name_of(path):
    return "::".join(path) if path else "crate"


def crate_dirs(args):
    if not args:
        base = os.path.join(ROOT, "crates")
        return [os.path.join(base, d) for d in sorted(os.listdir(base))
                if os.path.isdir(os.path.join(base, d, "src"))]
    dirs = []
    for a in args:
        for cand in (a, os.path.join(ROOT, "crates", a)):
            if os.path.isdir(os.path.join(cand, "src")):
                dirs.append(cand)
                break
        else:
            sys.exit(f"import-graph: no crate {a!r} (looked for {a}/src and crates/{a}/src)")
    return dirs


def report(crate_dir, opts):
    name = os.path.basename(os.path.normpath(crate_dir))
    if not any(os.path.exists(os.path.join(crate_dir, "src", f)) for f in ("lib.rs", "main.rs")):
        print(f"crate {name}: no src/lib.rs or src/main.rs, skipped")
        return 0
    modules = discover(crate_dir, opts.tests)
    edges = collapse(imports(modules, macro_homes(modules)), opts.depth)
    nodes = {p if opts.depth is None else p[:opts.depth] for p in modules}
    succ = defaultdict(set)
    for a, b in edges:
        succ[a].add(b)
    print(f"crate {name}: {len(nodes)} modules, {len(edges)} imports"
          + (f" (depth {opts.depth})" if opts.depth is not None else ""))
    for v in sorted(nodes):
        targets = sorted(succ[v])
        if opts.names:
            parts = [f"{name_of(t)} {{{', '.join(sorted(edges[(v, t)]))}}}" for t in targets]
        else:
            parts = [name_of(t) for t in targets]
        print(f"  {name_of(v)} -> {', '.join(parts) if parts else '(nothing)'}")
    cycles = [c for c in sccs(nodes, succ) if len(c) > 1]
    if not cycles:
        print("  no cycles: the modules import in one direction only")
        return 0
    for i, comp in enumerate(sorted(cycles, key=len, reverse=True), 1):
        order = top_down_order(comp, succ)
        rank = {v: k for k, v in enumerate(order)}
        print(f"  cycle {i}: {len(comp)} modules, top-down: {', '.join(name_of(v) for v in order)}")
        back = sorted((a, b) for a in comp for b in succ[a] if b in rank and rank[b] < rank[a])
        print(f"    closed by {len(back)} upward imports:")
        for a, b in back:
            print(f"      {name_of(a)} -> {name_of(b)} {{{', '.join(sorted(edges[(a, b)]))}}}")
    return len(cycles)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("crates", nargs="*", help="crate names or directories (default: every crate)")
    p.add_argument("--depth", type=int, help="collapse modules to their first N path segments")
    p.add_argument("--names", action="store_true", help="list the imported names on every edge")
    p.add_argument("--tests", action="store_true", help="include #[cfg(test)] modules")
    p.add_argument("--check", action="store_true", help="exit 1 if any crate has a cycle")
    opts = p.parse_args()
    cycles = 0
    for d in crate_dirs(opts.crates):
        cycles += report(d, opts)
    if opts.check and cycles:
        print(f"import-graph: {cycles} cycle(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
