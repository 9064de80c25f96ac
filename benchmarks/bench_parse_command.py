"""Summary figures (issue 6): parse_command and summarize() over Codex's vector inputs.

- parse_command, 50,000 calls per path: plain argv vs `bash -lc` (tree-sitter), both in
  Codex-only and extended mode; the issue asks >= 20,000/s plain and >= 5,000/s bash.
- summarize(line) in µs per call over the same inputs as command lines, against a
  baseline of Python's `shlex.split` on the same strings (ratio).
- a bare tree-sitter parse of the same scripts, for scale.

Needs ../shared/conformance/parse_command_vectors.json (or SYNAPSE_CONFORMANCE_DIR).
Run: .venv/bin/python benchmarks/bench_parse_command.py
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from synapse_lsp.summaries.parse_command import parse_command
from synapse_lsp.summaries.shell_words import bash_parser, extract_bash_script, shlex_join
from synapse_lsp.summaries.titles import summarize

CALLS = 50_000
REPEATS = 5


def _vectors() -> list[dict[str, Any]]:
    base = os.environ.get("SYNAPSE_CONFORMANCE_DIR")
    folder = Path(base) if base else Path(__file__).resolve().parents[2] / "shared/conformance"
    path = folder / "parse_command_vectors.json"
    if not path.is_file():
        sys.exit(f"vectors not found at {path}; set SYNAPSE_CONFORMANCE_DIR")
    vectors: list[dict[str, Any]] = json.loads(path.read_text())["vectors"]
    return vectors


def _rate(items: list[Any], call: Callable[[Any], object], calls: int) -> tuple[float, float]:
    """(calls per second, µs per call), best of REPEATS runs of `calls` calls."""
    work = (items * (calls // len(items) + 1))[:calls]
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for item in work:
            call(item)
        best = min(best, time.perf_counter() - started)
    return calls / best, best / calls * 1e6


def _median_us(items: list[Any], call: Callable[[Any], object], rounds: int = 200) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for item in items:
            call(item)
        samples.append((time.perf_counter() - started) / len(items) * 1e6)
    return statistics.median(samples)


def main() -> None:
    vectors = [v for v in _vectors() if not v.get("platform", "").startswith("windows")]
    plain = [v["argv"] for v in vectors if extract_bash_script(v["argv"]) is None]
    bash = [v["argv"] for v in vectors if extract_bash_script(v["argv"]) is not None]
    print(f"inputs: {len(plain)} plain argv, {len(bash)} bash -lc scripts; {CALLS:,} calls each")
    for label, items in (("plain argv", plain), ("bash -lc  ", bash)):
        for mode, codex_only in (("codex-only", True), ("extended  ", False)):

            def call(argv: list[str], codex_only: bool = codex_only) -> object:
                return parse_command(argv, codex_only=codex_only)

            rate, us = _rate(items, call, CALLS)
            print(f"parse_command {label} {mode}: {rate:>9,.0f} commands/s  ({us:6.1f} µs)")
    scripts = [extract_bash_script(a) or "" for a in bash]
    parser = bash_parser()
    ts = _median_us(scripts, lambda s: parser.parse(s.encode()))
    print(f"tree-sitter parse alone (bash scripts): {ts:6.1f} µs")

    lines = [extract_bash_script(v["argv"]) or shlex_join(v["argv"]) for v in vectors]
    ours = _median_us(lines, summarize)
    base = _median_us(lines, shlex.split)
    print(
        f"summarize(line): {ours:6.1f} µs/call; shlex.split baseline: {base:5.1f} µs/call; "
        f"ratio {ours / base:4.1f}x  ({len(lines)} lines, median of 200 rounds)"
    )


if __name__ == "__main__":
    main()
