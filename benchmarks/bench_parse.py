"""The one parse of a command line (`bashparse.parse`: tree-sitter-bash and the walk)
against the scanner the gate used before it, by line size and shape (issue 28 item 7).

    .venv/bin/python benchmarks/bench_parse.py [--runs 3] [--sizes 1000,10000,100000,1000000]

For each shape (plain words, many quotes, deep `$(` nesting, an unclosed quote, a long
pipeline, many redirections, a long malformed pipeline, a heredoc) and each size it
prints the time of the new path (the cache emptied before each run, so every run
parses), whether tree-sitter read the line or the scanner did (`scanner`: a problem —
a syntax error, the time budget, a line over `MAX_PARSED_CHARS`), the time of the old
path (a copy of the old `cmdline.simple_commands` kept in this file only), the ratio
new/old, and each path's growth from the previous size (x10 in size: ~10 is linear,
~100 quadratic). The old scanner is quadratic on deep nesting (each level re-scanned
its inside): once one of its runs takes over 2 s, the larger sizes are skipped.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synapse_lsp import bashparse  # noqa: E402


def shapes(size: int) -> dict[str, str]:
    def fill(unit: str, tail: str = "", head: str = "") -> str:
        return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail

    depth = max(1, (size - 6) // 3)
    return {
        "plain words": fill("word "),
        "many quotes": fill("'a b' \"c $d\" "),
        "deep $( nesting": "echo " + "$(" * depth + "x" + ")" * depth,
        "unclosed quote": fill("a b ", head="echo 'x "),
        "long pipeline": fill("cat x | ", "cat"),
        "many redirections": fill("> f 2>&1 ", head="echo "),
        "malformed pipeline": fill("a | ", ")"),
        "heredoc": fill("| col | col |\n", "EOF", "cat > t.md <<'EOF'\n"),
    }


def best(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def new_path(line: str) -> Callable[[], object]:
    def run() -> object:
        bashparse.clear_cache()
        return bashparse.parse(line)

    return run


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"tree-sitter for lines up to {bashparse.MAX_PARSED_CHARS:,} characters, budget "
        f"{bashparse.BUDGET_BASE:g} s + {bashparse.BUDGET_PER_CHAR * 1e6:g} µs a character\n"
    )
    header = (
        f"{'shape':20s} {'size':>9s} {'new ms':>9s} {'read by':8s} {'old ms':>10s} "
        f"{'new/old':>8s} {'new x':>6s} {'old x':>6s}"
    )
    print(header)
    print("-" * len(header))
    for name in shapes(1000):
        previous: tuple[float, float | None] | None = None
        old_too_slow = False
        for size in sizes:
            line = shapes(size)[name]
            runs = args.runs if size < 1_000_000 else 1
            new = best(new_path(line), runs)
            parsed = new_path(line)()
            assert isinstance(parsed, bashparse.Parsed)
            reader = "scanner" if parsed.problem is not None else "tree"
            old: float | None = None
            if not old_too_slow:
                old = best(lambda line=line: old_simple_commands(line), runs)  # type: ignore[misc]
                old_too_slow = old > 2.0
            grow_new = f"{new / previous[0]:6.1f}" if previous else "     -"
            grow_old = (
                f"{old / previous[1]:6.1f}"
                if previous and previous[1] and old is not None
                else "     -"
            )
            old_text = f"{old * 1000:10.1f}" if old is not None else "   skipped"
            ratio = f"{new / old:8.2f}" if old else "       -"
            print(
                f"{name:20s} {len(line):9,d} {new * 1000:9.1f} {reader:8s} {old_text} "
                f"{ratio} {grow_new} {grow_old}",
                flush=True,
            )
            previous = (new, old)
    return 0


# ------------------------------------------------ the old scanner (a copy, for comparison)
# `cmdline.simple_commands` and what it used, as they were before the parse replaced them.

_OPERATORS = ("&&", "||", "|&", ";;", "|", ";", "&", "\n")
_SPECIAL = re.compile(r"[\\'\"`(){}&|;\n]")
_DQ_SPECIAL = re.compile(r'[\\"]')
_SUBST_SPECIAL = re.compile(r"[\\'\"`]|[$<>]\(")
_RESERVED = frozenset({"if", "then", "else", "elif", "while", "until", "do", "!", "time"})


def old_top_level_operators(line: str) -> Iterator[tuple[int, str]]:
    i, n, depth = 0, len(line), 0
    while True:
        match = _SPECIAL.search(line, i)
        if match is None:
            return
        i = match.start()
        ch = line[i]
        if ch == "\\":
            i += 2
        elif ch == "'":
            end = line.find("'", i + 1)
            i = n if end < 0 else end + 1
        elif ch == '"':
            i = _old_double_quote_end(line, i + 1)
        elif ch == "`":
            end = line.find("`", i + 1)
            i = n if end < 0 else end + 1
        elif ch in "({":
            depth += 1
            i += 1
        elif ch in ")}":
            depth = max(0, depth - 1)
            i += 1
        elif depth > 0 or (
            ch == "&" and ((i > 0 and line[i - 1] in "<>") or line.startswith("&>", i))
        ):
            i += 1
        else:
            op = next(o for o in _OPERATORS if line.startswith(o, i))
            yield i, op
            i += len(op)


def _old_double_quote_end(line: str, i: int) -> int:
    while True:
        match = _DQ_SPECIAL.search(line, i)
        if match is None:
            return len(line)
        if match.group() == "\\":
            i = match.start() + 2
        else:
            return match.start() + 1


def old_split_all(line: str) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    start = 0
    for index, op in old_top_level_operators(line):
        out.append((line[start:index], op))
        start = index + len(op)
    out.append((line[start:], None))
    return out


def old_group_end(text: str, start: int) -> int:
    i, n, depth = start, len(text), 0
    while True:
        match = _SPECIAL.search(text, i)
        if match is None:
            return n
        i = match.start()
        ch = text[i]
        if ch == "\\":
            i += 2
        elif ch == "'":
            end = text.find("'", i + 1)
            i = n if end < 0 else end + 1
        elif ch == '"':
            i = _old_double_quote_end(text, i + 1)
        elif ch == "`":
            end = text.find("`", i + 1)
            i = n if end < 0 else end + 1
        else:
            if ch in "({":
                depth += 1
            elif ch in ")}":
                depth -= 1
                if depth == 0:
                    return i
            i += 1


def old_substitutions(text: str) -> list[str]:
    out: list[str] = []
    i, n, in_double = 0, len(text), False
    while True:
        match = _SUBST_SPECIAL.search(text, i)
        if match is None:
            return out
        i = match.start()
        token = match.group()
        if token == "\\":
            i += 2
        elif token == "'":
            if in_double:
                i += 1
            else:
                end = text.find("'", i + 1)
                i = n if end < 0 else end + 1
        elif token == '"':
            in_double = not in_double
            i += 1
        elif token == "`":
            end = text.find("`", i + 1)
            out.append(text[i + 1 : n if end < 0 else end])
            i = n if end < 0 else end + 1
        elif in_double and token != "$(":
            i += 2
        else:
            end = old_group_end(text, i + 1)
            out.append(text[i + 2 : end])
            i = end + 1


def old_simple_commands(line: str) -> list[str]:
    out: list[str] = []
    pending = [line]
    while pending:
        for raw, _ in old_split_all(pending.pop()):
            part = raw.strip()
            words = part.split(maxsplit=1)
            while words and words[0] in _RESERVED:
                part = words[1] if len(words) > 1 else ""
                words = part.split(maxsplit=1)
            if not part:
                continue
            pending.extend(old_substitutions(part))
            if part[0] in "({" and part not in ("(", "{"):
                end = old_group_end(part, 0)
                pending.append(part[1:end])
                after = part[end + 1 :].strip()
                if after:
                    out.append(after)
                continue
            out.append(part)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
