"""Fails when code under collectives/ or runtime/ reaches Boost.Asio through a header.

Workers' code (the collectives and libddp) talks to the store through BlockingStore, whose
header is free of Asio; Asio is parsed only by the .cpp files that run a loop themselves. This
follows every repository include ("x/y.hpp", rooted at the repository or at common/include)
from each file under collectives/ and runtime/ and prints, per file, the chain of headers that
ends in an `#include <boost/asio...>`. A .cpp file may include Asio itself; one that must reach
it through another module's header (a store server hosted in a worker) is named in ALLOWED.

Usage: asio_free_headers.py [REPO_ROOT]   (run by ctest as layers_asio_free_headers)
"""
import os
import re
import sys

ROOTS = ("collectives", "runtime")
INCLUDE_DIRS = ("", "common/include")
QUOTED = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ASIO = re.compile(r'^\s*#\s*include\s+<boost/asio[/.>]', re.M)
# .cpp files that run Asio code of another module on purpose, with the reason.
ALLOWED = {
    "runtime/src/hosted_store.cpp":
        "rank 0 hosts the job's TCPStore server (TORCHELASTIC_USE_AGENT_STORE=False)",
}


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "../.."))
    texts = {}

    def text_of(path):
        if path not in texts:
            with open(os.path.join(repo, path), errors="replace") as f:
                texts[path] = f.read()
        return texts[path]

    def resolve(name):
        for base in INCLUDE_DIRS:
            path = os.path.normpath(os.path.join(base, name))
            if os.path.isfile(os.path.join(repo, path)):
                return path
        return None

    chains = {}  # header -> the chain of headers from it to one including Asio, or None

    def asio_chain(header, visiting=()):
        if header in chains:
            return chains[header]
        if header in visiting:
            return None
        chain = [header] if ASIO.search(text_of(header)) else None
        for name in QUOTED.findall(text_of(header)):
            if chain:
                break
            included = resolve(name)
            if included:
                below = asio_chain(included, visiting + (header,))
                if below:
                    chain = [header] + below
        chains[header] = chain
        return chain

    files = sorted(os.path.relpath(os.path.join(d, n), repo)
                   for root in ROOTS for d, _, names in os.walk(os.path.join(repo, root))
                   for n in names if n.endswith((".cpp", ".cu", ".hpp", ".h", ".cuh")))
    failures = 0
    for path in files:
        is_header = path.endswith((".hpp", ".h", ".cuh"))
        chain = asio_chain(path) if is_header else None
        if not is_header:
            for name in QUOTED.findall(text_of(path)):
                included = resolve(name)
                chain = asio_chain(included) if included else None
                if chain:
                    chain = [path] + chain
                    break
        if chain and path not in ALLOWED:
            failures += 1
            print(f"FAIL: {path} reaches boost/asio through " + " -> ".join(chain[1:] or chain))
    for path in ALLOWED:
        if not os.path.isfile(os.path.join(repo, path)):
            failures += 1
            print(f"FAIL: ALLOWED names {path}, which does not exist")
    print(f"{len(files)} files under {', '.join(ROOTS)}; {failures} reach Asio through a header")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
