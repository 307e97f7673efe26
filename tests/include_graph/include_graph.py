#!/usr/bin/env python3
"""The module-level include graph of core, and the rules it must keep.

A core module is a folder: core/<module>/ (its sources) together with core/include/ninfer/<module>/
(its headers); the plugin ABI (core/include/ninfer/abi/) is the module `abi`. A file's #include
lines give the edges between modules. The check fails, naming the files, on

  * a cycle between core modules (a module that reaches itself through other modules);
  * a header directly in core/include/ninfer/ (every header belongs to a module folder);
  * a plugin source under plugins/ that includes a core header other than ninfer/abi/**, or that
    reaches into core/ by a relative path.

Known violations are named with --allow (an exact `FILE -> INCLUDE` pair, as printed); an
allowed pair that no longer occurs is itself an error, so the allow-list shrinks with the tree.

  include_graph.py [--root DIR] [--allow 'FILE -> INCLUDE' ...]      check, print problems
  include_graph.py --graph | --dot                                   print the module graph
"""

import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".inc", ".in")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
HEADER_ROOT = os.path.join("core", "include")
NINFER_HEADERS = os.path.join(HEADER_ROOT, "ninfer")


def source_files(root, top):
    base = os.path.join(root, top)
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(folder, name), root)


def includes(root, path):
    """(spelling, resolved repository-relative path or None) for each #include of `path`."""
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        text = f.read()
    for bracket, spelling in INCLUDE.findall(text):
        resolved = None
        candidates = [os.path.join(HEADER_ROOT, spelling)]
        if bracket == '"':
            candidates.insert(0, os.path.join(os.path.dirname(path), spelling))
        for candidate in candidates:
            candidate = os.path.normpath(candidate)
            if os.path.isfile(os.path.join(root, candidate)):
                resolved = candidate
                break
        yield spelling, resolved


def core_module(path):
    """The module of a repository-relative path under core/, '' for a loose header, None outside."""
    parts = path.split(os.sep)
    if parts[0] != "core" or len(parts) < 3:
        return None
    if parts[1] == "include":
        if len(parts) >= 4 and parts[2] == "ninfer":
            return parts[3] if len(parts) >= 5 else ""
        return None
    return parts[1]


def build(root):
    """Scan the tree: module edges with the file pairs behind them, and the problems found."""
    edges = {}       # (from module, to module) -> [(file, include spelling)]
    modules = set()
    problems = []    # (file, include spelling or '', message)
    plugin_uses = {}  # plugin folder -> set of core modules it includes
    for path in source_files(root, "core"):
        module = core_module(path)
        if module is None:
            continue
        if module == "":
            problems.append((path, "", "a core header outside any module folder "
                             "(move it into core/include/ninfer/<module>/)"))
            continue
        modules.add(module)
        for spelling, resolved in includes(root, path):
            target = core_module(resolved) if resolved else None
            if target and target != module:
                edges.setdefault((module, target), []).append((path, spelling))
    for path in source_files(root, "plugins"):
        plugin = path.split(os.sep)[1]
        for spelling, resolved in includes(root, path):
            into_core = resolved is not None and resolved.split(os.sep)[0] == "core"
            abi = resolved is not None and resolved.startswith(
                os.path.join(NINFER_HEADERS, "abi") + os.sep)
            if into_core:
                plugin_uses.setdefault(plugin, set()).add(core_module(resolved) or "core")
            if spelling.startswith("ninfer/") and not spelling.startswith("ninfer/abi/"):
                problems.append((path, spelling, "a plugin includes a core header outside "
                                 "ninfer/abi/ (plugins see only the plugin ABI)"))
            elif into_core and not abi:
                problems.append((path, spelling, "a plugin reaches into core/ by a relative "
                                 "path (plugins see only ninfer/abi/)"))
            elif into_core and not spelling.startswith("ninfer/abi/"):
                problems.append((path, spelling, "a plugin includes the ABI by a relative path "
                                 "(spell it ninfer/abi/...)"))
    return modules, edges, problems, plugin_uses


def cycles(modules, edges):
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph = {m: sorted({b for (a, b) in edges if a == m}) for m in modules}
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, []):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for m in sorted(modules):
        if m not in index:
            visit(m)
    return sorted(found)


def pair(path, spelling):
    return f"{path} -> {spelling}"


def check(root, allowed):
    modules, edges, problems, _ = build(root)
    used = set()
    messages = []

    for path, spelling, why in problems:
        if pair(path, spelling) in allowed:
            used.add(pair(path, spelling))
        else:
            messages.append(f"{pair(path, spelling) if spelling else path}: {why}")

    # An allowed include takes its edge out of the graph before cycles are looked for.
    kept = {}
    for edge, uses in edges.items():
        rest = [u for u in uses if pair(*u) not in allowed]
        used.update(pair(*u) for u in uses if pair(*u) in allowed)
        if rest:
            kept[edge] = rest
    for component in cycles(modules, kept):
        lines = [f"include cycle between core modules {', '.join(component)}:"]
        for (a, b), uses in sorted(kept.items()):
            if a in component and b in component:
                for path, spelling in uses:
                    lines.append(f"  {a} -> {b}: {pair(path, spelling)}")
        messages.append("\n".join(lines))

    for entry in sorted(allowed - used):
        messages.append(f"allow-list entry '{entry}' matches nothing in the tree; remove it")
    return messages


def print_graph(root, dot):
    modules, edges, _, plugin_uses = build(root)
    counts = {edge: len(uses) for edge, uses in edges.items()}
    in_cycle = {m for c in cycles(modules, edges) for m in c}
    if dot:
        print("digraph ninfer_core {")
        print("  rankdir=LR; node [shape=box, fontname=Helvetica];")
        for m in sorted(modules):
            style = ', color=red' if m in in_cycle else ''
            print(f'  "{m}" [label="{m}"{style}];')
        for plugin in sorted(plugin_uses):
            print(f'  "plugins/{plugin}" [shape=component];')
        for (a, b), n in sorted(counts.items()):
            print(f'  "{a}" -> "{b}" [label="{n}"];')
        for plugin, used in sorted(plugin_uses.items()):
            for m in sorted(used):
                print(f'  "plugins/{plugin}" -> "{m}";')
        print("}")
        return
    for m in sorted(modules):
        deps = sorted(b for (a, b) in counts if a == m)
        mark = "  (in a cycle)" if m in in_cycle else ""
        print(f"{m} -> {', '.join(deps) if deps else '(nothing)'}{mark}")
    for plugin, used in sorted(plugin_uses.items()):
        print(f"plugins/{plugin} -> {', '.join(sorted(used))}")


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")),
                        help="repository root (default: this script's repository)")
    parser.add_argument("--allow", action="append", default=[], metavar="'FILE -> INCLUDE'",
                        help="a known violation, exactly as printed")
    parser.add_argument("--graph", action="store_true", help="print the module graph as text")
    parser.add_argument("--dot", action="store_true", help="print the module graph as Graphviz")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if args.graph or args.dot:
        print_graph(root, args.dot)
        return 0
    messages = check(root, set(args.allow))
    for message in messages:
        print(message)
    if messages:
        print(f"include graph: {len(messages)} problem(s)")
        return 1
    print("include graph: no cycle between core modules, no plugin reaching into core")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
