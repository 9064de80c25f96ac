"""Issue 14 item 18: one help style for every subcommand (argparse, every option
described, `--version` listed); `./dev --help` exits 0; `--thinking 5` says why."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from synapse_lsp.cli.entry import SUBCOMMANDS, build_parser

ROOT = Path(__file__).resolve().parent.parent


def _synapse(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", *args],
        capture_output=True, text=True, timeout=60, cwd=cwd, check=False,
    )  # fmt: skip


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    out = [("synapse", build_parser())]
    for name, (module, _) in SUBCOMMANDS.items():
        parser = importlib.import_module(module).build_parser()
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                out += [(f"{name} {sub}", p) for sub, p in action.choices.items()]
    return out


@pytest.mark.parametrize("name", ["synapse", *SUBCOMMANDS])
def test_every_command_has_an_argparse_parser_with_version(name: str) -> None:
    parser = dict(_parsers())[name]
    assert isinstance(parser, argparse.ArgumentParser)
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert {"-h", "--help", "--version"} <= flags, name


def test_every_option_and_argument_is_described() -> None:
    for name, parser in _parsers():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) or name == "synapse":
                continue
            what = action.option_strings or [action.dest]
            assert action.help and action.help.strip(), f"synapse {name}: {what} has no help"


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_help_is_argparse_output_and_exits_0(name: str) -> None:
    proc = _synapse(name, "--help")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr  # `lsp` writes to stderr: its stdout is the protocol
    assert text.startswith(f"usage: synapse {name} "), text[:200]
    assert "options:" in text and "--version" in text


def test_top_level_help_and_version() -> None:
    help_ = _synapse("--help")
    assert help_.returncode == 0
    assert help_.stdout.startswith("usage: synapse ") and "--version" in help_.stdout
    for name in SUBCOMMANDS:
        assert name in help_.stdout
    version = _synapse("--version")
    assert version.returncode == 0 and version.stdout.startswith("synapse ")
    assert _synapse("exec", "--version").stdout == version.stdout
    unknown = _synapse("nope")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr


def test_dev_help_exits_0_and_bad_commands_exit_2() -> None:
    ok = subprocess.run([str(ROOT / "dev"), "--help"], capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and "./dev test" in ok.stdout
    bad = subprocess.run([str(ROOT / "dev"), "nope"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "./dev test" in bad.stderr


def test_thinking_below_the_floor_says_why_without_claiming_it_is_off(tmp_path: Path) -> None:
    proc = _synapse("chat", "--demo", "--thinking", "5", "-p", "hi", "--cwd", str(tmp_path))
    assert proc.returncode == 2
    assert "--thinking 5" in proc.stderr and "at least 1024" in proc.stderr
    assert "thinking is off" not in proc.stderr and "--thinking 0" in proc.stderr


def test_exec_help_says_which_exit_code_it_returns() -> None:
    text = _synapse("exec", "--help").stdout
    assert "Exit status" in text and "first line that failed" in " ".join(text.split())
