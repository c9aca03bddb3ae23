"""Fails when a file includes a header of a target its own target does not link.

The layers of agent/, rendezvous/, collectives/, runtime/ and common/ are CMake targets
(docs/design.md), and a part may include only what its target links, directly or through the
targets those link. This reads every CMakeLists.txt and *.cmake under those folders: the .cpp
files each add_library / target_sources names give each folder its target (a header belongs to
the target of its own .cpp, else to that of its folder's .cpp files), and target_link_libraries
gives each target the ddp_* targets it links. Every `#include "x/y.hpp"` rooted at the repository from one target's folder
into another's must then be covered by the link closure. Dependencies from outside (Boost, fmt)
are not checked. Prints every uncovered include, one per pair of targets.

The parts below the command line take narrow specs, never the LaunchConfig: a target named in
NEVER_LINKS fails when its link closure reaches one it must stay below, even where a CMake file
was changed to link it (so agent/core including agent/cli fails whichever way it is added).

Usage: include_links.py [REPO_ROOT]   (run by ctest as layers_include_links)
"""
import os
import re
import sys

ROOTS = ("agent", "rendezvous", "collectives", "runtime", "common")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
COMMAND = re.compile(r"\b(add_library|target_sources|target_link_libraries)\s*\(([^)]*)\)", re.S)
TARGET = re.compile(r"\bddp(?:_[a-z0-9]+)*\b")
# target -> the targets it must never link, directly or through others (docs/design.md).
NEVER_LINKS = {
    "ddp_agent_core": ("ddp_agent_cli", "ddp_agent"),
    "ddp_agent_process": ("ddp_agent_cli", "ddp_agent"),
    "ddp_agent_stacks": ("ddp_agent_cli", "ddp_agent"),
}


def cmake_files(repo):
    for root in ROOTS:
        for folder, _, files in os.walk(os.path.join(repo, root)):
            for name in files:
                if name == "CMakeLists.txt" or name.endswith(".cmake"):
                    yield os.path.join(folder, name)


def read_targets(repo):
    """({source file: target}, {target: set of ddp_* targets it links})."""
    owner, links = {}, {}
    for path in cmake_files(repo):
        with open(path) as f:
            text = re.sub(r"#[^\n]*", "", f.read())  # comments may hold parentheses
        folder = os.path.dirname(path)
        for command, body in COMMAND.findall(text):
            words = body.split()
            if not words:
                continue
            target = words[0]
            if command == "target_link_libraries":
                links.setdefault(target, set()).update(
                    t for word in words[1:] for t in TARGET.findall(word) if t != target)
                continue
            links.setdefault(target, set())
            for word in words[1:]:
                if word.endswith((".cpp", ".cu")) and "$" not in word:
                    source = os.path.normpath(os.path.join(folder, word))
                    owner[os.path.relpath(source, repo)] = target
    return owner, links


def closure(target, links):
    seen, stack = {target}, [target]
    while stack:
        for dep in links.get(stack.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "../.."))
    owner, links = read_targets(repo)
    folder_target = {}
    for source, target in owner.items():
        folder_target.setdefault(os.path.dirname(source), target)
    # Header-only folders: the vocabulary headers (common/include/ddp) and libddp's public ones.
    folder_target.setdefault("common/include/ddp", "ddp_vocabulary")
    folder_target.setdefault("runtime/include/ddp", "ddp")

    def target_of(path):
        """A source's target; a header's is that of its own .cpp (x.cpp or x_linux.cpp) where one
        exists, else its folder's (a folder may hold two targets' files)."""
        stem = os.path.splitext(path)[0]
        return (owner.get(path) or owner.get(stem + ".cpp") or owner.get(stem + "_linux.cpp")
                or folder_target.get(os.path.dirname(path)))

    failures = {}
    for low, highs in NEVER_LINKS.items():
        for high in highs:
            if high in closure(low, links):
                failures[(low, high)] = None
    for path in sorted(owner) + sorted(
            os.path.relpath(os.path.join(d, n), repo)
            for root in ROOTS for d, _, files in os.walk(os.path.join(repo, root))
            for n in files if n.endswith((".hpp", ".h", ".cuh"))):
        source_target = target_of(path)
        if source_target is None:
            continue
        with open(os.path.join(repo, path), errors="replace") as f:
            text = f.read()
        reach = closure(source_target, links)
        for header in INCLUDE.findall(text):
            header_target = target_of(header) if os.path.exists(os.path.join(repo, header)) else None
            if header_target is None or header_target in reach:
                continue
            failures.setdefault((source_target, header_target), f"{path} -> {header}")
    for (a, b), example in sorted(failures.items()):
        if example is None:
            print(f"FAIL: {a} links {b}, a part above it (NEVER_LINKS)")
        else:
            print(f"FAIL: {a} includes {b} without linking it: {example}")
    print(f"{len(owner)} sources in {len(links)} targets; {len(failures)} uncovered target pairs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
