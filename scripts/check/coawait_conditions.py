"""Fails on the shapes of co_await that GCC 12 miscompiles.

GCC 12 (Debian 12's compiler) miscompiles two shapes of co_await:

- A capturing lambda that is a temporary in the full expression of a co_await
  (f(co_await g(x, [p] {...}))) is destroyed twice: what it captured is released twice. ddprun's
  etcd agent passed its exit barrier such a lambda holding its lease, released the lease twice at
  every job's end, and sometimes aborted there with a corrupted heap.
- A co_await inside a condition (if, while, for, switch), a conditional operator
  (a ? co_await x : y) or a short-circuit operand (a && co_await x) is rewritten into statements
  of its own; when the branch it rewrites has no scope of its own, the frame laid out for the
  rewritten code and the frame the coroutine's start fills can disagree, and by-value parameters
  are then read 8 bytes off (GCC bug 106188, fixed in later releases): a std::function or
  std::string parameter is garbage, and its destructor frees what it does not own.

- A conditional operator inside the parenthesized operand of a co_await
  (co_await (tls ? write(a) : write(b))) destroys the awaitable it chose twice: "double free
  detected", or a corrupted heap.

All are cured the same way: name the lambda, choose or await into a named local, test the local.

Flags, in every .cpp and .hpp under the source folders: a co_await inside the parentheses of an
if, while, for or switch; a co_await right after `?`, `:` (of a conditional), `&&` or `||`
(optionally behind `!` or `(`); a co_await whose operand is followed by `&&`, `||` or `?` in the
same full expression, except Asio's awaitable operators (`co_await (a || b)`, the operator inside
the parentheses that follow co_await); a `?` at the top level of those parentheses; a lambda with
captures in the full expression of a co_await.

Usage: coawait_conditions.py [REPO_ROOT]   (run by ctest as layers_coawait_conditions)
"""
import os
import re
import sys

FOLDERS = ("agent", "apps", "collectives", "common", "rendezvous", "runtime", "tests")
KEYWORD = re.compile(r"\b(if|while|for|switch)\s*(constexpr\s*)?\(")
AFTER_OPERATOR = re.compile(r"(\?|&&|\|\||[^:]:(?!:))\s*[!(\s]*co_await\b")
COAWAIT = re.compile(r"\bco_await\b")
CAPTURING_LAMBDA = re.compile(r"\[[^\[\]]*[\w&=][^\[\]]*\]\s*(\([^()]*\))?\s*(mutable\s*)?(->[^{;]*)?\{")


def strip_comments_and_strings(text):
    """The text with comments, string and character literals blanked (offsets kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        two = text[i:i + 2]
        if two == "//":
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif two == "/*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif text[i] in "\"'":
            quote, j = text[i], i + 1
            while j < n and text[j] != quote:
                j += 2 if text[j] == "\\" else 1
            out.append(quote + " " * (min(j, n) - i - 1) + (quote if j < n else ""))
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def closing(text, open_at):
    """The index of the parenthesis closing the one at `open_at`."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def operator_after(text, at):
    """`&&`, `||` or `?` at the top level of the rest of the full expression that the co_await at
    `at` starts (after Asio's `co_await (a || b)`, whose parentheses are one operand); None."""
    i = at + len("co_await")
    while i < len(text) and text[i].isspace():
        i += 1
    if i < len(text) and text[i] == "(":
        i = closing(text, i) + 1
    depth = 0
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return None
            depth -= 1
        elif c in ";," and depth == 0:
            return None
        elif depth == 0 and text.startswith(("&&", "||"), i):
            return text[i:i + 2]
        elif depth == 0 and c == "?":
            return "?"
        i += 1
    return None


def conditional_in_operand(text, at):
    """Whether the co_await at `at` awaits a parenthesized operand with a top-level `?`."""
    i = at + len("co_await")
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text) or text[i] != "(":
        return False
    depth = 0
    for j in range(i, closing(text, i)):
        depth += text[j] in "([{"
        depth -= text[j] in ")]}"
        if depth == 1 and text[j] == "?":
            return True
    return False


def findings(text):
    code = strip_comments_and_strings(text)
    found = set()
    for m in KEYWORD.finditer(code):
        open_at = code.index("(", m.end() - 1)
        close_at = closing(code, open_at)
        for a in COAWAIT.finditer(code, open_at, close_at):
            found.add((a.start(), f"co_await in the condition of `{m.group(1)}`"))
    for m in AFTER_OPERATOR.finditer(code):
        a = code.index("co_await", m.start())
        found.add((a, "co_await as an operand of `?:`, `&&` or `||`"))
    for a in COAWAIT.finditer(code):
        start = max(code.rfind(c, 0, a.start()) for c in ";{}") + 1
        end = code.find(";", a.end())
        if CAPTURING_LAMBDA.search(code, start, end if end >= 0 else len(code)):
            found.add((a.start(), "a capturing lambda in the full expression of a co_await"))
        if conditional_in_operand(code, a.start()):
            found.add((a.start(), "a conditional operator in the operand of a co_await"))
        op = operator_after(code, a.start())
        if op:
            found.add((a.start(), f"co_await followed by `{op}` in one expression"))
    return sorted(found)


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "../.."))
    bad = []
    for folder in FOLDERS:
        for base, _, files in os.walk(os.path.join(repo, folder)):
            for name in sorted(files):
                if not name.endswith((".cpp", ".hpp")):
                    continue
                path = os.path.join(base, name)
                with open(path, errors="replace") as f:
                    text = f.read()
                if "co_await" not in text:
                    continue
                for offset, what in findings(text):
                    line = text.count("\n", 0, offset) + 1
                    bad.append(f"{os.path.relpath(path, repo)}:{line}: {what}")
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} co_await(s) GCC 12 may miscompile: await into a named local first "
              "(see this script's docstring)")
        return 1
    print("ok: no co_await in a condition, a conditional operator, a short-circuit operand or "
          "beside a capturing lambda")
    return 0


if __name__ == "__main__":
    sys.exit(main())
