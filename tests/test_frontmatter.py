"""Issue 32: one reader of YAML front matter (synapse_lsp/frontmatter.py) for skills'
SKILL.md and Claude Code's command and agent files; both callers read real files
through it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from synapse_lsp.agent import claude_commands
from synapse_lsp.extensions.skills import scan_skills
from synapse_lsp.frontmatter import parse_front_matter

TEXT = """\
---
name: meta
Description: 'Reads PDFs'
# a comment: not a key
tags:
  - pdf
  - "extraction"
allowed-tools: Bash(git add:*), Bash(git commit:*)
---

Body line.
"""


def test_one_parse() -> None:
    meta, body = parse_front_matter(TEXT)
    assert meta == {
        "name": "meta",
        "description": "Reads PDFs",
        "tags": "pdf, extraction",
        "allowed-tools": "Bash(git add:*), Bash(git commit:*)",
    }
    assert body == "Body line."
    assert parse_front_matter("no front matter") == ({}, "no front matter")
    unclosed = "---\nname: x\nnever closed\n"
    assert parse_front_matter(unclosed) == ({}, unclosed)


@pytest.mark.parametrize(
    "module", ["synapse_lsp.agent.claude_files", "synapse_lsp.extensions.skills"]
)
def test_no_second_reader(module: str) -> None:
    """The readers that were copies are gone: the one in frontmatter.py is the owner."""
    source = Path(importlib.import_module(module).__file__ or "").read_text(encoding="utf-8")
    assert "def parse_front_matter" not in source


def test_both_callers_read_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "skills" / "meta").mkdir(parents=True)
    (tmp_path / "skills" / "meta" / "SKILL.md").write_text(TEXT)
    (skill,), _ = scan_skills(tmp_path / "skills")
    assert (skill.description, skill.tags) == ("Reads PDFs", ("pdf", "extraction"))
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "meta.md").write_text(TEXT)
    found = claude_commands.load([("user", tmp_path / "commands")], lambda _: None)
    command = found.commands["meta"]
    assert command.description == "Reads PDFs" and command.body == "Body line."
    assert command.allowed_tools == ("Bash(git add:*)", "Bash(git commit:*)")
