"""Fails when two parts of the code include each other, directly or through other parts.

A part is a folder under agent/, rendezvous/, collectives/, runtime/, common/ and apps/ (its
files, not its subfolders). Every `#include "x/y/z.hpp"` rooted at the repository is an edge from
the including file's part to the included file's part. An edge inside a cycle of parts fails the
check unless include_cycles.allow lists it (the list is empty: a cycle is a defect to remove, and
an entry there is a debt written down). A listed edge that no longer closes a cycle fails too, so
the list only shrinks. The check prints every cycle, with one include that makes each edge.

Usage: include_cycles.py [REPO_ROOT]   (run by ctest as layers_include_cycles)
"""
import os
import re
import sys

ROOTS = ("agent", "rendezvous", "collectives", "runtime", "common", "apps")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def part_of(path):
    return os.path.dirname(path)


def edges(repo):
    """{(from part, to part): 'file -> include'} over every source file."""
    known = set()
    for root in ROOTS:
        for folder, _, files in os.walk(os.path.join(repo, root)):
            for name in files:
                known.add(os.path.relpath(os.path.join(folder, name), repo))
    found = {}
    for path in sorted(known):
        if not path.endswith((".hpp", ".cpp", ".h", ".cu", ".cuh")):
            continue
        with open(os.path.join(repo, path), errors="replace") as f:
            text = f.read()
        for target in INCLUDE.findall(text):
            if target not in known:
                continue  # generated, system-like or another tree
            a, b = part_of(path), part_of(target)
            if a != b:
                found.setdefault((a, b), f"{path} -> {target}")
    return found


def cycles(graph_edges):
    """Strongly connected components with more than one part (Tarjan)."""
    graph = {}
    for a, b in graph_edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
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
                result.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return result


def allowed_edges():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include_cycles.allow")
    allowed = set()
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                a, b = (part.strip() for part in line.split("->"))
                allowed.add((a, b))
    return allowed


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "../.."))
    found = edges(repo)
    allowed = allowed_edges()
    in_cycles, failures = set(), []
    for component in cycles(found):
        print(f"include cycle between {', '.join(component)}:")
        for (a, b), example in sorted(found.items()):
            if a in component and b in component:
                in_cycles.add((a, b))
                known = (a, b) in allowed
                print(f"  {a} -> {b}: {example}{'' if known else '   <- NEW'}")
                if not known:
                    failures.append(f"new edge in a cycle: {a} -> {b} ({example})")
    for a, b in sorted(allowed - in_cycles):
        failures.append(f"{a} -> {b} closes no cycle any more: remove it from include_cycles.allow")
    for failure in failures:
        print(f"FAIL: {failure}")
    print(f"{len(found)} edges between parts, {len(in_cycles)} in cycles "
          f"({len(in_cycles & allowed)} known)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
